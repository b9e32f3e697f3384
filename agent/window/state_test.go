package window

import (
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// ModelDMCache sets smq sized as the dm-cache, filled over a window; the
// measured read time charges the hits on the policy's CPUs, else the
// host's; without one the hits keep the default cost.
func TestModelDMCache(t *testing.T) {
	c := newTestController(t, true)
	if n := c.ModelDMCache(960, 128, 1<<20, 0, 8); n != 0 || c.Policy.Engine.Cache.HitOverheadNs != 0 || !c.Policy.Engine.CacheFill {
		t.Fatalf("unmeasured: servers %d, cache %+v, fill %v", n, c.Policy.Engine.Cache, c.Policy.Engine.CacheFill)
	}
	want := engine.SMQ(960, 128, 1<<20)
	if got := c.Policy.Engine.Cache; got.Segments != want.Segments || got.SegmentSectors != want.SegmentSectors || !got.SMQ {
		t.Fatalf("cache %+v, want %+v", got, want)
	}
	c.Policy.Engine.CPUs = 0
	if n := c.ModelDMCache(960, 128, 1<<20, 11_000, 8); n != 8 || c.Policy.Engine.Cache.HitOverheadNs != 11_000 || c.Policy.Engine.Cache.HitServers != 8 {
		t.Fatalf("measured, the host's CPUs: servers %d, cache %+v", n, c.Policy.Engine.Cache)
	}
	c.Policy.Engine.CPUs = 2
	if n := c.ModelDMCache(960, 128, 1<<20, 11_000, 8); n != 2 || c.Policy.Engine.Cache.HitServers != 2 {
		t.Fatalf("measured, the policy's CPUs: servers %d, cache %+v", n, c.Policy.Engine.Cache)
	}
}

// RestoreMemo takes an earlier run's pacing and the corrections within
// their bounds; an unsound counterfactual record is returned as an error
// and not taken.
func TestRestoreMemo(t *testing.T) {
	c := newTestController(t, true)
	at := time.Unix(1000, 0)
	m := Memo{LastChange: at, Guard: decide.State{ConsecutiveChanges: 2, Pinned: true},
		Backoff:        map[string]time.Time{"bfq": at.Add(time.Hour)},
		Corrections:    map[string]float64{"bfq": 1.1, "kyber": CorrectionMax * 2},
		Counterfactual: counterfactual.Record{Checks: 1, WrongSigns: 2}}
	if err := c.RestoreMemo(m); err == nil {
		t.Fatal("an unsound counterfactual record restored without an error")
	}
	if !c.Memo.LastChange.Equal(at) || c.Memo.Guard != m.Guard || !c.Memo.Backoff["bfq"].Equal(at.Add(time.Hour)) {
		t.Errorf("pacing %+v", c.Memo)
	}
	if _, ok := c.Memo.Corrections["kyber"]; ok || c.Memo.Corrections["bfq"] != 1.1 || c.Memo.Counterfactual.Checks != 0 {
		t.Errorf("corrections %v, counterfactual %+v", c.Memo.Corrections, c.Memo.Counterfactual)
	}
}
