package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
)

// TestCacheWarmedFromTheWindowBefore: zipf-like reads over a hot set that
// the cache holds, in two windows. Simulated from empty, the first window
// spends its reads promoting; the second, started from what the first
// left (Report.CacheContents → Options.CacheWarm), is predicted the gain a
// real cache keeps, and the same inputs give the same contents.
func TestCacheWarmedFromTheWindowBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	window := func() []uint64 {
		secs := make([]uint64, 3000)
		for i := range secs {
			secs[i] = 40*gib + rng.Uint64N(24<<11)&^7 // 24 MiB hot set
		}
		return secs
	}
	eval := func(secs []uint64, warm *CacheWarm) Report {
		w, err := sim.NewWindow(closedReads(secs, 200e3), sim.LoopAuto)
		if err != nil {
			t.Fatal(err)
		}
		opt := Options{Model: model.Default(model.HDD, 200*gib), Current: Candidate{Scheduler: "none"},
			Decide: decide.DefaultConfig("none"), Cache: CacheForBlocks(512, 128, 200*gib)}
		if warm != nil {
			opt.CacheWarm = *warm
		}
		rep, err := Evaluate(w, both("none"), opt)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	w1, w2 := window(), window()
	cold := eval(w1, nil)
	if cold.CacheContents == nil || len(cold.CacheContents.Segments) == 0 {
		t.Fatal("no cache contents reported")
	}
	for _, o := range cold.Outcomes {
		if o.Result.CacheContents != nil {
			t.Errorf("%s keeps its contents in the report's outcomes", o.Candidate.Name())
		}
	}
	coldNext, warm := eval(w2, nil), eval(w2, cold.CacheContents)
	t.Logf("second window: %.1f %% from empty, %.1f %% warmed (%d segments, %d hot hotspots)", *coldNext.CacheGainPct, *warm.CacheGainPct,
		len(cold.CacheContents.Segments), len(cold.CacheContents.HotSpots))
	if *warm.CacheGainPct < *coldNext.CacheGainPct+10 {
		t.Errorf("warmed: %.1f %%, from empty %.1f %%; want at least 10 points more", *warm.CacheGainPct, *coldNext.CacheGainPct)
	}
	if again := eval(w2, cold.CacheContents); !reflect.DeepEqual(again.CacheContents, warm.CacheContents) || *again.CacheGainPct != *warm.CacheGainPct {
		t.Error("the same window and warm start gave another result")
	}
}
