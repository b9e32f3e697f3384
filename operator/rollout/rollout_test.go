package rollout

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// policy returns a defaulted policy at generation 3.
func policy(name string, mode v1alpha1.TuningMode, mut ...func(*v1alpha1.StorageTuning)) *v1alpha1.StorageTuning {
	p := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3}}
	p.Spec.Mode = mode
	p.Spec.Default()
	for _, m := range mut {
		m(p)
	}
	return p
}

// dev is a device on mq-deadline; with gain > 0 it is recommended to move
// to bfq with that gain; its candidates put the current setting at 1000 µs.
func dev(name string, gain float64) v1alpha1.DeviceState {
	d := v1alpha1.DeviceState{Name: name, Current: v1alpha1.DeviceSettings{Scheduler: "mq-deadline", ReadAheadKiB: 128}}
	d.Candidates = []v1alpha1.CandidateResult{
		{Name: "bfq", PredictedServiceTimeMicros: int64(1000 * (1 - gain/100)), PredictedGainPercent: v1alpha1.FormatPercent(gain)},
		{Name: "mq-deadline", PredictedServiceTimeMicros: 1000, PredictedGainPercent: "0"},
	}
	rec := "mq-deadline"
	if gain > 0 {
		rec = "bfq"
	}
	d.Recommendation = &v1alpha1.Recommendation{Scheduler: rec, GainPercent: v1alpha1.FormatPercent(gain)}
	return d
}

// node returns a node with a fresh NodeStorageState holding devs.
func node(name string, devs ...v1alpha1.DeviceState) Node {
	st := &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: name}}
	st.Status.LastHeartbeatTime = ptr.To(ago(10 * time.Second))
	st.Status.Devices = devs
	return Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, State: st}
}

func withGrant(n Node, g *v1alpha1.RolloutGrant) Node { n.State.Spec.Grant = g; return n }

func grant(policy string, gen int64, until time.Duration, devs ...string) *v1alpha1.RolloutGrant {
	return &v1alpha1.RolloutGrant{Policy: policy, Generation: gen, Until: metav1.NewTime(now.Add(until)), Devices: devs}
}

func cond(t *testing.T, p Plan, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, p.Status.Conditions)
	}
	return *c
}

func reasons(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}

func TestAggregate(t *testing.T) {
	p := policy("fleet", v1alpha1.ModeObserve)
	changed := dev("sdb", 0)
	changed.Current.Scheduler = "bfq"
	changed.Recommendation.Scheduler = "bfq"
	changed.Original = &v1alpha1.DeviceSettings{Scheduler: "mq-deadline"}
	changed.Applied = &v1alpha1.AppliedSetting{Scheduler: "bfq", At: ago(time.Minute)}
	reverted := dev("sdc", 0)
	reverted.Reverts = 2
	reverted.LastRevertTime = ptr.To(ago(2 * time.Minute))
	nodes := []Node{
		node("a", dev("sda", 20), changed),
		node("b", dev("sda", 10), reverted, dev("sdd", 0)),
	}
	plan := Evaluate(p, []*v1alpha1.StorageTuning{p}, nodes, now)
	s := plan.Status
	if s.ObservedGeneration != 3 || s.MatchedNodes != 2 || s.MatchedDevices != 5 || s.RecommendedChanges != 2 ||
		s.ChangedDevices != 1 || s.RevertedDevices != 1 {
		t.Errorf("counts: %+v", s)
	}
	want := []v1alpha1.SchedulerCount{{Scheduler: "mq-deadline", Count: 4}, {Scheduler: "bfq", Count: 1}}
	if !slices.Equal(s.Settings, want) {
		t.Errorf("settings = %v, want %v", s.Settings, want)
	}
	// Five devices at 1000 µs each; 200 + 100 µs saved: 6 %.
	if s.PredictedGainPercent != "6" && s.PredictedGainPercent != "6.0" {
		t.Errorf("gain = %q, want 6", s.PredictedGainPercent)
	}
	if s.LastChangeTime == nil || !s.LastChangeTime.Equal(ptr.To(ago(time.Minute))) {
		t.Errorf("lastChangeTime = %v", s.LastChangeTime)
	}
	if got := reasons(plan.Events); !slices.Equal(got, []string{EventChanged, EventReverted}) {
		t.Errorf("events = %v", got)
	}
	if c := cond(t, plan, v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v", c)
	}
	if c := cond(t, plan, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonObserving {
		t.Errorf("Progressing = %+v", c)
	}
	if len(plan.Grants) != 0 || len(plan.Revoke) != 0 {
		t.Errorf("observe mode granted %v revoked %v", plan.Grants, plan.Revoke)
	}

	// The same inputs again, with the status written back: no new events,
	// no condition transition.
	p.Status = plan.Status
	again := Evaluate(p, []*v1alpha1.StorageTuning{p}, nodes, now.Add(time.Second))
	if len(again.Events) != 0 {
		t.Errorf("repeated events: %v", again.Events)
	}
	if c := cond(t, again, v1alpha1.ConditionReady); !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Ready transition moved to %v", c.LastTransitionTime)
	}
}

// Devices whose defaults changed are summed up per distinct change, the
// most devices first, with those judged and judged slower counted, and
// an event per node once.
func TestDefaultsChangedAggregate(t *testing.T) {
	p := policy("fleet", v1alpha1.ModeObserve)
	changed := func(name, knob, old, new, with string) v1alpha1.DeviceState {
		d := dev(name, 0)
		d.DefaultsChanged = &v1alpha1.DefaultsChange{Knobs: []v1alpha1.KnobChange{{Knob: knob, Old: old, New: new}},
			With: with, Since: ago(time.Hour), DetectedTime: ago(time.Minute)}
		return d
	}
	upgrade := "kernel 6.16.1 → 6.17.2"
	slower := changed("sda", "read_ahead_kb", "128", "4096", upgrade)
	slower.DefaultsChanged.Knobs[0].Verdict, slower.DefaultsChanged.Knobs[0].ChangePercent = v1alpha1.VerdictSlower, "+312.5"
	notSlower := changed("sda", "read_ahead_kb", "128", "4096", upgrade)
	notSlower.DefaultsChanged.Knobs[0].Verdict, notSlower.DefaultsChanged.Knobs[0].ChangePercent = v1alpha1.VerdictNotSlower, "-1.0"
	nodes := []Node{
		node("a", slower, changed("sdb", "read_ahead_kb", "128", "4096", upgrade)),
		node("b", notSlower, dev("sdb", 0)),
		node("c", changed("vda", "scheduler", "mq-deadline", "none", "image A → B")),
	}
	plan := Evaluate(p, []*v1alpha1.StorageTuning{p}, nodes, now)
	want := []v1alpha1.DefaultsChangeCount{
		{Change: "read_ahead_kb 128 → 4096", With: upgrade, Nodes: 2, Devices: 3, SlowerDevices: 1, JudgedDevices: 2},
		{Change: "scheduler mq-deadline → none", With: "image A → B", Nodes: 1, Devices: 1},
	}
	if !slices.Equal(plan.Status.DefaultsChanged, want) {
		t.Errorf("defaultsChanged = %+v, want %+v", plan.Status.DefaultsChanged, want)
	}
	var evs []string
	for _, e := range plan.Events {
		if e.Reason == EventDefaultsChanged && e.Warning {
			evs = append(evs, e.Node+": "+e.Message)
		}
	}
	if len(evs) != 3 || !strings.HasPrefix(evs[0], "a: a/sda: defaults changed, read_ahead_kb 128 → 4096 (kernel 6.16.1 → 6.17.2); a/sdb:") {
		t.Errorf("events %q", evs)
	}
	p.Status = plan.Status
	if again := Evaluate(p, []*v1alpha1.StorageTuning{p}, nodes, now.Add(time.Second)); slices.Contains(reasons(again.Events), EventDefaultsChanged) ||
		!slices.Equal(again.Status.DefaultsChanged, want) {
		t.Errorf("again: events %v, defaultsChanged %+v", reasons(again.Events), again.Status.DefaultsChanged)
	}
}

// reverted returns a node whose device sda was put back after a measured
// regression and whose agent reports Degraded/Reverted: it halts an Apply
// roll-out.
func reverted(name string) Node {
	n := node(name, dev("sda", 20))
	n.State.Status.Devices[0].Reverts = 1
	n.State.Status.Devices[0].LastRevertTime = ptr.To(ago(time.Second))
	meta.SetStatusCondition(&n.State.Status.Conditions, metav1.Condition{
		Type: v1alpha1.NodeConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReverted})
	return n
}

func TestReadiness(t *testing.T) {
	stale := node("b", dev("sda", 0))
	stale.State.Status.LastHeartbeatTime = ptr.To(ago(StaleAfter + time.Second))
	cases := []struct {
		name   string
		policy *v1alpha1.StorageTuning
		nodes  []Node
		status metav1.ConditionStatus
		reason string
	}{
		{"all report", policy("p", v1alpha1.ModeObserve), []Node{node("a")}, metav1.ConditionTrue, v1alpha1.ReasonReconciled},
		{"no nodes", policy("p", v1alpha1.ModeObserve), nil, metav1.ConditionFalse, v1alpha1.ReasonNoMatchingNodes},
		{"selector matches none", policy("p", v1alpha1.ModeObserve, func(p *v1alpha1.StorageTuning) {
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "hdd"}}
		}), []Node{node("a")}, metav1.ConditionFalse, v1alpha1.ReasonNoMatchingNodes},
		{"no state yet", policy("p", v1alpha1.ModeObserve), []Node{node("a"), {Name: "b"}}, metav1.ConditionFalse, v1alpha1.ReasonNodesNotReporting},
		{"stale heartbeat", policy("p", v1alpha1.ModeObserve), []Node{node("a"), stale}, metav1.ConditionFalse, v1alpha1.ReasonNodesNotReporting},
		{"invalid selector", policy("p", v1alpha1.ModeApply, func(p *v1alpha1.StorageTuning) {
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
		}), []Node{node("a")}, metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector},
		// A halted roll-out is not ready, though every node reports.
		{"halted by a regression", policy("p", v1alpha1.ModeApply), []Node{node("a"), reverted("c")},
			metav1.ConditionFalse, v1alpha1.ReasonRegressionReverted},
		{"halted, a node not reporting", policy("p", v1alpha1.ModeApply), []Node{reverted("c"), {Name: "b"}},
			metav1.ConditionFalse, v1alpha1.ReasonRegressionReverted},
		{"halted, Observe mode too", policy("p", v1alpha1.ModeObserve), []Node{reverted("c")},
			metav1.ConditionFalse, v1alpha1.ReasonRegressionReverted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Evaluate(c.policy, []*v1alpha1.StorageTuning{c.policy}, c.nodes, now)
			got := cond(t, plan, v1alpha1.ConditionReady)
			if got.Status != c.status || got.Reason != c.reason {
				t.Errorf("Ready = %s/%s (%s), want %s/%s", got.Status, got.Reason, got.Message, c.status, c.reason)
			}
			if c.reason == v1alpha1.ReasonRegressionReverted {
				d := cond(t, plan, v1alpha1.ConditionDegraded)
				if d.Status != metav1.ConditionTrue || !strings.HasPrefix(got.Message, d.Message) || !strings.Contains(got.Message, "c/sda") {
					t.Errorf("Ready message %q does not carry the halt (Degraded = %+v)", got.Message, d)
				}
				if len(c.nodes) > 1 && c.nodes[1].State == nil && !strings.Contains(got.Message, "b") {
					t.Errorf("Ready message %q does not name the node not reporting", got.Message)
				}
			}
			if c.reason == v1alpha1.ReasonNodesNotReporting && !strings.Contains(got.Message, "b") {
				t.Errorf("message does not name the node: %q", got.Message)
			}
			if c.reason == v1alpha1.ReasonInvalidSelector {
				if d := cond(t, plan, v1alpha1.ConditionDegraded); d.Status != metav1.ConditionTrue {
					t.Errorf("Degraded = %+v", d)
				}
			}
		})
	}
}

func TestGrants(t *testing.T) {
	apply := func(mut ...func(*v1alpha1.StorageTuning)) *v1alpha1.StorageTuning {
		return policy("p", v1alpha1.ModeApply, mut...)
	}
	maxUn := func(v intstr.IntOrString) func(*v1alpha1.StorageTuning) {
		return func(p *v1alpha1.StorageTuning) { p.Spec.Rollout.MaxUnavailable = &v }
	}
	pending := func(name string) Node { return node(name, dev("sda", 20), dev("sdb", 15), dev("sdc", 0)) }
	recent := pending("b")
	recent.State.Status.Devices[2].Applied = &v1alpha1.AppliedSetting{Scheduler: "mq-deadline", At: ago(time.Minute)}
	staleNode := pending("a")
	staleNode.State.Status.LastHeartbeatTime = ptr.To(ago(time.Hour))
	degraded := pending("c")
	degraded.State.Status.Devices[2].Reverts = 1
	degraded.State.Status.Devices[2].LastRevertTime = ptr.To(ago(time.Minute))
	meta.SetStatusCondition(&degraded.State.Status.Conditions, metav1.Condition{
		Type: v1alpha1.NodeConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReverted})

	cases := []struct {
		name        string
		policy      *v1alpha1.StorageTuning
		nodes       []Node
		grants      []string // nodes granted now
		revoke      []string
		progressing string
	}{
		{"one at a time, by name", apply(), []Node{pending("c"), pending("a"), pending("b")}, []string{"a"}, nil, v1alpha1.ReasonRollingOut},
		{"nothing pending", apply(), []Node{node("a", dev("sda", 0))}, nil, nil, v1alpha1.ReasonRolloutComplete},
		{"percentage rounds up", apply(maxUn(intstr.FromString("50%"))), []Node{pending("a"), pending("b"), pending("c")}, []string{"a", "b"}, nil, v1alpha1.ReasonRollingOut},
		{"count", apply(maxUn(intstr.FromInt32(5))), []Node{pending("a"), pending("b")}, []string{"a", "b"}, nil, v1alpha1.ReasonRollingOut},
		{"valid grant holds the slot", apply(), []Node{pending("a"), withGrant(pending("b"), grant("p", 3, time.Minute, "sda"))}, nil, nil, v1alpha1.ReasonRollingOut},
		{"expired grant is revoked and the slot reused", apply(), []Node{withGrant(pending("a"), grant("p", 3, -time.Second, "sda"))}, []string{"a"}, []string{"a"}, v1alpha1.ReasonRollingOut},
		{"old generation grant revoked", apply(), []Node{withGrant(node("a"), grant("p", 2, time.Minute, "sda"))}, nil, []string{"a"}, v1alpha1.ReasonRolloutComplete},
		{"another policy's grant in force", apply(), []Node{withGrant(pending("a"), grant("q", 1, time.Minute, "sdz"))}, nil, nil, v1alpha1.ReasonRolloutComplete},
		{"another policy's grant expired", apply(), []Node{withGrant(pending("a"), grant("q", 1, -time.Minute, "sdz"))}, []string{"a"}, nil, v1alpha1.ReasonRollingOut},
		{"dwell time", apply(), []Node{recent}, nil, nil, v1alpha1.ReasonWaitingForDwell},
		{"dwell zero", apply(func(p *v1alpha1.StorageTuning) { p.Spec.Rollout.MinDwell = &metav1.Duration{} }), []Node{recent}, []string{"b"}, nil, v1alpha1.ReasonRollingOut},
		{"not reporting is not granted", apply(), []Node{staleNode, pending("b")}, []string{"b"}, nil, v1alpha1.ReasonRollingOut},
		{"observe revokes", policy("p", v1alpha1.ModeObserve), []Node{withGrant(pending("a"), grant("p", 3, time.Minute, "sda"))}, nil, []string{"a"}, v1alpha1.ReasonObserving},
		{"pause stops grants", apply(func(p *v1alpha1.StorageTuning) { p.Spec.Paused = true }),
			[]Node{pending("a"), withGrant(pending("b"), grant("p", 3, time.Minute, "sda"))}, nil, []string{"b"}, v1alpha1.ReasonPaused},
		{"regression halts", apply(maxUn(intstr.FromInt32(9))),
			[]Node{pending("a"), withGrant(pending("b"), grant("p", 3, time.Minute, "sda")), degraded}, nil, []string{"b"}, v1alpha1.ReasonRegressionReverted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Evaluate(c.policy, []*v1alpha1.StorageTuning{c.policy}, c.nodes, now)
			got := slices.Sorted(maps.Keys(plan.Grants))
			if !slices.Equal(got, c.grants) {
				t.Errorf("granted %v, want %v", got, c.grants)
			}
			if !slices.Equal(plan.Revoke, c.revoke) {
				t.Errorf("revoked %v, want %v", plan.Revoke, c.revoke)
			}
			if pr := cond(t, plan, v1alpha1.ConditionProgressing); pr.Reason != c.progressing {
				t.Errorf("Progressing = %s (%s), want %s", pr.Reason, pr.Message, c.progressing)
			}
			for n, g := range plan.Grants {
				if g.Policy != "p" || g.Generation != 3 {
					t.Errorf("%s: grant %+v", n, g)
				}
				if !slices.Equal(g.Devices, []string{"sda", "sdb"}) {
					t.Errorf("%s: granted devices %v, want the pending sda, sdb", n, g.Devices)
				}
				if want := now.Add(GrantDuration(5 * time.Second)); !g.Until.Time.Equal(want) {
					t.Errorf("%s: until %v, want %v", n, g.Until, want)
				}
			}
			if len(plan.Grants) > 0 && plan.RequeueAfter <= 0 {
				t.Error("no requeue while grants are in force")
			}
		})
	}
}

func TestDwellRequeue(t *testing.T) {
	n := node("a", dev("sda", 20))
	n.State.Status.Devices[0].Applied = &v1alpha1.AppliedSetting{At: ago(time.Minute)}
	p := policy("p", v1alpha1.ModeApply)
	plan := Evaluate(p, []*v1alpha1.StorageTuning{p}, []Node{n}, now)
	// Dwell ends in 9 min, the heartbeat goes stale in 3 min − 10 s.
	if want := StaleAfter - 10*time.Second; plan.RequeueAfter != want {
		t.Errorf("requeue after %v, want %v", plan.RequeueAfter, want)
	}
	n.State.Status.LastHeartbeatTime = ptr.To(metav1.NewTime(now))
	p.Spec.Rollout.MinDwell = &metav1.Duration{Duration: 2 * time.Minute}
	plan = Evaluate(p, []*v1alpha1.StorageTuning{p}, []Node{n}, now)
	if plan.RequeueAfter != time.Minute {
		t.Errorf("requeue after %v, want the end of the dwell time in 1m", plan.RequeueAfter)
	}
}

func TestRegressionEvents(t *testing.T) {
	n := node("a", dev("sda", 20))
	n.State.Status.Devices[0].Reverts = 1
	n.State.Status.Devices[0].LastRevertTime = ptr.To(ago(time.Second))
	meta.SetStatusCondition(&n.State.Status.Conditions, metav1.Condition{
		Type: v1alpha1.NodeConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReverted})
	p := policy("p", v1alpha1.ModeApply)
	plan := Evaluate(p, []*v1alpha1.StorageTuning{p}, []Node{n}, now)
	if d := cond(t, plan, v1alpha1.ConditionDegraded); d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "a/sda") {
		t.Errorf("Degraded = %+v", d)
	}
	if got := reasons(plan.Events); !slices.Equal(got, []string{EventReverted, EventRolloutHalted}) {
		t.Errorf("events = %v", got)
	}
	// Recovery: the agent clears Degraded; the roll-out resumes.
	meta.SetStatusCondition(&n.State.Status.Conditions, metav1.Condition{
		Type: v1alpha1.NodeConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAgentReady})
	p.Status = plan.Status
	plan = Evaluate(p, []*v1alpha1.StorageTuning{p}, []Node{n}, now.Add(time.Hour))
	if d := cond(t, plan, v1alpha1.ConditionDegraded); d.Status != metav1.ConditionFalse {
		t.Errorf("Degraded after recovery = %+v", d)
	}
	if len(plan.Grants) != 0 {
		// The heartbeat is an hour old by now: not granted until it reports.
		t.Errorf("granted a node that does not report: %v", plan.Grants)
	}
}

func TestOverlap(t *testing.T) {
	hi := policy("zz-high", v1alpha1.ModeApply, func(p *v1alpha1.StorageTuning) {
		p.Spec.Priority = 10
		p.Spec.Devices.Include = []string{"sda"}
	})
	lo := policy("aa-low", v1alpha1.ModeApply)
	other := policy("other", v1alpha1.ModeObserve, func(p *v1alpha1.StorageTuning) {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/hostname": "elsewhere"}}
	})
	all := []*v1alpha1.StorageTuning{lo, hi, other}
	nodes := []Node{node("a", dev("sda", 20), dev("sdb", 20)), node("b", dev("sda", 20))}

	win := Evaluate(hi, all, nodes, now)
	lose := Evaluate(lo, all, nodes, now)
	alone := Evaluate(other, all, nodes, now)
	if win.Status.MatchedDevices != 2 || lose.Status.MatchedDevices != 1 {
		t.Errorf("governed: winner %d, loser %d; want 2 and 1", win.Status.MatchedDevices, lose.Status.MatchedDevices)
	}
	if c := cond(t, win, v1alpha1.ConditionConflict); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonOverrides ||
		!strings.Contains(c.Message, "aa-low (2 devices)") {
		t.Errorf("winner Conflict = %+v", c)
	}
	if c := cond(t, lose, v1alpha1.ConditionConflict); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonOverridden ||
		!strings.Contains(c.Message, "zz-high (2 devices)") {
		t.Errorf("loser Conflict = %+v", c)
	}
	if c := cond(t, alone, v1alpha1.ConditionConflict); c.Status != metav1.ConditionFalse {
		t.Errorf("unrelated policy Conflict = %+v", c)
	}
	if !slices.Contains(reasons(lose.Events), EventConflict) || !slices.Contains(reasons(win.Events), EventConflict) {
		t.Errorf("no conflict events: %v / %v", lose.Events, win.Events)
	}
	// The loser only grants what it governs: sdb on node a.
	if g := lose.Grants["a"]; g == nil || !slices.Equal(g.Devices, []string{"sdb"}) {
		t.Errorf("loser grant = %+v", lose.Grants)
	}
	// A deleted winner frees the devices.
	gone := hi.DeepCopy()
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	again := Evaluate(lo, []*v1alpha1.StorageTuning{lo, gone}, nodes, now)
	if again.Status.MatchedDevices != 3 {
		t.Errorf("after the winner's deletion the loser governs %d, want 3", again.Status.MatchedDevices)
	}
}

func TestMaxUnavailable(t *testing.T) {
	cases := []struct {
		v     *intstr.IntOrString
		nodes int
		want  int
	}{
		{nil, 10, 1},
		{ptr.To(intstr.FromInt32(3)), 10, 3},
		{ptr.To(intstr.FromInt32(0)), 10, 1},
		{ptr.To(intstr.FromString("10%")), 1000, 100},
		{ptr.To(intstr.FromString("10%")), 15, 2},
		{ptr.To(intstr.FromString("1%")), 3, 1},
		{ptr.To(intstr.FromString("100%")), 7, 7},
		{ptr.To(intstr.FromString("bogus")), 7, 1},
	}
	for _, c := range cases {
		if got := MaxUnavailable(c.v, c.nodes); got != c.want {
			t.Errorf("MaxUnavailable(%v, %d) = %d, want %d", c.v, c.nodes, got, c.want)
		}
	}
}

// oomKilled is a node whose agent was OOM-killed since ago.
func oomKilled(name string, since time.Duration) Node {
	n := node(name, dev("sda", 20))
	n.State.Status.AgentOOMKill = &v1alpha1.AgentOOMKill{Pod: "shadowtune-agent-" + name, RestartCount: 2, Time: ago(since)}
	return n
}

// overBudget is a node whose sda skipped a window for the CPU budget since ago.
func overBudget(name string, since time.Duration) Node {
	n := node(name, dev("sda", 20))
	n.State.Status.Devices[0].CPUBudgetSkips = 4
	n.State.Status.Devices[0].LastCPUBudgetSkipTime = ptr.To(ago(since))
	return n
}

// TestAgentTroubleDegraded: an OOM kill of a selected node's agent and a
// window skipped for the CPU budget on a governed device make the policy
// Degraded (AgentOOMKilled before CPUBudgetExceeded, both after a
// regression's halt) for their quiet periods, without halting the roll-out
// or making Ready False, with one Warning event when it starts and a
// requeue for when it clears.
func TestAgentTroubleDegraded(t *testing.T) {
	for _, c := range []struct {
		name     string
		nodes    []Node
		status   metav1.ConditionStatus
		reason   string
		says     []string
		requeue  time.Duration // 0: not checked
		grants   int
		notReady bool
	}{
		{"nothing", []Node{node("a", dev("sda", 20))}, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, nil, 0, 1, false},
		{"agent OOM-killed", []Node{oomKilled("a", time.Minute), node("b", dev("sda", 20))}, metav1.ConditionTrue, v1alpha1.ReasonAgentOOMKilled,
			[]string{"OOMKilled", "a (pod shadowtune-agent-a, restart count 2, at " + ago(time.Minute).UTC().Format(time.RFC3339)}, 0, 1, false},
		{"OOM kill past the quiet period", []Node{oomKilled("a", v1alpha1.OOMKillDegradedFor)}, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, nil, 0, 1, false},
		{"OOM kill clears soon", []Node{oomKilled("a", v1alpha1.OOMKillDegradedFor-time.Minute)}, metav1.ConditionTrue, v1alpha1.ReasonAgentOOMKilled,
			nil, time.Minute, 1, false},
		{"over the CPU budget", []Node{overBudget("a", 10*time.Second)}, metav1.ConditionTrue, v1alpha1.ReasonCPUBudgetExceeded,
			[]string{"cpuBudgetPercent", "a/sda"}, 0, 1, false},
		{"CPU budget past the quiet period", []Node{overBudget("a", v1alpha1.CPUBudgetDegradedFor)}, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, nil, 0, 1, false},
		{"both", []Node{overBudget("a", 10*time.Second), oomKilled("b", time.Minute)}, metav1.ConditionTrue, v1alpha1.ReasonAgentOOMKilled,
			[]string{"b (pod", "a/sda"}, 0, 1, false},
		{"a regression halts, the kill is in the message", []Node{reverted("a"), oomKilled("b", time.Minute)}, metav1.ConditionTrue, v1alpha1.ReasonRegressionReverted,
			[]string{"a/sda", "b (pod"}, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policy("p", v1alpha1.ModeApply)
			plan := Evaluate(p, []*v1alpha1.StorageTuning{p}, c.nodes, now)
			d := cond(t, plan, v1alpha1.ConditionDegraded)
			if d.Status != c.status || d.Reason != c.reason {
				t.Fatalf("Degraded = %s/%s %q, want %s/%s", d.Status, d.Reason, d.Message, c.status, c.reason)
			}
			for _, w := range c.says {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q does not say %q", d.Message, w)
				}
			}
			if len(plan.Grants) != c.grants {
				t.Errorf("%d grants, want %d: %v", len(plan.Grants), c.grants, plan.Grants)
			}
			if r := cond(t, plan, v1alpha1.ConditionReady); (r.Status == metav1.ConditionFalse) != c.notReady {
				t.Errorf("Ready = %s/%s", r.Status, r.Reason)
			}
			if c.requeue > 0 && plan.RequeueAfter != c.requeue {
				t.Errorf("requeue after %v, want %v (when Degraded clears)", plan.RequeueAfter, c.requeue)
			}
			if c.reason == v1alpha1.ReasonAgentOOMKilled || c.reason == v1alpha1.ReasonCPUBudgetExceeded {
				if got := reasons(plan.Events); !slices.Contains(got, c.reason) {
					t.Errorf("events %v, want a %s warning", got, c.reason)
				}
				// Once: not again while the condition holds.
				p.Status = plan.Status
				again := Evaluate(p, []*v1alpha1.StorageTuning{p}, c.nodes, now.Add(time.Second))
				if got := reasons(again.Events); slices.Contains(got, c.reason) {
					t.Errorf("second evaluation's events %v repeat %s", got, c.reason)
				}
			}
		})
	}
}
