package decide

// The on/off rule of a real block cache (dm-cache) in front of a device:
// REDCAP's activation–deactivation algorithm (ADA; KDSim §4.1, DESIGN §6)
// realised with what a node can see of each side.

import (
	"fmt"
	"strings"
)

// Cache modes as dm-cache names them (Documentation/admin-guide/
// device-mapper/cache.rst): on is writethrough, off is passthrough.
const (
	CacheOn  = "writethrough"
	CacheOff = "passthrough"
)

// CacheInput is one window's evidence about a dm-cache.
//
// While the cache is off, the origin sees the whole stream, so the window
// is simulated with and without a cache of the same size and block size
// (PredictedGainPct, the engine's CacheGainPct, and ADAOn), and the
// cache's counters show what it holds (ResidentHits). While it is on, the
// origin sees only misses and promotions, so the cache is judged by its
// own counters: each read hit saves a read at the origin, and each
// promotion costs one at the origin of a whole cache block.
type CacheInput struct {
	// Active reports whether the cache is on (writethrough) now.
	Active bool
	// PredictedGainPct (off only) is the simulated reduction of the
	// window's total I/O time with the cache, percent; nil when the
	// window was not simulated with it.
	PredictedGainPct *float64
	// ADAOn (off only) is the simulated ADA's state after the window.
	ADAOn bool
	// ResidentHits and ResidentMisses (off only) are the cache's read
	// hit and miss counters over the window (dm-cache status deltas). In
	// passthrough dm-cache counts a read of a block it holds as a hit and
	// serves it from the origin (map_bio, drivers/md/dm-cache-target.c),
	// and it promotes nothing (policy_allow_migrations false): the hits
	// are the reads the cache, turned on as it stands, would serve. A
	// cache keeps its blocks while off, so what an earlier spell on
	// brought in counts here, which a simulation from the window's
	// requests cannot know.
	ResidentHits, ResidentMisses uint64
	// PrevPredictedOn (off only) reports whether the previous window
	// predicted the cache's gain too (CacheDecision.PredictsOn): the
	// cache is turned on only when two consecutive windows predict it, so
	// that a window simulated on a model not yet calibrated does not
	// switch it.
	PrevPredictedOn bool
	// PrevMeasuredOff (on only) reports whether the previous window's
	// counters measured a loss too (CacheDecision.MeasuresOff): the cache
	// is turned off only when two consecutive windows measure it, so that
	// the burst of promotions with which the cache follows a new working
	// set does not switch it (seen in the VM lab: -14.2 % in the first
	// window of uniform reads after zipf ones, +9.2 % in the next).
	PrevMeasuredOff bool
	// ReadHits, ReadMisses and Promotions (on only) are the cache's
	// counters over the window (dm-cache status deltas).
	ReadHits, ReadMisses, Promotions uint64
	// ReadNs is the mean cost at the origin of one of the window's reads,
	// and BlockReadNs that of a read of one cache block, ns: the device
	// time each takes from the others (the agent's readCostNs), not its
	// time in the device's queue. Both are used on and off.
	ReadNs, BlockReadNs float64
	// MarginPct is the predicted gain the cache must show to be turned on
	// (Config.MarginPct).
	MarginPct float64
	// MinReads is the number of reads a window needs to be judged.
	MinReads uint64
}

// CacheDecision is the rule's answer.
type CacheDecision struct {
	// Mode is the mode to set, CacheOn or CacheOff; "" keeps the mode.
	Mode string
	// GainPct is the gain the decision rests on: predicted (off) or
	// measured from the counters (on), percent of the time the reads would
	// take at the origin without the cache.
	GainPct float64
	// Measured reports whether GainPct comes from the cache's counters
	// while on; Known whether there is a GainPct at all (predicted, from
	// the blocks an off cache holds, or measured).
	Measured, Known bool
	// Reason says why, in one line.
	Reason string
	// PredictsOn reports whether this window's simulation predicted the
	// margin with ADA on (the next window's PrevPredictedOn).
	PredictsOn bool
	// MeasuresOff reports whether this window's counters measured a loss
	// (the next window's PrevMeasuredOff).
	MeasuresOff bool
}

// MeasuredCacheGainPct is the gain of an active cache over a window from
// its counters: the origin time its read hits saved less what its
// promotions cost, as a percentage of the time all its reads would have
// taken at the origin. ok is false without reads or read times.
func MeasuredCacheGainPct(hits, misses, promotions uint64, readNs, blockReadNs float64) (pct float64, ok bool) {
	reads := float64(hits + misses)
	if reads == 0 || readNs <= 0 {
		return 0, false
	}
	if blockReadNs <= 0 {
		blockReadNs = readNs
	}
	saved := float64(hits)*readNs - float64(promotions)*blockReadNs
	return 100 * saved / (reads * readNs), true
}

// Cache decides the cache's mode for the next window. An off cache is
// turned on when two consecutive windows predict at least MarginPct:
// either the simulation, with ADA ending on, or the blocks the cache
// already holds (ResidentHits, priced as MeasuredCacheGainPct prices an
// active cache's hits, with no promotions). An on cache is turned off
// when its measured gain is below zero (its promotions cost the origin
// more than its hits save). Between the two thresholds the mode is kept,
// so a cache near break-even does not thrash. The thrash guard, minDwell
// and the grant are the caller's gates, as for the scheduler.
func Cache(in CacheInput) CacheDecision {
	if !in.Active {
		return cacheOff(in)
	}
	if in.ReadHits+in.ReadMisses < max(in.MinReads, 1) {
		return CacheDecision{Reason: fmt.Sprintf("%d reads through the cache, fewer than %d", in.ReadHits+in.ReadMisses, max(in.MinReads, 1))}
	}
	g, ok := MeasuredCacheGainPct(in.ReadHits, in.ReadMisses, in.Promotions, in.ReadNs, in.BlockReadNs)
	if !ok {
		return CacheDecision{Reason: "no read service time measured at the origin"}
	}
	d := CacheDecision{GainPct: g, Measured: true, Known: true}
	hitPct := 100 * float64(in.ReadHits) / float64(in.ReadHits+in.ReadMisses)
	if g < 0 {
		d.MeasuresOff = true
		d.Reason = fmt.Sprintf("measured %.1f %%: %.1f %% read hits do not pay for %d promotions", g, hitPct, in.Promotions)
		if in.PrevMeasuredOff {
			d.Mode = CacheOff
			d.Reason += ", two windows in a row"
		} else {
			d.Reason += "; waiting for a second window to agree"
		}
		return d
	}
	d.Reason = fmt.Sprintf("measured %.1f %% with %.1f %% read hits", g, hitPct)
	return d
}

// cacheOff is Cache's rule for an off cache.
func cacheOff(in CacheInput) CacheDecision {
	res, resOK := 0.0, false
	if n := in.ResidentHits + in.ResidentMisses; n >= max(in.MinReads, 1) {
		res, resOK = MeasuredCacheGainPct(in.ResidentHits, in.ResidentMisses, 0, in.ReadNs, in.BlockReadNs)
	}
	if in.PredictedGainPct == nil && !resOK {
		return CacheDecision{Reason: "not simulated with the cache this window"}
	}
	d := CacheDecision{Known: true}
	simOn := in.PredictedGainPct != nil && *in.PredictedGainPct >= in.MarginPct && in.ADAOn
	resOn := resOK && res >= in.MarginPct
	d.PredictsOn = simOn || resOn
	var why []string
	if in.PredictedGainPct != nil {
		d.GainPct = *in.PredictedGainPct
		why = append(why, fmt.Sprintf("predicted %.1f %% less I/O time with the cache", d.GainPct))
	}
	if resOK {
		if resOn || in.PredictedGainPct == nil {
			d.GainPct = res
		}
		why = append(why, fmt.Sprintf("the cache holds the blocks of %.1f %% of the reads (counted while off): %.1f %% less with it on",
			100*float64(in.ResidentHits)/float64(in.ResidentHits+in.ResidentMisses), res))
	}
	if resOn && !simOn {
		why = why[len(why)-1:] // the evidence the decision rests on
	}
	return offReason(d, strings.Join(why, "; "), in)
}

// offReason completes cacheOff's decision d with its reason: why, and
// what it calls for.
func offReason(d CacheDecision, why string, in CacheInput) CacheDecision {
	switch {
	case d.PredictsOn && in.PrevPredictedOn:
		d.Mode = CacheOn
		d.Reason = fmt.Sprintf("%s (margin %.0f %%), two windows in a row", why, in.MarginPct)
	case d.PredictsOn:
		d.Reason = why + "; waiting for a second window to agree"
	case d.GainPct >= in.MarginPct:
		d.Reason = why + "; but ADA ends off over the window's last reads"
	default:
		d.Reason = fmt.Sprintf("%s; below the margin of %.0f %%", why, in.MarginPct)
	}
	return d
}
