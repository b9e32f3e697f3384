package sched

// fifo.go: an arrival-ordered queue with O(1) removal from the middle, the
// model of the kernel's fifo_list / bfqq->fifo / software-queue lists
// (struct list_head queuelist).
//
// Entries live in a power-of-two ring addressed by absolute position; a
// request's position is kept in its Seq field, so removing it only clears
// its slot. Cleared slots are skipped (and reclaimed) when they reach the
// head.

type fifo struct {
	buf        []*Request
	head, tail int64 // absolute positions; live entries are in [head, tail)
	n          int   // live entries
}

func (f *fifo) len() int { return f.n }

func (f *fifo) grow() {
	size := 2 * len(f.buf)
	if size == 0 {
		size = 16
	}
	nb := make([]*Request, size)
	om, nm := int64(len(f.buf)-1), int64(size-1)
	for i := f.head; i < f.tail; i++ {
		nb[i&nm] = f.buf[i&om]
	}
	f.buf = nb
}

// push appends r and records its position in r.Seq.
func (f *fifo) push(r *Request) {
	if f.tail-f.head == int64(len(f.buf)) {
		f.compact()
		if f.tail-f.head == int64(len(f.buf)) {
			f.grow()
		}
	}
	f.buf[f.tail&int64(len(f.buf)-1)] = r
	r.Seq = f.tail
	f.tail++
	f.n++
}

// compact drops cleared slots at the head.
func (f *fifo) compact() {
	if len(f.buf) == 0 {
		return
	}
	m := int64(len(f.buf) - 1)
	for f.head < f.tail && f.buf[f.head&m] == nil {
		f.head++
	}
}

// peek returns the oldest live entry, or nil.
func (f *fifo) peek() *Request {
	if f.n == 0 {
		return nil
	}
	f.compact()
	return f.buf[f.head&int64(len(f.buf)-1)]
}

// pop removes and returns the oldest live entry, or nil.
func (f *fifo) pop() *Request {
	r := f.peek()
	if r != nil {
		f.buf[f.head&int64(len(f.buf)-1)] = nil
		f.head++
		f.n--
	}
	return r
}

// remove clears r's slot; r must be in f.
func (f *fifo) remove(r *Request) {
	m := int64(len(f.buf) - 1)
	if f.buf[r.Seq&m] == r {
		f.buf[r.Seq&m] = nil
		f.n--
	}
}

// takeSlot moves keep into the slot of gone (which leaves the queue) and
// clears keep's old slot: the list_move/list_replace in dd_merged_requests
// and bfq_requests_merged when the absorbed request was older.
func (f *fifo) takeSlot(keep, gone *Request) {
	m := int64(len(f.buf) - 1)
	if f.buf[keep.Seq&m] == keep {
		f.buf[keep.Seq&m] = nil
	}
	f.buf[gone.Seq&m] = keep
	keep.Seq = gone.Seq
	f.n--
}
