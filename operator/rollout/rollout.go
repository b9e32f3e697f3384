// Package rollout holds the operator's decisions as pure functions over
// plain inputs: what a StorageTuning's status says about the fleet
// (aggregation), which policy governs a device when policies overlap, and
// which nodes may change now (grants under maxUnavailable and the dwell
// time, halted by a measured regression). The controllers in
// operator/controller only read the inputs from the API server and write
// the outputs back. Design: DESIGN §7.
package rollout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// StaleAfter is how old a NodeStorageState's heartbeat may be before its
// node counts as not reporting: three missed heartbeats.
const StaleAfter = 3 * v1alpha1.HeartbeatInterval

// Grant lifetime bounds: a grant lasts GrantWindows evaluation windows
// plus GrantSlack, enough for the agent to see it, decide in the next
// window and verify the change over two more (DESIGN §6).
const (
	GrantWindows = 4
	GrantSlack   = time.Minute
)

// Node is one cluster node as the operator sees it.
type Node struct {
	// Name is the node's name.
	Name string
	// Labels are the node's labels (for spec.nodeSelector).
	Labels map[string]string
	// State is the node's NodeStorageState, nil when its agent has not
	// created one yet.
	State *v1alpha1.NodeStorageState
}

// Event is a Kubernetes event to record on the policy. Events about one
// node name its NodeStorageState as the related object: the events API
// merges events with the same regarding and related objects, reason and
// action into one series whatever their notes, so per-node events must
// differ in the related object, and an Evaluate emits at most one event
// per node and reason.
type Event struct {
	// Node is the node the event is about, "" for the policy as a whole.
	Node string
	// Warning selects type Warning instead of Normal.
	Warning bool
	// Reason is the event's CamelCase reason.
	Reason string
	// Message is the event's note.
	Message string
}

// Event reasons.
const (
	EventGranted       = "Granted"
	EventGrantRevoked  = "GrantRevoked"
	EventChanged       = "Changed"
	EventReverted      = "Reverted"
	EventConflict      = "Conflict"
	EventRolloutHalted = "RolloutHalted"
	// EventDefaultsChanged: an agent found a governed device's queue
	// defaults changed since its previous start (a kernel or node-image
	// upgrade).
	EventDefaultsChanged = "DefaultsChanged"
)

// Plan is what the operator should make true for one policy.
type Plan struct {
	// Status is the policy's new status; its conditions are the previous
	// ones updated with meta.SetStatusCondition, so transition times only
	// move when a status changes.
	Status v1alpha1.StorageTuningStatus
	// Grants maps a node name to the grant the policy wants its
	// NodeStorageState to carry from now on (new grants only).
	Grants map[string]*v1alpha1.RolloutGrant
	// Revoke lists nodes whose NodeStorageState carries a grant of this
	// policy that must be removed (expired, for an old generation, or the
	// roll-out stopped).
	Revoke []string
	// Events to record on the policy.
	Events []Event
	// RequeueAfter is when the plan changes by itself (a grant expires, a
	// dwell time ends, a heartbeat goes stale); 0 means only on changes.
	RequeueAfter time.Duration
}

// deviceRef is one device of one node.
type deviceRef struct {
	node *Node
	dev  *v1alpha1.DeviceState
}

// Evaluate computes the plan of policy p given every policy in the cluster
// (all, p included; for overlaps) and every node. p must be defaulted as
// the API server defaults it; Evaluate works on a defaulted copy anyway.
// now is the time of the decision. Inputs are not modified.
func Evaluate(p *v1alpha1.StorageTuning, all []*v1alpha1.StorageTuning, nodes []Node, now time.Time) Plan {
	pol := p.DeepCopy()
	pol.Spec.Default()
	e := evaluation{p: pol, all: all, now: now, plan: Plan{Grants: map[string]*v1alpha1.RolloutGrant{}}}
	e.plan.Status = *p.Status.DeepCopy()
	e.plan.Status.ObservedGeneration = p.Generation

	if _, err := pol.Spec.MatchesNode(nil); err != nil {
		e.invalidSelector(err)
		return e.plan
	}
	e.match(nodes)
	e.aggregate()
	e.grant()
	e.conditions()
	return e.plan
}

// evaluation carries one Evaluate call's intermediate results.
type evaluation struct {
	p    *v1alpha1.StorageTuning
	all  []*v1alpha1.StorageTuning
	now  time.Time
	plan Plan

	matched     []*Node
	notReported []string        // matched nodes without a fresh NodeStorageState
	stale       map[string]bool // the same, as a set
	governed    []deviceRef
	overridden  map[string]int // winner policy → devices of p it governs
	overrides   map[string]int // loser policy → devices p governs instead
	degraded    []string       // "node/device" reverted within back-off
	oomKilled   []string       // agents of matched nodes OOM-killed within the quiet period
	overBudget  []string       // "node/device" skipped for the CPU budget within the quiet period
	pending     int
	granted     int // nodes changing now (valid grants, old and new)
	dwelling    int // nodes with pending devices waiting for the dwell time
	requeue     time.Duration
}

func (e *evaluation) invalidSelector(err error) {
	s := &e.plan.Status
	s.MatchedNodes, s.MatchedDevices, s.RecommendedChanges, s.ChangedDevices, s.RevertedDevices = 0, 0, 0, 0, 0
	s.Settings, s.PredictedGainPercent, s.DefaultsChanged = nil, "", nil
	msg := "spec.nodeSelector: " + err.Error()
	e.set(v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidSelector, msg)
	e.set(v1alpha1.ConditionDegraded, true, v1alpha1.ReasonInvalidSelector, msg)
	e.set(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonInvalidSelector, msg)
	e.set(v1alpha1.ConditionConflict, false, v1alpha1.ReasonNoConflict, "")
}

// match finds the selected nodes and the devices p governs on them.
func (e *evaluation) match(nodes []Node) {
	e.overridden, e.overrides, e.stale = map[string]int{}, map[string]int{}, map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if ok, _ := e.p.Spec.MatchesNode(n.Labels); !ok {
			continue
		}
		e.matched = append(e.matched, n)
		if !e.fresh(n) {
			e.notReported = append(e.notReported, n.Name)
			e.stale[n.Name] = true
		}
		if n.State == nil {
			continue
		}
		np := v1alpha1.NodePolicies(e.all, n.Labels)
		for j := range n.State.Status.Devices {
			d := &n.State.Status.Devices[j]
			sel := v1alpha1.DevicePolicies(np, d.Info())
			at := slices.IndexFunc(sel, func(q *v1alpha1.StorageTuning) bool { return q.Name == e.p.Name })
			switch {
			case at < 0:
				continue
			case at > 0:
				e.overridden[sel[0].Name]++
				continue
			}
			for _, q := range sel[1:] {
				e.overrides[q.Name]++
			}
			e.governed = append(e.governed, deviceRef{n, d})
		}
	}
}

// fresh reports whether the node's agent reported within StaleAfter; it
// also schedules a requeue for when the heartbeat goes stale.
func (e *evaluation) fresh(n *Node) bool {
	if n.State == nil || n.State.Status.LastHeartbeatTime == nil {
		return false
	}
	stale := n.State.Status.LastHeartbeatTime.Add(StaleAfter)
	if !e.now.Before(stale) {
		return false
	}
	e.after(stale.Sub(e.now))
	return true
}

func (e *evaluation) after(d time.Duration) {
	if d > 0 && (e.requeue == 0 || d < e.requeue) {
		e.requeue = d
		e.plan.RequeueAfter = d
	}
}

// aggregate fills the status counts, settings, gain and times, and the
// change and revert events.
func (e *evaluation) aggregate() {
	s := &e.plan.Status
	prevChange, prevRevert := s.LastChangeTime, s.LastRevertTime
	s.MatchedNodes = int32(len(e.matched))
	s.MatchedDevices = int32(len(e.governed))
	s.RecommendedChanges, s.ChangedDevices, s.RevertedDevices = 0, 0, 0
	bySched := map[string]int32{}
	var saved, base float64
	changes, reverts := perNode{}, perNode{}
	for _, r := range e.governed {
		d := r.dev
		if d.Pending() {
			s.RecommendedChanges++
		}
		if d.Original != nil {
			s.ChangedDevices++
		}
		if d.Reverts > 0 {
			s.RevertedDevices++
		}
		if d.Current.Scheduler != "" {
			bySched[d.Current.Scheduler]++
		}
		if cur, sv, ok := predictedTimes(d); ok {
			saved += sv
			base += cur
		}
		if d.Applied != nil && after(d.Applied.At, prevChange) {
			changes.add(r.node.Name, fmt.Sprintf("%s/%s: applied %s", r.node.Name, d.Name, describeApplied(d.Applied)))
		}
		if d.Applied != nil && (s.LastChangeTime == nil || s.LastChangeTime.Before(&d.Applied.At)) {
			s.LastChangeTime = d.Applied.At.DeepCopy()
		}
		if d.LastRevertTime != nil {
			if after(*d.LastRevertTime, prevRevert) {
				reverts.add(r.node.Name, fmt.Sprintf("%s/%s: change put back after a measured regression", r.node.Name, d.Name))
			}
			if s.LastRevertTime == nil || s.LastRevertTime.Before(d.LastRevertTime) {
				s.LastRevertTime = d.LastRevertTime.DeepCopy()
			}
		}
	}
	e.plan.Events = append(e.plan.Events, changes.events(EventChanged, false)...)
	e.plan.Events = append(e.plan.Events, reverts.events(EventReverted, true)...)
	e.defaultsChanged()
	s.Settings = settings(bySched)
	s.PredictedGainPercent = ""
	if base > 0 {
		s.PredictedGainPercent = v1alpha1.FormatPercent(100 * saved / base)
	}
	e.pending = int(s.RecommendedChanges)

	e.agentTrouble()
	for _, n := range e.matched {
		if n.State == nil {
			continue
		}
		c := meta.FindStatusCondition(n.State.Status.Conditions, v1alpha1.NodeConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonReverted {
			continue
		}
		for _, r := range e.governed {
			if r.node == n && r.dev.Reverts > 0 {
				e.degraded = append(e.degraded, n.Name+"/"+r.dev.Name)
			}
		}
	}
}

// agentTrouble finds the agents of matched nodes killed for lack of
// memory within v1alpha1.OOMKillDegradedFor (NodeStorageState
// agentOOMKill) and p's governed devices whose window was skipped for the
// CPU budget within v1alpha1.CPUBudgetDegradedFor; both make the policy
// Degraded without halting the roll-out, and a requeue is scheduled for
// when they clear.
func (e *evaluation) agentTrouble() {
	for _, n := range e.matched {
		if n.State == nil || n.State.Status.AgentOOMKill == nil {
			continue
		}
		k := n.State.Status.AgentOOMKill
		if left := k.Time.Add(v1alpha1.OOMKillDegradedFor).Sub(e.now); left > 0 {
			e.oomKilled = append(e.oomKilled, fmt.Sprintf("%s (pod %s, restart count %d, at %s)",
				n.Name, k.Pod, k.RestartCount, k.Time.UTC().Format(time.RFC3339)))
			e.after(left)
		}
	}
	for _, r := range e.governed {
		t := r.dev.LastCPUBudgetSkipTime
		if t == nil {
			continue
		}
		if left := t.Add(v1alpha1.CPUBudgetDegradedFor).Sub(e.now); left > 0 {
			e.overBudget = append(e.overBudget, r.node.Name+"/"+r.dev.Name)
			e.after(left)
		}
	}
}

// maxDefaultsChanges bounds StorageTuningStatus.DefaultsChanged (its
// CRD's MaxItems).
const maxDefaultsChanges = 8

// defaultsChanged sums up the governed devices' defaults changes, one
// entry per distinct change (its knobs and what came with it), the most
// devices first, with how many devices judged it and found it slower,
// and makes an event per node of those found since the status's last
// one.
func (e *evaluation) defaultsChanged() {
	s := &e.plan.Status
	prev := s.LastDefaultsChangeTime
	type key struct{ change, with string }
	counts, nodes := map[key]*v1alpha1.DefaultsChangeCount{}, map[key]map[string]bool{}
	found := perNode{}
	for _, r := range e.governed {
		c := r.dev.DefaultsChanged
		if c == nil {
			continue
		}
		k := key{c.Describe(), c.With}
		n := counts[k]
		if n == nil {
			n, nodes[k] = &v1alpha1.DefaultsChangeCount{Change: k.change, With: k.with}, map[string]bool{}
			counts[k] = n
		}
		n.Devices++
		switch c.Verdict() {
		case v1alpha1.VerdictSlower:
			n.JudgedDevices, n.SlowerDevices = n.JudgedDevices+1, n.SlowerDevices+1
		case v1alpha1.VerdictNotSlower:
			n.JudgedDevices++
		}
		nodes[k][r.node.Name] = true
		if after(c.DetectedTime, prev) {
			msg := fmt.Sprintf("%s/%s: defaults changed, %s", r.node.Name, r.dev.Name, k.change)
			if k.with != "" {
				msg += " (" + k.with + ")"
			}
			found.add(r.node.Name, msg)
		}
		if s.LastDefaultsChangeTime == nil || s.LastDefaultsChangeTime.Before(&c.DetectedTime) {
			s.LastDefaultsChangeTime = c.DetectedTime.DeepCopy()
		}
	}
	s.DefaultsChanged = nil
	for k, n := range counts {
		n.Nodes = int32(len(nodes[k]))
		s.DefaultsChanged = append(s.DefaultsChanged, *n)
	}
	slices.SortFunc(s.DefaultsChanged, func(a, b v1alpha1.DefaultsChangeCount) int {
		if a.Devices != b.Devices {
			return int(b.Devices - a.Devices)
		}
		return strings.Compare(a.Change+a.With, b.Change+b.With)
	})
	s.DefaultsChanged = s.DefaultsChanged[:min(len(s.DefaultsChanged), maxDefaultsChanges)]
	e.plan.Events = append(e.plan.Events, found.events(EventDefaultsChanged, true)...)
}

// perNode collects event messages by node.
type perNode map[string][]string

func (p perNode) add(node, msg string) { p[node] = append(p[node], msg) }

// events returns one event per node, in node order, its messages joined.
func (p perNode) events(reason string, warning bool) []Event {
	var out []Event
	for _, n := range slices.Sorted(maps.Keys(p)) {
		out = append(out, Event{Node: n, Warning: warning, Reason: reason, Message: strings.Join(p[n], "; ")})
	}
	return out
}

// after reports whether t is later than prev (any t when prev is nil).
func after(t metav1.Time, prev *metav1.Time) bool { return prev == nil || prev.Before(&t) }

// predictedTimes returns the predicted service time of the device's
// current setting over the last window and what the recommendation would
// save of it, µs. The current time follows from any candidate's time and
// its gain over the current setting: t = cur × (1 − gain/100). A device
// with no pending recommendation saves nothing.
func predictedTimes(d *v1alpha1.DeviceState) (cur, saved float64, ok bool) {
	for _, c := range d.Candidates {
		g, err := v1alpha1.ParsePercent(c.PredictedGainPercent)
		if err != nil || g >= 100 || c.PredictedServiceTimeMicros <= 0 {
			continue
		}
		cur = float64(c.PredictedServiceTimeMicros) / (1 - g/100)
		ok = true
		break
	}
	if !ok || !d.Pending() {
		return cur, 0, ok
	}
	if g, err := v1alpha1.ParsePercent(d.Recommendation.GainPercent); err == nil {
		saved = cur * g / 100
	}
	return cur, saved, true
}

func describeApplied(a *v1alpha1.AppliedSetting) string {
	var parts []string
	if a.Scheduler != "" {
		parts = append(parts, "scheduler "+a.Scheduler)
	}
	keys := make([]string, 0, len(a.Tunables))
	for k := range a.Tunables {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+a.Tunables[k])
	}
	if a.ReadAheadKiB > 0 {
		parts = append(parts, fmt.Sprintf("read_ahead_kb=%d", a.ReadAheadKiB))
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// settings turns per-scheduler counts into the status list: most devices
// first, then by name, at most 8 entries (the rest are left out).
func settings(m map[string]int32) []v1alpha1.SchedulerCount {
	if len(m) == 0 {
		return nil
	}
	out := make([]v1alpha1.SchedulerCount, 0, len(m))
	for k, v := range m {
		out = append(out, v1alpha1.SchedulerCount{Scheduler: k, Count: v})
	}
	slices.SortFunc(out, func(a, b v1alpha1.SchedulerCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Scheduler, b.Scheduler)
	})
	return out[:min(len(out), 8)]
}

// MaxUnavailable resolves spec.rollout.maxUnavailable for a number of
// selected nodes: a count as given, a percentage of the nodes rounded up;
// at least 1 either way. Unset (nil) takes the schema default.
func MaxUnavailable(v *intstr.IntOrString, nodes int) int {
	if v == nil {
		var s v1alpha1.StorageTuningSpec
		s.Default()
		v = s.Rollout.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, nodes, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// GrantDuration is how long a grant of a policy with the given evaluation
// window lasts.
func GrantDuration(window time.Duration) time.Duration {
	return GrantWindows*window + GrantSlack
}

// grant decides the grants: revoke p's invalid grants (or all of them when
// the roll-out must not proceed), then grant nodes with pending devices,
// in name order, while fewer than maxUnavailable nodes hold valid grants
// and the node's dwell time since its last change is over.
func (e *evaluation) grant() {
	spec := &e.p.Spec
	rolling := spec.Mode == v1alpha1.ModeApply && !spec.Paused && len(e.degraded) == 0
	pendingOn := map[*Node][]string{}
	lastChange := map[*Node]time.Time{}
	for _, r := range e.governed {
		if r.dev.Pending() {
			pendingOn[r.node] = append(pendingOn[r.node], r.dev.Name)
		}
		if r.dev.Applied != nil && r.dev.Applied.At.After(lastChange[r.node]) {
			lastChange[r.node] = r.dev.Applied.At.Time
		}
	}
	var candidates []*Node
	for _, n := range e.matched {
		if n.State == nil {
			continue
		}
		g := n.State.Spec.Grant
		switch {
		case g == nil:
		case g.Policy != e.p.Name:
			if e.now.Before(g.Until.Time) {
				continue // another policy's grant is in force on this node
			}
		case rolling && v1alpha1.CheckGrantPolicy(g, e.p, e.now) == nil:
			e.granted++
			e.after(g.Until.Sub(e.now))
			continue
		default:
			e.plan.Revoke = append(e.plan.Revoke, n.Name)
			if v1alpha1.CheckGrantPolicy(g, e.p, e.now) == nil {
				e.plan.Events = append(e.plan.Events, Event{Node: n.Name, Reason: EventGrantRevoked,
					Message: fmt.Sprintf("%s: grant revoked (%s)", n.Name, e.stopReason())})
			}
		}
		if rolling && len(pendingOn[n]) > 0 && !e.stale[n.Name] {
			candidates = append(candidates, n)
		}
	}
	if !rolling {
		return
	}
	slices.SortFunc(candidates, func(a, b *Node) int { return cmp.Compare(a.Name, b.Name) })
	budget := MaxUnavailable(spec.Rollout.MaxUnavailable, len(e.matched)) - e.granted
	dwell := spec.Rollout.MinDwell.Duration
	for _, n := range candidates {
		if wait := lastChange[n].Add(dwell).Sub(e.now); wait > 0 {
			e.dwelling++
			e.after(wait)
			continue
		}
		if budget <= 0 {
			continue
		}
		budget--
		devs := slices.Clone(pendingOn[n])
		slices.Sort(devs)
		g := &v1alpha1.RolloutGrant{
			Devices:    devs,
			Until:      metav1.NewTime(e.now.Add(GrantDuration(spec.Evaluation.Window.Duration)).Truncate(time.Second)),
			Policy:     e.p.Name,
			Generation: e.p.Generation,
		}
		e.plan.Grants[n.Name] = g
		e.granted++
		e.after(g.Until.Sub(e.now))
		e.plan.Events = append(e.plan.Events, Event{Node: n.Name, Reason: EventGranted,
			Message: fmt.Sprintf("%s: may change %s until %s", n.Name, strings.Join(devs, ", "), g.Until.UTC().Format(time.RFC3339))})
	}
}

func (e *evaluation) stopReason() string {
	switch {
	case e.p.Spec.Mode != v1alpha1.ModeApply:
		return "policy is in Observe mode"
	case e.p.Spec.Paused:
		return "policy is paused"
	case len(e.degraded) > 0:
		return "roll-out halted by a regression"
	}
	return "grant expired or for an older generation"
}

// conditions sets Ready, Progressing, Degraded and Conflict.
//
// Degraded, first that holds: a regression revert halts the roll-out →
// True RegressionReverted (with the others below in its message); an
// agent of a selected node was OOM-killed within
// v1alpha1.OOMKillDegradedFor → True AgentOOMKilled; a governed device's
// window was skipped for the CPU budget within
// v1alpha1.CPUBudgetDegradedFor → True CPUBudgetExceeded (these two do not
// halt the roll-out nor make Ready False); else False AsExpected.
//
// Ready is False while the roll-out is halted by a regression (with the
// halt's reason and message), so that `kubectl get stune` does not show a
// halted policy as ready; otherwise it is True once every selected node
// reports.
func (e *evaluation) conditions() {
	n := len(e.matched)
	halt := fmt.Sprintf("regression measured after a change, roll-out halted: %s", list(e.degraded))
	notReporting := fmt.Sprintf("%d of %d selected nodes have no current NodeStorageState: %s", len(e.notReported), n, list(e.notReported))
	switch {
	case n == 0:
		e.set(v1alpha1.ConditionReady, false, v1alpha1.ReasonNoMatchingNodes, "no node matches spec.nodeSelector")
	case len(e.degraded) > 0:
		msg := halt
		if len(e.notReported) > 0 {
			msg += "; " + notReporting
		}
		e.set(v1alpha1.ConditionReady, false, v1alpha1.ReasonRegressionReverted, msg)
	case len(e.notReported) > 0:
		e.set(v1alpha1.ConditionReady, false, v1alpha1.ReasonNodesNotReporting, notReporting)
	default:
		e.set(v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled,
			fmt.Sprintf("%d nodes report, %d devices governed", n, len(e.governed)))
	}

	var trouble []string // what degrades the policy without halting it
	if len(e.oomKilled) > 0 {
		trouble = append(trouble, "agent killed for lack of memory (OOMKilled) on "+list(e.oomKilled))
	}
	if len(e.overBudget) > 0 {
		trouble = append(trouble, "windows not evaluated, over spec.evaluation.cpuBudgetPercent, on "+list(e.overBudget))
	}
	prev := meta.FindStatusCondition(e.plan.Status.Conditions, v1alpha1.ConditionDegraded)
	switch {
	case len(e.degraded) > 0:
		msg := strings.Join(append([]string{halt}, trouble...), "; ")
		if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != v1alpha1.ReasonRegressionReverted {
			e.plan.Events = append(e.plan.Events, Event{Warning: true, Reason: EventRolloutHalted, Message: halt})
		}
		e.set(v1alpha1.ConditionDegraded, true, v1alpha1.ReasonRegressionReverted, msg)
	case len(trouble) > 0:
		reason := v1alpha1.ReasonAgentOOMKilled
		if len(e.oomKilled) == 0 {
			reason = v1alpha1.ReasonCPUBudgetExceeded
		}
		msg := strings.Join(trouble, "; ")
		if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != reason {
			e.plan.Events = append(e.plan.Events, Event{Warning: true, Reason: reason, Message: msg})
		}
		e.set(v1alpha1.ConditionDegraded, true, reason, msg)
	default:
		e.set(v1alpha1.ConditionDegraded, false, v1alpha1.ReasonAsExpected, "")
	}

	spec := &e.p.Spec
	switch {
	case spec.Mode != v1alpha1.ModeApply:
		e.set(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonObserving,
			fmt.Sprintf("Observe mode: %d devices would change", e.pending))
	case spec.Paused:
		e.set(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonPaused,
			fmt.Sprintf("paused: %d devices would change", e.pending))
	case len(e.degraded) > 0:
		e.set(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonRegressionReverted, "roll-out halted by a regression")
	case e.granted > 0:
		e.set(v1alpha1.ConditionProgressing, true, v1alpha1.ReasonRollingOut,
			fmt.Sprintf("%d nodes may change now, %d devices pending", e.granted, e.pending))
	case e.dwelling > 0:
		e.set(v1alpha1.ConditionProgressing, true, v1alpha1.ReasonWaitingForDwell,
			fmt.Sprintf("%d nodes wait for spec.rollout.minDwell since their last change", e.dwelling))
	default:
		e.set(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonRolloutComplete,
			fmt.Sprintf("%d devices pending", e.pending))
	}

	switch {
	case len(e.overridden) > 0:
		msg := "devices also selected by a policy that takes precedence (spec.priority, then name): " + counts(e.overridden)
		e.conflict(v1alpha1.ReasonOverridden, msg)
	case len(e.overrides) > 0:
		msg := "takes precedence over overlapping policies on: " + counts(e.overrides)
		e.conflict(v1alpha1.ReasonOverrides, msg)
	default:
		e.set(v1alpha1.ConditionConflict, false, v1alpha1.ReasonNoConflict, "")
	}
}

func (e *evaluation) conflict(reason, msg string) {
	prev := meta.FindStatusCondition(e.plan.Status.Conditions, v1alpha1.ConditionConflict)
	if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != reason {
		e.plan.Events = append(e.plan.Events, Event{Warning: true, Reason: EventConflict, Message: msg})
	}
	e.set(v1alpha1.ConditionConflict, true, reason, msg)
}

func (e *evaluation) set(typ string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&e.plan.Status.Conditions, metav1.Condition{
		Type: typ, Status: st, Reason: reason, Message: msg,
		ObservedGeneration: e.p.Generation, LastTransitionTime: metav1.NewTime(e.now),
	})
}

// list joins names, at most 10, sorted.
func list(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	if len(s) > 10 {
		return strings.Join(s[:10], ", ") + fmt.Sprintf(" and %d more", len(s)-10)
	}
	return strings.Join(s, ", ")
}

// counts renders "other (3 devices), x (1 device)" by name.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		unit := "devices"
		if m[k] == 1 {
			unit = "device"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", k, m[k], unit)
	}
	return list(parts)
}
