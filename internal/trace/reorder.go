package trace

// reorderBuf restores non-decreasing Arrival order over a stream that is
// only nearly ordered. It holds at most cap requests in a min-heap keyed by
// (Arrival, input position), so requests with equal arrivals keep their
// input order. A request is released once more than cap requests are held;
// a request arriving earlier than one already released cannot be placed and
// is reported by push.
type reorderBuf struct {
	cap      int
	h        []reorderItem
	seq      uint64
	released bool
	last     int64 // arrival of the last released request
}

type reorderItem struct {
	q   Request
	seq uint64
}

func (b *reorderBuf) less(i, j int) bool {
	a, c := &b.h[i], &b.h[j]
	if a.q.Arrival != c.q.Arrival {
		return a.q.Arrival < c.q.Arrival
	}
	return a.seq < c.seq
}

// push adds q. ok is false if q arrives before an already released request.
func (b *reorderBuf) push(q Request) (ok bool) {
	if b.released && q.Arrival < b.last {
		return false
	}
	b.seq++
	b.h = append(b.h, reorderItem{q, b.seq})
	for i := len(b.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !b.less(i, p) {
			break
		}
		b.h[i], b.h[p] = b.h[p], b.h[i]
		i = p
	}
	return true
}

// full reports whether a request must be released before the next push.
func (b *reorderBuf) full() bool { return len(b.h) > b.cap }

func (b *reorderBuf) empty() bool { return len(b.h) == 0 }

// pop releases the request with the earliest arrival. The buffer must not
// be empty.
func (b *reorderBuf) pop() Request {
	q := b.h[0].q
	n := len(b.h) - 1
	b.h[0] = b.h[n]
	b.h = b.h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && b.less(r, l) {
			m = r
		}
		if !b.less(m, i) {
			break
		}
		b.h[i], b.h[m] = b.h[m], b.h[i]
		i = m
	}
	b.released, b.last = true, q.Arrival
	return q
}
