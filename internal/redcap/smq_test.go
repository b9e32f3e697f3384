package redcap

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestMLQRedistribute: after a redistribute every level holds its target
// (the top eight levels 16 entries, two each, the rest evenly below, the
// lower levels taking the remainder; with fewer than 16 entries they fill
// the top eight levels from the bottom, two each), none lost.
func TestMLQRedistribute(t *testing.T) {
	for _, n := range []int{0, 5, 16, 100, 1000} {
		q := newMLQ(1000, 8, 16)
		for e := range int32(n) {
			q.push(e)
		}
		q.redistribute()
		total := 0
		for l := range smqLevels {
			want := q.target[l]
			if n < 16 && l >= smqLevels-8 {
				want = min(2, max(n-2*(l-(smqLevels-8)), 0))
			}
			if q.count[l] != want {
				t.Fatalf("%d entries: level %d holds %d, want %d", n, l, q.count[l], want)
			}
			total += q.count[l]
		}
		top := 0
		for l := smqLevels - 8; l < smqLevels; l++ {
			top += q.count[l]
		}
		if total != n || top != min(n, 16) {
			t.Errorf("%d entries: %d queued, %d in the top eight levels; want %d and %d", n, total, top, n, min(n, 16))
		}
	}
}

// TestMLQRequeue: an entry raised takes the tail of its new level and the
// oldest entry there takes its old level, so the counts stay; raised past
// the top it stops there.
func TestMLQRequeue(t *testing.T) {
	q := newMLQ(8, 0, 0)
	for e, l := range []uint8{0, 0, 4, 4, 63} {
		q.level[e] = l
		q.push(int32(e))
	}
	q.requeue(0, 4)
	if q.level[0] != 4 || q.level[2] != 0 || q.count[0] != 2 || q.count[4] != 2 || q.tail[4] != 0 {
		t.Errorf("after raising entry 0 by 4: levels %v, counts %d at 0 and %d at 4, tail of 4 is %d; want 0 at 4 (tail), 2 at 0",
			q.level[:5], q.count[0], q.count[4], q.tail[4])
	}
	q.requeue(3, 200)
	if q.level[3] != 63 || q.level[4] != 4 {
		t.Errorf("raised past the top: entry 3 at %d, entry 4 (the top's oldest) at %d; want 63 and 4", q.level[3], q.level[4])
	}
	if q.peek(64) != 1 || q.peek(0) != none {
		t.Errorf("peek: %d and %d, want entry 1 (the oldest of level 0) and none", q.peek(64), q.peek(0))
	}
}

// TestSMQPromoteLevel: a tick sets the promote level from the share of
// the period's misses whose hotspot stood in the top quarter
// (update_promote_levels, stats_assess), and at the period's end the
// level jump (update_level_jump).
func TestSMQPromoteLevel(t *testing.T) {
	for _, tc := range []struct {
		hits, misses uint32
		level        int
		jump         uint8
	}{
		{0, 0, 48, 4},
		{1, 99, 48, 4},   // 1 %
		{6, 94, 48, 4},   // 6 %: under 1/16
		{7, 93, 32, 2},   // 7 %
		{12, 88, 32, 2},  // 12 %: under 1/8
		{13, 87, 0, 1},   // 13 %
		{100, 0, 0, 1},   // all
		{50, 50, 0, 1},   // half
		{1, 15, 32, 2},   // 1/16 exactly: fair
		{1, 7, 0, 1},     // 1/8 exactly: well
		{0, 1000, 48, 4}, // none
	} {
		s := newSMQ(1024, 8)
		s.started, s.nextHotPeriod = true, 0
		s.hits, s.misses = tc.hits, tc.misses
		s.onTick(1)
		if s.promote != tc.level || s.jump != tc.jump {
			t.Errorf("%d of %d misses in the top quarter: promote level %d, jump %d; want %d, %d",
				tc.hits, tc.hits+tc.misses, s.promote, s.jump, tc.level, tc.jump)
		}
	}
}

// backward returns the reads of GNU tac over a file of fileKiB: 8 KiB
// at a time from its end, one at a time, each completing after
// serviceNs (completion unknown when serviceNs is 0).
func backward(fileKiB int, serviceNs int64) []trace.Request {
	var reqs []trace.Request
	var now int64
	for s := int64(fileKiB*2 - 16); s >= 0; s -= 16 {
		r := trace.Request{Arrival: now, Complete: trace.Unknown, Sector: uint64(s), Sectors: 16, Op: trace.Read}
		if serviceNs > 0 {
			r.Complete = now + serviceNs
		}
		reqs = append(reqs, r)
		now += serviceNs + 20_000
	}
	return reqs
}

// replay reads reqs through c, each copy done at once.
func replay(c *Cache, reqs []trace.Request) {
	for _, r := range reqs {
		c.SetTimes(r.Arrival, r.Complete)
		if r.Op == trace.Write {
			c.Write(r.Sector, r.Sectors)
			continue
		}
		for _, f := range c.Read(r.Sector, r.Sectors).Fetches {
			c.FillDone(f.ID)
		}
	}
}

// TestSMQFileReadBackward: a file read once, backward, 8 KiB at a time
// (GNU tac) behind a disk of 400 IOPS, through an empty cache of 64 KiB
// blocks on a 448 MiB origin (hotspots of 4 blocks). Each read completes
// before the next, so each is the policy's tick: a hotspot's misses
// raise it at every read, and once it reaches the promote level its
// blocks are copied in at their first miss and the file's next reads
// of them hit. In the VM lab smq copied in 188–286 of the file's 384
// blocks and 38–44 % of the reads hit (TestPaperWorkloadsCachedLV's
// writethrough runs); whatever the disk's pace, the cache must copy in
// most of the file and serve a third of its reads. Read once forward in
// 64 KiB reads, one per block, nothing is read again: no hits.
func TestSMQFileReadBackward(t *testing.T) {
	cfg := Config{Segments: 640, SegmentSectors: 128, CapacitySectors: 448 << 11, SMQ: true, HotspotSegments: 4}
	for _, serviceNs := range []int64{0, 100_000, 2_500_000, 20_000_000} {
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		reqs := backward(24<<10, serviceNs)
		replay(c, reqs)
		st := c.Stats()
		hitPct := 100 * float64(st.FullHits) / float64(st.Reads)
		t.Logf("service %.1f ms: %d blocks copied in, %.1f %% of %d reads hit", float64(serviceNs)/1e6, st.MissParts, hitPct, st.Reads)
		if st.MissParts < 192 || hitPct < 33 {
			t.Errorf("service %.1f ms: %d of 384 blocks copied in, %.1f %% of the reads hit; want at least half and a third",
				float64(serviceNs)/1e6, st.MissParts, hitPct)
		}
	}
	c, _ := New(cfg)
	var scan []trace.Request
	for s := range uint64(384) {
		scan = append(scan, trace.Request{Arrival: int64(s) * 1e6, Complete: int64(s)*1e6 + 5e5, Sector: s * 128, Sectors: 128, Op: trace.Read})
	}
	replay(c, scan)
	if st := c.Stats(); st.FullHits != 0 {
		t.Errorf("a file read once forward, a block a read: %d hits, want none", st.FullHits)
	}
}

// TestSMQFullCacheDemotesLowerHalf: a full cache copies in nothing new
// while every block it holds stands in the top half of its queue (each
// copied in at the top level); once a cache period has spread them over
// the levels (a minute), a miss that would copy in gives up the oldest
// block of the lower half, and the next such miss takes its place.
func TestSMQFullCacheDemotesLowerHalf(t *testing.T) {
	cfg := Config{Segments: 64, SegmentSectors: 128, SMQ: true, HotspotSegments: 1}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var now int64
	read := func(k uint64) {
		now += 1e6
		c.SetTimes(now, now+5e5)
		for _, f := range c.Read(k*128, 8).Fetches {
			c.FillDone(f.ID)
		}
	}
	for round := 0; c.free > 0 && round < 100; round++ {
		for k := range uint64(64) {
			read(k)
		}
	}
	if c.free != 0 {
		t.Fatalf("64 blocks read over and over: %d slots still free", c.free)
	}
	for round := 0; round < 20; round++ {
		for k := uint64(1000); k < 1008; k++ {
			read(k)
		}
	}
	if st := c.Stats(); st.Evictions != 0 {
		t.Fatalf("within the cache period: %d blocks given up, want none", st.Evictions)
	}
	now += smqCachePeriodNs
	for round := 0; round < 20; round++ {
		for k := uint64(1000); k < 1008; k++ {
			read(k)
		}
	}
	st := c.Stats()
	if st.Evictions == 0 || st.Evictions > 32 {
		t.Errorf("after a cache period: %d blocks given up, want some, at most the lower half (32)", st.Evictions)
	}
	held := 0
	for k := uint64(1000); k < 1008; k++ {
		if c.Cached(k * 128) {
			held++
		}
	}
	if held == 0 {
		t.Error("after a cache period none of the new hot blocks was copied in")
	}
}

// TestSMQWarmRoundTrip: Warm passes on the blocks with their levels and
// the hotspot queue with its levels; Load into a new cache gives the same
// Warm back.
func TestSMQWarmRoundTrip(t *testing.T) {
	cfg := Config{Segments: 640, SegmentSectors: 128, SMQ: true, HotspotSegments: 4}
	c, _ := New(cfg)
	replay(c, backward(8<<10, 2_500_000))
	w := c.Warm(1 << 20)
	if len(w.Segments) == 0 || len(w.Levels) != len(w.Segments) || len(w.HotSpots) == 0 || len(w.HotLevels) != len(w.HotSpots) {
		t.Fatalf("warm: %d blocks, %d levels, %d hotspots, %d levels", len(w.Segments), len(w.Levels), len(w.HotSpots), len(w.HotLevels))
	}
	d, _ := New(cfg)
	d.Load(w)
	if again := d.Warm(1 << 20); !reflect.DeepEqual(again, w) {
		t.Errorf("loaded and taken again: %d blocks, %d hotspots; want %d, %d as passed on", len(again.Segments), len(again.HotSpots), len(w.Segments), len(w.HotSpots))
	}
}

// TestSMQWritesKeepBlocks: under SMQ a write keeps the block it hits
// (writethrough writes both copies) and copies nothing in.
func TestSMQWritesKeepBlocks(t *testing.T) {
	c, _ := New(Config{Segments: 640, SegmentSectors: 128, SMQ: true, HotspotSegments: 4})
	replay(c, backward(1<<10, 2_500_000))
	var held []uint64
	for k := range uint64(16) {
		if c.Cached(k * 128) {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		t.Fatal("nothing copied in")
	}
	n := c.Stats().MissParts
	for _, k := range held {
		c.SetTimes(1e10, 1e10+1e6)
		if inv := c.Write(k*128, 8); inv != 0 || !c.Cached(k*128) {
			t.Errorf("write to held block %d: %d invalidated, still held %v", k, inv, c.Cached(k*128))
		}
	}
	for k := uint64(5000); k < 5100; k++ {
		c.SetTimes(int64(k)*1e7, int64(k)*1e7+1e6)
		c.Write(k*128, 8)
	}
	if c.Stats().MissParts != n {
		t.Error("writes copied blocks in")
	}
}

// TestSMQExcludesPromoteAfter: the two promotion rules are refused
// together.
func TestSMQExcludesPromoteAfter(t *testing.T) {
	err := Config{SMQ: true, PromoteAfter: 2}.Validate()
	if err == nil || !strings.Contains(err.Error(), "SMQ and PromoteAfter") {
		t.Errorf("SMQ with PromoteAfter 2: %v", err)
	}
}
