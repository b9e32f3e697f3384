package window

// A device's window of requests: what a window keeps of its requests.
//
// What a window needs of its requests:
//   - learning: every measured request, predicted and then learned in
//     dispatch order, giving the window's real and predicted totals and
//     the model error over groups of 1000 requests (learn.go);
//   - calibration (until the class has been checked): a window's measured
//     requests;
//   - simulation: the newest Policy.MaxSimulated requests (65,536), a
//     contiguous slice in arrival order;
//   - the status and metrics: how many requests the window had.
//
// So a window keeps only its newest MaxSimulated requests, in a ring of
// that many, reused window after window and put in order in place at the
// window's end, and every request is learned online as it arrives,
// keeping only running totals and the per-group errors. Memory is then
// bounded by MaxSimulated instead of growing with the device's IOPS, and
// the work left for the window's end is the simulation of at most
// MaxSimulated requests.

import (
	"slices"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// window holds the newest requests of a device's current window.
type window struct {
	// keep holds the window's newest requests, at most the limit given
	// to retain: in arrival order, or once full a ring whose oldest is at
	// head.
	keep []trace.Request
	head int
	// total counts the window's requests; unlearned those dropped before
	// they reached it (Controller.Skip).
	total, unlearned int
	// readSectors and aheadSectors are the sectors of the window's reads
	// and of those the kernel issued as read-ahead (REQ_RAHEAD, which the
	// page cache's read-ahead and read-around requests carry), and
	// aheadRequests the count of the latter: over every request of the
	// window, not only those kept.
	readSectors, aheadSectors uint64
	aheadRequests             int64
	// aheadNs is the time, ns, during which at least one read-ahead
	// request was in service: the union of their service intervals, as
	// the kernel counts a disk's busy time (io_ticks, update_io_ticks in
	// block/blk-core.c), taken in arrival order with aheadUntil, the
	// latest completion counted (exact when requests are dispatched in
	// the order they arrive). A sum of service times would count the
	// time of requests in service together once for each, and grow
	// with the number in flight while the device reads faster.
	aheadNs, aheadUntil int64
	// ahead are the read-ahead requests' service times by size, near or
	// far from the read before each (lastEnd, its end sector), and
	// dispatched alone or not: at or after busyUntil, the latest
	// completion (ns) of the requests that arrived before it. A request
	// dispatched while one that arrived after it was in flight, or while
	// an untraced one was (sampling), counts as alone.
	ahead     readahead.Latencies
	lastEnd   uint64
	busyUntil int64
}

// count adds chunk's reads to the window's read totals.
func (w *window) count(chunk []trace.Request) {
	for i := range chunk {
		q := &chunk[i]
		alone := q.Dispatch != trace.Unknown && q.Dispatch >= w.busyUntil
		if q.Complete != trace.Unknown {
			w.busyUntil = max(w.busyUntil, q.Complete)
		}
		if q.Op != trace.Read {
			continue
		}
		w.readSectors += uint64(q.Sectors)
		far := q.Sector != w.lastEnd
		w.lastEnd = q.Sector + uint64(q.Sectors)
		if q.Flags&trace.ReadAhead == 0 {
			continue
		}
		w.aheadSectors += uint64(q.Sectors)
		w.aheadRequests++
		if q.HasService() {
			w.aheadNs += max(0, q.Complete-max(q.Dispatch, w.aheadUntil))
			w.aheadUntil = max(w.aheadUntil, q.Complete)
			w.ahead.Add(q.Sectors, far, alone, q.ServiceTime())
		}
	}
}

// retain adds chunk to keep, overwriting the oldest requests once keep
// holds limit requests (the same limit all window).
func (w *window) retain(chunk []trace.Request, limit int) {
	w.count(chunk)
	if len(chunk) >= limit {
		chunk = chunk[len(chunk)-limit:]
	}
	if room := limit - len(w.keep); room > 0 {
		k := min(room, len(chunk))
		if len(w.keep)+k > cap(w.keep) {
			grown := make([]trace.Request, len(w.keep), min(limit, max(2*cap(w.keep), len(w.keep)+k, 1024)))
			copy(grown, w.keep)
			w.keep = grown
		}
		w.keep = append(w.keep, chunk[:k]...)
		chunk = chunk[k:]
	}
	for len(chunk) > 0 { // full: overwrite from the oldest on
		n := copy(w.keep[w.head:], chunk)
		chunk = chunk[n:]
		w.head = (w.head + n) % len(w.keep)
	}
}

// simulated returns the window's newest requests, at most max, in arrival
// order (putting the ring in order, in place).
func (w *window) simulated() []trace.Request {
	if w.head != 0 {
		slices.Reverse(w.keep[:w.head])
		slices.Reverse(w.keep[w.head:])
		slices.Reverse(w.keep)
		w.head = 0
	}
	return w.keep
}

// reset empties the window for the next one; the buffer is kept.
func (w *window) reset() {
	*w = window{keep: w.keep[:0], lastEnd: w.lastEnd, busyUntil: w.busyUntil, aheadUntil: w.aheadUntil}
}
