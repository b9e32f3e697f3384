package redcap

import (
	"slices"
	"testing"
)

// TestContentsPreload: Contents lists the valid segments least recently
// used first, Preload puts them back in that order (the last most recently
// used), drops the oldest when there is no room, and counts nothing.
func TestContentsPreload(t *testing.T) {
	c := small(t, 3)
	fill(t, c, 5, 6, 7)
	c.Read(5*16, 1) // 5 becomes the most recently used
	if got := c.Contents(10); !slices.Equal(got, []uint64{6, 7, 5}) {
		t.Fatalf("Contents = %v, want [6 7 5]", got)
	}
	if got := c.Contents(2); !slices.Equal(got, []uint64{7, 5}) {
		t.Errorf("Contents(2) = %v, want the two most recent [7 5]", got)
	}
	w := small(t, 3)
	w.Preload([]uint64{1, 6, 7, 5})
	if got := w.Contents(10); !slices.Equal(got, []uint64{6, 7, 5}) {
		t.Errorf("preloaded 4 into 3: Contents = %v, want [6 7 5]", got)
	}
	if st := w.Stats(); st != (Stats{}) {
		t.Errorf("Preload counted %+v", st)
	}
	if p := w.Read(6*16, 1); p.Bypass || p.HitParts != 1 {
		t.Errorf("a preloaded segment misses: %+v", *p)
	}
	w.Preload([]uint64{7})
	if got := w.Contents(10); !slices.Equal(got, []uint64{5, 6, 7}) {
		t.Errorf("preloading a held segment: Contents = %v, want it most recent [5 6 7]", got)
	}
}

// Warm carries the hotspots that became hot: loaded into a new cache,
// their misses copy at once, as smq's hotspot levels persist.
func TestWarmCarriesHotSpots(t *testing.T) {
	cfg := Config{Segments: 8, SegmentSectors: 128, PromoteAfter: 2, HotspotSegments: 4, PromoteGapReads: 2}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Read(0, 8)        // hotspot 0: one counted miss
	c.Read(100*512, 8)  // elsewhere
	c.Read(200*512, 8)  // elsewhere
	p := c.Read(128, 8) // segment 1 of hotspot 0: the second counted miss copies it
	if len(p.Fetches) != 1 {
		t.Fatalf("the hotspot's second counted miss: %+v, want a fetch", *p)
	}
	w := c.Warm(10)
	if !slices.Equal(w.HotSpots, []uint64{0}) {
		t.Fatalf("Warm().HotSpots = %v, want [0]", w.HotSpots)
	}
	if w0 := c.Warm(0); len(w0.HotSpots) != 0 || len(w0.Segments) != 0 {
		t.Fatalf("Warm(0) = %+v, want nothing", w0)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := n.Read(2*128, 8); len(p.Fetches) != 0 {
		t.Fatalf("a first miss in an empty cache: %+v, want no fetch", *p)
	}
	n.Reset()
	n.Load(w)
	if p := n.Read(2*128, 8); len(p.Fetches) != 1 || p.Fetches[0].Sector != 2*128 {
		t.Fatalf("a first miss in hotspot 0 after Load: %+v, want a fetch of segment 2", *p)
	}
}
