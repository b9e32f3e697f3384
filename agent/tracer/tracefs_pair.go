package tracer

import (
	"math"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// tfKey identifies a request in a trace_pipe stream, as blkparse does: the
// disk, the operation and the current start sector (0 for flushes, whose
// sector the kernel prints inconsistently).
type tfKey struct {
	dev    uint32
	op     trace.Op
	sector uint64
}

// tfReq is a request in flight in the tracefs pairing.
type tfReq struct {
	start, arrival, dispatch int64 // ns, 0 until seen
	sector                   uint64
	sectors                  uint32 // as issued
	left                     uint32 // sectors not completed yet
	pid                      uint32
	op                       trace.Op
	flags                    trace.Flags
	requeued                 bool
	shell                    bool // an empty pre-flush write: never issued
}

// seen is when the request was first seen: a lower bound of its arrival.
func (r *tfReq) seen() int64 {
	if r.start != 0 {
		return r.start
	}
	return r.arrival
}

// flushWait is the oldest request waiting for a flush on a disk.
type flushWait struct {
	start int64
	pid   uint32
}

// pairer pairs the events of a trace_pipe stream into completed requests,
// following the same rules as the eBPF program (see doc.go). Requests at the
// same key are served first in, first out.
type pairer struct {
	pending map[tfKey][]*tfReq
	flushes map[uint32]flushWait // by disk
	done    func(raw)            // receives completed requests

	orphans, skipped, requeues, partial, dropped, stale, unissued uint64
}

func newPairer(done func(raw)) *pairer {
	return &pairer{pending: map[tfKey][]*tfReq{}, flushes: map[uint32]flushWait{}, done: done}
}

func keyOf(ev *tfEvent) tfKey {
	k := tfKey{dev: ev.dev, op: ev.op, sector: ev.sector}
	if ev.op == trace.Flush {
		k.sector = 0
	}
	return k
}

// find returns the first request at k that ok accepts.
func (p *pairer) find(k tfKey, ok func(*tfReq) bool) *tfReq {
	for _, r := range p.pending[k] {
		if ok(r) {
			return r
		}
	}
	return nil
}

func (p *pairer) push(k tfKey, r *tfReq) { p.pending[k] = append(p.pending[k], r) }

func (p *pairer) remove(k tfKey, r *tfReq) {
	l := p.pending[k]
	if i := slices.Index(l, r); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(p.pending, k)
	} else {
		p.pending[k] = l
	}
}

func notIssued(r *tfReq) bool    { return r.dispatch == 0 && !r.shell }
func issuable(r *tfReq) bool     { return (r.dispatch == 0 && !r.shell) || r.requeued }
func inService(r *tfReq) bool    { return r.dispatch != 0 && !r.requeued }
func freshStart(r *tfReq) bool   { return r.dispatch == 0 && r.arrival == 0 && !r.shell }
func isShell(r *tfReq) bool      { return r.shell }
func reinsertable(r *tfReq) bool { return freshStart(r) || r.requeued }

// event applies one block event.
func (p *pairer) event(ev *tfEvent) {
	switch ev.kind {
	case tfLost:
		p.dropped += ev.lost
		return
	case tfRequeue:
		p.requeues++
	}
	if !ev.opOK {
		if ev.kind == tfComplete && ev.nr > 0 {
			p.skipped++
		}
		return
	}
	k := keyOf(ev)
	switch ev.kind {
	case tfIOStart:
		// An empty write is the shell of a pre-flush: it waits for a flush
		// request and completes without being issued.
		p.push(k, &tfReq{start: ev.ts, pid: ev.pid, shell: ev.nr == 0 && ev.op != trace.Flush})
		if _, ok := p.flushes[ev.dev]; ev.pre && !ok {
			p.flushes[ev.dev] = flushWait{ev.ts, ev.pid}
		}
	case tfInsert:
		r := p.find(k, reinsertable)
		if r == nil {
			r = &tfReq{pid: ev.pid}
			p.push(k, r)
		}
		if r.arrival == 0 {
			r.arrival = ev.ts // a re-insert after a requeue keeps the first
		}
	case tfIssue:
		r := p.find(k, issuable)
		if r == nil {
			r = &tfReq{pid: ev.pid}
			p.push(k, r)
			if fw, ok := p.flushes[ev.dev]; ok && ev.op == trace.Flush {
				// A flush request of the flush machinery: it arrived with
				// the oldest request waiting for it.
				r.start, r.arrival, r.pid = fw.start, fw.start, fw.pid
				delete(p.flushes, ev.dev)
			}
		}
		if r.arrival == 0 {
			r.arrival = ev.ts // bypassed the scheduler
		}
		r.dispatch, r.requeued = ev.ts, false
		r.sector, r.sectors, r.left = ev.sector, ev.nr, ev.nr
		r.op, r.flags = ev.op, ev.flags
	case tfRequeue:
		if r := p.find(k, inService); r != nil {
			r.requeued = true
		}
	case tfMerge:
		// ev's request is merged into the one in front of it.
		if r := p.find(k, notIssued); r != nil {
			p.remove(k, r)
		}
	case tfFrontMerge:
		// A bio joins the front of the request that starts where it ends.
		old := tfKey{dev: ev.dev, op: ev.op, sector: ev.sector + uint64(ev.nr)}
		if r := p.find(old, notIssued); r != nil {
			p.remove(old, r)
			p.push(k, r)
		}
	case tfComplete:
		if ev.nr == 0 && ev.op != trace.Flush {
			// The shell of a pre-flush, or the second, empty completion
			// of a write whose FUA was emulated by a post-flush.
			if r := p.find(k, isShell); r != nil {
				p.remove(k, r)
				p.unissued++
				if fw, ok := p.flushes[ev.dev]; ok && fw.start == r.start {
					delete(p.flushes, ev.dev) // no flush was needed
				}
			}
			return
		}
		r := p.find(k, inService)
		if r == nil {
			p.orphans++
			return
		}
		p.remove(k, r)
		if ev.op != trace.Flush && ev.nr < r.left {
			// Partial completion: the rest now starts after what completed.
			r.left -= ev.nr
			p.push(tfKey{dev: ev.dev, op: ev.op, sector: ev.sector + uint64(ev.nr)}, r)
			p.partial++
			return
		}
		p.done(raw{
			arrival: r.arrival, dispatch: r.dispatch, complete: ev.ts,
			sector: r.sector, sectors: r.sectors, dev: ev.dev, pid: r.pid,
			op: r.op, flags: r.flags, failed: ev.errno != 0,
		})
	}
}

// sweep abandons requests first seen before stale and returns the earliest
// arrival of the others, or for a request not inserted yet its
// block_io_start time, which no arrival precedes (math.MaxInt64 if none is
// pending).
func (p *pairer) sweep(stale int64) int64 {
	oldest := int64(math.MaxInt64)
	for k, l := range p.pending {
		for _, r := range slices.Clone(l) {
			s := r.seen()
			if s < stale {
				p.remove(k, r)
				if !r.shell {
					p.stale++
				}
				continue
			}
			oldest = min(oldest, s)
		}
	}
	for d, fw := range p.flushes {
		if fw.start < stale {
			delete(p.flushes, d)
		}
	}
	return oldest
}
