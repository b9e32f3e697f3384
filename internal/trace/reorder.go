package trace

import "container/heap"

// reorderBuf restores non-decreasing Arrival order over a stream that is
// only nearly ordered. It holds at most cap requests in a min-heap keyed by
// (Arrival, input position), so requests with equal arrivals keep their
// input order. A request is released once more than cap requests are held;
// a request arriving earlier than one already released cannot be placed and
// is reported by push.
type reorderBuf struct {
	cap      int
	h        reorderHeap
	seq      uint64
	released bool
	last     int64 // arrival of the last released request
}

type reorderItem struct {
	q   Request
	seq uint64
}

// reorderHeap orders held requests by (Arrival, input position) for
// container/heap.
type reorderHeap []reorderItem

func (h reorderHeap) Len() int { return len(h) }
func (h reorderHeap) Less(i, j int) bool {
	a, c := &h[i], &h[j]
	if a.q.Arrival != c.q.Arrival {
		return a.q.Arrival < c.q.Arrival
	}
	return a.seq < c.seq
}
func (h reorderHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *reorderHeap) Push(x any)   { *h = append(*h, x.(reorderItem)) }
func (h *reorderHeap) Pop() any {
	old := *h
	n := len(old) - 1
	it := old[n]
	*h = old[:n]
	return it
}

// push adds q. ok is false if q arrives before an already released request.
func (b *reorderBuf) push(q Request) (ok bool) {
	if b.released && q.Arrival < b.last {
		return false
	}
	b.seq++
	heap.Push(&b.h, reorderItem{q, b.seq})
	return true
}

// full reports whether a request must be released before the next push.
func (b *reorderBuf) full() bool { return len(b.h) > b.cap }

func (b *reorderBuf) empty() bool { return len(b.h) == 0 }

// pop releases the request with the earliest arrival. The buffer must not
// be empty.
func (b *reorderBuf) pop() Request {
	q := heap.Pop(&b.h).(reorderItem).q
	b.released, b.last = true, q.Arrival
	return q
}
