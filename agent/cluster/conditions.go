package cluster

// The NodeStorageState's conditions, one function per condition
// (observedGeneration = in.Generation):
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
//     window.RegressionBackoff → True Reverted; a change failed → True
//     ApplyFailed; another writer changed a governed device → True
//     OtherWriter (naming the device, the change and the writer); the
//     agent container was killed for lack of memory within
//     v1alpha1.OOMKillDegradedFor (its pod's lastState.terminated.reason
//     OOMKilled, status agentOOMKill) → True AgentOOMKilled (naming the
//     pod, the node, the restart count and the time); the
//     agent started within UncleanRestartDegradedFor after a run that
//     ended without a clean shutdown → True UncleanRestart; a window
//     skipped for the CPU budget within v1alpha1.CPUBudgetDegradedFor → True
//     CPUBudgetExceeded; events dropped within DroppedDegradedFor → True
//     EventsDropped; else False AgentReady.
//   - Ready: True AgentReady when TracingActive and ModelReady are True
//     and Degraded is False; else False with the reason of the first of
//     them that is not.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// UncleanRestartDegradedFor is how long after the agent started following
// an unclean end of its previous run (killed: out of memory, SIGKILL) the
// node reports Degraded (UncleanRestart).
const UncleanRestartDegradedFor = 10 * v1alpha1.HeartbeatInterval

const (
	yes     = metav1.ConditionTrue
	no      = metav1.ConditionFalse
	unknown = metav1.ConditionUnknown
)

// setConditions sets the five conditions in order (Ready reads the others),
// keeping the transition time of a condition whose status is unchanged.
func setConditions(st *v1alpha1.NodeStorageStateStatus, in StatusInput, f facts, tracer v1alpha1.TracerKind) {
	set := func(c metav1.Condition) {
		c.Message = truncate(c.Message, 32768)
		c.ObservedGeneration, c.LastTransitionTime = in.Generation, metav1.NewTime(in.Now.Truncate(time.Second))
		meta.SetStatusCondition(&st.Conditions, c)
	}
	set(tracingActive(in, tracer))
	set(modelReady(f, st.GovernedDevices))
	set(applied(f))
	set(degraded(in, f, recentOOMKill(st.AgentOOMKill, in.Now)))
	set(ready(st.Conditions, tracer))
}

func condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func tracingActive(in StatusInput, tracer v1alpha1.TracerKind) metav1.Condition {
	const typ = v1alpha1.NodeConditionTracingActive
	switch {
	case in.TracerError != "":
		return condition(typ, no, v1alpha1.ReasonTracerUnavailable, in.TracerError)
	case tracer == v1alpha1.TracerEBPF:
		return condition(typ, yes, v1alpha1.ReasonTracingEBPF, "block I/O traced with eBPF")
	case tracer == v1alpha1.TracerTracefs:
		return condition(typ, yes, v1alpha1.ReasonTracingTracefs, "block I/O traced through tracefs: "+strings.Join(in.Agent.Notes, "; "))
	}
	return condition(typ, no, v1alpha1.ReasonTracerUnavailable, "the tracer has not started yet")
}

func modelReady(f facts, governed int32) metav1.Condition {
	const typ = v1alpha1.NodeConditionModelReady
	if len(f.learning) > 0 {
		return condition(typ, no, v1alpha1.ReasonLearning, "waiting for a loaded window to calibrate the disk model of "+list(f.learning))
	}
	return condition(typ, yes, v1alpha1.ReasonModelTrained, fmt.Sprintf("%d governed device(s) have a calibrated disk model", governed))
}

func applied(f facts) metav1.Condition {
	const typ = v1alpha1.NodeConditionApplied
	switch {
	case len(f.apply) == 0:
		return condition(typ, no, v1alpha1.ReasonObserveOnly, "no device is governed in Apply mode")
	case slices.ContainsFunc(f.failed, func(n string) bool { return slices.Contains(f.apply, n) }):
		return condition(typ, no, v1alpha1.ReasonApplyFailed, "a change failed on "+list(f.failed))
	case len(f.expired) > 0:
		return condition(typ, no, v1alpha1.ReasonGrantExpired, "the grant expired with changes pending on "+list(f.expired))
	case len(f.awaiting) > 0:
		return condition(typ, no, v1alpha1.ReasonAwaitingGrant, "changes pending, not granted, on "+list(f.awaiting))
	case len(f.verifying) > 0:
		return condition(typ, unknown, v1alpha1.ReasonApplied, "change applied, being verified, on "+list(f.verifying))
	case len(f.changed) > 0:
		return condition(typ, yes, v1alpha1.ReasonApplied, "changed and verified: "+list(f.changed))
	}
	return condition(typ, yes, v1alpha1.ReasonNothingToApply, "every device governed in Apply mode has its recommended setting")
}

func degraded(in StatusInput, f facts, oom *v1alpha1.AgentOOMKill) metav1.Condition {
	const typ = v1alpha1.NodeConditionDegraded
	dropped := !in.EventsDroppedAt.IsZero() && in.Now.Sub(in.EventsDroppedAt) < DroppedDegradedFor
	unclean := in.Agent.UncleanRestart
	switch {
	case len(f.reverted) > 0:
		return condition(typ, yes, v1alpha1.ReasonReverted, "a change was put back after a measured regression on "+list(f.reverted))
	case len(f.failed) > 0:
		return condition(typ, yes, v1alpha1.ReasonApplyFailed, "a change failed on "+list(f.failed))
	case len(f.otherWriter) > 0:
		return condition(typ, yes, v1alpha1.ReasonOtherWriter, "another writer changed a setting the agent governs: "+strings.Join(f.otherWriter, "; "))
	case oom != nil:
		return condition(typ, yes, v1alpha1.ReasonAgentOOMKilled, OOMKillMessage(in.Node, oom))
	case unclean != nil && in.Now.Sub(unclean.Time) < UncleanRestartDegradedFor:
		return condition(typ, yes, v1alpha1.ReasonUncleanRestart,
			"the agent's previous run ended without a clean shutdown (killed: out of memory or SIGKILL; or a node crash); restarted at "+
				unclean.UTC().Format(time.RFC3339))
	case len(f.overBudget) > 0:
		return condition(typ, yes, v1alpha1.ReasonCPUBudgetExceeded,
			"windows not evaluated: the evaluations were over spec.evaluation.cpuBudgetPercent on "+list(f.overBudget))
	case dropped:
		return condition(typ, yes, v1alpha1.ReasonEventsDropped, "the tracer dropped block I/O events")
	}
	return condition(typ, no, v1alpha1.ReasonAgentReady, "")
}

// ready is True when the agent traces, its models are calibrated and it is
// not degraded; else False with the first failing condition's reason.
func ready(cs []metav1.Condition, tracer v1alpha1.TracerKind) metav1.Condition {
	const typ = v1alpha1.NodeConditionReady
	tc := meta.FindStatusCondition(cs, v1alpha1.NodeConditionTracingActive)
	mc := meta.FindStatusCondition(cs, v1alpha1.NodeConditionModelReady)
	dc := meta.FindStatusCondition(cs, v1alpha1.NodeConditionDegraded)
	switch {
	case tracer == v1alpha1.TracerNone || tc.Status != yes:
		return condition(typ, no, tc.Reason, tc.Message)
	case mc.Status != yes:
		return condition(typ, no, mc.Reason, mc.Message)
	case dc.Status != no:
		return condition(typ, no, dc.Reason, dc.Message)
	}
	return condition(typ, yes, v1alpha1.ReasonAgentReady, "tracing, models calibrated, not degraded")
}

func list(names []string) string {
	const show = 8
	if len(names) > show {
		return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
	}
	return strings.Join(names, ", ")
}

// OOMKillMessage describes an OOM kill of the agent on node.
func OOMKillMessage(node string, k *v1alpha1.AgentOOMKill) string {
	on := ""
	if node != "" {
		on = " on node " + node
	}
	return fmt.Sprintf("the agent container of pod %s%s was killed for lack of memory (OOMKilled) at %s, restart count %d; "+
		"raise the chart's agent.resources.limits.memory or govern fewer candidates (Degraded for %s after the last kill)",
		k.Pod, on, k.Time.UTC().Format(time.RFC3339), k.RestartCount, v1alpha1.OOMKillDegradedFor)
}
