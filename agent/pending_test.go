package agent

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/agent/window/controllertest"
	"github.com/shadowtune/shadowtune/agent/window/windowtest"
)

// While the loop is busy (evaluating a window) the tracer's requests wait
// in the device's pending buffer: it stays within 2 × MaxSimulated,
// counts what it drops, and the window still simulates the newest
// MaxSimulated requests, contiguous.
func TestPendingIsBounded(t *testing.T) {
	c := controllertest.New(t, false)
	c.Policy.MaxSimulated = 1000
	d := &device{ctrl: c}
	var mu sync.Mutex
	d.ingest(&mu) // learns the bound, as the loop's first ingest does
	reqs := windowtest.FIFOWindow(1, 7300, 4, 4, 0, 1)
	for i := range reqs { // the loop is busy: nothing is ingested
		d.keepPending(&reqs[i])
		if len(d.pending) > 2*c.Policy.MaxSimulated {
			t.Fatalf("pending holds %d requests, over 2 × %d", len(d.pending), c.Policy.MaxSimulated)
		}
	}
	kept := len(d.pending)
	if d.overflow+kept != len(reqs) {
		t.Fatalf("dropped %d + kept %d ≠ %d delivered", d.overflow, kept, len(reqs))
	}
	d.ingest(&mu)
	if got, want := c.Simulated(), reqs[len(reqs)-1000:]; !slices.Equal(got, want) {
		t.Fatal("the window does not simulate the newest 1000 requests")
	}
	in := window.Input{Now: time.Unix(100, 0), Skip: "test"}
	rep, err := c.EndWindow(in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unlearned != len(reqs)-kept || rep.Requests != kept {
		t.Errorf("report: %d requests, %d unlearned; want %d and %d", rep.Requests, rep.Unlearned, kept, len(reqs)-kept)
	}
	// The status accounts for every delivered request: traced and
	// learned, or dropped unlearned.
	d.report(rep, nil, in, &windowEnv{})
	if st := d.status; st.TotalRequests+st.UnlearnedRequests != int64(len(reqs)) || st.UnlearnedRequests != int64(len(reqs)-kept) {
		t.Errorf("status: totalRequests %d, unlearnedRequests %d; want %d and %d", st.TotalRequests, st.UnlearnedRequests, kept, len(reqs)-kept)
	}
	if c.Unlearned() != 0 {
		t.Error("the next window starts with unlearned requests")
	}
}
