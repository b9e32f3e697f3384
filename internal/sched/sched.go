// Package sched models the dispatch policies of the Linux 6.x blk-mq I/O
// schedulers (elevators) in virtual time: none, mq-deadline, bfq and kyber.
//
// The models follow the kernel's policy (block/blk-mq-sched.c,
// block/mq-deadline.c, block/bfq-iosched.c, block/bfq-wf2q.c,
// block/kyber-iosched.c) at the level that decides which queued request is
// issued next and when the elevator holds the device idle; they are not
// line-by-line ports. DESIGN §5; DADS (JPDC 2014) §3.4 for comparing
// schedulers by simulation.
//
// Units: sectors are 512 bytes; times are nanoseconds of virtual time.
// Tunables use the kernel's sysfs names and units (queue/iosched/*), so a
// candidate chosen in simulation can be written to the host unchanged.
package sched

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Request is a request inside the simulator. The simulator owns it; a
// scheduler may read every field and write the fields marked "scheduler".
type Request struct {
	ID      int32  // index of the request in the simulated window
	Sector  uint64 // start, 512-byte sectors
	Sectors uint32 // length, 512-byte sectors (grows when others merge in)
	Op      trace.Op
	Flags   trace.Flags
	PID     uint32

	Insert   int64 // ns: when it entered the scheduler
	Dispatch int64 // ns: set by the simulator when issued to the device
	Complete int64 // ns: set by the simulator at completion

	// Merged lists requests merged into this one; they complete with it.
	Merged []*Request

	// Scheduler-private state.
	Deadline int64 // scheduler: e.g. FIFO expiry time
	Class    int32 // scheduler: e.g. kyber domain, bfq queue index
	Seq      int64 // scheduler: insertion sequence or virtual finish time
}

// End returns the first sector after the request.
func (r *Request) End() uint64 { return r.Sector + uint64(r.Sectors) }

// IsRead reports whether the request is a read.
func (r *Request) IsRead() bool { return r.Op == trace.Read }

// IsSync reports whether the request is synchronous: every read, and writes
// flagged REQ_SYNC (the kernel's op_is_sync()).
func (r *Request) IsSync() bool { return r.Op == trace.Read || r.Flags&trace.Sync != 0 }

// Scheduler is one elevator instance serving one device queue.
//
// The simulator calls Insert when a request reaches the scheduler, then
// Dispatch whenever the device can take a request (after an insertion, a
// completion, or at the wake time a previous Dispatch returned). Complete
// reports each completion so the scheduler can adapt (kyber's latency
// feedback, bfq's budgets and idling).
type Scheduler interface {
	// Name returns the kernel's name of the elevator ("mq-deadline", ...).
	Name() string
	// Insert queues r at virtual time now. If r can be merged into a queued
	// request (contiguous, same op, within the device's max request size),
	// the scheduler appends r to that request's Merged list, extends it, and
	// returns true; r is then not returned by Dispatch itself.
	Insert(r *Request, now int64) (merged bool)
	// Dispatch returns the request to issue at now, or nil. When it returns
	// nil while requests are queued (bfq idling, kyber throttling, a
	// deadline batch waiting), wake is the earliest time at which Dispatch
	// should be called again even if nothing else happens; otherwise wake is
	// -1.
	Dispatch(now int64) (r *Request, wake int64)
	// Complete reports that r (previously dispatched) completed at now.
	Complete(r *Request, now int64)
	// Queued returns the number of requests held (not yet dispatched).
	Queued() int
}

// Device describes the queue a scheduler serves.
type Device struct {
	Rotational bool   // queue/rotational
	MaxSectors uint32 // queue/max_sectors_kb × 2: largest request after merging, sectors
	QueueDepth int    // requests the device accepts at once (nr_requests / tag depth)
}

// DefaultDevice is a rotational disk with the kernel's default 1280 KiB
// max_sectors_kb and a queue depth of 1.
var DefaultDevice = Device{Rotational: true, MaxSectors: 2560, QueueDepth: 1}

// Tunables are elevator tunables by their sysfs name (queue/iosched/NAME)
// and in their sysfs units (e.g. mq-deadline read_expire in ms, kyber
// read_lat_nsec in ns, bfq slice_idle in ms).
type Tunables map[string]int64

// String formats tunables as "name=value,..." sorted by name.
func (t Tunables) String() string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatInt(t[k], 10)
	}
	return strings.Join(parts, ",")
}

// ParseTunables parses "name=value,...".
func ParseTunables(s string) (Tunables, error) {
	t := Tunables{}
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("tunable %q: want name=value", kv)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("tunable %s: value %q is not an integer", k, v)
		}
		t[strings.TrimSpace(k)] = n
	}
	return t, nil
}

// Spec describes one elevator model.
type Spec struct {
	Name string
	// Defaults returns the tunables Linux 6.x sets for dev.
	Defaults func(dev Device) Tunables
	// New builds an instance; tun holds only known names (defaults filled).
	New func(tun Tunables, dev Device) (Scheduler, error)
}

var specs = map[string]Spec{}

func register(s Spec) { specs[s.Name] = s }

// Names returns the modelled elevators in a fixed order:
// none, mq-deadline, bfq, kyber (those registered).
func Names() []string {
	var out []string
	for _, n := range []string{"none", "mq-deadline", "bfq", "kyber"} {
		if _, ok := specs[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// Defaults returns the default tunables of the named elevator for dev.
func Defaults(name string, dev Device) (Tunables, error) {
	s, ok := specs[name]
	if !ok {
		return nil, fmt.Errorf("unknown scheduler %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return s.Defaults(dev), nil
}

// New builds the named elevator. Tunables not given take their defaults;
// an unknown tunable name or an out-of-range value is an error.
func New(name string, tun Tunables, dev Device) (Scheduler, error) {
	s, ok := specs[name]
	if !ok {
		return nil, fmt.Errorf("unknown scheduler %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	full := s.Defaults(dev)
	for k, v := range tun {
		if _, known := full[k]; !known {
			return nil, fmt.Errorf("scheduler %s: unknown tunable %q", name, k)
		}
		full[k] = v
	}
	return s.New(full, dev)
}
