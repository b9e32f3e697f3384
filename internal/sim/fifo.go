package sim

import "github.com/shadowtune/shadowtune/internal/sched"

// requestFIFO is a first-in-first-out queue of requests: those waiting in
// the device for a server, or for the gate. Its storage is reused once it
// drains and, for a queue that never drains, kept to what waits rather than
// to all it ever held.
type requestFIFO struct {
	q    []*sched.Request
	head int
}

// len returns the number of requests waiting.
func (f *requestFIFO) len() int { return len(f.q) - f.head }

// push appends q.
func (f *requestFIFO) push(q *sched.Request) { f.q = append(f.q, q) }

// pop removes and returns the oldest request; the queue must not be empty.
func (f *requestFIFO) pop() *sched.Request {
	q := f.q[f.head]
	f.q[f.head] = nil
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	} else if f.head >= 1024 && 2*f.head >= len(f.q) {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	return q
}
