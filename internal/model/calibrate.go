package model

import "github.com/shadowtune/shadowtune/internal/trace"

// Calibration is the outcome of CalibrateCache.
type Calibration struct {
	// Cache is the chosen configuration (the base one when Calibrated is
	// false).
	Cache CacheConfig `json:"cache"`
	// Calibrated says whether the trace had enough measured hits to choose.
	Calibrated bool `json:"calibrated"`
	// Reads and MeasuredHits count the scored reads and those the
	// classifier calls hits.
	Reads        int `json:"reads"`
	MeasuredHits int `json:"measuredHits"`
	// FalseHits and FalseMisses count the reads the chosen cache model
	// calls hits but were measured as misses, and the reverse.
	FalseHits   int `json:"falseHits"`
	FalseMisses int `json:"falseMisses"`
}

// Candidate values searched by CalibrateCache. They span the drives DADS
// probed (Table 2: 20–128 segments, read-ahead 32–256 sectors) and older
// or simpler drives with few, large segments and longer read-ahead (the
// DiskSim validation drives of the 1990s had 1–2 MB caches in a handful of
// segments and kept reading ahead while idle).
var (
	calSegments = []int{4, 8, 16, 32, 64, 128}
	calReadAhd  = [][2]uint32{ // {min (non-sequential), max (sequential)}, sectors
		{32, 256}, {64, 256}, {128, 256}, {256, 256},
		{128, 512}, {256, 512}, {512, 512}, {1024, 1024},
	}
	calBehind = []uint8{50, 0}
)

// CalibrateCache chooses the HDD disk-cache parameters that best explain
// the measured hits of a recorded window — the "probing run" of DESIGN §3
// done on the recording instead of with a capture program (DADS §3.2).
// reqs are taken in order as dispatched; hit classifies their measured
// times. The cache size stays base.SizeBytes (the one parameter a drive
// publishes); the number of segments, the two read-ahead sizes and the
// read-behind share are searched over a fixed grid. Each candidate runs
// the cache model free (its own hit/miss decisions drive its state, as in
// a simulation) and is scored by max(false hits, false misses): the
// error of the total predicted time of a window grows with |FH − FM|
// (DADS §3.2 calls a cache model "alike enough" when its hit ratio matches
// the drive's) and the per-request error with FH + FM, and
// max = ((FH+FM) + |FH−FM|)/2 weighs both equally. Ties keep the earlier
// candidate; base is tried first. With fewer than 100 measured reads or
// 20 measured hits it returns base with Calibrated false.
func CalibrateCache(reqs []trace.Request, hit HitClassifier, capacitySectors uint64, base CacheConfig) Calibration {
	res := Calibration{Cache: base}
	measured := make([]int8, len(reqs)) // 1 hit, 0 miss, −1 not a scored read
	for i := range reqs {
		q := &reqs[i]
		measured[i] = -1
		if q.Op != trace.Read || !q.HasService() {
			continue
		}
		res.Reads++
		if hit.IsHit(q.Sectors, q.ServiceTime()) {
			measured[i] = 1
			res.MeasuredHits++
		} else {
			measured[i] = 0
		}
	}
	score := func(c CacheConfig) (fh, fm int) {
		dc := newDiskCache(c, capacitySectors)
		for i := range reqs {
			q := &reqs[i]
			if q.Op != trace.Read {
				continue
			}
			h := dc.read(q.Sector, q.End())
			switch {
			case measured[i] < 0:
			case h && measured[i] == 0:
				fh++
			case !h && measured[i] == 1:
				fm++
			}
		}
		return fh, fm
	}
	res.FalseHits, res.FalseMisses = score(base)
	if res.Reads < 100 || res.MeasuredHits < 20 || base.SizeBytes <= 0 {
		return res
	}
	res.Calibrated = true
	best, bestSum := max(res.FalseHits, res.FalseMisses), res.FalseHits+res.FalseMisses
	for _, segs := range calSegments {
		for _, ra := range calReadAhd {
			for _, behind := range calBehind {
				c := CacheConfig{
					SizeBytes:           base.SizeBytes,
					Segments:            segs,
					ReadAheadMinSectors: ra[0],
					ReadAheadMaxSectors: ra[1],
					ReadBehindPct:       behind,
				}
				if c == base || c.validate() != nil {
					continue
				}
				fh, fm := score(c)
				if s, sum := max(fh, fm), fh+fm; s < best || (s == best && sum < bestSum) {
					best, bestSum = s, sum
					res.Cache, res.FalseHits, res.FalseMisses = c, fh, fm
				}
			}
		}
	}
	return res
}
