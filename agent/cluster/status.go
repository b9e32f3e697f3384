package cluster

// The agent's view (agent.Status) as a NodeStorageState status, and the
// operator's grant as the agent reads it: pure functions, table-tested.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
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
}

// DroppedDegradedFor is how long after the tracer last dropped events the
// node reports Degraded (EventsDropped).
const DroppedDegradedFor = v1alpha1.HeartbeatInterval

// BuildStatus converts the agent's status into the NodeStorageState
// status, LastHeartbeatTime set to in.Now.
//
// Devices: the governed devices and the other tunable disks (agent.Status
// Devices and Ungoverned), by name, at most v1alpha1.MaxNodeDevices:
// identity, class, current setting (sysfs), original (the actuator's
// record), governedBy, the fastest candidates (current included),
// recommendation, last applied setting, model error, thrash guard, tracer,
// events dropped, reverts and last revert time.
//
// Counts: deviceCount, governedDevices, pendingDevices (governed devices
// whose recommendation differs from their current setting,
// DeviceState.Pending), appliedDevices (devices with a recorded original:
// their current setting is shadowtune's).
//
// Conditions (observedGeneration = in.Generation):
//   - TracingActive: True, reason EBPF or Tracefs, while the agent traces;
//     False, TracerUnavailable, with in.TracerError or before the first
//     window.
//   - ModelReady: False, Learning, while a governed device's model has not
//     been trained or calibrated on a loaded window; else True,
//     ModelTrained.
//   - Applied, over the devices governed in Apply mode, first that holds:
//     none → False ObserveOnly; a change failed this window → False
//     ApplyFailed; a pending change and no valid grant → False
//     GrantExpired (the device's grant for its policy has expired) or
//     AwaitingGrant; a change under verification → Unknown Applied; some
//     device changed → True Applied; else True NothingToApply.
//   - Degraded, first that holds: a regression revert within
//     agent.RegressionBackoff → True Reverted; a change failed → True
//     ApplyFailed; events dropped within DroppedDegradedFor → True
//     EventsDropped; else False AgentReady.
//   - Ready: True AgentReady when TracingActive and ModelReady are True
//     and Degraded is False; else False with the reason of the first of
//     them that is not.
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
	byName := map[string]*agent.DeviceStatus{}
	for i := range in.Agent.Devices {
		byName[in.Agent.Devices[i].Name] = &in.Agent.Devices[i]
	}
	for i := range in.Agent.Ungoverned {
		if _, ok := byName[in.Agent.Ungoverned[i].Name]; !ok {
			byName[in.Agent.Ungoverned[i].Name] = &in.Agent.Ungoverned[i]
		}
	}
	names := slices.Sorted(maps.Keys(byName))
	if len(names) > v1alpha1.MaxNodeDevices {
		// Governed devices first, then by name.
		slices.SortStableFunc(names, func(a, b string) int {
			ga, gb := byName[a].Policy != "" || byName[a].Mode != "", byName[b].Policy != "" || byName[b].Mode != ""
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

	var (
		apply, failed, verifying, changed, learning []string
		awaiting, expired                           []string
		reverted                                    []string
	)
	for _, n := range names {
		d := byName[n]
		governed := d.Mode != ""
		ds := deviceState(d, governed, tracer)
		st.Devices = append(st.Devices, ds)
		if ds.Original != nil {
			st.AppliedDevices++
		}
		if !governed {
			continue
		}
		st.GovernedDevices++
		if ds.Pending() {
			st.PendingDevices++
		}
		if !d.ModelCalibrated {
			learning = append(learning, n)
		}
		if !d.LastRevert.IsZero() && in.Now.Sub(d.LastRevert) < agent.RegressionBackoff {
			reverted = append(reverted, n)
		}
		if d.ApplyError != "" {
			failed = append(failed, n)
		}
		if d.Mode != string(v1alpha1.ModeApply) {
			continue
		}
		apply = append(apply, n)
		switch {
		case d.AwaitingGrant || (d.Paused && ds.Pending()):
			if errors.Is(v1alpha1.CheckGrant(in.Grant, in.Policies[d.Policy], n, in.Now), v1alpha1.ErrGrantExpired) {
				expired = append(expired, n)
			} else {
				awaiting = append(awaiting, n)
			}
		case d.Verifying > 0:
			verifying = append(verifying, n)
		}
		if ds.Original != nil {
			changed = append(changed, n)
		}
	}
	st.DeviceCount = int32(len(st.Devices))

	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: truncate(msg, 32768), ObservedGeneration: in.Generation, LastTransitionTime: metav1.NewTime(in.Now.Truncate(time.Second))})
	}
	const (
		yes = metav1.ConditionTrue
		no  = metav1.ConditionFalse
	)

	// TracingActive.
	tracing := tracer != v1alpha1.TracerNone
	switch {
	case in.TracerError != "":
		set(v1alpha1.NodeConditionTracingActive, no, v1alpha1.ReasonTracerUnavailable, in.TracerError)
	case tracer == v1alpha1.TracerEBPF:
		set(v1alpha1.NodeConditionTracingActive, yes, v1alpha1.ReasonTracingEBPF, "block I/O traced with eBPF")
	case tracer == v1alpha1.TracerTracefs:
		set(v1alpha1.NodeConditionTracingActive, yes, v1alpha1.ReasonTracingTracefs, "block I/O traced through tracefs: "+strings.Join(in.Agent.Notes, "; "))
	default:
		set(v1alpha1.NodeConditionTracingActive, no, v1alpha1.ReasonTracerUnavailable, "the tracer has not started yet")
	}

	// ModelReady.
	if len(learning) > 0 {
		set(v1alpha1.NodeConditionModelReady, no, v1alpha1.ReasonLearning, "waiting for a loaded window to calibrate the disk model of "+list(learning))
	} else {
		set(v1alpha1.NodeConditionModelReady, yes, v1alpha1.ReasonModelTrained, fmt.Sprintf("%d governed device(s) have a calibrated disk model", st.GovernedDevices))
	}

	// Applied.
	switch {
	case len(apply) == 0:
		set(v1alpha1.NodeConditionApplied, no, v1alpha1.ReasonObserveOnly, "no device is governed in Apply mode")
	case hasApplyFailure(failed, apply):
		set(v1alpha1.NodeConditionApplied, no, v1alpha1.ReasonApplyFailed, "a change failed on "+list(failed))
	case len(expired) > 0:
		set(v1alpha1.NodeConditionApplied, no, v1alpha1.ReasonGrantExpired, "the grant expired with changes pending on "+list(expired))
	case len(awaiting) > 0:
		set(v1alpha1.NodeConditionApplied, no, v1alpha1.ReasonAwaitingGrant, "changes pending, not granted, on "+list(awaiting))
	case len(verifying) > 0:
		set(v1alpha1.NodeConditionApplied, metav1.ConditionUnknown, v1alpha1.ReasonApplied, "change applied, being verified, on "+list(verifying))
	case len(changed) > 0:
		set(v1alpha1.NodeConditionApplied, yes, v1alpha1.ReasonApplied, "changed and verified: "+list(changed))
	default:
		set(v1alpha1.NodeConditionApplied, yes, v1alpha1.ReasonNothingToApply, "every device governed in Apply mode has its recommended setting")
	}

	// Degraded.
	dropped := !in.EventsDroppedAt.IsZero() && in.Now.Sub(in.EventsDroppedAt) < DroppedDegradedFor
	switch {
	case len(reverted) > 0:
		set(v1alpha1.NodeConditionDegraded, yes, v1alpha1.ReasonReverted, "a change was put back after a measured regression on "+list(reverted))
	case len(failed) > 0:
		set(v1alpha1.NodeConditionDegraded, yes, v1alpha1.ReasonApplyFailed, "a change failed on "+list(failed))
	case dropped:
		set(v1alpha1.NodeConditionDegraded, yes, v1alpha1.ReasonEventsDropped, "the tracer dropped block I/O events")
	default:
		set(v1alpha1.NodeConditionDegraded, no, v1alpha1.ReasonAgentReady, "")
	}

	// Ready.
	tc := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeConditionTracingActive)
	mc := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeConditionModelReady)
	dc := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeConditionDegraded)
	switch {
	case !tracing || tc.Status != yes:
		set(v1alpha1.NodeConditionReady, no, tc.Reason, tc.Message)
	case mc.Status != yes:
		set(v1alpha1.NodeConditionReady, no, mc.Reason, mc.Message)
	case dc.Status != no:
		set(v1alpha1.NodeConditionReady, no, dc.Reason, dc.Message)
	default:
		set(v1alpha1.NodeConditionReady, yes, v1alpha1.ReasonAgentReady, "tracing, models calibrated, not degraded")
	}
	return st
}

func hasApplyFailure(failed, apply []string) bool {
	for _, f := range failed {
		if slices.Contains(apply, f) {
			return true
		}
	}
	return false
}

// deviceState is one device's entry.
func deviceState(d *agent.DeviceStatus, governed bool, tracer v1alpha1.TracerKind) v1alpha1.DeviceState {
	ds := v1alpha1.DeviceState{
		Name:       d.Name,
		MajorMinor: d.MajorMinor,
		Model:      truncate(d.Model, 128),
		Serial:     truncate(d.Serial, 128),
		WWN:        truncate(d.WWN, 128),
		SizeBytes:  int64(min(d.SizeBytes, 1<<63-1)),
		Rotational: d.Rotational,
		Tracer:     v1alpha1.TracerNone,
	}
	switch c := v1alpha1.DeviceClass(d.Class); c {
	case v1alpha1.DeviceClassHDD, v1alpha1.DeviceClassSSD, v1alpha1.DeviceClassNVMe:
		ds.Class = c
	}
	if d.Settings != nil {
		ds.Current = settings(*d.Settings)
	} else {
		ds.Current = v1alpha1.DeviceSettings{Scheduler: d.Current, ReadAheadKiB: int32(d.ReadAheadKiB)}
	}
	if d.Original != nil {
		o := settings(*d.Original)
		ds.Original = &o
	}
	if !governed {
		return ds
	}
	ds.GovernedBy = d.Policy
	ds.Tracer = tracer
	for i, c := range d.Candidates {
		if i == v1alpha1.MaxDeviceCandidates {
			break
		}
		ds.Candidates = append(ds.Candidates, v1alpha1.CandidateResult{
			Name: truncate(c.Name, 256), PredictedServiceTimeMicros: max(c.ServiceTimeUs, 0),
			PredictedGainPercent: v1alpha1.FormatPercent(c.GainPct),
		})
	}
	if r := d.Recommendation; r != nil {
		ds.Recommendation = &v1alpha1.Recommendation{
			Scheduler: r.Scheduler, Tunables: capMap(r.Tunables), ReadAheadKiB: int32(r.ReadAheadKiB),
			Redcap: r.Redcap, GainPercent: v1alpha1.FormatPercent(r.GainPct), Reason: truncate(r.Reason, 64),
		}
	}
	if a := d.Applied; a != nil {
		ds.Applied = &v1alpha1.AppliedSetting{Scheduler: a.Scheduler, Tunables: capMap(a.Tunables),
			ReadAheadKiB: int32(a.ReadAheadKiB), At: metav1.NewTime(a.At.Truncate(time.Second))}
	}
	if d.TotalRequests > 0 {
		ds.ModelErrorPercent = v1alpha1.FormatPercent(d.ModelErrorPct)
	}
	ds.ThrashGuard = v1alpha1.ThrashGuardState{Changes: int32(d.ThrashGuard.Changes), QuietChecks: int32(d.ThrashGuard.QuietChecks),
		Pinned: d.ThrashGuard.Pinned}
	ds.Reverts = int32(d.Reverts)
	if !d.LastRevert.IsZero() {
		ds.LastRevertTime = ptrTime(d.LastRevert)
	}
	ds.EventsDropped = int64(min(d.EventsDropped, 1<<63-1))
	return ds
}

func settings(s agent.Settings) v1alpha1.DeviceSettings {
	return v1alpha1.DeviceSettings{Scheduler: s.Scheduler, Tunables: capMap(s.Tunables), ReadAheadKiB: int32(s.ReadAheadKiB)}
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

func list(names []string) string {
	const show = 8
	if len(names) > show {
		return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
	}
	return strings.Join(names, ", ")
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
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
