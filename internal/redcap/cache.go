// Package redcap models REDCAP, the RAM Enhanced Disk Cache (González-Férez,
// Piernas and Cortes, MSST 2007 §3; Computer Journal 2016 §4), and its
// activation–deactivation algorithm (ADA; Computer Journal 2016 §4.1), as
// state machines that shadowtune's virtual-time simulator drives.
//
// The package does no timing of its own. For every read the simulator calls
// [Cache.Read], which returns a [Plan]: which parts are served from RAM,
// which in-flight segment fills the request must wait for, and which
// whole-segment reads (the prefetch) the simulator must issue to the disk
// model. When such a fill completes in virtual time the simulator calls
// [Cache.FillDone]. Writes and discards go through [Cache.Write], which only
// invalidates; the write itself goes to the disk model unchanged. DESIGN §6.
//
// Units: sectors are 512 bytes ([trace.SectorSize]); a block is 4 KiB
// (8 sectors); times are nanoseconds.
package redcap

import (
	"fmt"
	"math"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Defaults from the Computer Journal 2016 evaluation (§7): 512 segments of
// 128 KiB, 64 MiB in all.
const (
	// DefaultSegments is the default number of cache segments N.
	DefaultSegments = 512
	// DefaultSegmentSectors is the default segment size S in 512-byte
	// sectors (256 sectors = 128 KiB = 32 blocks of 4 KiB).
	DefaultSegmentSectors = 256
	// DefaultCopyBytesPerSec is the default RAM copy bandwidth used to cost
	// serving a request from the cache: 5 GB/s (5e9 bytes/s), a
	// conservative single-core memcpy rate including cache misses. A 128 KiB
	// copy then costs about 26 µs.
	DefaultCopyBytesPerSec = 5e9
	// DefaultHitOverheadNs is the default fixed cost, in ns, of serving one
	// request (or request part) from the cache: look-up, bio split/clone and
	// completion in the block layer, about 1 µs.
	DefaultHitOverheadNs = 1000
)

// SectorsPerBlock is the number of 512-byte sectors in a 4 KiB block, the
// unit in which REDCAP and ADA count data (Computer Journal 2016 §4.1).
const SectorsPerBlock = 8

// Config sizes the cache and its RAM cost model. The zero value of a field
// selects its default.
type Config struct {
	// Segments is N, the number of cache segments (default 512).
	Segments int
	// SegmentSectors is S in 512-byte sectors (default 256 = 128 KiB). It
	// must be a whole number of 4 KiB blocks (a multiple of 8). The disk is
	// divided into aligned segments of this size: segment k covers sectors
	// [k·S, (k+1)·S). REDCAP 2007 §3.
	SegmentSectors uint32
	// CapacitySectors is the device size in 512-byte sectors; a prefetch of
	// the last, partial segment is clamped to it. 0 means unknown (no clamp).
	CapacitySectors uint64
	// CopyBytesPerSec is the RAM copy bandwidth in bytes/s used for
	// [Plan.CopyNs] (default [DefaultCopyBytesPerSec]).
	CopyBytesPerSec float64
	// HitOverheadNs is a fixed cost in ns per request that the cache
	// serves (default [DefaultHitOverheadNs]; set a negative value for 0).
	// For a dm-cache it is the cache device's measured read time.
	HitOverheadNs int64
	// HitServers bounds the reads the cache serves at once (the
	// simulator queues the rest FIFO): a RAM disk's read is CPU work, so
	// a dm-cache on brd or zram serves at most one read per CPU at a
	// time. 0: no bound (each read takes its copy time, in parallel).
	HitServers int
	// PromoteAfter selects how misses are handled. 0 (REDCAP, 2007 §3):
	// a miss fetches its whole segment and the read is served from it.
	// n ≥ 1 is a count-based stand-in for dm-cache's smq policy
	// (drivers/md/dm-cache-policy-smq.c; SMQ follows its own rules),
	// which promotes only blocks it has seen hot: a read that
	// misses goes to the disk as requested (Plan.Bypass), and a segment is
	// copied in by a background read of the whole segment (Plan.Fetches,
	// waited on by no read) at its n-th counted miss while not cached. A
	// miss counts only when at least PromoteGapReads reads (or
	// PromoteGapNs of time) came since the segment's (or hotspot's) last
	// counted miss: a segment read through once (sequentially or in
	// strides) is not hot, a segment read again
	// later is (smq raises a hotspot's level at most once a second, so it
	// counts hits over time, not within a pass). Miss counts are kept for
	// at most max(4 × Segments, 4096) segments at a time, then forgotten
	// all at once (as smq's levels age). At most 255.
	PromoteAfter int
	// PromoteGapReads is the reads that must come between two counted
	// misses under PromoteAfter (default [DefaultPromoteGapReads]).
	PromoteGapReads int
	// PromoteGapNs, when > 0, replaces PromoteGapReads with a time: the
	// ns that must pass between two counted misses, on the clock the
	// caller keeps with [Cache.SetNow] (the simulator gives each read's
	// recorded arrival: the workload's own clock, which does not depend
	// on how well the device is modelled).
	// smq raises a hotspot's level at most once per tick of its policy
	// (end_hotspot_period in dm-cache-policy-smq.c clears the hotspot
	// hit bits; dm-cache-target.c's waker ticks it every second), so its
	// promotions follow time, not a read count: a read count fitted at
	// one request rate is wrong at another.
	PromoteGapNs int64
	// PromoteGapQuiet measures PromoteGapReads from the segment's last
	// miss, counted or not, rather than from its last counted one: a
	// segment counts again only after that many reads without a miss, so
	// one missed more often never reaches PromoteAfter.
	PromoteGapQuiet bool
	// HotspotSegments, with PromoteAfter, counts misses per hotspot of
	// this many adjacent segments rather than per segment, as smq tracks
	// hotness in hotspot blocks of up to 16 cache blocks
	// (calc_hotspot_params in dm-cache-policy-smq.c): once a hotspot has
	// missed PromoteAfter times, a miss of any of its segments copies that
	// segment in. 0 and 1 count per segment.
	HotspotSegments int
	// FillOnly, with PromoteAfter, copies a segment in only into a slot
	// that holds nothing: a full cache replaces nothing. smq demotes only
	// entries in the lower half of its clean queue, whose levels it
	// redistributes once a minute (CACHE_UPDATE_PERIOD); in the VM lab a
	// full 64 MiB smq cache demoted nothing for 45 s after its hot set
	// moved, then half its blocks at once (docs/agent.md). Nothing here
	// frees slots over time; a caller that carries the cache from window
	// to window (Warm, Load) must, at that pace.
	FillOnly bool
	// SMQ stands for dm-cache's smq policy by its own rules (see smq):
	// a miss goes to the disk as requested (Plan.Bypass) and its block
	// is copied in by a background read when smq's hotspot queue ranks
	// the block's hotspot (HotspotSegments blocks) high enough; a full
	// cache gives up a block of its lower half for a later copy. Its
	// clock is the caller's (SetTimes): each request's arrival and
	// recorded completion, which time the policy's ticks. Writes keep the
	// blocks they hit (dm-cache's writethrough writes both copies). It
	// excludes PromoteAfter, whose gap and fill fields it ignores.
	SMQ bool
}

// withDefaults returns c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.Segments == 0 {
		c.Segments = DefaultSegments
	}
	if c.SegmentSectors == 0 {
		c.SegmentSectors = DefaultSegmentSectors
	}
	if c.CopyBytesPerSec == 0 {
		c.CopyBytesPerSec = DefaultCopyBytesPerSec
	}
	if c.PromoteGapReads == 0 {
		c.PromoteGapReads = DefaultPromoteGapReads
	}
	if c.HitOverheadNs == 0 {
		c.HitOverheadNs = DefaultHitOverheadNs
	} else if c.HitOverheadNs < 0 {
		c.HitOverheadNs = 0
	}
	return c
}

// Validate reports whether the configuration (after defaults) is usable.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Segments < 1:
		return fmt.Errorf("redcap: Segments must be ≥ 1, got %d", c.Segments)
	case c.Segments > math.MaxInt32:
		return fmt.Errorf("redcap: Segments must be ≤ %d, got %d", math.MaxInt32, c.Segments)
	case c.SegmentSectors%SectorsPerBlock != 0:
		return fmt.Errorf("redcap: SegmentSectors must be a multiple of %d (whole 4 KiB blocks), got %d",
			SectorsPerBlock, c.SegmentSectors)
	case math.IsNaN(c.CopyBytesPerSec) || math.IsInf(c.CopyBytesPerSec, 0) || c.CopyBytesPerSec < 0:
		return fmt.Errorf("redcap: CopyBytesPerSec must be a positive finite number, got %v", c.CopyBytesPerSec)
	case c.PromoteAfter < 0 || c.PromoteAfter > 255:
		return fmt.Errorf("redcap: PromoteAfter must be between 0 and 255, got %d", c.PromoteAfter)
	case c.HitServers < 0:
		return fmt.Errorf("redcap: HitServers must be ≥ 0, got %d", c.HitServers)
	case c.PromoteGapReads < 0:
		return fmt.Errorf("redcap: PromoteGapReads must be ≥ 0, got %d", c.PromoteGapReads)
	case c.PromoteGapNs < 0:
		return fmt.Errorf("redcap: PromoteGapNs must be ≥ 0, got %d", c.PromoteGapNs)
	case c.SMQ && c.PromoteAfter > 0:
		return fmt.Errorf("redcap: SMQ and PromoteAfter %d both set: choose one promotion rule", c.PromoteAfter)
	case c.HotspotSegments < 0:
		return fmt.Errorf("redcap: HotspotSegments must be ≥ 0, got %d", c.HotspotSegments)
	}
	return nil
}

// SizeBytes returns the cache capacity C = N × S in bytes.
func (c Config) SizeBytes() uint64 {
	c = c.withDefaults()
	return uint64(c.Segments) * uint64(c.SegmentSectors) * trace.SectorSize
}

// FillID identifies one in-flight segment fill (a whole-segment prefetch
// read). It is valid from the [Cache.Read] that returned it in
// [Plan.Fetches] until the matching [Cache.FillDone]; after that the same
// value may identify a later fill.
type FillID int32

// Fetch is one whole-segment read that the simulator must issue to the disk
// model (the REDCAP prefetch; REDCAP 2007 §3). It is a plain read of
// Sectors sectors at Sector; the segment becomes valid at FillDone(ID).
type Fetch struct {
	ID      FillID
	Sector  uint64 // first sector, aligned to SegmentSectors
	Sectors uint32 // SegmentSectors, less at the end of the device
}

// Plan is what the cache decides for one read. It is owned by the cache and
// valid only until the next call of any Cache method.
//
// Timing model for the simulator: a read that is not bypassed completes at
//
//	max(now, completion of every fill in Waits and Fetches) + CopyNs
//
// i.e. the data is copied from RAM to the request once every segment it
// needs is present. A bypassed read goes to the disk model unchanged.
type Plan struct {
	// Bypass: the cache does not handle this read, because it misses and
	// not enough segments can be freed (every segment is being filled).
	// The read goes to disk unchanged; only ServedSectors is set. REDCAP
	// 2007 §3.
	Bypass bool
	// Parts is the number of segments the read touches (the per-segment
	// partial requests of Computer Journal 2016 §4).
	Parts int
	// HitParts, WaitParts and MissParts classify the parts: served from a
	// valid segment; waiting for a fill that an earlier read started;
	// starting a new fill (one entry in Fetches each).
	HitParts, WaitParts, MissParts int
	// HitSectors is the number of requested sectors in hit parts.
	HitSectors uint32
	// Waits lists the in-flight fills this read must wait for.
	Waits []FillID
	// Fetches lists the whole-segment reads to issue now.
	Fetches []Fetch
	// FetchedSectors is the sum of Fetches[i].Sectors.
	FetchedSectors uint32
	// ServedSectors is what REDCAP serves for this read in the sense of ADA's
	// B_Redcap (Computer Journal 2016 §4.1): the requested sectors of hit
	// and wait parts plus the whole fetched segments of miss parts
	// (requested and prefetched). For a bypass it is the request length.
	ServedSectors uint32
	// CopyNs is the modelled cost in ns of copying the requested data from
	// RAM to the request: HitOverheadNs + bytes / CopyBytesPerSec.
	CopyNs int64
}

// Stats counts what the cache did since New or Reset. Sectors are 512 bytes.
type Stats struct {
	Reads          uint64 // Read calls with at least one sector
	Bypasses       uint64 // reads sent to disk unchanged
	FullHits       uint64 // reads served entirely from valid segments
	HitParts       uint64 // parts served from valid segments
	WaitParts      uint64 // parts that waited for an in-flight fill
	MissParts      uint64 // parts that started a fill (= fetches issued)
	HitSectors     uint64 // requested sectors served from valid segments
	FetchedSectors uint64 // sectors read from disk by fills
	Evictions      uint64 // valid segments dropped by LRU replacement
	Writes         uint64 // Write calls with at least one sector
	Invalidations  uint64 // valid segments dropped by writes
	StaleFills     uint64 // in-flight fills made stale by writes
}

// Slot states.
const (
	slotFree    uint8 = iota // holds nothing; in the LRU list (at the tail)
	slotValid                // holds segment seg; in the LRU list
	slotFilling              // fill in flight; not in the LRU list (not evictable)
)

const none = int32(-1)

// Cache is the REDCAP segment cache. It is not safe for concurrent use.
//
// Segments that hold data or are free sit on an LRU list (free ones at the
// least-recently-used end); a segment being filled is off the list, since
// it cannot be evicted until its fill completes. Hits and waits make a
// segment most recently used.
type Cache struct {
	cfg   Config
	segSz uint64

	index map[uint64]int32 // disk segment number → slot (valid or filling, not stale)

	seg   []uint64 // slot → disk segment number
	state []uint8
	stale []bool // filling slot whose data must not become valid
	prev  []int32
	next  []int32
	head  int32 // most recently used
	tail  int32 // least recently used
	onLRU int   // slots on the LRU list (free + valid) = evictable slots
	free  int   // slots that hold nothing (slotFree)

	parts []int32 // scratch: slot per part, none for a miss
	plan  Plan
	stats Stats

	hot map[uint64]hotness // PromoteAfter > 0: misses per uncached segment (or hotspot)
	now int64              // ns, the caller's clock (SetNow), for PromoteGapNs
	// complete is the next request's recorded completion, ns, or
	// trace.Unknown (SetTimes).
	complete int64
	smq      *smq // Config.SMQ
}

// hotness is an uncached segment's counted misses and the clock at its
// last miss (Cache.clock: the read count, or ns under PromoteGapNs).
type hotness struct {
	n    uint8
	last int64
}

// DefaultPromoteGapReads is Config.PromoteGapReads's default.
const DefaultPromoteGapReads = 64

// minHotSegments is the fewest uncached segments whose misses are counted
// at a time (Config.PromoteAfter).
const minHotSegments = 4096

// New returns an empty cache. Zero fields of cfg take their defaults.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := cfg.Segments
	c := &Cache{
		cfg:   cfg,
		segSz: uint64(cfg.SegmentSectors),
		index: make(map[uint64]int32, min(n, 1<<14)), // grows with the segments in use
		seg:   make([]uint64, n),
		state: make([]uint8, n),
		stale: make([]bool, n),
		prev:  make([]int32, n),
		next:  make([]int32, n),
		parts: make([]int32, 0, 16),
	}
	c.plan.Waits = make([]FillID, 0, 4)
	c.plan.Fetches = make([]Fetch, 0, 4)
	if cfg.PromoteAfter > 0 {
		c.hot = make(map[uint64]hotness)
	}
	if cfg.SMQ {
		c.smq = newSMQ(n, cfg.HotspotSegments)
	}
	c.complete = trace.Unknown
	c.Reset()
	return c, nil
}

// Reset empties the cache and zeroes the statistics without allocating.
// In-flight fills are forgotten: the simulator must not deliver FillDone
// for fills planned before Reset (their ids may be reused).
func (c *Cache) Reset() {
	clear(c.index)
	clear(c.hot)
	// The free slots in LRU order from the tail (the next one claimed):
	// 0, 1, 2, …, so that the slots in use, and the fill IDs naming them,
	// stay as few as the segments touched (the simulator sizes its
	// per-fill state by them).
	n := int32(len(c.seg))
	for i := range n {
		c.state[i] = slotFree
		c.stale[i] = false
		c.prev[i] = i + 1
		c.next[i] = i - 1
	}
	c.prev[n-1] = none
	c.head, c.tail = n-1, 0
	c.onLRU, c.free = int(n), int(n)
	c.stats = Stats{}
	if c.smq != nil {
		c.smq.reset()
	}
}

// Config returns the configuration in use, with defaults filled in.
func (c *Cache) Config() Config { return c.cfg }

// SetNow sets the cache's clock to now, ns, the time of the next Read:
// the clock of Config.PromoteGapNs. A clock that goes back counts no
// miss until it has passed the last counted one by the gap again.
func (c *Cache) SetNow(now int64) { c.now, c.complete = now, trace.Unknown }

// SetTimes sets the cache's clock to the next request's arrival, ns, and
// gives its recorded completion, ns (trace.Unknown when not measured):
// Config.SMQ's policy ticks when the request it picked completes.
func (c *Cache) SetTimes(arrival, complete int64) { c.now, c.complete = arrival, complete }

// clock returns the time of the promotion gap and the gap: ns under
// PromoteGapNs, else reads.
func (c *Cache) clock() (now, gap int64) {
	if c.cfg.PromoteGapNs > 0 {
		return c.now, c.cfg.PromoteGapNs
	}
	return int64(c.stats.Reads), int64(c.cfg.PromoteGapReads)
}

// Stats returns the counters since New or Reset.
func (c *Cache) Stats() Stats { return c.stats }

// Segment returns the number of the disk segment that holds sector.
func (c *Cache) Segment(sector uint64) uint64 { return sector / c.segSz }

// Busy returns the number of segments currently being filled.
func (c *Cache) Busy() int { return len(c.seg) - c.onLRU }

// Cached reports whether the disk segment holding sector is valid in the
// cache (not merely being filled).
func (c *Cache) Cached(sector uint64) bool {
	s, ok := c.index[sector/c.segSz]
	return ok && c.state[s] == slotValid
}

// CopyNs returns the modelled cost in ns of copying sectors 512-byte sectors
// from the cache to a request: HitOverheadNs + bytes / CopyBytesPerSec.
func (c *Cache) CopyNs(sectors uint32) int64 {
	if sectors == 0 {
		return 0
	}
	b := float64(sectors) * trace.SectorSize
	return c.cfg.HitOverheadNs + int64(math.Ceil(b*1e9/c.cfg.CopyBytesPerSec))
}

// Read plans a read of sectors 512-byte sectors starting at sector
// (REDCAP 2007 §3; Computer Journal 2016 §4). Every disk segment the read
// touches is one part: a valid segment is a hit, a segment being filled is
// a wait, and any other segment is a miss that claims the least recently
// used evictable slot and fetches the whole aligned segment. If the misses
// need more slots than can be evicted (every other slot is being filled),
// the whole read bypasses the cache and the cache state is not changed.
//
// The returned Plan is valid until the next call on c.
func (c *Cache) Read(sector uint64, sectors uint32) *Plan {
	p := &c.plan
	p.Bypass = false
	p.Parts, p.HitParts, p.WaitParts, p.MissParts = 0, 0, 0, 0
	p.HitSectors, p.FetchedSectors, p.ServedSectors = 0, 0, 0
	p.CopyNs = 0
	p.Waits = p.Waits[:0]
	p.Fetches = p.Fetches[:0]
	if sectors == 0 {
		return p
	}
	c.stats.Reads++
	if c.smq != nil {
		c.smq.advance(c.now, c.complete)
	}

	end := sector + uint64(sectors)
	first, last := sector/c.segSz, (end-1)/c.segSz

	// Pass 1: classify without changing state.
	c.parts = c.parts[:0]
	hitsOnLRU, misses := 0, 0
	for k := first; k <= last; k++ {
		s, ok := c.index[k]
		if !ok {
			s = none
			misses++
		} else if c.state[s] == slotValid {
			hitsOnLRU++
		}
		c.parts = append(c.parts, s)
	}
	if misses > 0 && c.smq != nil {
		return c.missSMQ(sector, end, first)
	}
	if misses > 0 && c.cfg.PromoteAfter > 0 {
		return c.missPromote(sector, end, first, hitsOnLRU)
	}
	// Hit segments are moved to the MRU end before victims are taken from
	// the LRU end, so they are never chosen as victims for this read.
	if misses > c.onLRU-hitsOnLRU {
		c.stats.Bypasses++
		p.Bypass = true
		p.ServedSectors = sectors
		return p
	}

	// Pass 2: hits and waits first (touch), then misses (evict and fetch).
	for i, s := range c.parts {
		if s == none {
			continue
		}
		k := first + uint64(i)
		n := partLen(sector, end, k, c.segSz)
		if c.state[s] == slotValid {
			p.HitParts++
			p.HitSectors += n
			c.unlink(s)
			c.pushHead(s)
			if c.smq != nil {
				c.smq.hit(s)
			}
		} else { // filling
			p.WaitParts++
			p.Waits = append(p.Waits, FillID(s))
		}
		p.ServedSectors += n
	}
	for i, s := range c.parts {
		if s != none {
			continue
		}
		k := first + uint64(i)
		v := c.claim(k)

		start := k * c.segSz
		n := c.segSz
		if capa := c.cfg.CapacitySectors; capa > 0 && start+n > capa {
			// Clamp the last partial segment to the device, but never below
			// the end of the requested data.
			n = max(capa, min(end, start+n)) - start
		}
		p.MissParts++
		p.Fetches = append(p.Fetches, Fetch{ID: FillID(v), Sector: start, Sectors: uint32(n)})
		p.FetchedSectors += uint32(n)
		p.ServedSectors += uint32(n)
	}
	p.Parts = len(c.parts)
	p.CopyNs = c.CopyNs(sectors)

	c.stats.HitParts += uint64(p.HitParts)
	c.stats.WaitParts += uint64(p.WaitParts)
	c.stats.MissParts += uint64(p.MissParts)
	c.stats.HitSectors += uint64(p.HitSectors)
	c.stats.FetchedSectors += uint64(p.FetchedSectors)
	if p.HitParts == p.Parts {
		c.stats.FullHits++
	}
	return p
}

// missPromote plans a read with a miss under PromoteAfter: the read goes
// to the disk unchanged, and each missing segment that reached
// PromoteAfter misses is copied in by a background fetch (when a slot can
// be evicted without touching the read's own hits).
func (c *Cache) missPromote(sector, end, first uint64, hitsOnLRU int) *Plan {
	p := &c.plan
	p.Bypass = true
	p.ServedSectors = uint32(end - sector)
	c.stats.Bypasses++
	if len(c.hot) >= max(4*len(c.seg), minHotSegments) {
		clear(c.hot)
	}
	free := c.onLRU - hitsOnLRU
	if c.cfg.FillOnly {
		free = c.free
	}
	group := uint64(max(c.cfg.HotspotSegments, 1))
	now, gap := c.clock()
	for i, s := range c.parts {
		if s != none {
			continue
		}
		k := first + uint64(i)
		h, seen := c.hot[k/group]
		if !seen || now-h.last >= gap {
			h.n, h.last = min(h.n+1, 255), now
		} else if c.cfg.PromoteGapQuiet {
			h.last = now
		}
		c.hot[k/group] = h
		if int(h.n) < c.cfg.PromoteAfter || free == 0 {
			continue
		}
		if group == 1 {
			delete(c.hot, k) // cached now; a hotspot stays hot for its other segments
		}
		free--
		c.promote(k)
	}
	c.stats.MissParts += uint64(p.MissParts)
	c.stats.FetchedSectors += uint64(p.FetchedSectors)
	return p
}

// missSMQ plans a read with a miss under SMQ: the read goes to the disk
// unchanged; each block of it is looked up in smq's order, a missed one
// that smq would copy in taking a free slot by a background fetch or, with
// none free, making one free for a later miss (demote).
func (c *Cache) missSMQ(sector, end, first uint64) *Plan {
	p := &c.plan
	p.Bypass = true
	p.ServedSectors = uint32(end - sector)
	c.stats.Bypasses++
	for i, s := range c.parts {
		k := first + uint64(i)
		if s != none {
			if c.state[s] == slotValid {
				c.smq.hit(s)
			} else {
				c.smq.missed(k) // being copied in: not yet in smq's table
			}
			continue
		}
		if !c.smq.missed(k) {
			continue
		}
		if c.free == 0 {
			if v := c.smq.victim(); v != none {
				c.demote(v)
			}
			continue
		}
		c.promote(k)
	}
	c.stats.MissParts += uint64(p.MissParts)
	c.stats.FetchedSectors += uint64(p.FetchedSectors)
	return p
}

// promote claims a slot for disk segment k and adds its background copy
// to the plan: the whole segment, clamped to the device.
func (c *Cache) promote(k uint64) {
	p := &c.plan
	v := c.claim(k)
	start, n := k*c.segSz, c.segSz
	if capa := c.cfg.CapacitySectors; capa > 0 && start+n > capa {
		n = max(capa, start+1) - start
	}
	p.MissParts++
	p.Fetches = append(p.Fetches, Fetch{ID: FillID(v), Sector: start, Sectors: uint32(n)})
	p.FetchedSectors += uint32(n)
}

// demote frees the valid slot v (smq's demotion: a clean block is
// dropped, nothing is written).
func (c *Cache) demote(v int32) {
	delete(c.index, c.seg[v])
	c.release(v)
	c.stats.Evictions++
}

// release frees the valid slot s, already out of the index: it becomes
// the next slot claimed, and leaves smq's queue.
func (c *Cache) release(s int32) {
	c.state[s] = slotFree
	c.free++
	c.unlink(s)
	c.pushTail(s)
	if c.smq != nil {
		c.smq.dropped(s)
	}
}

// writeSMQ looks up the blocks first..last of a write under SMQ: a cached
// block stays (writethrough writes both copies) and counts as a hit; one
// being copied in is made stale; a missed one raises its hotspot but is
// not copied in. It returns the fills made stale.
func (c *Cache) writeSMQ(first, last uint64) (invalidated int) {
	c.smq.advance(c.now, c.complete)
	for k := first; k <= last; k++ {
		s, ok := c.index[k]
		switch {
		case !ok:
			c.smq.missed(k)
		case c.state[s] == slotValid:
			c.smq.hit(s)
		default:
			delete(c.index, k)
			c.stale[s] = true
			c.stats.StaleFills++
			invalidated++
		}
	}
	return invalidated
}

// claim takes the least recently used evictable slot for disk segment k,
// marks it filling and returns it.
func (c *Cache) claim(k uint64) int32 {
	v := c.tail
	c.unlink(v)
	if c.state[v] == slotFree {
		c.free--
	}
	if c.state[v] == slotValid {
		delete(c.index, c.seg[v])
		c.stats.Evictions++
		if c.smq != nil {
			c.smq.dropped(v)
		}
	}
	c.state[v] = slotFilling
	c.stale[v] = false
	c.seg[v] = k
	c.index[k] = v
	return v
}

// partLen returns how many sectors of [sector, end) fall in disk segment k.
func partLen(sector, end, k, segSz uint64) uint32 {
	lo, hi := k*segSz, (k+1)*segSz
	return uint32(min(hi, end) - max(lo, sector))
}

// FillDone reports that the fill id (from [Plan.Fetches]) completed. The
// segment becomes valid and most recently used, unless a write invalidated
// it while the fill was in flight; then the slot is freed. Unknown or
// already completed ids are ignored.
func (c *Cache) FillDone(id FillID) {
	s := int32(id)
	if s < 0 || int(s) >= len(c.seg) || c.state[s] != slotFilling {
		return
	}
	if c.stale[s] {
		c.stale[s] = false
		c.state[s] = slotFree
		c.free++
		c.pushTail(s)
		return
	}
	c.state[s] = slotValid
	c.pushHead(s)
	if c.smq != nil {
		c.smq.cached(s, smqLevels-1)
	}
}

// Write invalidates every cached segment that the write of sectors 512-byte
// sectors at sector touches, and returns how many segments it invalidated
// (valid ones dropped plus in-flight fills made stale). Call it for writes
// and discards; the request itself goes to disk unchanged (REDCAP 2007 §3;
// Computer Journal 2016 §4).
//
// Granularity: whole segments, not single 4 KiB blocks as in the papers.
// Realised with dm-cache the cache block is the segment, and a partly valid
// segment would need a partial re-fetch the papers do not describe;
// invalidating the whole segment can only lose hits, so it never makes the
// cache look better than it is. A write to a segment being filled marks the
// fill stale: the segment leaves the index at once (later reads miss and
// fetch it anew), and its data is discarded at FillDone; reads that were
// already waiting for that fill still complete with it.
func (c *Cache) Write(sector uint64, sectors uint32) (invalidated int) {
	if sectors == 0 {
		return 0
	}
	c.stats.Writes++
	end := sector + uint64(sectors)
	first, last := sector/c.segSz, (end-1)/c.segSz
	if c.smq != nil {
		return c.writeSMQ(first, last)
	}
	if len(c.index) == 0 {
		return 0
	}
	for k := first; k <= last; k++ {
		s, ok := c.index[k]
		if !ok {
			continue
		}
		delete(c.index, k)
		invalidated++
		if c.state[s] == slotFilling {
			c.stale[s] = true
			c.stats.StaleFills++
			continue
		}
		c.release(s)
		c.stats.Invalidations++
	}
	return invalidated
}

// unlink removes slot s from the LRU list.
func (c *Cache) unlink(s int32) {
	p, n := c.prev[s], c.next[s]
	if p != none {
		c.next[p] = n
	} else {
		c.head = n
	}
	if n != none {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.prev[s], c.next[s] = none, none
	c.onLRU--
}

// pushHead inserts slot s at the most recently used end.
func (c *Cache) pushHead(s int32) {
	c.prev[s] = none
	c.next[s] = c.head
	if c.head != none {
		c.prev[c.head] = s
	} else {
		c.tail = s
	}
	c.head = s
	c.onLRU++
}

// pushTail inserts slot s at the least recently used end (next victim).
func (c *Cache) pushTail(s int32) {
	c.next[s] = none
	c.prev[s] = c.tail
	if c.tail != none {
		c.next[c.tail] = s
	} else {
		c.head = s
	}
	c.tail = s
	c.onLRU++
}

// Warm is what a cache carries from one window to the next, as a real
// cache keeps its blocks and smq its hotspot levels: its valid segments,
// least recently used first (Contents), and, under PromoteAfter, the
// hotspots (or segments) whose counted misses reached PromoteAfter, so
// that their misses copy at once (HotSpots).
type Warm struct {
	Segments []uint64
	HotSpots []uint64
	// Levels and HotLevels, under Config.SMQ, are the levels in smq's
	// queues of Segments and HotSpots (the hints dm-cache keeps in its
	// metadata for its blocks).
	Levels, HotLevels []uint8
}

// Warm returns the cache's Warm: at most limit segments (the most
// recently used) and limit hotspots (the lowest numbered, so that the same
// run gives the same Warm whatever the map's order).
func (c *Cache) Warm(limit int) Warm {
	w := Warm{Segments: c.Contents(limit)}
	if c.smq != nil {
		for _, k := range w.Segments {
			w.Levels = append(w.Levels, c.smq.clean.level[c.index[k]])
		}
		w.HotSpots, w.HotLevels = c.smq.hotLevels(limit)
		return w
	}
	for k, h := range c.hot {
		if int(h.n) >= c.cfg.PromoteAfter {
			w.HotSpots = append(w.HotSpots, k)
		}
	}
	slices.Sort(w.HotSpots)
	w.HotSpots = w.HotSpots[:min(len(w.HotSpots), max(limit, 0))]
	return w
}

// Load puts w into an empty cache: Preload of its segments, and its
// hotspots as having reached PromoteAfter.
func (c *Cache) Load(w Warm) {
	c.Preload(w.Segments)
	if c.smq != nil {
		for i, k := range w.Segments {
			if s, ok := c.index[k]; ok && i < len(w.Levels) && c.state[s] == slotValid {
				c.smq.cached(s, w.Levels[i])
			}
		}
		c.smq.loadHot(w.HotSpots, w.HotLevels)
		return
	}
	if c.hot == nil {
		return
	}
	for _, k := range w.HotSpots {
		c.hot[k] = hotness{n: uint8(c.cfg.PromoteAfter)}
	}
}

// Contents returns the disk segment numbers of the valid segments, least
// recently used first, at most max of them (the most recently used; max ≤
// 0: none): what Preload puts back.
func (c *Cache) Contents(max int) []uint64 {
	var out []uint64
	for s := c.head; s != none && len(out) < max; s = c.next[s] {
		if c.state[s] == slotValid {
			out = append(out, c.seg[s])
		}
	}
	slices.Reverse(out)
	return out
}

// Preload makes the disk segments segs valid, in order, each becoming the
// most recently used, as if filled before the run: a cache warmed with
// what it held at the end of the previous window (Contents). A segment
// already held is made most recently used; when no slot is free the least
// recently used is dropped. The statistics do not count it, and the miss
// counts of PromoteAfter start empty.
func (c *Cache) Preload(segs []uint64) {
	st := c.stats
	for _, k := range segs {
		if s, ok := c.index[k]; ok {
			if c.state[s] == slotValid {
				c.unlink(s)
				c.pushHead(s)
			}
			continue
		}
		if c.onLRU == 0 {
			break
		}
		v := c.claim(k)
		c.state[v] = slotValid
		c.pushHead(v)
		if c.smq != nil {
			c.smq.cached(v, uint8(smqLevels*len(c.index)/len(c.seg))) // spread as a redistribute would
		}
	}
	c.stats = st
}

// lruOrder returns the disk segment numbers of valid slots from most to
// least recently used (for tests and debugging).
func (c *Cache) lruOrder() []uint64 {
	var out []uint64
	for s := c.head; s != none; s = c.next[s] {
		if c.state[s] == slotValid {
			out = append(out, c.seg[s])
		}
	}
	return out
}

// Blocks returns the number of 4 KiB blocks needed to hold sectors 512-byte
// sectors, rounded up: the B of ADA (Computer Journal 2016 §4.1).
func Blocks(sectors uint32) uint32 {
	return uint32((uint64(sectors) + SectorsPerBlock - 1) / SectorsPerBlock)
}
