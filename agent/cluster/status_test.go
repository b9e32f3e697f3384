package cluster

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func policy(name string, gen int64, mode v1alpha1.TuningMode) *v1alpha1.StorageTuning {
	p := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}}
	p.Spec.Mode = mode
	p.Default()
	return p
}

// dev returns a governed device's status: calibrated, recommendation equal
// to the current setting.
func dev(name, pol string, mode v1alpha1.TuningMode, mut func(*v1alpha1.DeviceState)) v1alpha1.DeviceState {
	d := v1alpha1.DeviceState{
		Name: name, Class: "ssd", GovernedBy: pol, Mode: mode,
		MajorMinor: "8:0", Model: "DISK", SizeBytes: 1 << 30, TotalRequests: 5000, ModelErrorPercent: v1alpha1.FormatPercent(2.345),
		Current: v1alpha1.DeviceSettings{Scheduler: "mq-deadline", Tunables: map[string]string{"fifo_batch": "16"}, ReadAheadKiB: 128},
		Candidates: []v1alpha1.CandidateResult{{Name: "mq-deadline", PredictedServiceTimeMicros: 1000},
			{Name: "bfq", PredictedServiceTimeMicros: 1100, PredictedGainPercent: v1alpha1.FormatPercent(-10)}},
		Recommendation:  &v1alpha1.Recommendation{Scheduler: "mq-deadline", ReadAheadKiB: 128, Reason: "AlreadyBest"},
		ModelCalibrated: true,
		EventsDropped:   3,
		Window:          &v1alpha1.WindowState{Requests: 1000},
	}
	if mut != nil {
		mut(&d)
	}
	return d
}

// pending makes d recommend bfq.
func pending(d *v1alpha1.DeviceState) {
	d.Recommendation = &v1alpha1.Recommendation{Scheduler: "bfq", ReadAheadKiB: 128, GainPercent: v1alpha1.FormatPercent(12.34), Reason: "Better"}
}

// changed makes d hold a setting shadowtune applied.
func changed(d *v1alpha1.DeviceState) {
	d.Original = &v1alpha1.DeviceSettings{Scheduler: "none", ReadAheadKiB: 4096}
	d.Applied = &v1alpha1.AppliedSetting{Scheduler: "mq-deadline", At: metav1.NewTime(now.Add(-time.Hour))}
}

type cond struct {
	status metav1.ConditionStatus
	reason string
}

func TestBuildStatusConditions(t *testing.T) {
	apply := policy("fleet", 2, v1alpha1.ModeApply)
	pols := map[string]*v1alpha1.StorageTuning{"fleet": apply, "obs": policy("obs", 1, v1alpha1.ModeObserve)}
	validGrant := &v1alpha1.RolloutGrant{Devices: []string{"sda"}, Until: metav1.NewTime(now.Add(time.Minute)), Policy: "fleet", Generation: 2}
	expiredGrant := validGrant.DeepCopy()
	expiredGrant.Until = metav1.NewTime(now.Add(-time.Minute))
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown

	for _, c := range []struct {
		name     string
		in       StatusInput
		want     map[string]cond
		counts   [4]int32 // devices, governed, pending, applied
		governed string   // governedBy of the first device
	}{
		{
			name: "before the first window",
			in:   StatusInput{},
			want: map[string]cond{
				"TracingActive": {F, v1alpha1.ReasonTracerUnavailable}, "ModelReady": {T, v1alpha1.ReasonModelTrained},
				"Applied": {F, v1alpha1.ReasonObserveOnly}, "Degraded": {F, v1alpha1.ReasonAgentReady},
				"Ready": {F, v1alpha1.ReasonTracerUnavailable},
			},
		},
		{
			name: "tracer failed",
			in:   StatusInput{TracerError: "start tracer: no BTF", Agent: agent.Status{Tracer: "ebpf"}},
			want: map[string]cond{"TracingActive": {F, v1alpha1.ReasonTracerUnavailable}, "Ready": {F, v1alpha1.ReasonTracerUnavailable}},
		},
		{
			name: "observe, all calibrated",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Mode: "Observe",
				Devices:    []v1alpha1.DeviceState{dev("sda", "obs", v1alpha1.ModeObserve, pending)},
				Ungoverned: []v1alpha1.DeviceState{{Name: "vda", Class: "hdd", Current: v1alpha1.DeviceSettings{Scheduler: "none"}}}}},
			want: map[string]cond{
				"TracingActive": {T, v1alpha1.ReasonTracingEBPF}, "ModelReady": {T, v1alpha1.ReasonModelTrained},
				"Applied": {F, v1alpha1.ReasonObserveOnly}, "Degraded": {F, v1alpha1.ReasonAgentReady}, "Ready": {T, v1alpha1.ReasonAgentReady},
			},
			counts: [4]int32{2, 1, 1, 0}, governed: "obs",
		},
		{
			name: "learning",
			in: StatusInput{Agent: agent.Status{Tracer: "tracefs", Devices: []v1alpha1.DeviceState{
				dev("sda", "obs", v1alpha1.ModeObserve, func(d *v1alpha1.DeviceState) { d.ModelCalibrated = false; d.Recommendation = nil })}}},
			want: map[string]cond{
				"TracingActive": {T, v1alpha1.ReasonTracingTracefs}, "ModelReady": {F, v1alpha1.ReasonLearning},
				"Ready": {F, v1alpha1.ReasonLearning},
			},
			counts: [4]int32{1, 1, 0, 0},
		},
		{
			name: "apply, awaiting a grant",
			in: StatusInput{Grant: nil, Policies: pols, Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) { pending(d); d.AwaitingGrant = true })}}},
			want:   map[string]cond{"Applied": {F, v1alpha1.ReasonAwaitingGrant}, "Ready": {T, v1alpha1.ReasonAgentReady}},
			counts: [4]int32{1, 1, 1, 0},
		},
		{
			name: "apply, grant expired",
			in: StatusInput{Grant: expiredGrant, Policies: pols, Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) { pending(d); d.AwaitingGrant = true })}}},
			want: map[string]cond{"Applied": {F, v1alpha1.ReasonGrantExpired}},
		},
		{
			name: "apply, verifying",
			in: StatusInput{Grant: validGrant, Policies: pols, Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) { changed(d); d.VerifyingWindows = 2 })}}},
			want:   map[string]cond{"Applied": {U, v1alpha1.ReasonApplied}},
			counts: [4]int32{1, 1, 0, 1},
		},
		{
			name: "apply, applied",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, changed), dev("sdb", "fleet", v1alpha1.ModeApply, nil)}}},
			want:   map[string]cond{"Applied": {T, v1alpha1.ReasonApplied}, "Degraded": {F, v1alpha1.ReasonAgentReady}},
			counts: [4]int32{2, 2, 0, 1},
		},
		{
			name: "apply, nothing to apply",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, nil)}}},
			want: map[string]cond{"Applied": {T, v1alpha1.ReasonNothingToApply}},
		},
		{
			name: "apply failed",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) { pending(d); d.Window.ApplyError = "EBUSY" })}}},
			want: map[string]cond{"Applied": {F, v1alpha1.ReasonApplyFailed}, "Degraded": {T, v1alpha1.ReasonApplyFailed},
				"Ready": {F, v1alpha1.ReasonApplyFailed}},
		},
		{
			name: "reverted within the back-off",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) {
					changed(d)
					d.Reverts, d.LastRevertTime = 1, &metav1.Time{Time: now.Add(-window.RegressionBackoff + time.Minute)}
				})}}},
			want: map[string]cond{"Degraded": {T, v1alpha1.ReasonReverted}, "Ready": {F, v1alpha1.ReasonReverted}},
		},
		{
			name: "reverted before the back-off",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) {
					d.Reverts, d.LastRevertTime = 1, &metav1.Time{Time: now.Add(-window.RegressionBackoff - time.Minute)}
				})}}},
			want: map[string]cond{"Degraded": {F, v1alpha1.ReasonAgentReady}, "Ready": {T, v1alpha1.ReasonAgentReady}},
		},
		{
			name: "another writer",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) {
					d.OtherWriter = &v1alpha1.OtherWriterState{Time: metav1.NewTime(now), Change: "scheduler none -> bfq", Writer: "bash (pid 7)", Yielded: true}
				})}}},
			want: map[string]cond{"Degraded": {T, v1alpha1.ReasonOtherWriter}, "Ready": {F, v1alpha1.ReasonOtherWriter}},
		},
		{
			name: "restarted after an unclean end",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", UncleanRestart: &metav1.Time{Time: now.Add(-time.Minute)},
				Devices: []v1alpha1.DeviceState{dev("sda", "obs", v1alpha1.ModeObserve, nil)}}},
			want: map[string]cond{"Degraded": {T, v1alpha1.ReasonUncleanRestart}, "Ready": {F, v1alpha1.ReasonUncleanRestart}},
		},
		{
			name: "restarted after an unclean end long ago",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", UncleanRestart: &metav1.Time{Time: now.Add(-UncleanRestartDegradedFor)},
				Devices: []v1alpha1.DeviceState{dev("sda", "obs", v1alpha1.ModeObserve, nil)}}},
			want: map[string]cond{"Degraded": {F, v1alpha1.ReasonAgentReady}},
		},
		{
			name: "over the CPU budget recently",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "obs", v1alpha1.ModeObserve, func(d *v1alpha1.DeviceState) {
					d.CPUBudgetSkips, d.LastCPUBudgetSkipTime = 3, &metav1.Time{Time: now.Add(-10 * time.Second)}
				})}}},
			want: map[string]cond{"Degraded": {T, v1alpha1.ReasonCPUBudgetExceeded}, "Ready": {F, v1alpha1.ReasonCPUBudgetExceeded}},
		},
		{
			name: "over the CPU budget long ago",
			in: StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{
				dev("sda", "obs", v1alpha1.ModeObserve, func(d *v1alpha1.DeviceState) {
					d.CPUBudgetSkips, d.LastCPUBudgetSkipTime = 3, &metav1.Time{Time: now.Add(-DroppedDegradedFor)}
				})}}},
			want: map[string]cond{"Degraded": {F, v1alpha1.ReasonAgentReady}},
		},
		{
			name: "events dropped recently",
			in: StatusInput{EventsDroppedAt: now.Add(-10 * time.Second), Agent: agent.Status{Tracer: "ebpf",
				Devices: []v1alpha1.DeviceState{dev("sda", "obs", v1alpha1.ModeObserve, nil)}}},
			want: map[string]cond{"Degraded": {T, v1alpha1.ReasonEventsDropped}, "Ready": {F, v1alpha1.ReasonEventsDropped}},
		},
		{
			name: "events dropped long ago",
			in: StatusInput{EventsDroppedAt: now.Add(-DroppedDegradedFor), Agent: agent.Status{Tracer: "ebpf",
				Devices: []v1alpha1.DeviceState{dev("sda", "obs", v1alpha1.ModeObserve, nil)}}},
			want: map[string]cond{"Degraded": {F, v1alpha1.ReasonAgentReady}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = now
			c.in.Generation = 7
			st := BuildStatus(c.in)
			for typ, w := range c.want {
				got := meta.FindStatusCondition(st.Conditions, typ)
				if got == nil || got.Status != w.status || got.Reason != w.reason {
					t.Errorf("%s = %+v, want %s/%s", typ, got, w.status, w.reason)
					continue
				}
				if got.ObservedGeneration != 7 {
					t.Errorf("%s observedGeneration %d", typ, got.ObservedGeneration)
				}
			}
			if len(st.Conditions) != 5 {
				t.Errorf("%d conditions, want 5", len(st.Conditions))
			}
			if c.counts != [4]int32{} {
				got := [4]int32{st.DeviceCount, st.GovernedDevices, st.PendingDevices, st.AppliedDevices}
				if got != c.counts {
					t.Errorf("counts (devices, governed, pending, applied) = %v, want %v", got, c.counts)
				}
			}
			if c.governed != "" && (len(st.Devices) == 0 || st.Devices[0].GovernedBy != c.governed) {
				t.Errorf("governedBy of %+v, want %s", st.Devices, c.governed)
			}
			if st.ObservedGeneration != 7 || st.LastHeartbeatTime == nil || !st.LastHeartbeatTime.Time.Equal(now) {
				t.Errorf("observedGeneration %d heartbeat %v", st.ObservedGeneration, st.LastHeartbeatTime)
			}
		})
	}
}

func TestBuildStatusDevice(t *testing.T) {
	d := dev("sda", "fleet", v1alpha1.ModeApply, func(d *v1alpha1.DeviceState) {
		pending(d)
		changed(d)
		d.Reverts, d.LastRevertTime = 2, &metav1.Time{Time: now.Add(-time.Hour).Add(300 * time.Millisecond)}
		d.ThrashGuard = v1alpha1.ThrashGuardState{Changes: 1, QuietChecks: 2, Pinned: true}
		d.Candidates = nil
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
			d.Candidates = append(d.Candidates, v1alpha1.CandidateResult{Name: n, PredictedServiceTimeMicros: 10, PredictedGainPercent: v1alpha1.FormatPercent(1.25)})
		}
	})
	st := BuildStatus(StatusInput{Now: now, Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{d},
		Ungoverned: []v1alpha1.DeviceState{{Name: "nvme0n1", Class: "nvme", Current: v1alpha1.DeviceSettings{Scheduler: "none", ReadAheadKiB: 128}}}}})
	if len(st.Devices) != 2 || st.Devices[0].Name != "nvme0n1" || st.Devices[1].Name != "sda" {
		t.Fatalf("devices %+v, want nvme0n1 then sda", st.Devices)
	}
	un, got := st.Devices[0], st.Devices[1]
	if un.GovernedBy != "" || un.Tracer != v1alpha1.TracerNone || un.Recommendation != nil || un.Class != v1alpha1.DeviceClassNVMe ||
		un.Current.Scheduler != "none" || un.Current.ReadAheadKiB != 128 || un.ModelErrorPercent != "" {
		t.Errorf("ungoverned device %+v", un)
	}
	want := v1alpha1.DeviceState{
		Name: "sda", MajorMinor: "8:0", Model: "DISK", SizeBytes: 1 << 30, Class: v1alpha1.DeviceClassSSD,
		Current:           v1alpha1.DeviceSettings{Scheduler: "mq-deadline", Tunables: map[string]string{"fifo_batch": "16"}, ReadAheadKiB: 128},
		Original:          &v1alpha1.DeviceSettings{Scheduler: "none", ReadAheadKiB: 4096},
		GovernedBy:        "fleet",
		Mode:              v1alpha1.ModeApply,
		ModelCalibrated:   true,
		Window:            &v1alpha1.WindowState{}, // request counts left out
		Recommendation:    &v1alpha1.Recommendation{Scheduler: "bfq", ReadAheadKiB: 128, GainPercent: "12.3", Reason: "Better"},
		Applied:           &v1alpha1.AppliedSetting{Scheduler: "mq-deadline", At: metav1.NewTime(now.Add(-time.Hour))},
		ModelErrorPercent: "2.3",
		ThrashGuard:       v1alpha1.ThrashGuardState{Changes: 1, QuietChecks: 2, Pinned: true},
		Tracer:            v1alpha1.TracerEBPF,
		Reverts:           2,
		LastRevertTime:    &metav1.Time{Time: now.Add(-time.Hour)},
		EventsDropped:     3,
	}
	gotCands := got.Candidates
	got.Candidates = nil
	if !SameStatus(v1alpha1.NodeStorageStateStatus{Devices: []v1alpha1.DeviceState{got}}, v1alpha1.NodeStorageStateStatus{Devices: []v1alpha1.DeviceState{want}}) {
		t.Errorf("device\n got %+v\nwant %+v", got, want)
	}
	if len(gotCands) != v1alpha1.MaxDeviceCandidates || gotCands[0].Name != "a" || gotCands[0].PredictedGainPercent != "1.2" ||
		gotCands[0].PredictedServiceTimeMicros != 10 {
		t.Errorf("candidates %+v", gotCands)
	}
	if !got.Pending() || st.PendingDevices != 1 || st.AppliedDevices != 1 {
		t.Errorf("pending %v / %d, applied %d", got.Pending(), st.PendingDevices, st.AppliedDevices)
	}
}

func TestBuildStatusDeviceLimit(t *testing.T) {
	var ag agent.Status
	for i := range v1alpha1.MaxNodeDevices + 10 {
		ag.Ungoverned = append(ag.Ungoverned, v1alpha1.DeviceState{Name: "sd" + string(rune('a'+i/26)) + string(rune('a'+i%26))})
	}
	ag.Devices = []v1alpha1.DeviceState{dev("zz", "fleet", v1alpha1.ModeObserve, nil)}
	st := BuildStatus(StatusInput{Now: now, Agent: ag})
	if st.DeviceCount != v1alpha1.MaxNodeDevices || len(st.Devices) != v1alpha1.MaxNodeDevices {
		t.Fatalf("%d devices", len(st.Devices))
	}
	if last := st.Devices[len(st.Devices)-1]; last.Name != "zz" || st.GovernedDevices != 1 {
		t.Errorf("the governed device was dropped: last %s, governed %d", last.Name, st.GovernedDevices)
	}
}

func TestConditionTransitionTimesKept(t *testing.T) {
	in := StatusInput{Now: now, Agent: agent.Status{Tracer: "ebpf"}}
	first := BuildStatus(in)
	in.Now = now.Add(time.Hour)
	in.Conditions = first.Conditions
	second := BuildStatus(in)
	for _, c := range second.Conditions {
		if !c.LastTransitionTime.Time.Equal(now) {
			t.Errorf("%s transition time %v, want the first one %v", c.Type, c.LastTransitionTime, now)
		}
	}
	if !SameStatus(first, second) {
		t.Error("statuses that differ only in their times are not the same")
	}
	in.TracerError = "gone"
	third := BuildStatus(in)
	if c := meta.FindStatusCondition(third.Conditions, "TracingActive"); !c.LastTransitionTime.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("TracingActive turned False at %v", c.LastTransitionTime)
	}
	if SameStatus(second, third) {
		t.Error("a changed condition compares the same")
	}
	// The input's conditions are not modified.
	if c := meta.FindStatusCondition(first.Conditions, "TracingActive"); c.Status != metav1.ConditionTrue {
		t.Error("BuildStatus modified its input conditions")
	}
}

func TestSameStatus(t *testing.T) {
	base := BuildStatus(StatusInput{Now: now, Agent: agent.Status{Tracer: "ebpf",
		Devices: []v1alpha1.DeviceState{dev("sda", "fleet", v1alpha1.ModeApply, changed)}}})
	for _, c := range []struct {
		name string
		mut  func(*v1alpha1.NodeStorageStateStatus)
		same bool
	}{
		{"identical", func(*v1alpha1.NodeStorageStateStatus) {}, true},
		{"heartbeat", func(s *v1alpha1.NodeStorageStateStatus) { s.LastHeartbeatTime = ptrTime(now.Add(time.Minute)) }, true},
		{"transition time", func(s *v1alpha1.NodeStorageStateStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(time.Minute))
		}, true},
		{"condition order", func(s *v1alpha1.NodeStorageStateStatus) {
			s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0]
		}, true},
		{"empty vs nil tunables", func(s *v1alpha1.NodeStorageStateStatus) { s.Devices[0].Original.Tunables = map[string]string{} }, true},
		{"model error", func(s *v1alpha1.NodeStorageStateStatus) { s.Devices[0].ModelErrorPercent = "9.9" }, false},
		{"observed generation", func(s *v1alpha1.NodeStorageStateStatus) { s.ObservedGeneration++ }, false},
		{"applied at", func(s *v1alpha1.NodeStorageStateStatus) { s.Devices[0].Applied.At = metav1.NewTime(now) }, false},
		{"condition message", func(s *v1alpha1.NodeStorageStateStatus) { s.Conditions[0].Message = "x" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := base.DeepCopy()
			c.mut(other)
			if got := SameStatus(base, *other); got != c.same {
				t.Errorf("SameStatus = %v, want %v", got, c.same)
			}
		})
	}
}

// TestBuildStatusThrottled: a device the agent models as throttled keeps
// its class and caps in the NodeStorageState; a class outside the enum is
// left out.
func TestBuildStatusThrottled(t *testing.T) {
	th := &v1alpha1.DeviceThrottle{IOPS: 3000, BytesPerSecond: 131072000}
	d := dev("vdb", "fleet", v1alpha1.ModeObserve, func(d *v1alpha1.DeviceState) {
		d.Class, d.Throttle = v1alpha1.DeviceClassThrottled, th
	})
	bad := dev("vdc", "fleet", v1alpha1.ModeObserve, func(d *v1alpha1.DeviceState) { d.Class = "tape" })
	st := BuildStatus(StatusInput{Now: now, Agent: agent.Status{Tracer: "ebpf", Devices: []v1alpha1.DeviceState{d, bad}}})
	if len(st.Devices) != 2 {
		t.Fatalf("devices %+v", st.Devices)
	}
	if got := st.Devices[0]; got.Class != v1alpha1.DeviceClassThrottled || got.Throttle == nil || *got.Throttle != *th {
		t.Errorf("vdb: class %q, throttle %+v; want throttled, %+v", got.Class, got.Throttle, *th)
	}
	if got := st.Devices[1]; got.Class != "" {
		t.Errorf("vdc: class %q, want none (not in the enum)", got.Class)
	}
}
