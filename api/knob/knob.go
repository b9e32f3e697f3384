// Package knob is the one table of the block-queue knobs shadowtune knows:
// every blk-mq scheduler it simulates, each scheduler's tunables
// (queue/iosched/NAME) and the queue attributes (queue/NAME) it writes or
// puts back. The API's names and its CEL rule (api/v1alpha1), what the
// actuator may write (agent/actuate) and the simulator's tunables
// (internal/sched) are read from it or checked against it by tests.
//
// The package imports nothing, so that the API, the agent and the
// simulator can all read it.
package knob

import "slices"

// Role is what shadowtune does with a knob.
type Role string

const (
	// Tuned knobs are candidate settings: the simulator models them, a
	// policy bounds them and the actuator writes them.
	Tuned Role = "tuned"
	// Restored knobs are never chosen, but a scheduler switch resets
	// them, so the actuator records them before the first change and puts
	// them back on revert: a new elevator instance starts from its
	// defaults (block/elevator.c elevator_switch), blk_mq_init_sched
	// (block/blk-mq-sched.c) sets nr_requests, and bfq turns writeback
	// throttling off while it runs (block/bfq-iosched.c bfq_init_queue
	// calls wbt_disable_default).
	Restored Role = "restored"
)

// Knob is one row of the table.
type Knob struct {
	// Scheduler is the scheduler the tunable belongs to, whose
	// queue/iosched/Name it is; "" for a queue attribute, queue/Name.
	Scheduler string
	// Name is the sysfs file's name.
	Name string
	// Unit is the unit of the value sysfs reads and writes: "ms", "µs",
	// "ns", "KiB", "sectors", "requests", "count" or "0/1".
	Unit string
	Role Role
}

// Boolean reports whether the knob takes only 0 or 1.
func (k Knob) Boolean() bool { return k.Unit == "0/1" }

// schedulers are the blk-mq schedulers shadowtune simulates, in the
// order the API lists them.
var schedulers = []string{"none", "mq-deadline", "bfq", "kyber"}

// table is the catalogue: the scheduler tunables in the order the API
// lists them (block/mq-deadline.c deadline_attrs, block/bfq-iosched.c
// bfq_attrs, block/kyber-iosched.c kyber_sched_attrs), then the queue
// attributes (block/blk-sysfs.c).
var table = []Knob{
	{"mq-deadline", "read_expire", "ms", Tuned},
	{"mq-deadline", "write_expire", "ms", Tuned},
	{"mq-deadline", "fifo_batch", "requests", Tuned},
	{"mq-deadline", "writes_starved", "count", Tuned},
	{"mq-deadline", "front_merges", "0/1", Tuned},
	{"mq-deadline", "async_depth", "requests", Restored},
	{"mq-deadline", "prio_aging_expire", "ms", Restored},
	{"bfq", "slice_idle", "ms", Tuned},
	{"bfq", "slice_idle_us", "µs", Tuned},
	{"bfq", "low_latency", "0/1", Tuned},
	{"bfq", "back_seek_max", "KiB", Tuned},
	{"bfq", "back_seek_penalty", "count", Tuned},
	{"bfq", "fifo_expire_sync", "ms", Tuned},
	{"bfq", "fifo_expire_async", "ms", Tuned},
	{"bfq", "timeout_sync", "ms", Tuned},
	{"bfq", "max_budget", "sectors", Tuned},
	{"bfq", "strict_guarantees", "0/1", Tuned},
	{"kyber", "read_lat_nsec", "ns", Tuned},
	{"kyber", "write_lat_nsec", "ns", Tuned},
	{"", "read_ahead_kb", "KiB", Tuned},
	{"", "nr_requests", "requests", Restored},
	{"", "wbt_lat_usec", "µs", Restored},
}

// Schedulers returns the schedulers shadowtune simulates: none,
// mq-deadline, bfq, kyber. The slice is a copy.
func Schedulers() []string { return slices.Clone(schedulers) }

// Tunables returns the names of scheduler's tuned tunables in the
// table's order; nil for none and for an unknown scheduler.
func Tunables(scheduler string) []string {
	if scheduler == "" {
		return nil
	}
	return names(scheduler, Tuned)
}

// Recorded returns the names of every tunable of scheduler in the table,
// tuned or restored: what a record of the device's originals may hold
// for it. nil for none and for an unknown scheduler.
func Recorded(scheduler string) []string {
	if scheduler == "" {
		return nil
	}
	return names(scheduler, "")
}

// Queue returns the queue attributes (queue/NAME) of role r, in the
// table's order.
func Queue(r Role) []string { return names("", r) }

// names returns the names of the rows of scheduler ("" for the queue
// attributes) with role r ("" any role).
func names(scheduler string, r Role) []string {
	var out []string
	for _, k := range table {
		if k.Scheduler == scheduler && (r == "" || k.Role == r) {
			out = append(out, k.Name)
		}
	}
	return out
}

// Lookup returns the row of scheduler's tunable name (scheduler "" for a
// queue attribute).
func Lookup(scheduler, name string) (Knob, bool) {
	i := slices.IndexFunc(table, func(k Knob) bool { return k.Scheduler == scheduler && k.Name == name })
	if i < 0 {
		return Knob{}, false
	}
	return table[i], true
}

// All returns every row of the table, in its order. The slice is a copy.
func All() []Knob { return slices.Clone(table) }
