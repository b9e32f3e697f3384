package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shadowtune/shadowtune/api/knob"
)

// SchedulerName is the kernel's name of a blk-mq I/O scheduler, as written
// to /sys/block/DEV/queue/scheduler.
// +kubebuilder:validation:Enum=none;mq-deadline;bfq;kyber
type SchedulerName string

// The blk-mq schedulers shadowtune simulates (internal/sched).
const (
	SchedulerNone       SchedulerName = "none"
	SchedulerMQDeadline SchedulerName = "mq-deadline"
	SchedulerBFQ        SchedulerName = "bfq"
	SchedulerKyber      SchedulerName = "kyber"
)

// TunableSchedulerName is a scheduler that has tunables: every SchedulerName
// but none.
// +kubebuilder:validation:Enum=mq-deadline;bfq;kyber
type TunableSchedulerName string

// SchedulerNames returns the known schedulers in a fixed order: none,
// mq-deadline, bfq, kyber.
func SchedulerNames() []SchedulerName {
	return []SchedulerName{SchedulerNone, SchedulerMQDeadline, SchedulerBFQ, SchedulerKyber}
}

// IsKnown reports whether s is one of SchedulerNames.
func (s SchedulerName) IsKnown() bool { return slices.Contains(SchedulerNames(), s) }

// KnownTunables returns the names a TunableRange of scheduler s may
// name, from the knob table (api/knob): the scheduler's tunables
// (queue/iosched/NAME), then the queue attributes tuned with a scheduler
// (queue/nr_requests); nil for none and unknown schedulers. The slice is a
// copy.
func KnownTunables(s SchedulerName) []string { return knob.Ranged(string(s)) }

// tunableBounds returns the row of the tunable name when the kernel
// bounds it (knob.Knob Min and Max).
func tunableBounds(name string) (knob.Knob, bool) {
	for _, k := range knob.All() {
		if k.Name == name && k.Max > 0 {
			return k, true
		}
	}
	return knob.Knob{}, false
}

// IsBooleanTunable reports whether the tunable takes only 0 or 1
// (front_merges, low_latency, strict_guarantees).
func IsBooleanTunable(name string) bool { return slices.Contains(booleanTunables(), name) }

// booleanTunables are the tuned scheduler tunables that take 0 or 1, in
// the knob table's order.
func booleanTunables() []string {
	var out []string
	for _, k := range knob.All() {
		if k.Scheduler != "" && k.Role == knob.Tuned && k.Boolean() {
			out = append(out, k.Name)
		}
	}
	return out
}

// celRule is one x-kubernetes-validations rule.
type celRule struct{ rule, message, fieldPath string }

// tunableRules are the three CEL rules on TunableRange that the knob
// table decides: the name must be a tunable of the scheduler, a boolean
// tunable's max is at most 1, and a bounded knob's min and max are within
// its bounds.
func tunableRules() []celRule {
	var rule, msg strings.Builder
	tunable := []SchedulerName{SchedulerMQDeadline, SchedulerBFQ, SchedulerKyber}
	msg.WriteString("name must be a tunable of the scheduler (")
	for i, s := range tunable {
		names := KnownTunables(s)
		list := "['" + strings.Join(names, "', '") + "']"
		if i < len(tunable)-1 {
			fmt.Fprintf(&rule, "self.scheduler == '%s' ? self.name in %s : ", s, list)
		} else {
			fmt.Fprintf(&rule, "self.name in %s", list)
		}
		if i > 0 {
			msg.WriteString("; ")
		}
		fmt.Fprintf(&msg, "%s: %s", s, strings.Join(names, ", "))
	}
	msg.WriteString(")")
	b := booleanTunables()
	var bounds, boundsMsg []string
	for _, k := range knob.All() {
		if k.Max > 0 && (k.Role == knob.Tuned) {
			bounds = append(bounds, fmt.Sprintf("(self.name != '%s' || (self.min >= %d && self.max <= %d))", k.Name, k.Min, k.Max))
			boundsMsg = append(boundsMsg, fmt.Sprintf("%s takes %d to %d", k.Name, k.Min, k.Max))
		}
	}
	return []celRule{
		{rule.String(), msg.String(), ".name"},
		{
			fmt.Sprintf("!(self.name in ['%s']) || self.max <= 1", strings.Join(b, "', '")),
			fmt.Sprintf("%s and %s take 0 or 1: max must be at most 1", strings.Join(b[:len(b)-1], ", "), b[len(b)-1]),
			".max",
		},
		{strings.Join(bounds, " && "), strings.Join(boundsMsg, "; ") + ": min and max must be in that range", ".max"},
	}
}

// TunableRuleMarkers returns tunableRules as the arguments of
// +kubebuilder:validation:XValidation markers, in order: hack/knobgen
// writes them into storagetuning_types.go (make generate), and a test
// checks that the generated CRD carries the rules.
func TunableRuleMarkers() []string {
	var out []string
	for _, r := range tunableRules() {
		out = append(out, fmt.Sprintf("rule=%q,message=%q,fieldPath=%q", r.rule, r.message, r.fieldPath))
	}
	return out
}
