package model

import "fmt"

// CacheConfig parameterises the HDD disk-cache model (DADS §3.2; DESIGN §3
// "Disk-cache model"). The model decides, for each read a Disk serves,
// whether the drive's cache holds it — and hence whether the read-hit or the
// read-miss table predicts its time.
//
// The cache is split into Segments segments of equal size, each holding one
// contiguous range of sectors, replaced LRU. Only read misses read ahead
// (reads that hit do not extend a segment):
//
//   - A miss that overlaps or touches no cached range is the first miss of
//     a new segment (the LRU one is reused). It is non-sequential: the
//     drive reads the request plus ReadAheadMinSectors, the request placed
//     in the middle (half before, half after), since the real layout of
//     tracks is unknown (DADS §3.2). ReadBehindPct generalises the
//     placement: the share of that read-ahead placed before the request
//     (50 = DADS's middle, the default; 0 = a drive that only reads
//     forward, as the Seagate Cheetah 9LP of the DiskSim traces does).
//   - A miss that overlaps or touches a cached range continues that
//     segment's stream. It is sequential: the drive reads the request plus
//     ReadAheadMaxSectors in the access direction — ahead if the request
//     runs past the top of the range, behind if it starts below the bottom
//     — and the segment keeps the newest SegmentSectors sectors.
//   - Read-ahead is shortened so that it never pushes the request itself
//     out of its segment (a segment holds at most SegmentSectors).
//   - Writes use immediate reporting (the write table holds their times)
//     and leave the read segments alone; the drive keeps cached data
//     coherent, and write-back segments are not modelled.
//
// A read is a hit only if one segment holds all its sectors. The values
// of a particular drive can be found from a recorded window with measured
// service times by [CalibrateCache].
type CacheConfig struct {
	// SizeBytes is the cache size in bytes (0 disables the model: every read
	// is a miss).
	SizeBytes int64 `json:"sizeBytes"`
	// Segments is the number of equal segments (≥ 1 when SizeBytes > 0).
	Segments int `json:"segments"`
	// ReadAheadMaxSectors is the read-ahead after a sequential miss, sectors.
	ReadAheadMaxSectors uint32 `json:"readAheadMaxSectors"`
	// ReadAheadMinSectors is the read-ahead after a non-sequential miss,
	// sectors (≤ ReadAheadMaxSectors).
	ReadAheadMinSectors uint32 `json:"readAheadMinSectors"`
	// ReadBehindPct is the percentage (0…100) of the non-sequential
	// read-ahead placed before the request on a segment's first miss; 50
	// is DADS's "requested blocks in the middle".
	ReadBehindPct uint8 `json:"readBehindPct"`
}

// Defaults of the disk-cache model, within the ranges the DESIGN gives from
// the drives DADS probed (cache 16–32 MB, 20–128 segments, read-ahead
// 32–256 sectors; DADS Table 2).
const (
	// DefaultCacheBytes is 16 MiB, the smaller cache of DADS's drives and
	// still the common cache of 7200 rpm drives up to a few TB; a larger
	// guess would predict hits a smaller drive cannot serve.
	DefaultCacheBytes = 16 << 20
	// DefaultCacheSegments is 32 segments (512 KiB each), between DADS's
	// 20 and 128 and enough for a few dozen concurrent streams.
	DefaultCacheSegments = 32
	// DefaultReadAheadMaxSectors is 256 sectors (128 KiB), the sequential
	// read-ahead of every drive in DADS Table 2.
	DefaultReadAheadMaxSectors = 256
	// DefaultReadAheadMinSectors is the non-sequential read-ahead: 256
	// sectors as well, the value of two of DADS's four drives (the others
	// used 32 and 96). A drive keeps reading ahead after a random miss
	// while it is idle, so with any think time a short first read-ahead
	// under-predicts the hits that follow (measured on the DiskSim traces).
	DefaultReadAheadMinSectors = 256
)

// DefaultCacheConfig returns the default HDD cache parameters.
func DefaultCacheConfig() CacheConfig {
	return CacheConfig{
		SizeBytes:           DefaultCacheBytes,
		Segments:            DefaultCacheSegments,
		ReadAheadMaxSectors: DefaultReadAheadMaxSectors,
		ReadAheadMinSectors: DefaultReadAheadMinSectors,
		ReadBehindPct:       50,
	}
}

// Enabled reports whether the configuration models a cache at all.
func (c CacheConfig) Enabled() bool { return c.SizeBytes > 0 && c.Segments > 0 }

// SegmentSectors returns the size of one segment in sectors.
func (c CacheConfig) SegmentSectors() uint64 {
	if !c.Enabled() {
		return 0
	}
	return uint64(c.SizeBytes) / 512 / uint64(c.Segments)
}

func (c CacheConfig) validate() error {
	switch {
	case c.SizeBytes < 0:
		return fmt.Errorf("field \"cache.sizeBytes\": must be ≥ 0, got %d", c.SizeBytes)
	case c.SizeBytes == 0:
		return nil
	case c.Segments < 1 || c.Segments > 4096:
		return fmt.Errorf("field \"cache.segments\": must be in 1…4096, got %d", c.Segments)
	case c.SegmentSectors() < 1:
		return fmt.Errorf("field \"cache.sizeBytes\": %d B is less than one sector per segment", c.SizeBytes)
	case c.ReadBehindPct > 100:
		return fmt.Errorf("field \"cache.readBehindPct\": must be in 0…100, got %d", c.ReadBehindPct)
	case c.ReadAheadMinSectors > c.ReadAheadMaxSectors:
		return fmt.Errorf("field \"cache.readAheadMinSectors\": %d exceeds readAheadMaxSectors %d", c.ReadAheadMinSectors, c.ReadAheadMaxSectors)
	}
	return nil
}

// segment is one cache segment: the cached range [lo, hi) in sectors.
type segment struct {
	lo, hi uint64
	use    uint64 // LRU stamp (0 = never used, i.e. invalid)
}

// diskCache is the state of one drive's cache.
type diskCache struct {
	segs         []segment
	segSectors   uint64
	raMax, raMin uint64
	behindPct    uint64 // ReadBehindPct
	limit        uint64 // device capacity in sectors: read-ahead stops there
	tick         uint64
}

func newDiskCache(c CacheConfig, capacitySectors uint64) diskCache {
	if !c.Enabled() {
		return diskCache{}
	}
	return diskCache{
		segs:       make([]segment, c.Segments),
		segSectors: c.SegmentSectors(),
		raMax:      uint64(c.ReadAheadMaxSectors),
		raMin:      uint64(c.ReadAheadMinSectors),
		behindPct:  uint64(c.ReadBehindPct),
		limit:      capacitySectors,
	}
}

// holding returns the index of a segment holding all of [s, e), or −1.
func (c *diskCache) holding(s, e uint64) int {
	n := e - s
	for i := range c.segs {
		g := &c.segs[i]
		if span, off := g.hi-g.lo, s-g.lo; off <= span && n <= span-off && g.use != 0 {
			return i
		}
	}
	return -1
}

// read serves a read of [s, e) and reports whether it hit. A miss reads
// ahead as described in CacheConfig. One pass over the segments finds the
// segment holding the request (a hit), else the most recently used
// segment the request overlaps or touches (its stream) and the LRU one.
func (c *diskCache) read(s, e uint64) bool {
	if len(c.segs) == 0 {
		return false
	}
	c.tick++
	stream, victim := -1, 0
	n := e - s
	var streamUse uint64
	minUse := c.segs[0].use
	for i := range c.segs {
		g := &c.segs[i]
		if g.use < minUse {
			victim, minUse = i, g.use
		}
		// Unsigned differences keep the common case (a random request far
		// from g) on predictable branches: off wraps to a huge value
		// when s < g.lo.
		span, off := g.hi-g.lo, s-g.lo
		if off <= span || g.lo-s <= n { // [s, e] and [g.lo, g.hi] intersect
			if g.use == 0 {
				continue
			}
			if off <= span && n <= span-off {
				g.use = c.tick
				return true
			}
			if g.use > streamUse {
				stream, streamUse = i, g.use
			}
		}
	}
	c.fill(s, e, stream, victim)
	return false
}

// miss performs the read-ahead of a read miss of [s, e).
func (c *diskCache) miss(s, e uint64) {
	stream, victim := -1, 0
	n := e - s
	var streamUse uint64
	minUse := c.segs[0].use
	for i := range c.segs {
		g := &c.segs[i]
		if g.use < minUse {
			victim, minUse = i, g.use
		}
		if s-g.lo <= g.hi-g.lo || g.lo-s <= n { // intersect, see read
			if g.use > streamUse {
				stream, streamUse = i, g.use
			}
		}
	}
	c.fill(s, e, stream, victim)
}

// room returns how much read-ahead fits in a segment next to a request
// of [s, e): read-ahead never pushes the request itself out of its segment.
func (c *diskCache) room(s, e uint64) uint64 {
	return c.segSectors - min(e-s, c.segSectors)
}

// fill performs the read-ahead of a miss of [s, e): into segment stream
// (sequential, ≥ 0 when the request overlaps or touches a cached range),
// else into the LRU segment victim (non-sequential, a first miss).
func (c *diskCache) fill(s, e uint64, stream, victim int) {
	if stream < 0 {
		c.place(s, e, victim)
		return
	}
	g := &c.segs[stream]
	ra := min(c.raMax, c.room(s, e))
	if e > g.hi { // forward: read ahead past the request, keep the top
		g.lo, g.hi = min(g.lo, s), c.clampHi(e+ra, e)
		if g.hi-g.lo > c.segSectors {
			g.lo = g.hi - c.segSectors
		}
	} else { // backward: read ahead below the request, keep the bottom
		g.lo, g.hi = satSub(s, ra), max(g.hi, e)
		if g.hi-g.lo > c.segSectors {
			g.hi = g.lo + c.segSectors
		}
	}
	g.use = c.tick
}

// lru returns the index of the least recently used (or an unused) segment.
func (c *diskCache) lru() int {
	v := 0
	for i := range c.segs {
		if c.segs[i].use < c.segs[v].use {
			v = i
		}
	}
	return v
}

// place loads [s, e) with the non-sequential read-ahead around it
// (ReadBehindPct of it before, the rest after) into segment v: the first
// miss of a segment.
func (c *diskCache) place(s, e uint64, v int) {
	ra := min(c.raMin, c.room(s, e))
	behind := ra * c.behindPct / 100
	g := &c.segs[v]
	g.lo, g.hi = satSub(s, behind), c.clampHi(e+ra-behind, e)
	if g.hi-g.lo > c.segSectors { // a request longer than a segment: keep its end
		g.lo = g.hi - c.segSectors
	}
	g.use = c.tick
}

// observe updates the cache after a real read of [s, e) whose outcome was
// measured: a hit makes sure the range is cached (the drive evidently had
// it); a miss the model thought was a hit drops that segment, then reads
// ahead as for any miss.
func (c *diskCache) observe(s, e uint64, hit bool) {
	if len(c.segs) == 0 {
		return
	}
	c.tick++
	i := c.holding(s, e)
	switch {
	case hit && i >= 0:
		c.segs[i].use = c.tick
	case hit:
		c.place(s, e, c.lru())
	default:
		if i >= 0 {
			c.segs[i] = segment{}
		}
		c.miss(s, e)
	}
}

// clampHi stops read-ahead at the end of the device (never below e, the
// end of the request itself).
func (c *diskCache) clampHi(hi, e uint64) uint64 {
	if c.limit > 0 && hi > c.limit {
		return max(c.limit, e)
	}
	return hi
}

func satSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
