package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestResponseRatioGatesTheDecision: the report compares the current
// setting's simulated mean response time with the window's measured one,
// and a predicted gain is acted on only where they agree within
// decide.Config.MaxResponseRatio. The window's measured response times
// are set around the simulation's own, so only they differ between the
// cases (open loop: the simulation does not read them).
func TestResponseRatioGatesTheDecision(t *testing.T) {
	// Random reads of four processes over 10 GiB of a disk, 400 a second:
	// the elevators that sort are predicted faster on the disk model.
	rng := rand.New(rand.NewPCG(7, 8))
	reqs := make([]trace.Request, 2000)
	for i := range reqs {
		at := int64(i) * 2_500_000
		reqs[i] = trace.Request{Arrival: at, Dispatch: trace.Unknown, Complete: trace.Unknown, Sector: rng.Uint64N(10*gib) &^ 7,
			Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: uint32(1 + i%4), Think: trace.Unknown}
	}
	cfg := decide.DefaultConfig("none")
	cfg.MaxResponseRatio = 2
	opt := Options{Model: model.Default(model.HDD, 200*gib), Current: Candidate{Scheduler: "none"}, Decide: cfg, Rank: RankWait}
	cands := []Candidate{{Scheduler: "none"}, {Scheduler: "mq-deadline"}}
	eval := func(measuredNs float64) Report {
		t.Helper()
		for i := range reqs {
			if measuredNs > 0 {
				reqs[i].Complete = reqs[i].Arrival + int64(measuredNs)
			}
		}
		w, err := sim.NewWindow(reqs, sim.LoopOpen)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Evaluate(w, cands, opt)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	unmeasured := eval(0)
	if unmeasured.ResponseRatio != 0 || unmeasured.Decision.Reason != decide.ReasonBetter || unmeasured.Decision.Target != "mq-deadline" {
		t.Fatalf("no completion times: ratio %g, %s to %q (%s); want 0, Better to mq-deadline",
			unmeasured.ResponseRatio, unmeasured.Decision.Reason, unmeasured.Decision.Target, unmeasured.Decision.Message)
	}
	simMean := find(unmeasured.Outcomes, opt.Current).Result.MeanResponseNs

	for _, tc := range []struct {
		name     string
		measured float64 // the window's measured mean response, × the simulated one
		reason   decide.Reason
	}{
		{"as simulated", 1, decide.ReasonBetter},
		{"simulated at just under twice the measured", 0.51, decide.ReasonBetter},
		{"simulated at ten times the measured (a queue only the model has)", 0.1, decide.ReasonNotReproduced},
		{"simulated at a third of the measured", 3, decide.ReasonNotReproduced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := eval(simMean * tc.measured)
			if want := 1 / tc.measured; math.Abs(r.ResponseRatio-want) > 1e-3*want {
				t.Errorf("ratio %g, want %g", r.ResponseRatio, want)
			}
			if r.Decision.Reason != tc.reason || r.Decision.Switch != (tc.reason == decide.ReasonBetter) {
				t.Errorf("%s, switch %v (%s); want %s", r.Decision.Reason, r.Decision.Switch, r.Decision.Message, tc.reason)
			}
		})
	}
}
