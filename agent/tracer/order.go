package tracer

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// raw is a completed request as the kernel reported it: absolute
// CLOCK_MONOTONIC times in ns.
type raw struct {
	arrival, dispatch, complete int64
	sector                      uint64
	sectors                     uint32
	dev, pid                    uint32
	op                          trace.Op
	flags                       trace.Flags
	failed                      bool
}

// collector converts completed requests to trace time and releases them in
// non-decreasing Arrival order. It is not safe for concurrent use, except
// that its counters may be read at any time.
type collector struct {
	base     int64      // CLOCK_MONOTONIC ns of trace time 0
	held     []heldItem // unordered until release sorts it
	spare    []heldItem // release's second buffer for held
	keys     []heldKey  // release's sort keys
	out      []trace.Request
	seq      uint64
	last     int64 // Arrival of the last released request
	released bool

	events, lost, errors atomic.Uint64
}

type heldItem struct {
	q   trace.Request
	seq uint64
}

// heldKey is the sort key of held[idx]: release sorts these 24-byte keys
// and then moves each request once, rather than swapping 80-byte items
// all through the sort.
type heldKey struct {
	arrival int64
	seq     uint64
	idx     int
}

// cmpKey orders held requests by (Arrival, input order).
func cmpKey(a, b heldKey) int {
	if c := cmp.Compare(a.arrival, b.arrival); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// add converts r and holds it until release. A request that arrived
// before the base, that cannot be placed in order, or that is invalid is
// counted lost.
func (c *collector) add(r raw) {
	q := trace.Request{
		Arrival:  r.arrival - c.base,
		Dispatch: r.dispatch - c.base,
		Complete: r.complete - c.base,
		Sector:   r.sector,
		Sectors:  r.sectors,
		Dev:      r.dev,
		PID:      r.pid,
		Op:       r.op,
		Flags:    r.flags,
		Think:    trace.Unknown,
	}
	if q.Op == trace.Flush {
		q.Sector, q.Sectors = 0, 0
	}
	// CLOCK_MONOTONIC is consistent across CPUs; these only guard
	// against a kernel that stamped events out of order.
	if q.Dispatch < q.Arrival {
		q.Dispatch = q.Arrival
	}
	if q.Complete < q.Dispatch {
		q.Complete = q.Dispatch
	}
	if q.Arrival < 0 || (c.released && q.Arrival < c.last) || q.Validate() != nil {
		c.lost.Add(1)
		return
	}
	if r.failed {
		c.errors.Add(1)
	}
	c.seq++
	c.held = append(c.held, heldItem{q, c.seq})
}

// release returns, in Arrival order, the held requests that arrived at or
// before frontier (absolute CLOCK_MONOTONIC ns); math.MaxInt64 releases
// all. It returns nil if there is none. The slice is reused by the next
// call.
func (c *collector) release(frontier int64) []trace.Request {
	limit := int64(math.MaxInt64)
	if frontier != math.MaxInt64 {
		limit = frontier - c.base
	}
	if len(c.held) == 0 {
		return nil
	}
	// One sort per release rather than a heap operation per request (a
	// heap through container/heap boxes every record): what stays held is
	// already sorted, so pdqsort is near-linear on it.
	keys := c.keys[:0]
	for i := range c.held {
		keys = append(keys, heldKey{c.held[i].q.Arrival, c.held[i].seq, i})
	}
	c.keys = keys
	slices.SortFunc(keys, cmpKey)
	n := sort.Search(len(keys), func(i int) bool { return keys[i].arrival > limit })
	if n == 0 {
		return nil
	}
	out := slices.Grow(c.out[:0], n)[:n]
	for i := range out {
		out[i] = c.held[keys[i].idx].q
	}
	c.out = out
	rest := c.spare[:0]
	for _, k := range keys[n:] {
		rest = append(rest, c.held[k.idx])
	}
	c.held, c.spare = rest, c.held[:0]
	c.last = out[n-1].Arrival
	c.released = true
	c.events.Add(uint64(n))
	c.shrink(len(keys))
	return out
}

// keepCap is the capacity, in requests, up to which release keeps its
// buffers between calls whatever it used.
const keepCap = 1 << 16

// shrink lets the garbage collector have the buffers of a batch far larger
// than the last one (used requests): after the agent's loop was busy for
// tens of seconds, one batch can hold millions of requests, and keeping
// its capacity kept ~75 MB for the rest of the run. The returned batch
// (out) stays valid for the caller; the next release allocates anew.
func (c *collector) shrink(used int) {
	big := func(capacity int) bool { return capacity > keepCap && capacity > 4*used }
	if big(cap(c.keys)) {
		c.keys = nil
	}
	if big(cap(c.spare)) {
		c.spare = nil
	}
	if big(cap(c.out)) {
		c.out = nil
	}
	if big(cap(c.held)) {
		c.held = slices.Clone(c.held)
	}
}
