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
