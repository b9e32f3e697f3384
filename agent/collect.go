package agent

// The trace-collection path: how a device's traced requests become its
// window.
//
// What a window needs of its requests (device.go):
//   - learning (deviceController.learn): every measured request, predicted
//     and then learned in dispatch order, giving the window's real and
//     predicted totals and the model error over groups of 1000 requests;
//   - calibration (calibrate, until the class has been checked): a
//     window's measured requests;
//   - simulation (deviceController.evaluate): the newest
//     Policy.MaxSimulated requests (65,536), a contiguous slice in arrival
//     order;
//   - the status and metrics: how many requests the window had.
//
// So a window keeps only its newest MaxSimulated requests (in a ring of
// that many, reused window after window and put in order in place at the
// window's end), and
// every request is learned online as it arrives, keeping only running
// totals and the per-group errors. Memory is then bounded by MaxSimulated
// instead of growing with the device's IOPS, and the work left for the
// window's end is the simulation of at most MaxSimulated requests.
//
// Learning online is the learning a whole window got at its end: every
// request is predicted, then learned, and the model error is taken over
// the same groups. The order differs only at the edges of the chunks it
// is learned in (each one tracer batch, 250 ms, or more): a chunk is
// sorted by dispatch time, and a request dispatched before the last of
// the previous chunk (at most the requests in flight at that moment, out
// of tens of thousands) is learned after it, as one at a window's edge
// always was. Until the controller has calibrated the model (calibrate
// may replace it by another class's default, so nothing learned before
// counts), a window is calibrated and learned at its end as before, over
// the kept slice: that is the whole window up to MaxSimulated requests,
// and a busier first window teaches the model only its newest
// MaxSimulated requests.
//
// Concurrency: the tracer's callback only appends to pending, under Run's
// mutex. Everything else runs on Run's goroutine (ingest after each
// tracer batch and at the window's end, then the window), like the
// controller itself, so the model is never shared between goroutines.

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// collect is one device's requests of the current window.
type collect struct {
	// pending is filled by the tracer's callback, under Run's mutex;
	// ingest swaps it with chunk, so both buffers are reused.
	pending, chunk []trace.Request
	// keep holds the window's newest requests, at most max: in arrival
	// order, or once full a ring whose oldest is at head.
	keep []trace.Request
	head int
	max  int
	// total counts the window's requests.
	total int
	// online: the window's requests are learned as they arrive (the
	// controller had calibrated its model when the window began).
	online bool
	learn  windowLearner
}

func newCollect(c *deviceController) *collect {
	return &collect{max: c.policy.MaxSimulated, online: c.calibrated}
}

// ingest moves the requests the tracer delivered since the last call into
// the window (mu guards pending).
func (w *collect) ingest(c *deviceController, mu *sync.Mutex) {
	mu.Lock()
	w.pending, w.chunk = w.chunk[:0], w.pending
	mu.Unlock()
	chunk := w.chunk
	if len(chunk) == 0 {
		return
	}
	w.total += len(chunk)
	if w.online {
		w.learn.observe(c.disk, chunk)
	}
	w.retain(chunk)
}

// retain adds chunk to keep, overwriting the oldest requests once keep
// holds max.
func (w *collect) retain(chunk []trace.Request) {
	if len(chunk) >= w.max {
		chunk = chunk[len(chunk)-w.max:]
	}
	if room := w.max - len(w.keep); room > 0 {
		k := min(room, len(chunk))
		if len(w.keep)+k > cap(w.keep) {
			grown := make([]trace.Request, len(w.keep), min(w.max, max(2*cap(w.keep), len(w.keep)+k, 1024)))
			copy(grown, w.keep)
			w.keep = grown
		}
		w.keep = append(w.keep, chunk[:k]...)
		chunk = chunk[k:]
	}
	for len(chunk) > 0 { // full: overwrite from the oldest on
		n := copy(w.keep[w.head:], chunk)
		chunk = chunk[n:]
		w.head = (w.head + n) % w.max
	}
}

// simulated returns the window's newest requests, at most max, in arrival
// order (putting the ring in order, in place).
func (w *collect) simulated() []trace.Request {
	if w.head != 0 {
		slices.Reverse(w.keep[:w.head])
		slices.Reverse(w.keep[w.head:])
		slices.Reverse(w.keep)
		w.head = 0
	}
	return w.keep
}

// figures returns what learning the whole window gave; a window that was
// not learned online is calibrated (if need be) and learned now, over the
// kept slice.
func (w *collect) figures(c *deviceController) learned {
	if !w.online {
		reqs := w.simulated()
		if !c.calibrated {
			c.calibrate(reqs)
		}
		w.learn.observe(c.disk, reqs)
	}
	l := w.learn.result()
	l.requests = w.total
	return l
}

// step evaluates the window (deviceController.evaluate).
func (w *collect) step(c *deviceController, now time.Time) (WindowReport, error) {
	return c.evaluate(w.simulated(), w.figures(c), now)
}

// skip closes a window that is not evaluated (over the CPU budget): its
// requests teach the model all the same, without calibration, as
// deviceController.learn would.
func (w *collect) skip(c *deviceController) {
	if !w.online {
		w.learn.observe(c.disk, w.simulated())
	}
	w.learn.result()
}

// next starts the next window; the buffers are kept for it.
func (w *collect) next(c *deviceController) {
	w.keep, w.head, w.total = w.keep[:0], 0, 0
	w.learn.result() // resets it
	w.max, w.online = c.policy.MaxSimulated, c.calibrated
}

// learned is what learning a window's requests gave.
type learned struct {
	requests       int // the window's requests
	realNs, predNs int64
	errPct         float64
}

// windowLearner is deviceController.learn made incremental: it predicts
// then learns each measured request (sorted by dispatch within each
// observed chunk) and accumulates the window's totals and its per-1000-
// request group errors until result.
type windowLearner struct {
	realNs, predNs int64
	gReal, gPred   int64 // the open group
	n              int   // requests in the open group
	groupErrs      []float64
	order          []int32
}

// observe learns the measured requests of reqs on d, in dispatch order.
func (l *windowLearner) observe(d *model.Disk, reqs []trace.Request) {
	l.order = l.order[:0]
	sorted := true
	var last int64
	for i := range reqs {
		if reqs[i].HasService() {
			if len(l.order) > 0 && reqs[i].Dispatch < last {
				sorted = false
			}
			last = reqs[i].Dispatch
			l.order = append(l.order, int32(i))
		}
	}
	if !sorted {
		// By dispatch, then record order (a stable sort); pdqsort is
		// near-linear on the nearly sorted input.
		slices.SortFunc(l.order, func(a, b int32) int {
			if c := cmp.Compare(reqs[a].Dispatch, reqs[b].Dispatch); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	for _, i := range l.order {
		q := &reqs[i]
		svc := q.ServiceTime()
		p := d.PredictObserve(q.Op, q.Sector, q.Sectors, svc)
		l.realNs += svc
		l.predNs += p
		l.gReal += svc
		l.gPred += p
		l.n++
		if l.n == 1000 {
			l.groupErrs = append(l.groupErrs, pctErr(l.gPred, l.gReal))
			l.gReal, l.gPred, l.n = 0, 0, 0
		}
	}
}

// result returns the totals and the model error, the median group error
// (a last group of fewer than 500 requests counts only when it is the
// only one), and resets the learner.
func (l *windowLearner) result() learned {
	if l.n > 0 && (len(l.groupErrs) == 0 || l.n >= 500) {
		l.groupErrs = append(l.groupErrs, pctErr(l.gPred, l.gReal))
	}
	r := learned{realNs: l.realNs, predNs: l.predNs}
	if len(l.groupErrs) > 0 {
		slices.Sort(l.groupErrs)
		r.errPct = l.groupErrs[len(l.groupErrs)/2]
	}
	*l = windowLearner{groupErrs: l.groupErrs[:0], order: l.order[:0]}
	return r
}
