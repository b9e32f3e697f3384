package sim

import (
	"container/heap"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Loop selects how the request arrival simulator (RAS) releases requests
// into the scheduler.
type Loop uint8

const (
	// LoopAuto is closed loop when the window carries completion times and
	// process ids, open loop otherwise.
	LoopAuto Loop = iota
	// LoopOpen releases every request at its recorded arrival time.
	LoopOpen
	// LoopClosed releases dependent requests at the simulated completion of
	// the request they waited for plus their think time (KDSim §3.2,
	// DADS §3.4).
	LoopClosed
)

// String returns "auto", "open" or "closed".
func (l Loop) String() string {
	switch l {
	case LoopOpen:
		return "open"
	case LoopClosed:
		return "closed"
	}
	return "auto"
}

// ParseLoop parses "auto", "open" or "closed".
func ParseLoop(s string) (Loop, bool) {
	switch s {
	case "auto", "":
		return LoopAuto, true
	case "open":
		return LoopOpen, true
	case "closed":
		return LoopClosed, true
	}
	return LoopAuto, false
}

// anchor kinds: what event of another request a request's release waits for.
const (
	anchorNone     uint8 = iota // released at its recorded arrival
	anchorComplete              // released at the anchor's simulated completion + offset
	anchorRelease               // released at the anchor's simulated release + offset
)

// plan holds the per-request arrival rules of one window. It depends only
// on the recorded trace, so it is computed once and shared, read-only, by
// the runs of every candidate.
type plan struct {
	n      int
	closed bool
	kind   []uint8
	anchor []int32
	offset []int64 // ns
	// dependents in CSR form: deps[depStart[i]:depStart[i+1]] are the
	// requests anchored on request i.
	depStart []int32
	deps     []int32
}

// blocking reports whether the issuing process waits for r: a read that is
// not read-ahead, or a write flagged REQ_SYNC (O_DIRECT, fsync).
func blocking(r *trace.Request) bool {
	switch r.Op {
	case trace.Read:
		return r.Flags&trace.ReadAhead == 0
	case trace.Write:
		return r.Flags&trace.Sync != 0
	}
	return false
}

// canClose reports whether a window has what closed-loop replay needs:
// completion times and process ids.
func canClose(reqs []trace.Request) bool {
	withPID, withTimes := 0, 0
	for i := range reqs {
		if reqs[i].PID != 0 {
			withPID++
		}
		if reqs[i].Complete != trace.Unknown {
			withTimes++
		}
	}
	return withPID*2 >= len(reqs) && withTimes*2 >= len(reqs)
}

// pendHeap is a min-heap (container/heap) of request indices by recorded
// completion time, ties by index.
type pendHeap struct {
	idx  []int32
	reqs []trace.Request
}

func (h *pendHeap) Len() int { return len(h.idx) }
func (h *pendHeap) Less(a, b int) bool {
	ca, cb := h.reqs[h.idx[a]].Complete, h.reqs[h.idx[b]].Complete
	return ca < cb || (ca == cb && h.idx[a] < h.idx[b])
}
func (h *pendHeap) Swap(a, b int) { h.idx[a], h.idx[b] = h.idx[b], h.idx[a] }
func (h *pendHeap) Push(x any)    { h.idx = append(h.idx, x.(int32)) }
func (h *pendHeap) Pop() any {
	n := len(h.idx) - 1
	i := h.idx[n]
	h.idx = h.idx[:n]
	return i
}

// procState tracks one process while building the plan.
type procState struct {
	pending  pendHeap // blocking requests not yet completed (recorded)
	lastDone int32    // latest-completing blocking request completed so far, or -1
	lastSync int32    // latest blocking request by arrival, or -1
}

// buildPlan derives each request's arrival rule from the recorded window.
//
// Open loop: every request is released at its recorded arrival.
//
// Closed loop (a refinement of KDSim §3.2's dependency heuristic and
// DADS §3.4's think time, using the recorded completion times):
//   - A blocking request (a read that is not read-ahead, or a REQ_SYNC
//     write) of process p waits for the blocking request of p that had most
//     recently completed when it arrived in the recording; it is released at
//     that request's simulated completion plus its think time (recorded
//     arrival − recorded completion of that request, or the think time the
//     trace records). A process that kept several requests in flight (AIO)
//     therefore keeps doing so, and a strictly serial process stays serial.
//   - An asynchronous request (read-ahead, buffered write) of p keeps its
//     recorded offset from p's latest earlier blocking request: it is
//     released that long after that request's simulated release. It never
//     overtakes that request, as KDSim's "no sync read ahead of it" rule
//     asks, and it moves with its process when a candidate speeds the
//     process up.
//   - Requests with no process id (pid 0), and the first request of each
//     process, are released at their recorded arrival.
func buildPlan(reqs []trace.Request, loop Loop) *plan {
	n := len(reqs)
	p := &plan{n: n}
	p.closed = loop == LoopClosed || (loop == LoopAuto && canClose(reqs))
	p.kind = make([]uint8, n)
	p.anchor = make([]int32, n)
	p.offset = make([]int64, n)
	p.depStart = make([]int32, n+1)
	if !p.closed {
		return p
	}
	procs := map[uint32]*procState{}
	for i := range reqs {
		r := &reqs[i]
		p.anchor[i] = -1
		if r.PID == 0 {
			continue
		}
		ps := procs[r.PID]
		if ps == nil {
			ps = &procState{pending: pendHeap{reqs: reqs}, lastDone: -1, lastSync: -1}
			procs[r.PID] = ps
		}
		// Retire every blocking request of p that completed before r arrived.
		for len(ps.pending.idx) > 0 && reqs[ps.pending.idx[0]].Complete <= r.Arrival {
			ps.lastDone = heap.Pop(&ps.pending).(int32)
		}
		if blocking(r) {
			if d := ps.lastDone; d >= 0 {
				think := r.Arrival - reqs[d].Complete
				if r.Think != trace.Unknown && r.Think >= 0 {
					think = r.Think
				}
				p.kind[i], p.anchor[i], p.offset[i] = anchorComplete, d, think
			}
			if r.Complete != trace.Unknown {
				heap.Push(&ps.pending, int32(i))
			}
			ps.lastSync = int32(i)
		} else if s := ps.lastSync; s >= 0 {
			p.kind[i], p.anchor[i], p.offset[i] = anchorRelease, s, r.Arrival-reqs[s].Arrival
		}
	}
	// Dependents in CSR form.
	for i := 0; i < n; i++ {
		if p.kind[i] != anchorNone {
			p.depStart[p.anchor[i]+1]++
		}
	}
	for i := 0; i < n; i++ {
		p.depStart[i+1] += p.depStart[i]
	}
	p.deps = make([]int32, p.depStart[n])
	fill := make([]int32, n)
	for i := 0; i < n; i++ {
		if p.kind[i] != anchorNone {
			a := p.anchor[i]
			p.deps[p.depStart[a]+fill[a]] = int32(i)
			fill[a]++
		}
	}
	return p
}
