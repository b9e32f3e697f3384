package window

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// phaseWindow is one process reading 4 KiB at depth 1 from start (ns),
// at a stride of 64 KiB from a random first sector (so that every read
// lands in the same cell of the model): its first n−tail requests take
// fast ns each, its last tail slow ns.
func phaseWindow(seed uint64, n, tail int, fast, slow, start int64) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 3))
	first := rng.Uint64N(10*gib) &^ 7
	reqs := make([]trace.Request, 0, n)
	now := start
	for i := range n {
		svc := fast
		if i >= n-tail {
			svc = slow
		}
		reqs = append(reqs, trace.Request{Arrival: now, Dispatch: now, Complete: now + svc,
			Sector: first + uint64(i)*128, Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: 100, Think: trace.Unknown})
		now += svc + 20_000
	}
	return reqs
}

// A window simulates the setting in effect with what the model learned
// over the whole window, not over its last moments: a window of 4,000
// reads at 50 µs then 1,000 at 400 µs is simulated at its measured busy
// time (120 µs a read), where the model's cells alone, holding the newest
// samples, would put it near 400 µs.
func TestWindowSimulatedWithTheWholeWindow(t *testing.T) {
	c, err := New("sdz", model.Default(model.SSD, 100*gib),
		Setting{Candidate: engine.Candidate{Scheduler: "none"}}, testPolicy(false))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	first := phaseWindow(1, 5000, 0, 50_000, 50_000, 0)
	if _, err := step(c, first, now); err != nil { // calibrates the model
		t.Fatal(err)
	}
	reqs := phaseWindow(2, 5000, 1000, 50_000, 400_000, first[len(first)-1].Complete+1e6)
	rep, err := step(c, reqs, now.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Report == nil {
		t.Fatalf("no simulation: %+v", rep)
	}
	var sim int64
	for _, o := range rep.Report.Outcomes {
		if o.Candidate.Name() == "none" {
			sim = o.Result.TotalServiceNs
		}
	}
	measured := rep.SimulatedRealNs
	if r := float64(sim) / float64(measured); math.Abs(r-1) > 0.1 {
		t.Errorf("simulated service of none %.3f s against %.3f s measured (%.2fx), want within 10 %%",
			float64(sim)/1e9, float64(measured)/1e9, r)
	}
}
