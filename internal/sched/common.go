package sched

import (
	"fmt"
	"math"
	"sort"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// common.go: helpers shared by the elevator models.
//
// Conventions of every model in this package:
//
//   - Request.Class holds the model's classification of a queued or
//     dispatched request (mq-deadline direction, bfq queue index, kyber
//     domain). Two values are reserved: ClassMerged marks a request that was
//     merged into another one (it is completed through the other request's
//     Merged list), and ClassBypass a request that bypassed the elevator
//     (flushes). Complete ignores requests with either class, so the
//     simulator may call Complete for merged requests too.
//   - Request.Seq holds the request's position in the model's arrival-order
//     list (see fifo.go) while it is queued.
//   - Request.Deadline holds the FIFO expiry time (ns) where the model has
//     one (mq-deadline, bfq).
//   - Request.ID should be unique among the requests held by one scheduler
//     (the simulator uses the index in the window); it only breaks ties
//     between requests starting at the same sector.
//   - Flush requests (trace.Flush) never enter an elevator in Linux: the
//     flush machinery (block/blk-flush.c) issues them through the hardware
//     dispatch list ahead of scheduled I/O. Every model therefore keeps them
//     in a bypass FIFO that Dispatch serves first.

// Reserved values of Request.Class.
const (
	// ClassMerged marks a request merged into another queued request.
	ClassMerged int32 = -1
	// ClassBypass marks a request that bypassed the elevator (flush).
	ClassBypass int32 = -2
)

// maxMergeScan is how many of the newest software-queue requests
// blk_bio_list_merge (block/blk-merge.c) examines for a merge.
const maxMergeScan = 8

// mergeable reports whether r may take part in a merge: reads and writes
// without REQ_FUA (REQ_NOMERGE_FLAGS in include/linux/blk_types.h; flushes
// and discards are not merged by these models).
func mergeable(r *Request) bool {
	return (r.Op == trace.Read || r.Op == trace.Write) && r.Flags&trace.FUA == 0
}

// sameOpMergeable is blk_rq_merge_ok: both mergeable and the same operation.
func sameOpMergeable(a, b *Request) bool {
	return a.Op == b.Op && mergeable(a) && mergeable(b)
}

// fits reports whether a and b together stay within max sectors
// (ll_back_merge_fn / ll_front_merge_fn / ll_merge_requests_fn).
func fits(a, b *Request, max uint32) bool {
	return uint64(a.Sectors)+uint64(b.Sectors) <= uint64(max)
}

// absorb merges r into keep: keep grows by r (at the front when front is
// true), r and everything merged into r are appended to keep.Merged, and r
// is marked ClassMerged.
func absorb(keep, r *Request, front bool) {
	if front {
		keep.Sector = r.Sector
	}
	keep.Sectors += r.Sectors
	keep.Merged = append(keep.Merged, r)
	if len(r.Merged) > 0 {
		keep.Merged = append(keep.Merged, r.Merged...)
		r.Merged = nil
	}
	r.Class = ClassMerged
}

// listMerge is blk_bio_list_merge (block/blk-merge.c) as used by none (the
// blk-mq software queue, block/blk-mq-sched.c) and kyber (kyber_bio_merge):
// walk the newest maxMergeScan requests of l, newest first; a request that
// is not mergeable with r or not contiguous is skipped, a contiguous one is
// merged if the result fits in max sectors, and a contiguous one that does
// not fit ends the search (BIO_MERGE_FAILED). It returns the request r was
// merged into, or nil.
func listMerge(l *fifo, r *Request, max uint32) *Request {
	if !mergeable(r) || l.n == 0 {
		return nil
	}
	m := int64(len(l.buf) - 1)
	k := maxMergeScan
	for i := l.tail - 1; i >= l.head && k > 0; i-- {
		c := l.buf[i&m]
		if c == nil {
			continue
		}
		k--
		if !sameOpMergeable(c, r) {
			continue
		}
		var front bool
		switch {
		case c.End() == r.Sector:
		case c.Sector == r.End():
			front = true
		default:
			continue
		}
		if !fits(c, r, max) {
			return nil
		}
		absorb(c, r, front)
		return c
	}
	return nil
}

// maxSectors returns the device's merge limit, defaulting to
// DefaultDevice.MaxSectors when unset.
func maxSectors(dev Device) uint32 {
	if dev.MaxSectors == 0 {
		return DefaultDevice.MaxSectors
	}
	return dev.MaxSectors
}

// tunableRange is the accepted range of one tunable, in sysfs units.
type tunableRange struct {
	min, max int64
}

const (
	intMax  = math.MaxInt32  // INT_MAX
	intMin  = math.MinInt32  // INT_MIN
	uintMax = math.MaxUint32 // UINT_MAX
)

// checkTunables returns an error if tun holds a name outside ranges or a
// value outside its range. The kernel's sysfs store functions clamp
// out-of-range values; a simulated candidate must be exactly what would be
// written, so the models reject them instead.
func checkTunables(sched string, tun Tunables, ranges map[string]tunableRange) error {
	names := make([]string, 0, len(tun))
	for k := range tun {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		rg, ok := ranges[k]
		if !ok {
			return fmt.Errorf("scheduler %s: unknown tunable %q", sched, k)
		}
		if v := tun[k]; v < rg.min || v > rg.max {
			return fmt.Errorf("scheduler %s: tunable %s=%d out of range [%d, %d]", sched, k, v, rg.min, rg.max)
		}
	}
	return nil
}

// nsPerMs is one millisecond in ns.
const nsPerMs = int64(1e6)

// flushOp is the operation that bypasses every elevator.
const flushOp = trace.Flush

// metaFlag marks file-system metadata (REQ_META), preferred by bfq.
const metaFlag = trace.Meta
