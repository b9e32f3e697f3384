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

func TestBusyRate(t *testing.T) {
	rq := func(arrival, complete int64) trace.Request {
		return trace.Request{Arrival: arrival, Dispatch: trace.Unknown, Complete: complete}
	}
	for _, tc := range []struct {
		name string
		reqs []trace.Request
		want float64 // requests per second
	}{
		{"one request", []trace.Request{rq(0, 10)}, 0},
		{"overlapping: busy 0–3 µs", []trace.Request{rq(0, 2000), rq(1000, 3000)}, 2 / 3e-6},
		{"an idle gap is not busy time", []trace.Request{rq(0, 1000), rq(1e9, 1e9+1000)}, 2 / 2e-6},
		{"nested completions", []trace.Request{rq(0, 4000), rq(1000, 2000), rq(3000, 3500)}, 3 / 4e-6},
		{"no completions: the arrivals' span", []trace.Request{rq(0, trace.Unknown), rq(5000, trace.Unknown)}, 2 / 5e-6},
	} {
		if got := busyRate(tc.reqs); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: busyRate = %g, want %g", tc.name, got, tc.want)
		}
	}
}

func TestDispatchFactors(t *testing.T) {
	costs := map[string]float64{"none": 0, "mq-deadline": 3000, "bfq": 4400, "bad": -5}
	for _, tc := range []struct {
		name string
		rate float64
		cpus int
		want map[string]float64
	}{
		// 200 requests a second on a disk: 0.03 % for bfq.
		{"disk", 200, 2, map[string]float64{"none": 1, "mq-deadline": 1.0003, "bfq": 1.00044, "bad": 1}},
		// 250,000 a second on two CPUs: mq-deadline's extra 3 µs a request
		// takes 0.75 CPU of 2.
		{"fast device", 250_000, 2, map[string]float64{"none": 1, "mq-deadline": 1.375, "bfq": 1.55, "bad": 1}},
		{"more CPUs, smaller share", 250_000, 8, map[string]float64{"none": 1, "mq-deadline": 1.09375, "bfq": 1.1375, "bad": 1}},
		{"no rate", 0, 2, nil},
	} {
		got := dispatchFactors(Options{DispatchCostNs: costs, CPUs: tc.cpus}, tc.rate)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
		for s, w := range tc.want {
			if math.Abs(got[s]-w) > 1e-9 {
				t.Errorf("%s: %s factor %g, want %g", tc.name, s, got[s], w)
			}
		}
	}
	if f := dispatchFactors(Options{}, 250_000); f != nil {
		t.Errorf("no costs: %v, want nil", f)
	}
}

// TestDispatchCostTurnsDecision: a window the simulator alone decides for
// a scheduler other than none is decided for none once that scheduler's
// measured CPU cost per request is charged at the window's rate, and the
// report says by what factor.
func TestDispatchCostTurnsDecision(t *testing.T) {
	// Four processes of random reads over 10 GiB of a disk, recorded at
	// 10,000 requests a second: the elevators that sort win on the disk
	// model.
	rng := rand.New(rand.NewPCG(5, 6))
	reqs := make([]trace.Request, 4000)
	for i := range reqs {
		at := int64(i) * 100_000
		reqs[i] = trace.Request{Arrival: at, Dispatch: at, Complete: at + 350_000, Sector: rng.Uint64N(10*gib) &^ 7,
			Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: uint32(1 + i%4), Think: trace.Unknown}
	}
	w, err := sim.NewWindow(reqs, sim.LoopAuto)
	if err != nil {
		t.Fatal(err)
	}
	cur := Candidate{Scheduler: "none"}
	opt := Options{Model: model.Default(model.HDD, 200*gib), Current: cur, Decide: decide.DefaultConfig("none"), Rank: RankWait}
	cands := []Candidate{{Scheduler: "none"}, {Scheduler: "mq-deadline"}}
	free, err := Evaluate(w, cands, opt)
	if err != nil {
		t.Fatal(err)
	}
	if free.Decision.Best != "mq-deadline" || free.DispatchFactors != nil {
		t.Fatalf("without costs: best %q (+%.1f %%), factors %v; want mq-deadline, none",
			free.Decision.Best, free.Decision.BestImprovementPct, free.DispatchFactors)
	}
	// A cost that takes more CPU than mq-deadline's predicted gain: at
	// 10,000 requests a second on 2 CPUs, 200 µs a request is a factor 2.
	opt.DispatchCostNs, opt.CPUs = map[string]float64{"none": 0, "mq-deadline": 200_000}, 2
	charged, err := Evaluate(w, cands, opt)
	if err != nil {
		t.Fatal(err)
	}
	if charged.Decision.Best != "none" {
		t.Errorf("with mq-deadline's cost: best %q (+%.1f %%), want none", charged.Decision.Best, charged.Decision.BestImprovementPct)
	}
	if f := charged.DispatchFactor("mq-deadline"); math.Abs(f-2) > 0.01 {
		t.Errorf("mq-deadline's factor %g at %.0f requests/s, want 2", f, charged.BusyRate)
	}
	if f := charged.DispatchFactor("kyber"); f != 1 {
		t.Errorf("a scheduler without a cost: factor %g, want 1", f)
	}
	for _, o := range charged.Outcomes {
		want := float64(RankWait.Measure(o.Result)) * charged.DispatchFactor(o.Candidate.Scheduler)
		if got := charged.Predicted(RankWait, o); got != want {
			t.Errorf("%s: Predicted %g, want %g", o.Candidate.Name(), got, want)
		}
	}
}
