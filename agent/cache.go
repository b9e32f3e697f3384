package agent

// The dm-cache in front of a governed device (issue 15; DESIGN §6
// "REDCAP", realised as dm-cache): found through the device's holders,
// turned on (writethrough) or off (passthrough) by decide.Cache, recorded
// and reverted by the actuator.
//
// Which stream is judged: the agent traces the origin, a request-based
// disk. While the cache is off the origin sees the whole stream, which is
// simulated with and without a cache of the real one's size and block
// size. While it is on the origin sees only misses and promotions: the
// scheduler candidates are judged on that stream (it is what the origin
// serves), and the cache by its own counters.

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// governedCache is the agent's state of one dm-cache.
type governedCache struct {
	dmDev      string            // the cache device's kernel name, dm-N
	info, prev dmcache.CacheInfo // at this window's end and the previous one's
	havePrev   bool
	dec        decide.CacheDecision
	hitPct     float64 // the window's read hits, percent; -1: no reads
	// predHitPct is the simulated cache's read hits, percent, of the last
	// window simulated while the cache was off (kept while it is on: what
	// the switch on rested on); -1: none simulated.
	predHitPct float64
	// stat is the cache device's stat file at the last window's end;
	// readNs and reads are the window's mean read response time (ns) and
	// reads, what the application saw.
	stat       sysfs.Stat
	haveStat   bool
	readNs     float64
	reads      uint64
	predOn     bool // the last window predicted the cache's gain
	measOff    bool // the last window's counters measured a loss
	verify     *cacheVerify
	backoff    map[string]time.Time // mode → not set again before
	lastChange time.Time
	lastText   string
	logged     string // the last decision logged (cacheAfter)
}

// cacheVerify is the check of a cache switch by what the application
// sees: the mean read response time at the cache device over the windows
// after it against the window before it.
type cacheVerify struct {
	from, to   string
	baselineNs float64
	sumNs      float64 // Σ response time of the reads after the switch
	reads      uint64
	left       int
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// cacheBefore finds or refreshes the device's dm-cache before its window
// is evaluated, and tells the controller whether it is on: an active
// cache's window is judged without cached candidates.
func (d *device) cacheBefore(e *windowEnv) {
	var info dmcache.CacheInfo
	var dm string
	ok := false
	if e.caches != nil && d.policy.Spec.Cache.Enabled {
		info, dm, ok = dmcache.Find(e.hostRoot, d.sys.Name, d.sys.MajorMinor, e.caches)
	}
	if !ok {
		if d.cache != nil && e.metrics != nil {
			e.metrics.SetCache(d.sys.Name, nil)
		}
		d.cache, d.status.Cache = nil, nil
		d.ctrl.SetCache(false, false)
		return
	}
	if d.cache == nil || d.cache.info.Name != info.Name {
		d.cache = &governedCache{hitPct: -1, predHitPct: -1, dmDev: dm, backoff: map[string]time.Time{}}
		d.ctrl.ForgetCacheWarm()
		d.setDMCacheModel(info, dm, e)
	} else {
		d.cache.prev, d.cache.havePrev = d.cache.info, true
	}
	d.cache.info = info
	d.ctrl.SetCache(true, info.Mode == decide.CacheOn)
}

// cacheAfter decides on the cache after the window (rep) and, in Apply
// mode when the gate allows and nothing else changed in the window,
// switches it; a switch is verified over the next windows first.
func (d *device) cacheAfter(rep window.Report, g window.Gate, now time.Time, e *windowEnv) {
	c := d.cache
	if c == nil {
		return
	}
	c.readApp(e.hostRoot)
	if c.verify != nil {
		d.verifyCache(now, e)
		d.showCache()
		return
	}
	in := decide.CacheInput{Active: d.ctrl.CacheActive(), MarginPct: d.ctrl.Policy.Decide.MarginPct,
		MinReads: uint64(d.ctrl.Policy.MinRequests), PrevPredictedOn: c.predOn, PrevMeasuredOff: c.measOff}
	if r := rep.Report; r != nil && !in.Active {
		in.PredictedGainPct = r.CacheGainPct
		in.ADAOn = r.ADA != nil && r.ADA.On
		c.predHitPct = -1
		if r.CacheReadHitPct != nil {
			c.predHitPct = *r.CacheReadHitPct
		}
	}
	c.hitPct = -1
	if c.havePrev && c.info.ReadHits >= c.prev.ReadHits && c.info.ReadMisses >= c.prev.ReadMisses {
		hits, misses := c.info.ReadHits-c.prev.ReadHits, c.info.ReadMisses-c.prev.ReadMisses
		in.ReadNs, in.BlockReadNs = d.ctrl.ReadCosts()
		if !in.Active {
			// Off, the counters count the reads of blocks the cache
			// holds (decide.CacheInput.ResidentHits).
			in.ResidentHits, in.ResidentMisses = hits, misses
		} else {
			in.ReadHits, in.ReadMisses = hits, misses
			in.Promotions = c.info.Promotions - min(c.prev.Promotions, c.info.Promotions)
			if n := hits + misses; n > 0 {
				c.hitPct = 100 * float64(hits) / float64(n)
			}
		}
	}
	c.dec = decide.Cache(in)
	c.predOn, c.measOff = c.dec.PredictsOn, c.dec.MeasuresOff
	// The decision is logged when it changes kind (kept or switched, and
	// on what evidence), not every window.
	if key := c.info.Mode + "|" + c.dec.Mode + "|" + firstWord(c.dec.Reason); key != c.logged {
		c.logged = key
		e.log.Info("cache decision", "device", d.sys.Name, "cache", c.info.Name, "mode", c.info.Mode, "decision", c.dec.Reason)
	}
	if c.dec.Mode != "" && c.dec.Mode != c.info.Mode && now.After(c.backoff[c.dec.Mode]) && d.cacheGate(rep, g, now) {
		d.switchCache(c.dec.Mode, c.dec.Reason, now, e)
		if c.dec.Measured && c.info.Mode == decide.CacheOff {
			// A loss measured on the cache's own counters refutes the
			// prediction that turned it on, as a regression does a
			// switch: the simulation, which judges the filled cache,
			// does not turn it on again for the back-off.
			c.backoff[decide.CacheOn] = now.Add(d.ctrl.Policy.Backoff)
		}
	}
	d.showCache()
	if e.metrics != nil {
		e.metrics.SetCache(d.sys.Name, &metrics.CacheState{Name: c.info.Name, Mode: c.info.Mode,
			HitRatio: c.hitPct / 100, HitMeasured: c.hitPct >= 0, PredictedHitRatio: c.predHitPct / 100, PredictedHitKnown: c.predHitPct >= 0,
			Gain: c.dec.GainPct / 100, Measured: c.dec.Measured,
			GainKnown: c.dec.Known, Dirty: c.info.Dirty})
	}
}

// readApp reads the cache device's stat file: the window's reads and
// their mean response time, as the application saw them.
func (c *governedCache) readApp(hostRoot string) {
	st, err := sysfs.ReadStat(hostRoot, c.dmDev)
	if err != nil {
		c.haveStat, c.readNs, c.reads = false, 0, 0
		return
	}
	c.readNs, c.reads = 0, 0
	if c.haveStat && st.ReadIOs >= c.stat.ReadIOs && st.ReadTicksMs >= c.stat.ReadTicksMs {
		c.reads = st.ReadIOs - c.stat.ReadIOs
		if c.reads > 0 {
			c.readNs = float64(st.ReadTicksMs-c.stat.ReadTicksMs) * 1e6 / float64(c.reads)
		}
	}
	c.stat, c.haveStat = st, true
}

// verifyCache counts the window towards the verification of the last
// switch and, at its end, switches back when the application's mean read
// response time got worse than the window before the switch by more than
// the policy's tolerated regression (the mode switched to is then not
// set again for the policy's back-off).
func (d *device) verifyCache(now time.Time, e *windowEnv) {
	c, v := d.cache, d.cache.verify
	v.sumNs += c.readNs * float64(c.reads)
	v.reads += c.reads
	v.left--
	if v.left > 0 {
		return
	}
	c.verify = nil
	if v.reads == 0 || v.baselineNs <= 0 {
		return
	}
	after := v.sumNs / float64(v.reads)
	limit := v.baselineNs * (1 + d.ctrl.Policy.ToleratedRegressionPct/100)
	msg := fmt.Sprintf("mean read response %.0f µs after, %.0f µs before", after/1e3, v.baselineNs/1e3)
	if after <= limit {
		c.lastText += "; verified: " + msg
		return
	}
	c.backoff[v.to] = now.Add(d.ctrl.Policy.Backoff)
	d.switchCache(v.from, "regression: "+msg, now, e)
	c.verify = nil // a revert is not verified again
	d.status.Reverts++
	d.status.LastRevertTime = ptrTime(now)
}

// cacheGate reports whether the cache may be switched now: Apply mode,
// the policy's gate, no other change or verification in progress, and
// minDwell since the cache's last switch.
func (d *device) cacheGate(rep window.Report, g window.Gate, now time.Time) bool {
	c := d.cache
	return d.apply() && !g.Paused && !g.Yielded && g.Granted && rep.Action.Kind == window.ActionNone &&
		!d.ctrl.Verifying() &&
		(c.lastChange.IsZero() || now.Sub(c.lastChange) >= g.MinDwell)
}

// switchCache sets the cache's mode through the actuator (which records
// the original first) and starts its verification, when the window
// measured the application's reads.
func (d *device) switchCache(mode, reason string, now time.Time, e *windowEnv) {
	c := d.cache
	from := c.info.Mode
	if err := e.act.SetCacheMode(c.info.Name, d.sys.Name, mode); err != nil {
		d.status.LastError = err.Error()
		e.log.Error(err, "switch the cache", "device", d.sys.Name, "cache", c.info.Name, "mode", mode)
		return
	}
	c.info.Mode, c.havePrev, c.predOn, c.measOff = mode, false, false, false // counters of the new mode start at the next window
	c.lastChange = now
	c.lastText = fmt.Sprintf("%s -> %s: %s", from, mode, reason)
	if c.reads >= uint64(max(d.ctrl.Policy.MinRequests, 1)) {
		c.verify = &cacheVerify{from: from, to: mode, baselineNs: c.readNs, left: d.ctrl.Policy.VerifyWindows}
	}
	d.status.Changes++
	d.status.LastChangeTime, d.status.LastChange = ptrTime(now), "cache "+c.lastText
	if m := e.metrics; m != nil {
		m.IncChange(d.sys.Name)
	}
	kv := []any{"device", d.sys.Name, "cache", c.info.Name, "change", c.lastText}
	if mode == decide.CacheOn && c.predHitPct >= 0 {
		kv = append(kv, "predictedReadHitPercent", v1alpha1.FormatPercent(c.predHitPct))
	}
	e.log.Info("applied", kv...)
}

// showCache puts the cache's state into the device's status.
func (d *device) showCache() {
	c := d.cache
	st := &v1alpha1.CacheState{Name: c.info.Name, Mode: c.info.Mode, BlockBytes: int64(c.info.BlockSectors * trace.SectorSize),
		MeanReadMicroseconds: int64(c.readNs / 1e3),
		SizeBytes:            int64(min(c.info.TotalBlocks*c.info.BlockSectors*trace.SectorSize, 1<<62)),
		DirtyBlocks:          int64(min(c.info.Dirty, 1<<62)), Reason: c.dec.Reason, GainMeasured: c.dec.Measured,
		LastChange: c.lastText}
	if c.dec.Reason != "" && (c.dec.Measured || !strings.HasPrefix(c.dec.Reason, "not simulated")) {
		st.GainPercent = v1alpha1.FormatPercent(c.dec.GainPct)
	}
	if c.hitPct >= 0 {
		st.ReadHitPercent = v1alpha1.FormatPercent(c.hitPct)
	}
	if c.predHitPct >= 0 {
		st.PredictedReadHitPercent = v1alpha1.FormatPercent(c.predHitPct)
	}
	if !c.lastChange.IsZero() {
		t := metav1.NewTime(c.lastChange)
		st.LastChangeTime = &t
	}
	if c.verify != nil {
		st.VerifyingWindows = int32(c.verify.left)
	}
	d.status.Cache = st
}

// setDMCacheModel sets the simulated cache that stands for the dm-cache
// info (kernel name dm) in front of the device: smq by its own rules
// (engine.SMQ, its hotspots sized by the cache's origin, or by the device
// when the table gives no length), filled from empty over one window
// (engine.Options.CacheFill) as the real cache fills after a switch, each
// hit charged the cache device's measured read time (dmcache.ProbeRead) on
// one of the engine's CPUs. When the probe fails the failure is logged
// and the hits keep the default RAM copy cost.
func (d *device) setDMCacheModel(info dmcache.CacheInfo, dm string, e *windowEnv) {
	cfg := &d.ctrl.Policy.Engine.Cache
	origin := info.OriginSectors
	if origin == 0 {
		origin = d.sys.SizeBytes / trace.SectorSize
	}
	*cfg = engine.SMQ(info.TotalBlocks, uint32(info.BlockSectors), origin)
	d.ctrl.Policy.Engine.CacheFill = true
	dev, ns, err := dmcache.ProbeRead(e.hostRoot, dm, info.Origin)
	if err != nil {
		e.log.Info("cache read time not measured", "device", d.sys.Name, "cache", info.Name, "error", err.Error())
		return
	}
	cfg.HitOverheadNs = max(ns, 1)
	cfg.HitServers = d.ctrl.Policy.Engine.CPUs
	if cfg.HitServers <= 0 {
		cfg.HitServers = runtime.NumCPU()
	}
	e.log.Info("cache read time measured", "device", d.sys.Name, "cache", info.Name, "cacheDevice", dev,
		"readMicroseconds", float64(ns)/1e3, "hitServers", cfg.HitServers)
}
