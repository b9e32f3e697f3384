package model

import (
	"cmp"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// NetServiceTimes returns, for each request of reqs, its service time net
// of the time it waited inside the device for one of the device's k
// servers, in ns; trace.Unknown for a request without a measured service
// time. The result reuses out's storage when it is large enough.
//
// A request's measured service time (dispatch to completion, blktrace's
// D2C) includes, on a device that accepts more requests than it serves at
// once, the wait behind the requests it was queued after in the device: a
// loop device over a file, a virtio disk, a throttled cloud volume at
// queue depth 16 complete one request at a time and report each one's
// D2C as about 16 service times. A model that learns D2C and serves k
// requests at a time predicts such a device 16 times too slow, and puts
// the backlog in the elevator, which then reorders it. Here each request
// is taken to start service when it was dispatched or, if later, when the
// k-th previous completion freed a server (a FIFO of k servers, in
// completion order), and its net time runs from there to its completion:
// for k = 1 the gap since the previous completion while the device was
// busy (the busy time per request of iostat's svctm). A request served
// alone keeps its D2C; so does every request of a trace recorded at
// queue depth 1, like the DiskSim traces. The simulator puts the wait back
// (sim.Config.Tags).
func NetServiceTimes(reqs []trace.Request, k int, out []int64) []int64 {
	var n NetService
	return n.Times(reqs, k, out)
}

// NetService computes NetServiceTimes over a stream of chunks (the agent
// learns a window in tracer batches): it carries the last k completions
// from one chunk to the next. The zero value is ready to use.
type NetService struct {
	done   []int64 // the last k completions, a ring indexed by n mod k
	n      int
	sort   []int32
	bucket *Bucket // a Throttled device's token bucket, or nil
	admit  []int64 // per request of the chunk: when the bucket let it start, ns
}

// SetThrottle puts the token bucket t (when it caps anything) before the
// servers: a request then starts service no earlier than the bucket, fed
// the requests in dispatch order, admits it ([Bucket.Admit]), so it is
// learned net of its wait for the bucket as well. The bucket starts full
// (a burst available) and is carried from chunk to chunk.
func (s *NetService) SetThrottle(t Throttle) {
	s.bucket = nil
	if t.Enabled() {
		s.bucket = t.NewBucket()
	}
}

// Times is NetServiceTimes of one chunk, which follows the chunks given
// before; k is the device's servers (a change of k starts afresh).
func (s *NetService) Times(reqs []trace.Request, k int, out []int64) []int64 {
	k = max(k, 1)
	if len(s.done) != k {
		s.done, s.n = make([]int64, k), 0
	}
	if cap(out) < len(reqs) {
		out = make([]int64, len(reqs))
	}
	out = out[:len(reqs)]
	order := s.sort[:0]
	for i := range reqs {
		out[i] = trace.Unknown
		if reqs[i].HasService() {
			order = append(order, int32(i))
		}
	}
	s.admitted(reqs, order)
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(reqs[a].Complete, reqs[b].Complete) })
	for _, i := range order {
		q := &reqs[i]
		start := q.Dispatch
		if s.bucket != nil {
			start = min(max(start, s.admit[i]), q.Complete)
		}
		// A server freed after this completion (a chunk's edge) is no
		// evidence: the request keeps its whole time.
		if free := s.done[s.n%k]; s.n >= k && free > start && free <= q.Complete {
			start = free
		}
		out[i] = q.Complete - start
		s.done[s.n%k] = q.Complete
		s.n++
	}
	s.sort = order
	return out
}

// admitted fills s.admit for the measured requests of reqs (order: their
// indices) by feeding them to the bucket in dispatch order.
func (s *NetService) admitted(reqs []trace.Request, order []int32) {
	if s.bucket == nil {
		return
	}
	if cap(s.admit) < len(reqs) {
		s.admit = make([]int64, len(reqs))
	}
	s.admit = s.admit[:len(reqs)]
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(reqs[a].Dispatch, reqs[b].Dispatch) })
	for _, i := range order {
		q := &reqs[i]
		s.admit[i] = s.bucket.Admit(q.Dispatch, q.Sectors)
	}
}
