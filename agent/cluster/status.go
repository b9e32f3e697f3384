package cluster

// The agent's view (agent.Status) as a NodeStorageState status: the
// device entries and counts here, the conditions in conditions.go; pure
// functions, table-tested.

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// StatusInput is what BuildStatus needs.
type StatusInput struct {
	// Now is the time of the status.
	Now time.Time
	// Generation is the NodeStorageState's metadata.generation; Grant its
	// spec.grant.
	Generation int64
	Grant      *v1alpha1.RolloutGrant
	// Policies are the policies the agent runs with, by name (to tell an
	// expired grant from a missing one).
	Policies map[string]*v1alpha1.StorageTuning
	// Agent is the agent loop's last status (zero before its first
	// window).
	Agent agent.Status
	// TracerError, when not empty, says why the agent loop is not tracing
	// (it failed to start, or stopped).
	TracerError string
	// EventsDroppedAt is when the tracer's dropped-event count last grew
	// (zero: never); the node is Degraded for DroppedDegradedFor after.
	EventsDroppedAt time.Time
	// Conditions are the current conditions, whose transition times are
	// kept when their status does not change.
	Conditions []metav1.Condition
	// Node is the node's name (for messages).
	Node string
	// OOMKill is the agent container's last OOM kill as its pod reports
	// it (OOMKillOf), nil when none; LastOOMKill is the one the current
	// status reports. The status reports the later of the two.
	OOMKill, LastOOMKill *v1alpha1.AgentOOMKill
}

// DroppedDegradedFor is how long after the tracer last dropped events the
// node reports Degraded (EventsDropped).
const DroppedDegradedFor = v1alpha1.HeartbeatInterval

// BuildStatus converts the agent's status into the NodeStorageState
// status, LastHeartbeatTime set to in.Now. It runs three phases: the
// device entries (deviceEntries), the counts and the facts the conditions
// rest on (summarize), and the conditions (setConditions, conditions.go).
//
// Devices: the governed devices and the other tunable disks (agent.Status
// Devices and Ungoverned), by name, at most v1alpha1.MaxNodeDevices. A
// governed device's entry is the agent's own (the same schema), its
// strings and lists cut to the schema's bounds and its request counters
// left 0 (they grow every window and would force a write every window);
// an ungoverned disk's entry has its identity, class and settings only.
//
// Counts: deviceCount, governedDevices, pendingDevices (governed devices
// whose recommendation differs from their current setting,
// DeviceState.Pending), appliedDevices (devices with a recorded original:
// their current setting is shadowtune's).
func BuildStatus(in StatusInput) v1alpha1.NodeStorageStateStatus {
	st := v1alpha1.NodeStorageStateStatus{
		ObservedGeneration: in.Generation,
		LastHeartbeatTime:  ptrTime(in.Now),
		Conditions:         cloneConditions(in.Conditions),
	}
	tracer := v1alpha1.TracerKind(in.Agent.Tracer)
	if in.TracerError != "" || (tracer != v1alpha1.TracerEBPF && tracer != v1alpha1.TracerTracefs) {
		tracer = v1alpha1.TracerNone
	}
	st.Devices = deviceEntries(in.Agent, tracer)
	st.LastUncleanRestartTime = secondOf(in.Agent.UncleanRestart)
	st.AgentOOMKill = latestOOMKill(in.LastOOMKill, in.OOMKill)
	f := summarize(&st, in)
	setConditions(&st, in, f, tracer)
	return st
}

// deviceEntries are the status's device entries, by name: the governed
// devices first when there are more than v1alpha1.MaxNodeDevices.
func deviceEntries(ag agent.Status, tracer v1alpha1.TracerKind) []v1alpha1.DeviceState {
	byName := map[string]*v1alpha1.DeviceState{}
	for i := range ag.Devices {
		byName[ag.Devices[i].Name] = &ag.Devices[i]
	}
	for i := range ag.Ungoverned {
		if _, ok := byName[ag.Ungoverned[i].Name]; !ok {
			byName[ag.Ungoverned[i].Name] = &ag.Ungoverned[i]
		}
	}
	names := slices.Sorted(maps.Keys(byName))
	if len(names) > v1alpha1.MaxNodeDevices {
		slices.SortStableFunc(names, func(a, b string) int {
			ga, gb := governed(byName[a]), governed(byName[b])
			switch {
			case ga && !gb:
				return -1
			case gb && !ga:
				return 1
			}
			return strings.Compare(a, b)
		})
		names = names[:v1alpha1.MaxNodeDevices]
		slices.Sort(names)
	}
	out := make([]v1alpha1.DeviceState, 0, len(names))
	for _, n := range names {
		if d := byName[n]; governed(d) {
			out = append(out, governedEntry(d, tracer))
		} else {
			out = append(out, diskEntry(d))
		}
	}
	return out
}

// governed reports whether a policy governs the device (the agent sets
// the governing policy's mode).
func governed(d *v1alpha1.DeviceState) bool { return d.Mode != "" }

// diskEntry is an entry's identity, class and settings, within the
// schema's bounds: all an ungoverned disk reports.
func diskEntry(d *v1alpha1.DeviceState) v1alpha1.DeviceState {
	ds := v1alpha1.DeviceState{
		Name:       d.Name,
		MajorMinor: d.MajorMinor,
		Model:      truncate(d.Model, 128),
		Serial:     truncate(d.Serial, 128),
		WWN:        truncate(d.WWN, 128),
		SizeBytes:  max(d.SizeBytes, 0),
		Rotational: d.Rotational,
		Tracer:     v1alpha1.TracerNone,
		Current:    settings(d.Current),
	}
	switch c := d.Class; c {
	case v1alpha1.DeviceClassHDD, v1alpha1.DeviceClassSSD, v1alpha1.DeviceClassNVMe, v1alpha1.DeviceClassThrottled:
		ds.Class = c
	}
	if d.Original != nil {
		o := settings(*d.Original)
		ds.Original = &o
	}
	return ds
}

// governedEntry is a governed device's entry: the agent's, within the
// schema's bounds, times to the second, request counters left 0.
func governedEntry(d *v1alpha1.DeviceState, tracer v1alpha1.TracerKind) v1alpha1.DeviceState {
	ds := *d.DeepCopy()
	id := diskEntry(d)
	ds.Model, ds.Serial, ds.WWN, ds.SizeBytes, ds.Class = id.Model, id.Serial, id.WWN, id.SizeBytes, id.Class
	ds.Current, ds.Original = id.Current, id.Original
	ds.Tracer, ds.TotalRequests, ds.UnlearnedRequests = tracer, 0, 0
	ds.GovernedBy = truncate(ds.GovernedBy, 253)
	if len(ds.Candidates) > v1alpha1.MaxDeviceCandidates {
		ds.Candidates = ds.Candidates[:v1alpha1.MaxDeviceCandidates]
	}
	for i := range ds.Candidates {
		c := &ds.Candidates[i]
		c.Name, c.PredictedServiceTimeMicros = truncate(c.Name, 256), max(c.PredictedServiceTimeMicros, 0)
	}
	if r := ds.Recommendation; r != nil {
		r.Tunables, r.Reason = capMap(r.Tunables), truncate(r.Reason, 64)
	}
	if a := ds.Applied; a != nil {
		a.Tunables, a.At = capMap(a.Tunables), metav1.NewTime(a.At.Truncate(time.Second))
	}
	ds.LastRevertTime, ds.LastChangeTime = secondOf(ds.LastRevertTime), secondOf(ds.LastChangeTime)
	ds.LastCPUBudgetSkipTime = secondOf(ds.LastCPUBudgetSkipTime)
	ds.LastChange, ds.LastError, ds.Gone = truncate(ds.LastChange, 1024), truncate(ds.LastError, 1024), truncate(ds.Gone, 512)
	if ow := ds.OtherWriter; ow != nil {
		ow.Time = metav1.NewTime(ow.Time.Truncate(time.Second))
		ow.Change, ow.Writer = truncate(ow.Change, 1024), truncate(ow.Writer, 512)
	}
	if w := ds.Window; w != nil {
		w.Requests = 0
		w.Best, w.Skipped, w.Note = truncate(w.Best, 256), truncate(w.Skipped, 1024), truncate(w.Note, 1024)
		w.Error, w.ApplyError = truncate(w.Error, 1024), truncate(w.ApplyError, 1024)
	}
	return ds
}

// facts are the devices each condition rests on, by name.
type facts struct {
	apply, failed, verifying, changed, learning []string
	awaiting, expired, reverted                 []string
	// otherWriter: "DEVICE: CHANGE by WRITER" of each device another
	// writer changed.
	otherWriter []string
	// overBudget: devices a window of which was skipped for the CPU budget
	// within DroppedDegradedFor.
	overBudget []string
}

// summarize counts the status's devices and gathers the facts of the
// conditions from the agent's governed devices.
func summarize(st *v1alpha1.NodeStorageStateStatus, in StatusInput) facts {
	var f facts
	for i := range st.Devices {
		ds := &st.Devices[i]
		n := ds.Name
		if ds.Original != nil {
			st.AppliedDevices++
		}
		if !governed(ds) {
			continue
		}
		st.GovernedDevices++
		if ds.Pending() {
			st.PendingDevices++
		}
		if !ds.ModelCalibrated {
			f.learning = append(f.learning, n)
		}
		if t := ds.LastRevertTime; t != nil && in.Now.Sub(t.Time) < window.RegressionBackoff {
			f.reverted = append(f.reverted, n)
		}
		if ds.Window != nil && ds.Window.ApplyError != "" {
			f.failed = append(f.failed, n)
		}
		if t := ds.LastCPUBudgetSkipTime; t != nil && in.Now.Sub(t.Time) < v1alpha1.CPUBudgetDegradedFor {
			f.overBudget = append(f.overBudget, n)
		}
		if ow := ds.OtherWriter; ow != nil {
			what := n + ": " + ow.Change
			if ow.Writer != "" {
				what += " by " + ow.Writer
			}
			f.otherWriter = append(f.otherWriter, what)
		}
		if ds.Mode != v1alpha1.ModeApply {
			continue
		}
		f.apply = append(f.apply, n)
		switch {
		case ds.AwaitingGrant || (ds.Paused && ds.Pending()):
			if errors.Is(v1alpha1.CheckGrant(in.Grant, in.Policies[ds.GovernedBy], n, in.Now), v1alpha1.ErrGrantExpired) {
				f.expired = append(f.expired, n)
			} else {
				f.awaiting = append(f.awaiting, n)
			}
		case ds.VerifyingWindows > 0:
			f.verifying = append(f.verifying, n)
		}
		if ds.Original != nil {
			f.changed = append(f.changed, n)
		}
	}
	st.DeviceCount = int32(len(st.Devices))
	return f
}

func settings(s v1alpha1.DeviceSettings) v1alpha1.DeviceSettings {
	return v1alpha1.DeviceSettings{Scheduler: s.Scheduler, Tunables: capMap(s.Tunables), ReadAheadKiB: s.ReadAheadKiB}
}

// capMap copies m, keeping at most the schema's 32 entries (the first by
// name).
func capMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(m), 32))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if len(out) == 32 {
			break
		}
		out[k] = m[k]
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// secondOf is t to the second (nil stays nil).
func secondOf(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return ptrTime(t.Time)
}

func cloneConditions(cs []metav1.Condition) []metav1.Condition {
	if cs == nil {
		return nil
	}
	out := make([]metav1.Condition, len(cs))
	for i := range cs {
		cs[i].DeepCopyInto(&out[i])
	}
	return out
}

// SameStatus reports whether two statuses are equal but for their
// timestamps: LastHeartbeatTime and the conditions' LastTransitionTime.
func SameStatus(a, b v1alpha1.NodeStorageStateStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	a.LastHeartbeatTime, b.LastHeartbeatTime = nil, nil
	for _, cs := range [][]metav1.Condition{a.Conditions, b.Conditions} {
		for i := range cs {
			cs[i].LastTransitionTime = metav1.Time{}
		}
	}
	slices.SortFunc(a.Conditions, func(x, y metav1.Condition) int { return strings.Compare(x.Type, y.Type) })
	slices.SortFunc(b.Conditions, func(x, y metav1.Condition) int { return strings.Compare(x.Type, y.Type) })
	return equality.Semantic.DeepEqual(a, b)
}
