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
	// Tuned knobs are dimensions of the scheduler candidates: a policy's
	// TunableRange names them with a scheduler, the simulator models
	// them and the actuator writes them. A tuned queue attribute is set
	// with the scheduler it is named with.
	Tuned Role = "tuned"
	// OwnPolicy knobs are decided apart from the scheduler candidates,
	// by a policy block and a decision of their own (read_ahead_kb:
	// ReadAheadPolicy, agent/readahead).
	OwnPolicy Role = "own policy"
	// Restored knobs are never chosen, but a scheduler switch may change
	// them, so the actuator records them before its first change and puts
	// them back on revert: a new elevator instance starts from its
	// defaults (block/elevator.c elevator_switch), blk_mq_init_sched
	// (block/blk-mq-sched.c) sets nr_requests, and bfq turns writeback
	// throttling off while it runs (block/bfq-iosched.c bfq_init_queue
	// calls wbt_disable_default). Tuned queue attributes are recorded and
	// put back the same way (SwitchChanged).
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
	// Min and Max bound the values the kernel keeps as written, in Unit
	// (0 and 0: no bound beyond the unit's). A value outside is changed
	// or refused by the kernel, so the API refuses it.
	Min, Max int64
}

// Within reports whether the kernel keeps v as written: v in [Min, Max],
// or any v for a knob without bounds (Max 0).
func (k Knob) Within(v int64) bool { return k.Max == 0 || (v >= k.Min && v <= k.Max) }

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
	{Scheduler: "mq-deadline", Name: "read_expire", Unit: "ms", Role: Tuned},
	{Scheduler: "mq-deadline", Name: "write_expire", Unit: "ms", Role: Tuned},
	{Scheduler: "mq-deadline", Name: "fifo_batch", Unit: "requests", Role: Tuned},
	{Scheduler: "mq-deadline", Name: "writes_starved", Unit: "count", Role: Tuned},
	{Scheduler: "mq-deadline", Name: "front_merges", Unit: "0/1", Role: Tuned},
	{Scheduler: "mq-deadline", Name: "async_depth", Unit: "requests", Role: Restored},
	{Scheduler: "mq-deadline", Name: "prio_aging_expire", Unit: "ms", Role: Restored},
	{Scheduler: "bfq", Name: "slice_idle", Unit: "ms", Role: Tuned},
	{Scheduler: "bfq", Name: "slice_idle_us", Unit: "µs", Role: Tuned},
	{Scheduler: "bfq", Name: "low_latency", Unit: "0/1", Role: Tuned},
	{Scheduler: "bfq", Name: "back_seek_max", Unit: "KiB", Role: Tuned},
	{Scheduler: "bfq", Name: "back_seek_penalty", Unit: "count", Role: Tuned},
	{Scheduler: "bfq", Name: "fifo_expire_sync", Unit: "ms", Role: Tuned},
	{Scheduler: "bfq", Name: "fifo_expire_async", Unit: "ms", Role: Tuned},
	{Scheduler: "bfq", Name: "timeout_sync", Unit: "ms", Role: Tuned},
	{Scheduler: "bfq", Name: "max_budget", Unit: "sectors", Role: Tuned},
	{Scheduler: "bfq", Name: "strict_guarantees", Unit: "0/1", Role: Tuned},
	{Scheduler: "kyber", Name: "read_lat_nsec", Unit: "ns", Role: Tuned},
	{Scheduler: "kyber", Name: "write_lat_nsec", Unit: "ns", Role: Tuned},
	{Name: "read_ahead_kb", Unit: "KiB", Role: OwnPolicy},
	// With a scheduler, queue_requests_store (block/blk-sysfs.c) raises a
	// value below BLKDEV_MIN_RQ (4) to it, and blk_mq_update_nr_requests
	// refuses one above MAX_SCHED_RQ (16 × BLKDEV_DEFAULT_RQ, 2048).
	{Name: "nr_requests", Unit: "requests", Role: Tuned, Min: 4, Max: 2048},
	{Name: "wbt_lat_usec", Unit: "µs", Role: Restored},
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

// Ranged returns what a policy's TunableRange for scheduler may name: its
// tuned tunables, then the tuned queue attributes, in the table's order;
// nil for none and for an unknown scheduler.
func Ranged(scheduler string) []string {
	t := Tunables(scheduler)
	if t == nil {
		return nil
	}
	return append(t, Queue(Tuned)...)
}

// SwitchChanged returns the queue attributes a scheduler switch may change
// (tuned and restored), in the table's order: the actuator records them
// before its first change and puts them back on revert.
func SwitchChanged() []string { return append(Queue(Tuned), Queue(Restored)...) }

// IsQueue reports whether name is a queue attribute (queue/NAME) of the
// table rather than a scheduler tunable.
func IsQueue(name string) bool {
	_, ok := Lookup("", name)
	return ok
}

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
