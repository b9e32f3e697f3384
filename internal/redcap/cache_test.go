package redcap

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// small returns a cache of n segments of 16 sectors (8 KiB).
func small(t *testing.T, n int) *Cache {
	t.Helper()
	c, err := New(Config{Segments: n, SegmentSectors: 16})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fill reads one sector of each listed segment and completes the fills, so
// the segments end up valid, in that order of use.
func fill(t *testing.T, c *Cache, segs ...uint64) {
	t.Helper()
	for _, k := range segs {
		p := c.Read(k*16, 1)
		if p.Bypass || len(p.Fetches) != 1 {
			t.Fatalf("fill seg %d: plan %+v", k, *p)
		}
		c.FillDone(p.Fetches[0].ID)
	}
}

// check verifies the cache's internal invariants.
func (c *Cache) check() error {
	n := len(c.seg)
	seen := 0
	free, valid := 0, 0
	prev := none
	for s := c.head; s != none; s = c.next[s] {
		if c.prev[s] != prev {
			return fmt.Errorf("slot %d: prev %d, want %d", s, c.prev[s], prev)
		}
		switch c.state[s] {
		case slotFree:
			free++
		case slotValid:
			valid++
			if k, ok := c.index[c.seg[s]]; !ok || k != s {
				return fmt.Errorf("valid slot %d (seg %d) not indexed", s, c.seg[s])
			}
		default:
			return fmt.Errorf("slot %d on LRU list in state %d", s, c.state[s])
		}
		prev = s
		seen++
		if seen > n {
			return fmt.Errorf("LRU list cycle")
		}
	}
	if prev != c.tail {
		return fmt.Errorf("tail %d, last on list %d", c.tail, prev)
	}
	if seen != c.onLRU {
		return fmt.Errorf("onLRU %d, list length %d", c.onLRU, seen)
	}
	filling := 0
	for s := range n {
		if c.state[s] == slotFilling {
			filling++
		} else if c.stale[s] {
			return fmt.Errorf("slot %d stale but not filling", s)
		}
	}
	if filling+seen != n {
		return fmt.Errorf("filling %d + listed %d != %d", filling, seen, n)
	}
	for k, s := range c.index {
		if c.seg[s] != k || c.state[s] == slotFree || c.stale[s] {
			return fmt.Errorf("index seg %d → slot %d (seg %d state %d stale %v)",
				k, s, c.seg[s], c.state[s], c.stale[s])
		}
	}
	return nil
}

func mustCheck(t *testing.T, c *Cache) {
	t.Helper()
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if cfg.Segments != 512 || cfg.SegmentSectors != 256 || cfg.CopyBytesPerSec != 5e9 || cfg.HitOverheadNs != 1000 {
		t.Fatalf("defaults: %+v", cfg)
	}
	if got := cfg.SizeBytes(); got != 64<<20 {
		t.Fatalf("SizeBytes = %d, want 64 MiB", got)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Segments: -1}, "Segments"},
		{Config{SegmentSectors: 12}, "multiple of 8"},
		{Config{CopyBytesPerSec: -1}, "CopyBytesPerSec"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) error %v, want mention of %q", tc.cfg, err, tc.want)
		}
	}
	c, err = New(Config{HitOverheadNs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if c.Config().HitOverheadNs != 0 {
		t.Fatalf("negative HitOverheadNs should mean 0")
	}
}

func TestHitAfterPrefetch(t *testing.T) {
	c := small(t, 4)
	p := c.Read(3, 2)
	if p.Bypass || p.Parts != 1 || p.MissParts != 1 || p.HitParts != 0 || len(p.Waits) != 0 {
		t.Fatalf("first read: %+v", *p)
	}
	if got := p.Fetches; len(got) != 1 || got[0].Sector != 0 || got[0].Sectors != 16 {
		t.Fatalf("fetch %+v, want whole segment [0,16)", got)
	}
	if p.ServedSectors != 16 || p.FetchedSectors != 16 {
		t.Fatalf("served %d fetched %d, want 16/16", p.ServedSectors, p.FetchedSectors)
	}
	id := p.Fetches[0].ID
	if c.Cached(3) {
		t.Fatal("segment valid before its fill completed")
	}
	c.FillDone(id)
	if !c.Cached(0) || !c.Cached(15) || c.Cached(16) {
		t.Fatal("after FillDone: segment 0 should be cached, segment 1 not")
	}
	p = c.Read(10, 4)
	if p.Bypass || p.HitParts != 1 || p.HitSectors != 4 || len(p.Fetches) != 0 || len(p.Waits) != 0 {
		t.Fatalf("second read should hit: %+v", *p)
	}
	if p.ServedSectors != 4 {
		t.Fatalf("hit served %d sectors, want 4", p.ServedSectors)
	}
	// 1 µs + 2048 B at 5 GB/s (409.6 ns, rounded up).
	if p.CopyNs != 1000+410 {
		t.Fatalf("CopyNs = %d, want 1410", p.CopyNs)
	}
	st := c.Stats()
	if st.Reads != 2 || st.MissParts != 1 || st.HitParts != 1 || st.FullHits != 1 ||
		st.HitSectors != 4 || st.FetchedSectors != 16 {
		t.Fatalf("stats %+v", st)
	}
	mustCheck(t, c)
}

func TestWholeSegmentFetchAlignment(t *testing.T) {
	for _, tc := range []struct {
		sector  uint64
		sectors uint32
		want    uint64
	}{
		{0, 8, 0},
		{255, 1, 0},
		{256, 1, 256},
		{1000, 8, 768},
		{1 << 40, 8, 1 << 40},
		{1<<40 + 300, 8, 1<<40 + 256},
	} {
		c, err := New(Config{}) // 512 × 256 sectors
		if err != nil {
			t.Fatal(err)
		}
		p := c.Read(tc.sector, tc.sectors)
		if len(p.Fetches) != 1 || p.Fetches[0].Sector != tc.want || p.Fetches[0].Sectors != 256 {
			t.Errorf("Read(%d,%d) fetches %+v, want [%d,+256)", tc.sector, tc.sectors, p.Fetches, tc.want)
			continue
		}
		c.FillDone(p.Fetches[0].ID)
		if !c.Cached(tc.want) || !c.Cached(tc.want+255) || c.Cached(tc.want+256) {
			t.Errorf("after fill of [%d,+256): wrong segment cached", tc.want)
		}
		if c.Segment(tc.sector) != tc.want/256 {
			t.Errorf("Segment(%d) = %d", tc.sector, c.Segment(tc.sector))
		}
	}
}

func TestFetchClampedAtDeviceEnd(t *testing.T) {
	c, err := New(Config{Segments: 4, SegmentSectors: 16, CapacitySectors: 40})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Read(33, 2)
	if len(p.Fetches) != 1 || p.Fetches[0].Sector != 32 || p.Fetches[0].Sectors != 8 {
		t.Fatalf("fetch %+v, want [32,40)", p.Fetches)
	}
	// A request past the recorded capacity still gets its own sectors.
	p = c.Read(50, 4)
	if len(p.Fetches) != 1 || p.Fetches[0].Sector != 48 || p.Fetches[0].Sectors != 6 {
		t.Fatalf("fetch %+v, want [48,54)", p.Fetches)
	}
}

func TestSplitAcrossSegmentBoundary(t *testing.T) {
	c := small(t, 4)
	// Both segments missing: two fetches, one per segment.
	p := c.Read(14, 4) // sectors 14..17: 2 in seg 0, 2 in seg 1
	if p.Parts != 2 || p.MissParts != 2 || len(p.Fetches) != 2 {
		t.Fatalf("plan %+v", *p)
	}
	if p.Fetches[0].Sector != 0 || p.Fetches[1].Sector != 16 {
		t.Fatalf("fetches %+v", p.Fetches)
	}
	if p.ServedSectors != 32 {
		t.Fatalf("served %d, want 32", p.ServedSectors)
	}
	for _, f := range slices.Clone(p.Fetches) {
		c.FillDone(f.ID)
	}
	// Seg 0 and 1 valid now; a read over seg 1..2 is one hit part and one
	// miss part.
	p = c.Read(30, 4) // 30,31 in seg 1; 32,33 in seg 2
	if p.Parts != 2 || p.HitParts != 1 || p.HitSectors != 2 || p.MissParts != 1 {
		t.Fatalf("plan %+v", *p)
	}
	if len(p.Fetches) != 1 || p.Fetches[0].Sector != 32 {
		t.Fatalf("fetches %+v", p.Fetches)
	}
	if p.ServedSectors != 2+16 {
		t.Fatalf("served %d, want 18", p.ServedSectors)
	}
	// A large read over four segments, one of them being filled.
	p = c.Read(0, 64)
	if p.Parts != 4 || p.HitParts != 2 || p.WaitParts != 1 || p.MissParts != 1 {
		t.Fatalf("plan %+v", *p)
	}
	if p.HitSectors != 32 || p.ServedSectors != 32+16+16 {
		t.Fatalf("hit %d served %d", p.HitSectors, p.ServedSectors)
	}
	mustCheck(t, c)
}

func TestWaitOnInFlightFill(t *testing.T) {
	c := small(t, 4)
	p := c.Read(0, 1)
	id := p.Fetches[0].ID
	p = c.Read(5, 3)
	if p.Bypass || p.WaitParts != 1 || len(p.Waits) != 1 || p.Waits[0] != id || len(p.Fetches) != 0 {
		t.Fatalf("second read should wait for fill %d: %+v", id, *p)
	}
	if p.ServedSectors != 3 || p.HitSectors != 0 {
		t.Fatalf("wait part served %d hit %d", p.ServedSectors, p.HitSectors)
	}
	if c.Busy() != 1 {
		t.Fatalf("Busy = %d", c.Busy())
	}
	c.FillDone(id)
	c.FillDone(id) // duplicate: ignored
	if c.Busy() != 0 {
		t.Fatalf("Busy = %d after FillDone", c.Busy())
	}
	p = c.Read(5, 3)
	if p.HitParts != 1 {
		t.Fatalf("after fill, read should hit: %+v", *p)
	}
	if st := c.Stats(); st.WaitParts != 1 || st.MissParts != 1 || st.HitParts != 1 {
		t.Fatalf("stats %+v", st)
	}
	mustCheck(t, c)
}

func TestLRUEvictionOrder(t *testing.T) {
	c := small(t, 4)
	fill(t, c, 0, 1, 2, 3)
	if got := c.lruOrder(); !slices.Equal(got, []uint64{3, 2, 1, 0}) {
		t.Fatalf("LRU order %v", got)
	}
	// Touch 0 (hit) and 2 (hit): order 2,0,3,1.
	c.Read(0, 1)
	c.Read(2*16+5, 1)
	if got := c.lruOrder(); !slices.Equal(got, []uint64{2, 0, 3, 1}) {
		t.Fatalf("LRU order %v", got)
	}
	// A miss evicts the least recently used: 1, then 3.
	fill(t, c, 7)
	if c.Cached(16) || !c.Cached(0) || !c.Cached(7*16) {
		t.Fatal("segment 1 should have been evicted")
	}
	fill(t, c, 8)
	if c.Cached(3 * 16) {
		t.Fatal("segment 3 should have been evicted")
	}
	if got := c.lruOrder(); !slices.Equal(got, []uint64{8, 7, 2, 0}) {
		t.Fatalf("LRU order %v", got)
	}
	if st := c.Stats(); st.Evictions != 2 {
		t.Fatalf("evictions %d", st.Evictions)
	}
	// Freed (invalidated) slots are reused before any valid segment.
	c.Write(7*16, 1)
	fill(t, c, 9)
	if got := c.lruOrder(); !slices.Equal(got, []uint64{9, 8, 2, 0}) {
		t.Fatalf("LRU order %v", got)
	}
	if st := c.Stats(); st.Evictions != 2 {
		t.Fatalf("evictions %d, the free slot should have been used", st.Evictions)
	}
	mustCheck(t, c)
}

func TestFillsAreNotEvicted(t *testing.T) {
	c := small(t, 2)
	fill(t, c, 0)
	p := c.Read(16, 1) // seg 1 filling
	id1 := p.Fetches[0].ID
	// Seg 5 misses: the only evictable slot is seg 0's, not the filling one.
	p = c.Read(5*16, 1)
	if p.Bypass || len(p.Fetches) != 1 {
		t.Fatalf("plan %+v", *p)
	}
	if c.Cached(0) {
		t.Fatal("seg 0 should have been evicted")
	}
	if p.Fetches[0].ID == id1 {
		t.Fatal("a filling slot was reused")
	}
	mustCheck(t, c)
}

func TestBypassWhenAllSegmentsBusy(t *testing.T) {
	c := small(t, 2)
	a := c.Read(0, 1).Fetches[0].ID
	b := c.Read(16, 1).Fetches[0].ID
	p := c.Read(32, 4)
	if !p.Bypass || len(p.Fetches) != 0 || len(p.Waits) != 0 || p.ServedSectors != 4 {
		t.Fatalf("expected bypass, got %+v", *p)
	}
	// A read of a segment being filled still waits: it needs no new slot.
	p = c.Read(3, 1)
	if p.Bypass || len(p.Waits) != 1 || p.Waits[0] != a {
		t.Fatalf("expected wait on %d, got %+v", a, *p)
	}
	// Mixed: one wait part and one miss part with no free slot → bypass.
	p = c.Read(14, 4) // seg 0 and seg 1, both filling
	if p.Bypass || p.WaitParts != 2 {
		t.Fatalf("both parts are in flight, expected waits: %+v", *p)
	}
	p = c.Read(14, 20) // seg 0 (filling), seg 1 (filling), seg 2 (miss)
	if !p.Bypass {
		t.Fatalf("expected bypass, got %+v", *p)
	}
	c.FillDone(a)
	c.FillDone(b)
	if !c.Cached(0) || !c.Cached(16) {
		t.Fatal("bypass must not disturb the fills")
	}
	// One valid segment (hit) plus one filling, request needs one new slot:
	// the only evictable slot is the hit segment itself → bypass, and the
	// hit segment survives.
	c2 := small(t, 2)
	fill(t, c2, 0)
	c2.Read(16, 1)      // seg 1 filling
	p = c2.Read(10, 30) // seg 0 hit, seg 1 wait, seg 2 miss
	if !p.Bypass {
		t.Fatalf("expected bypass, got %+v", *p)
	}
	if !c2.Cached(0) {
		t.Fatal("bypass evicted a segment")
	}
	if st := c.Stats(); st.Bypasses != 2 {
		t.Fatalf("bypasses %d", st.Bypasses)
	}
	mustCheck(t, c)
	mustCheck(t, c2)
}

func TestWriteInvalidation(t *testing.T) {
	c := small(t, 4)
	fill(t, c, 0, 1, 2)
	if n := c.Write(15, 2); n != 2 { // touches seg 0 and 1
		t.Fatalf("invalidated %d, want 2", n)
	}
	if c.Cached(0) || c.Cached(16) || !c.Cached(32) {
		t.Fatal("segments 0 and 1 should be invalid, 2 valid")
	}
	p := c.Read(3, 1)
	if p.MissParts != 1 {
		t.Fatalf("read after write should miss: %+v", *p)
	}
	c.FillDone(p.Fetches[0].ID)
	if n := c.Write(100*16, 8); n != 0 {
		t.Fatalf("write to uncached segment invalidated %d", n)
	}
	if n := c.Write(0, 0); n != 0 {
		t.Fatal("empty write invalidated something")
	}
	if st := c.Stats(); st.Invalidations != 2 || st.Writes != 2 {
		t.Fatalf("stats %+v", st)
	}
	mustCheck(t, c)
}

func TestWriteDuringFill(t *testing.T) {
	c := small(t, 4)
	p := c.Read(0, 1)
	old := p.Fetches[0].ID
	p = c.Read(2, 1) // waits for old
	if len(p.Waits) != 1 || p.Waits[0] != old {
		t.Fatalf("plan %+v", *p)
	}
	if n := c.Write(4, 1); n != 1 {
		t.Fatalf("invalidated %d, want 1 (the stale fill)", n)
	}
	// A read after the write must not be served by the stale fill: it
	// misses and fetches the segment again into another slot.
	p = c.Read(6, 1)
	if p.MissParts != 1 || len(p.Waits) != 0 || p.Fetches[0].ID == old {
		t.Fatalf("read after write should start a new fill: %+v", *p)
	}
	fresh := p.Fetches[0].ID
	if c.Busy() != 2 {
		t.Fatalf("Busy = %d, want 2 (stale and fresh fill)", c.Busy())
	}
	c.FillDone(old)
	if c.Cached(0) {
		t.Fatal("stale fill became valid")
	}
	if c.Busy() != 1 {
		t.Fatalf("stale slot not freed: Busy = %d", c.Busy())
	}
	c.FillDone(fresh)
	if !c.Cached(0) {
		t.Fatal("fresh fill should be valid")
	}
	if st := c.Stats(); st.StaleFills != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Stale fill with no later read: FillDone frees the slot, nothing valid.
	p = c.Read(16, 1)
	id := p.Fetches[0].ID
	c.Write(16, 16)
	c.FillDone(id)
	if c.Cached(16) {
		t.Fatal("stale fill became valid")
	}
	mustCheck(t, c)
}

func TestZeroLengthAndReset(t *testing.T) {
	c := small(t, 2)
	p := c.Read(5, 0)
	if p.Bypass || p.Parts != 0 || len(p.Fetches) != 0 {
		t.Fatalf("plan %+v", *p)
	}
	fill(t, c, 0, 1)
	c.Read(40, 1)
	c.Reset()
	if c.Cached(0) || c.Busy() != 0 || c.Stats() != (Stats{}) {
		t.Fatal("Reset left state behind")
	}
	mustCheck(t, c)
	fill(t, c, 3)
	if !c.Cached(48) {
		t.Fatal("cache unusable after Reset")
	}
}

func TestBlocks(t *testing.T) {
	for _, tc := range []struct{ sectors, want uint32 }{{0, 0}, {1, 1}, {8, 1}, {9, 2}, {256, 32}} {
		if got := Blocks(tc.sectors); got != tc.want {
			t.Errorf("Blocks(%d) = %d, want %d", tc.sectors, got, tc.want)
		}
	}
}

// TestRandomInvariants drives the cache with random reads, writes and fill
// completions and checks the internal invariants after every step.
func TestRandomInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := small(t, 8)
	var inflight []FillID
	for i := range 20000 {
		switch op := r.IntN(10); {
		case op < 5:
			p := c.Read(uint64(r.IntN(400)), uint32(1+r.IntN(40)))
			for _, f := range p.Fetches {
				inflight = append(inflight, f.ID)
			}
			for _, w := range p.Waits {
				if !slices.Contains(inflight, w) {
					t.Fatalf("step %d: wait on fill %d not in flight", i, w)
				}
			}
		case op < 7:
			c.Write(uint64(r.IntN(400)), uint32(1+r.IntN(40)))
		default:
			if len(inflight) > 0 {
				j := r.IntN(len(inflight))
				c.FillDone(inflight[j])
				inflight = slices.Delete(inflight, j, j+1)
			}
		}
		if err := c.check(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if c.Busy() != len(inflight) {
			t.Fatalf("step %d: Busy %d, in flight %d", i, c.Busy(), len(inflight))
		}
	}
	st := c.Stats()
	if st.Bypasses == 0 || st.HitParts == 0 || st.WaitParts == 0 || st.StaleFills == 0 || st.Evictions == 0 {
		t.Fatalf("random run did not exercise every path: %+v", st)
	}
}

func TestReadDoesNotAllocate(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	// Warm up so the index map and scratch buffers reach their size.
	for range 100000 {
		p := c.Read(uint64(r.IntN(1<<22)), 8)
		for _, f := range p.Fetches {
			c.FillDone(f.ID)
		}
	}
	allocs := testing.AllocsPerRun(10000, func() {
		p := c.Read(uint64(r.IntN(1<<22)), uint32(8+r.IntN(600)))
		for _, f := range p.Fetches {
			c.FillDone(f.ID)
		}
		c.Write(uint64(r.IntN(1<<22)), 8)
	})
	if allocs > 0.01 {
		t.Fatalf("%.3f allocations per Read/FillDone/Write", allocs)
	}
}

func BenchmarkRead(b *testing.B) {
	c, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	b.ReportAllocs()
	for b.Loop() {
		p := c.Read(uint64(r.IntN(1<<20)), 8)
		for _, f := range p.Fetches {
			c.FillDone(f.ID)
		}
	}
}

// PromoteAfter (dm-cache's smq): misses go to the disk unchanged; a
// segment missed again within a pass is not hot; missed again after
// PromoteGapReads other reads, it is copied in the background; reads of it
// during the copy wait for it, then hit.
func TestPromoteAfter(t *testing.T) {
	c, err := New(Config{Segments: 2, SegmentSectors: 128, PromoteAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []uint64{0, 8} {
		if p := c.Read(sec, 8); !p.Bypass || len(p.Fetches) != 0 || p.ServedSectors != 8 {
			t.Fatalf("miss at %d within a pass: %+v, want a bypass without a fetch", sec, *p)
		}
	}
	for i := range DefaultPromoteGapReads {
		c.Read(uint64(1000+i)*128, 8) // other segments, once each
	}
	p := c.Read(16, 8)
	if !p.Bypass || len(p.Fetches) != 1 || p.Fetches[0].Sector != 0 || p.Fetches[0].Sectors != 128 {
		t.Fatalf("a miss after %d other reads: %+v, want a bypass and a fetch of segment 0", DefaultPromoteGapReads, *p)
	}
	id := p.Fetches[0].ID
	if p = c.Read(24, 8); p.Bypass || len(p.Waits) != 1 {
		t.Fatalf("read during the fill: %+v, want it to wait for the fill", *p)
	}
	c.FillDone(id)
	if p = c.Read(32, 8); p.Bypass || p.HitParts != 1 {
		t.Fatalf("after the fill: %+v, want a hit", *p)
	}
	if _, err := New(Config{PromoteAfter: 256}); err == nil {
		t.Error("PromoteAfter 256 accepted")
	}
}

// HotspotSegments: misses count per hotspot, so a segment of a hotspot
// that missed before is copied in at its own first miss; a pass through
// the hotspot counts once.
func TestHotspotSegments(t *testing.T) {
	c, err := New(Config{Segments: 16, SegmentSectors: 128, PromoteAfter: 2, HotspotSegments: 4})
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint64(4) { // one pass through hotspot 0
		if p := c.Read(k*128, 8); len(p.Fetches) != 0 {
			t.Fatalf("pass through hotspot 0, segment %d: %+v, want no fetch", k, *p)
		}
	}
	for i := range DefaultPromoteGapReads {
		c.Read(uint64(1000+i)*512, 8) // other hotspots, once each
	}
	p := c.Read(2*128, 8)
	if len(p.Fetches) != 1 || p.Fetches[0].Sector != 2*128 {
		t.Fatalf("segment 2 after its hotspot missed %d reads before: %+v, want a fetch of segment 2", DefaultPromoteGapReads, *p)
	}
	if p = c.Read(3*128, 8); len(p.Fetches) != 1 || p.Fetches[0].Sector != 3*128 {
		t.Fatalf("segment 3 of the hot hotspot: %+v, want a fetch at once", *p)
	}
	if _, err := New(Config{HotspotSegments: -1}); err == nil {
		t.Error("HotspotSegments -1 accepted")
	}
}

// FillOnly: a full cache copies nothing in; a slot freed by a write is
// filled again. Without FillOnly the least recently used segment goes.
func TestFillOnly(t *testing.T) {
	for _, fillOnly := range []bool{true, false} {
		c, err := New(Config{Segments: 2, SegmentSectors: 128, PromoteAfter: 1, FillOnly: fillOnly})
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []uint64{0, 128} {
			p := c.Read(sec, 8)
			if len(p.Fetches) != 1 {
				t.Fatalf("FillOnly %v: first miss at %d with free slots: %+v, want a fetch", fillOnly, sec, *p)
			}
			c.FillDone(p.Fetches[0].ID)
		}
		p := c.Read(256, 8)
		if got := len(p.Fetches); fillOnly && got != 0 || !fillOnly && got != 1 {
			t.Fatalf("FillOnly %v: a miss in a full cache fetched %d segments", fillOnly, got)
		}
		if !fillOnly {
			continue
		}
		c.Write(0, 8) // frees segment 0's slot
		if p = c.Read(512, 8); len(p.Fetches) != 1 {
			t.Fatalf("a miss after a write freed a slot: %+v, want a fetch", *p)
		}
		if p = c.Read(128, 8); p.HitParts != 1 {
			t.Fatalf("segment 1 after the refill: %+v, want a hit (it was never replaced)", *p)
		}
	}
}

// PromoteGapQuiet: a segment missed every 10 reads never counts twice
// when the gap runs from its last miss; from its last counted miss it
// does, after PromoteGapReads reads.
func TestPromoteGapQuiet(t *testing.T) {
	for _, quiet := range []bool{true, false} {
		c, err := New(Config{Segments: 4, SegmentSectors: 128, PromoteAfter: 2, PromoteGapReads: 64, PromoteGapQuiet: quiet})
		if err != nil {
			t.Fatal(err)
		}
		fetched := -1
		for i := 0; i < 200 && fetched < 0; i++ {
			if i%10 == 0 {
				if p := c.Read(0, 8); len(p.Fetches) > 0 {
					fetched = i
				}
				continue
			}
			c.Read(uint64(1000+i)*128, 8)
		}
		if quiet && fetched >= 0 {
			t.Errorf("quiet gap: segment 0, missed every 10 reads, was copied at read %d", fetched)
		}
		if !quiet && (fetched < 64 || fetched > 80) {
			t.Errorf("counted gap: segment 0 copied at read %d, want at the first miss 64 reads after the first (70)", fetched)
		}
	}
}

// PromoteGapNs: the gap between counted misses is time on the caller's
// clock (SetNow), not reads: a second miss 0.4 s after the first is not
// counted however many reads came between, one 0.6 s after it is; a
// clock that went back counts nothing.
func TestPromoteGapNs(t *testing.T) {
	c, err := New(Config{Segments: 4, SegmentSectors: 128, PromoteAfter: 2, PromoteGapNs: 500e6})
	if err != nil {
		t.Fatal(err)
	}
	read := func(now int64, sector uint64) *Plan {
		c.SetNow(now)
		return c.Read(sector, 8)
	}
	read(1e9, 0)          // first counted miss of segment 0
	for i := range 2000 { // fewer segments than the miss counts are kept for (4,096)
		read(1e9+int64(i), uint64(1000+i)*128) // many reads, little time
	}
	if p := read(1.4e9, 8); len(p.Fetches) != 0 {
		t.Fatalf("a miss 0.4 s after the first: %+v, want no fetch (gap 0.5 s)", *p)
	}
	if p := read(0.5e9, 8); len(p.Fetches) != 0 {
		t.Fatalf("a miss at a clock that went back: %+v, want no fetch", *p)
	}
	p := read(1.6e9, 16)
	if len(p.Fetches) != 1 || p.Fetches[0].Sector != 0 {
		t.Fatalf("a miss 0.6 s after the first: %+v, want a fetch of segment 0", *p)
	}
	if err := (Config{PromoteGapNs: -1}).Validate(); err == nil {
		t.Error("PromoteGapNs −1 accepted")
	}
}
