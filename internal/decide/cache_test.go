package decide

import (
	"math"
	"strings"
	"testing"
)

func TestCache(t *testing.T) {
	pct := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name     string
		in       CacheInput
		mode     string
		gain     float64
		measured bool
		reason   string
	}{
		{"off, not simulated", CacheInput{MarginPct: 5}, "", 0, false, "not simulated"},
		{"off, predicted gain, ADA on, first window", CacheInput{PredictedGainPct: pct(60), ADAOn: true, MarginPct: 5}, "", 60, false, "waiting for a second window"},
		{"off, predicted gain, ADA on, second window", CacheInput{PredictedGainPct: pct(60), ADAOn: true, PrevPredictedOn: true, MarginPct: 5}, CacheOn, 60, false, "two windows in a row"},
		{"off, predicted gain, ADA off", CacheInput{PredictedGainPct: pct(60), PrevPredictedOn: true, MarginPct: 5}, "", 60, false, "ADA ends off"},
		{"off, below margin", CacheInput{PredictedGainPct: pct(4.9), ADAOn: true, PrevPredictedOn: true, MarginPct: 5}, "", 4.9, false, "below the margin"},
		{"off, predicted loss", CacheInput{PredictedGainPct: pct(-300), MarginPct: 5}, "", -300, false, "below the margin"},
		// The blocks the cache holds, counted while off (passthrough):
		// 40 % of the reads would hit, where the simulation from the
		// window alone predicts nothing.
		{"off, resident hits, first window", CacheInput{ResidentHits: 400, ResidentMisses: 600, ReadNs: 1000, PredictedGainPct: pct(0), MinReads: 100, MarginPct: 5}, "", 40, false, "holds the blocks of 40.0 % of the reads (counted while off): 40.0 % less with it on; waiting"},
		{"off, resident hits, second window", CacheInput{ResidentHits: 400, ResidentMisses: 600, ReadNs: 1000, PrevPredictedOn: true, MinReads: 100, MarginPct: 5}, CacheOn, 40, false, "two windows in a row"},
		{"off, resident hits below the margin", CacheInput{ResidentHits: 40, ResidentMisses: 960, ReadNs: 1000, PredictedGainPct: pct(0), PrevPredictedOn: true, MinReads: 100, MarginPct: 5}, "", 0, false, "predicted 0.0 % less I/O time with the cache; the cache holds the blocks of 4.0 % of the reads (counted while off): 4.0 % less with it on; below the margin"},
		{"off, resident hits below the margin, not simulated", CacheInput{ResidentHits: 40, ResidentMisses: 960, ReadNs: 1000, PrevPredictedOn: true, MinReads: 100, MarginPct: 5}, "", 4, false, "the cache holds the blocks of 4.0 % of the reads (counted while off): 4.0 % less with it on; below the margin"},
		{"off, resident hits too few reads", CacheInput{ResidentHits: 40, ResidentMisses: 40, ReadNs: 1000, PrevPredictedOn: true, MinReads: 100, MarginPct: 5}, "", 0, false, "not simulated"},
		{"off, resident hits without read times", CacheInput{ResidentHits: 400, ResidentMisses: 600, PrevPredictedOn: true, MinReads: 100, MarginPct: 5}, "", 0, false, "not simulated"},
		{"off, simulation on, resident hits below the margin", CacheInput{ResidentHits: 10, ResidentMisses: 990, ReadNs: 1000, PredictedGainPct: pct(30), ADAOn: true, PrevPredictedOn: true, MinReads: 100, MarginPct: 5}, CacheOn, 30, false, "predicted 30.0 %"},
		// zipf: 84 % hits, few promotions: keep.
		{"on, paying", CacheInput{Active: true, ReadHits: 840, ReadMisses: 160, Promotions: 10, ReadNs: 1000, BlockReadNs: 2000, MinReads: 100}, "", 82, true, "84.0 % read hits"},
		// uniform over more than the cache: 20 % hits, a promotion per
		// three reads of blocks 4x as dear: off.
		{"on, costing, first window", CacheInput{Active: true, ReadHits: 200, ReadMisses: 800, Promotions: 300, ReadNs: 1000, BlockReadNs: 4000, MinReads: 100}, "", -100, true, "waiting for a second window"},
		{"on, costing, second window", CacheInput{Active: true, PrevMeasuredOff: true, ReadHits: 200, ReadMisses: 800, Promotions: 300, ReadNs: 1000, BlockReadNs: 4000, MinReads: 100}, CacheOff, -100, true, "do not pay for 300 promotions, two windows in a row"},
		// between zero and the margin: keep (hysteresis).
		{"on, near break-even", CacheInput{Active: true, ReadHits: 100, ReadMisses: 900, Promotions: 98, ReadNs: 1000, BlockReadNs: 1000, MinReads: 100}, "", 0.2, true, ""},
		{"on, too few reads", CacheInput{Active: true, ReadHits: 5, ReadMisses: 5, ReadNs: 1000, MinReads: 100}, "", 0, false, "fewer than 100"},
		{"on, no read time", CacheInput{Active: true, ReadHits: 500, ReadMisses: 500, MinReads: 100}, "", 0, false, "no read service time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Cache(tc.in)
			if d.Mode != tc.mode || math.Abs(d.GainPct-tc.gain) > 1e-9 || d.Measured != tc.measured || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("Cache(%+v) = %+v, want mode %q gain %v measured %v reason ~%q", tc.in, d, tc.mode, tc.gain, tc.measured, tc.reason)
			}
		})
	}
}

func TestMeasuredCacheGainPct(t *testing.T) {
	if _, ok := MeasuredCacheGainPct(0, 0, 0, 1000, 1000); ok {
		t.Error("no reads: ok")
	}
	// A block read time of 0 counts as one read.
	if g, ok := MeasuredCacheGainPct(50, 50, 50, 1000, 0); !ok || g != 0 {
		t.Errorf("got %v %v, want 0 true", g, ok)
	}
}
