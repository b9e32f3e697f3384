package model

import (
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// testCache: 4 segments of 1024 sectors, read-ahead 256 sequential / 64
// non-sequential, placed in the middle.
func testCache() diskCache {
	return newDiskCache(CacheConfig{
		SizeBytes: 4 * 1024 * 512, Segments: 4,
		ReadAheadMaxSectors: 256, ReadAheadMinSectors: 64, ReadBehindPct: 50,
	}, 1<<30)
}

type step struct {
	s, e uint64
	hit  bool
}

func runSteps(t *testing.T, c *diskCache, steps []step) {
	t.Helper()
	for i, st := range steps {
		if got := c.read(st.s, st.e); got != st.hit {
			t.Fatalf("step %d: read [%d, %d) hit = %v, want %v (segments %+v)", i, st.s, st.e, got, st.hit, c.segs)
		}
	}
}

func TestCacheReadAheadMiddleThenForward(t *testing.T) {
	c := testCache()
	runSteps(t, &c, []step{
		{1000, 1008, false}, // first miss: 64 sectors around it → [968, 1040)
		{1008, 1016, true},  // sequential, inside the read-ahead
		{968, 1000, true},   // behind the request: cached too
		{960, 968, false},   // touches the bottom: backward miss, 256 behind → [704, 1040)
		{704, 712, true},
		{1032, 1048, false}, // runs past the top: forward miss, 256 ahead → [704, 1304)
		{1200, 1300, true},
		{1304, 1305, false}, // touches the top: forward → [704, 1561)
	})
	if i := c.holding(704, 1561); i < 0 {
		t.Fatalf("segment is not [704, 1561): %+v", c.segs)
	}
	c.read(1561, 1700) // forward → [704, 1956), longer than 1024: keeps the newest → [932, 1956)
	g := c.segs[c.holding(1561, 1700)]
	if g.lo != 932 || g.hi != 1956 {
		t.Fatalf("after trimming: [%d, %d), want [932, 1956)", g.lo, g.hi)
	}
}

func TestCacheSegmentCapacity(t *testing.T) {
	c := testCache()
	// A sequential stream of 64-sector reads: the first miss reads 32
	// ahead, so the second misses too; from then on every miss reads 256
	// sectors ahead = 4 hits, 1 miss. 1000 reads → 2 + 199 misses, 799 hits.
	hits := 0
	for s := uint64(0); s < 64*1000; s += 64 {
		if c.read(s, s+64) {
			hits++
		}
		for _, g := range c.segs {
			if g.use != 0 && g.hi-g.lo > c.segSectors {
				t.Fatalf("segment %+v exceeds %d sectors", g, c.segSectors)
			}
		}
	}
	if hits != 799 {
		t.Fatalf("sequential stream: %d hits of 1000, want 799", hits)
	}
	// A request longer than a segment keeps its end cached.
	c = testCache()
	c.read(100000, 102000)
	if !c.read(101500, 102000) || c.read(100000, 100100) {
		t.Fatalf("long request: %+v", c.segs)
	}
}

func TestCacheReadAheadNeverDropsRequest(t *testing.T) {
	// Read-ahead larger than a segment must not push the request out.
	c := newDiskCache(CacheConfig{SizeBytes: 4 * 128 * 512, Segments: 4, ReadAheadMaxSectors: 1024, ReadAheadMinSectors: 1024, ReadBehindPct: 0}, 1<<30)
	c.read(5000, 5008)
	if !c.read(5000, 5008) {
		t.Fatalf("request not cached after its own miss: %+v", c.segs)
	}
	if !c.read(5008, 5128) { // 120 sectors of read-ahead fit in the 128-sector segment
		t.Fatalf("read-ahead not cached: %+v", c.segs)
	}
}

func TestCacheLRU(t *testing.T) {
	c := testCache()
	regions := []uint64{1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20}
	for _, r := range regions[:4] { // fill the 4 segments
		if c.read(r, r+8) {
			t.Fatalf("cold read of %d hit", r)
		}
	}
	if !c.read(regions[0], regions[0]+8) { // touch region 0: most recent
		t.Fatal("region 0 evicted early")
	}
	c.read(regions[4], regions[4]+8) // evicts the LRU: region 1
	runSteps(t, &c, []step{
		{regions[0], regions[0] + 8, true},
		{regions[2], regions[2] + 8, true},
		{regions[3], regions[3] + 8, true},
		{regions[4], regions[4] + 8, true},
		{regions[1], regions[1] + 8, false}, // evicted; reloaded over the LRU one, region 0
		{regions[0], regions[0] + 8, false},
	})
}

func TestCacheReadBehindPct(t *testing.T) {
	fwd := newDiskCache(CacheConfig{SizeBytes: 4 * 1024 * 512, Segments: 4, ReadAheadMaxSectors: 256, ReadAheadMinSectors: 64, ReadBehindPct: 0}, 1<<30)
	runSteps(t, &fwd, []step{
		{1000, 1008, false},
		{1008, 1072, true}, // all 64 sectors ahead
		{992, 1000, false}, // nothing behind
	})
}

func TestCacheEndOfDevice(t *testing.T) {
	c := newDiskCache(CacheConfig{SizeBytes: 4 * 1024 * 512, Segments: 4, ReadAheadMaxSectors: 256, ReadAheadMinSectors: 64, ReadBehindPct: 50}, 1010)
	c.read(1000, 1008)
	if g := c.segs[c.holding(1000, 1008)]; g.hi != 1010 {
		t.Fatalf("read-ahead ran past the device end: %+v", g)
	}
	c.read(2000, 2008) // past the (misconfigured) capacity: the request itself is still cached
	if c.holding(2000, 2008) < 0 {
		t.Fatal("request beyond the capacity not cached")
	}
}

func TestCacheObserveSync(t *testing.T) {
	c := testCache()
	c.observe(1000, 1008, true) // measured hit the model never saw: cached now
	if c.holding(1000, 1008) < 0 {
		t.Fatal("measured hit not cached")
	}
	c.observe(1000, 1008, false) // measured miss of a cached range: dropped, re-read
	if !c.read(1008, 1016) {
		t.Fatalf("read-ahead after the measured miss missing: %+v", c.segs)
	}
}

func TestDiskCacheThroughDisk(t *testing.T) {
	m := Default(HDD, 4*gib)
	m.Learn(trace.Read, 8, 1<<20, 9_000_000) // read-miss, far
	m.Learn(trace.Read, 8, 0, 200_000)       // read-hit, distance 0
	d := m.NewDisk(1)
	// First read: a miss at distance 5000 from sector 0 (column 10, cold:
	// the nearest column with data, 18, answers).
	if got := d.Service(trace.Read, 5000, 8); d.LastHit() || got != 9_000_000 {
		t.Fatalf("first read: %d hit %v", got, d.LastHit())
	}
	// Sequential next: a hit, distance 0.
	if got := d.Service(trace.Read, 5008, 8); !d.LastHit() || got != 200_000 {
		t.Fatalf("sequential read: %d hit %v", got, d.LastHit())
	}
	if d.Position() != 5016 {
		t.Fatalf("position %d", d.Position())
	}
	// A write in between: immediate reporting; the read cache keeps its data.
	d.Service(trace.Write, 9<<20, 8)
	if d.Service(trace.Read, 5016, 8); !d.LastHit() {
		t.Fatal("write evicted the read segment")
	}
	// Flushes do not move the head.
	d.Service(trace.Flush, 0, 0)
	if d.Position() != 5024 {
		t.Fatalf("flush moved the position to %d", d.Position())
	}
	// SSDs have no cache model.
	s := Default(SSD, 4*gib).NewDisk(1)
	s.Service(trace.Read, 5000, 8)
	if s.Service(trace.Read, 5008, 8); s.LastHit() {
		t.Fatal("SSD read hit a disk cache")
	}
}

func TestCacheConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c     CacheConfig
		field string
	}{
		{CacheConfig{SizeBytes: -1}, "cache.sizeBytes"},
		{CacheConfig{SizeBytes: 1 << 20, Segments: 0}, "cache.segments"},
		{CacheConfig{SizeBytes: 100, Segments: 1}, "cache.sizeBytes"},
		{CacheConfig{SizeBytes: 1 << 20, Segments: 4, ReadAheadMaxSectors: 8, ReadAheadMinSectors: 16}, "cache.readAheadMinSectors"},
		{CacheConfig{SizeBytes: 1 << 20, Segments: 4, ReadBehindPct: 101}, "cache.readBehindPct"},
	} {
		err := tc.c.validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: error %v, want one naming %s", tc.c, err, tc.field)
		}
	}
	if err := (CacheConfig{}).validate(); err != nil || (CacheConfig{}).Enabled() {
		t.Errorf("zero config (disabled): %v", err)
	}
	if err := DefaultCacheConfig().validate(); err != nil {
		t.Error(err)
	}
}
