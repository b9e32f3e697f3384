package window

import (
	"testing"

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
