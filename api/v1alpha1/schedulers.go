package v1alpha1

import "slices"

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

// knownTunables are the sysfs tunables (queue/iosched/NAME) of each
// scheduler that shadowtune can simulate, in their sysfs units. They are the
// names internal/sched accepts (a test checks) and the names the CEL rule on
// TunableRange lists; keep the three in step.
var knownTunables = map[SchedulerName][]string{
	SchedulerMQDeadline: {"read_expire", "write_expire", "fifo_batch", "writes_starved", "front_merges"},
	SchedulerBFQ: {"slice_idle", "slice_idle_us", "low_latency", "back_seek_max", "back_seek_penalty",
		"fifo_expire_sync", "fifo_expire_async", "timeout_sync", "max_budget", "strict_guarantees"},
	SchedulerKyber: {"read_lat_nsec", "write_lat_nsec"},
}

// booleanTunables take only 0 or 1.
var booleanTunables = []string{"front_merges", "low_latency", "strict_guarantees"}

// KnownTunables returns the sysfs tunable names of scheduler s that a
// TunableRange may name (nil for none and unknown schedulers). The slice is
// a copy.
func KnownTunables(s SchedulerName) []string { return slices.Clone(knownTunables[s]) }

// IsBooleanTunable reports whether the tunable takes only 0 or 1
// (front_merges, low_latency, strict_guarantees).
func IsBooleanTunable(name string) bool { return slices.Contains(booleanTunables, name) }
