package cluster

// The agent's Events on its own NodeStorageState, so that `kubectl describe
// nss NODE` shows the history of changes: derived from two consecutive
// agent statuses (eventsBetween, a pure function, table-tested) and
// recorded by the status writer (Agent.sync) once the object exists.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// Event reasons of the agent, on its NodeStorageState.
const (
	// EventApplied: the agent changed a device's setting under a grant.
	EventApplied = "Applied"
	// EventReverted: the agent put a device's original setting back (the
	// policy went to Observe, stopped governing the device, or was
	// deleted).
	EventReverted = "Reverted"
	// EventRegressionReverted: verification measured a regression after a
	// change and the agent put the previous setting back.
	EventRegressionReverted = "RegressionReverted"
	// EventTracerFallback: eBPF is not available; the agent traces with
	// tracefs.
	EventTracerFallback = "TracerFallback"
	// EventOtherWriter: something other than the agent changed a setting
	// the agent governs.
	EventOtherWriter = "OtherWriter"
	// EventDefaultsChanged: at the agent's start, a device's queue
	// defaults differed from those read at its previous start (a kernel
	// or node-image upgrade).
	EventDefaultsChanged = "DefaultsChanged"
	// EventDefaultsSlower (Warning): a changed default was judged slower
	// than the previous one (agent/sentinel).
	EventDefaultsSlower = "DefaultsSlower"
)

// maxPendingEvents bounds the events kept for the writer while the
// NodeStorageState cannot be written; older ones are dropped.
const maxPendingEvents = 64

// event is one Event to record on the node's NodeStorageState.
type event struct {
	// Type is corev1.EventTypeNormal or EventTypeWarning.
	Type string
	// Reason is one of the Event* reasons.
	Reason string
	// Action is what the agent did and to which device ("Apply sda",
	// "Trace"). events.k8s.io/v1 merges the events of one object that
	// agree in type, reason and action within a few minutes into a series
	// (the first note, a count): naming the device keeps the devices'
	// events apart, while repeats on one device are deduplicated.
	Action string
	// Message is the event's note.
	Message string
}

// eventsBetween returns the events that happened between two consecutive
// statuses of the agent loop: per device (the governed ones and the
// others, by name) a change (Changes grew), a regression revert (Reverts
// grew), a revert to the original (Original recorded before, not now,
// without a regression revert), another writer's change (a new
// OtherWriter entry; a changed device that left the status without being
// gone counts as put back); for the node, a fall-back to tracefs (the tracer
// became tracefs while the agent was asked for eBPF or either, tracerOpt
// "", "auto" or "ebpf"). Counters that went down (a restarted loop) yield
// nothing. Devices come in next's order, governed ones first.
func eventsBetween(prev, next agent.Status, tracerOpt string) []event {
	var out []event
	if next.Tracer == string(v1alpha1.TracerTracefs) && prev.Tracer != next.Tracer && tracerOpt != string(v1alpha1.TracerTracefs) {
		out = append(out, event{corev1.EventTypeWarning, EventTracerFallback, "Trace",
			"eBPF tracing is not available on this node: tracing block I/O with tracefs, which costs more CPU"})
	}
	before := make(map[string]*v1alpha1.DeviceState, len(prev.Devices)+len(prev.Ungoverned))
	for _, list := range [][]v1alpha1.DeviceState{prev.Devices, prev.Ungoverned} {
		for i := range list {
			before[list[i].Name] = &list[i]
		}
	}
	seen := make(map[string]bool, len(next.Devices)+len(next.Ungoverned))
	for _, list := range [][]v1alpha1.DeviceState{next.Devices, next.Ungoverned} {
		for i := range list {
			d := &list[i]
			seen[d.Name] = true
			if d.Gone != "" {
				continue
			}
			p := before[d.Name]
			if p == nil {
				p = &v1alpha1.DeviceState{Name: d.Name}
			}
			out = append(out, deviceEvents(p, d)...)
		}
	}
	// A changed device that leaves the status without being gone is no
	// longer governed (a virtual device, such as a loop device, is not
	// listed ungoverned): the agent put its original setting back.
	for _, p := range prev.Devices {
		if !seen[p.Name] && p.Original != nil && p.Gone == "" {
			out = append(out, event{corev1.EventTypeNormal, EventReverted, "Restore " + p.Name,
				fmt.Sprintf("%s: no longer governed, original setting put back (%s)", p.Name, describeSettings(p.Original))})
		}
	}
	return out
}

// deviceEvents compares two consecutive entries of one device.
func deviceEvents(p, d *v1alpha1.DeviceState) []event {
	var out []event
	regression := d.Reverts > p.Reverts
	switch {
	case regression:
		out = append(out, event{corev1.EventTypeWarning, EventRegressionReverted, "Revert " + d.Name,
			fmt.Sprintf("%s: %s%s", d.Name, orDefault(d.LastChange, "change put back after a measured regression"), more(d.Reverts-p.Reverts, "revert"))})
	case d.Changes > p.Changes:
		out = append(out, event{corev1.EventTypeNormal, EventApplied, "Apply " + d.Name,
			fmt.Sprintf("%s: %s%s", d.Name, orDefault(d.LastChange, "setting changed"), more(d.Changes-p.Changes, "change"))})
	}
	if regression && d.Changes > p.Changes {
		// Both in one interval: the revert is reported above; the change
		// too, without its text (LastChange holds the last write only).
		out = append(out, event{corev1.EventTypeNormal, EventApplied, "Apply " + d.Name,
			fmt.Sprintf("%s: setting changed%s", d.Name, more(d.Changes-p.Changes, "change"))})
	}
	if p.Original != nil && d.Original == nil && !regression {
		out = append(out, event{corev1.EventTypeNormal, EventReverted, "Restore " + d.Name,
			fmt.Sprintf("%s: original setting put back (%s)", d.Name, describeSettings(p.Original))})
	}
	if w := d.OtherWriter; w != nil && (p.OtherWriter == nil || !p.OtherWriter.Time.Equal(&w.Time) || p.OtherWriter.Change != w.Change) {
		msg := fmt.Sprintf("%s: %s", d.Name, w.Change)
		if w.Writer != "" {
			msg += " by " + w.Writer
		}
		if w.Yielded {
			msg += "; the agent stops changing the device and leaves that value in place (spec.otherWriters Yield)"
		} else {
			msg += "; the agent keeps governing the device (spec.otherWriters Reclaim)"
		}
		out = append(out, event{corev1.EventTypeWarning, EventOtherWriter, "Detect " + d.Name, msg})
	}
	if c := d.DefaultsChanged; c != nil && (p.DefaultsChanged == nil || !p.DefaultsChanged.DetectedTime.Equal(&c.DetectedTime)) {
		out = append(out, event{corev1.EventTypeWarning, EventDefaultsChanged, "Compare " + d.Name, d.Name + ": " + describeDefaults(c)})
	}
	if msg := newlySlower(p.DefaultsChanged, d.DefaultsChanged); msg != "" {
		out = append(out, event{corev1.EventTypeWarning, EventDefaultsSlower, "Judge " + d.Name, d.Name + ": " + msg})
	}
	return out
}

// newlySlower describes the knobs of next judged slower that prev (the
// same change, or none) did not judge slower: "read_ahead_kb 128 → 4096
// predicted slower (+312.5 %)"; "" when there are none.
func newlySlower(prev, next *v1alpha1.DefaultsChange) string {
	if next == nil {
		return ""
	}
	var parts []string
	for _, k := range next.Knobs {
		if k.Verdict != v1alpha1.VerdictSlower {
			continue
		}
		if prev != nil && prev.DetectedTime.Equal(&next.DetectedTime) && slices.ContainsFunc(prev.Knobs, func(p v1alpha1.KnobChange) bool {
			return p.Knob == k.Knob && p.Verdict == v1alpha1.VerdictSlower
		}) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s predicted slower (%s %%)", k.Describe(), k.ChangePercent))
	}
	return strings.Join(parts, ", ")
}

// describeDefaults renders a defaults change: "read_ahead_kb 128 → 4096
// since the agent's start at 2026-12-01T00:00:00Z; kernel 6.16.1 →
// 6.17.2".
func describeDefaults(c *v1alpha1.DefaultsChange) string {
	s := c.Describe() + " since the agent's start at " + c.Since.UTC().Format(time.RFC3339)
	if c.With != "" {
		s += "; " + c.With
	}
	return s
}

// more says how many more of a kind happened than the one described:
// "" for one, " (and 2 earlier changes)" for three.
func more(n int32, kind string) string {
	switch {
	case n <= 1:
		return ""
	case n == 2:
		return fmt.Sprintf(" (and 1 earlier %s)", kind)
	}
	return fmt.Sprintf(" (and %d earlier %ss)", n-1, kind)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// describeSettings renders a device setting: "mq-deadline, read_ahead_kb 128".
func describeSettings(s *v1alpha1.DeviceSettings) string {
	parts := []string{orDefault(s.Scheduler, "scheduler unknown")}
	if s.ReadAheadKiB > 0 {
		parts = append(parts, fmt.Sprintf("read_ahead_kb %d", s.ReadAheadKiB))
	}
	return strings.Join(parts, ", ")
}
