package window

import (
	"slices"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/window/windowtest"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// feed delivers reqs to the controller in chunks of size n, as the
// tracer's batches.
func feed(c *Controller, reqs []trace.Request, n int) {
	for len(reqs) > 0 {
		k := min(n, len(reqs))
		c.Add(reqs[:k])
		reqs = reqs[k:]
	}
}

// The window a controller keeps is the newest MaxSimulated requests,
// whatever the chunking, and its buffers stop growing.
func TestCollectKeepsNewest(t *testing.T) {
	c := newTestController(t, false)
	c.Policy.MaxSimulated = 1000
	c.nextWindow()
	reqs := windowtest.FIFOWindow(1, 5500, 4, 4, 0, 1)
	w := &c.win
	for _, n := range []int{1, 7, 333, 999, 1000, 1001, 2500, 6000} {
		feed(c, reqs, n)
		if w.total != len(reqs) {
			t.Fatalf("chunks of %d: total %d, want %d", n, w.total, len(reqs))
		}
		if got, want := w.simulated(), reqs[len(reqs)-1000:]; !slices.Equal(got, want) {
			t.Fatalf("chunks of %d: kept %d requests, not the newest 1000", n, len(got))
		}
		if got := w.simulated(); !slices.Equal(got, reqs[len(reqs)-1000:]) {
			t.Fatalf("chunks of %d: a second call changed the window", n)
		}
		if cap(w.keep) > c.Policy.MaxSimulated {
			t.Errorf("chunks of %d: keep grew to %d", n, cap(w.keep))
		}
		c.nextWindow()
		feed(c, reqs[:10], 3)
		if got := w.simulated(); !slices.Equal(got, reqs[:10]) || w.total != 10 {
			t.Errorf("chunks of %d: next window holds %d (total %d), want the 10 fed", n, len(got), w.total)
		}
		c.nextWindow()
	}
}

// Online learning in chunks gives what learning the whole window at its
// end gives when the chunks follow dispatch order (fifoWindow: one disk
// served in order), and the same model.
func TestCollectOnlineLearningMatchesWindow(t *testing.T) {
	reqs := windowtest.FIFOWindow(3, 20000, 4, 4, 0, 1)
	whole := newTestController(t, false)
	whole.learn.calibrated = true
	want := whole.learnedOf(reqs)

	c := newTestController(t, false)
	c.learn.calibrated = true
	c.nextWindow() // online
	feed(c, reqs, 1234)
	got := c.learn.learner.result()
	got.requests = c.win.total
	if got != want {
		t.Errorf("online %+v, whole window %+v", got, want)
	}
	if a, b := c.learn.disk.Service(trace.Read, 12345, 8), whole.learn.disk.Service(trace.Read, 12345, 8); a != b {
		t.Errorf("models differ after learning: %d vs %d ns", a, b)
	}
}

// A window that starts before calibration is calibrated and learned at its
// end, over the kept requests: for a window within MaxSimulated, fed in
// chunks, exactly what the same window fed at once gives.
func TestCollectCalibratesAtWindowEnd(t *testing.T) {
	ssdLike := windowtest.FIFOWindow(4, 3000, 4, 4, 0, 0.01) // far faster than an HDD
	a := newTestController(t, false)
	feed(a, ssdLike, 500)
	repA, err := a.EndWindow(Input{Now: time.Unix(0, 0), Gate: Gate{Granted: true}})
	if err != nil {
		t.Fatal(err)
	}
	b := newTestController(t, false)
	repB, err := step(b, ssdLike, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !a.learn.calibrated || a.learn.model.Class() != model.SSD || a.learn.note != b.learn.note {
		t.Errorf("calibrated %v class %v note %q; step: %q", a.learn.calibrated, a.learn.model.Class(), a.learn.note, b.learn.note)
	}
	if repA.ModelErrorPct != repB.ModelErrorPct || repA.RealServiceNs != repB.RealServiceNs || repA.Requests != repB.Requests {
		t.Errorf("collect: %d reqs err %.3f%% real %d; step: %d reqs err %.3f%% real %d",
			repA.Requests, repA.ModelErrorPct, repA.RealServiceNs, repB.Requests, repB.ModelErrorPct, repB.RealServiceNs)
	}
	if !a.learn.online {
		t.Error("the window after calibration is not learned online")
	}
}

// learnedOf is what learning reqs as one whole window gives.
func (c *Controller) learnedOf(reqs []trace.Request) learned {
	var l windowLearner
	l.observe(c.learn.disk, reqs)
	r := l.result()
	r.requests = len(reqs)
	return r
}

// A read-ahead request counts as alone when it is dispatched once every
// request that arrived before it has completed, across chunks and
// windows; writes occupy the device too.
func TestWindowAloneRequests(t *testing.T) {
	var w window
	ra := func(d, c int64, op trace.Op) trace.Request {
		return trace.Request{Arrival: d, Dispatch: d, Complete: c, Sector: uint64(d), Sectors: 8, Op: op, Flags: trace.ReadAhead}
	}
	w.count([]trace.Request{ra(0, 100, trace.Read), ra(50, 200, trace.Read)})     // alone; behind the first
	w.count([]trace.Request{ra(150, 180, trace.Read)})                            // behind the second
	w.count([]trace.Request{ra(200, 900, trace.Write), ra(250, 300, trace.Read)}) // behind a write
	if a, b := w.ahead.Requests(true), w.ahead.Requests(false); a != 1 || b != 3 {
		t.Errorf("first window: %v alone and %v behind others, want 1 and 3", a, b)
	}
	w.reset()
	w.count([]trace.Request{ra(850, 950, trace.Read), ra(1000, 1100, trace.Read)}) // behind the write; alone
	if a, b := w.ahead.Requests(true), w.ahead.Requests(false); a != 1 || b != 1 {
		t.Errorf("second window: %v alone and %v behind others, want 1 and 1", a, b)
	}
}

// TestWindowAheadBusy: the read-ahead requests' device time is the union
// of their service intervals (ns), across windows too: requests in
// service together count once, and a gap counts nothing.
func TestWindowAheadBusy(t *testing.T) {
	var w window
	ra := func(d, c int64) trace.Request {
		return trace.Request{Arrival: d, Dispatch: d, Complete: c, Sector: uint64(d), Sectors: 8, Op: trace.Read, Flags: trace.ReadAhead}
	}
	// [0,100] and [50,200] overlap: 200; [150,180] inside: 0; a gap, then
	// [300,400]: 100; a write [400,900] is no read-ahead.
	w.count([]trace.Request{ra(0, 100), ra(50, 200), ra(150, 180), ra(300, 400)})
	w.count([]trace.Request{{Arrival: 400, Dispatch: 400, Complete: 900, Sectors: 8, Op: trace.Write}})
	if w.aheadNs != 300 || w.aheadRequests != 4 || w.aheadSectors != 32 {
		t.Errorf("first window: %d ns busy, %d requests, %d sectors; want 300, 4, 32", w.aheadNs, w.aheadRequests, w.aheadSectors)
	}
	w.reset()
	// [350,500] began in the last window: only its 100 ns after 400.
	w.count([]trace.Request{ra(350, 500)})
	if w.aheadNs != 100 {
		t.Errorf("second window: %d ns busy, want 100 (after the last window's 400)", w.aheadNs)
	}
}
