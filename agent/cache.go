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
	"runtime"
	"time"

	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/trace"
)

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
	if d.cache == nil || d.cache.Info().Name != info.Name {
		d.cache = dmcache.NewGoverned(info, dm)
		d.ctrl.ForgetCacheWarm()
		d.setDMCacheModel(info, dm, e)
	} else {
		d.cache.Refresh(info)
	}
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
	st, err := sysfs.ReadStat(e.hostRoot, c.DMDev())
	c.ObserveApp(st, err == nil)
	if c.Verifying() {
		d.verifyCache(now, e)
		d.status.Cache = c.Status()
		return
	}
	w := dmcache.Window{Active: d.ctrl.CacheActive(), MarginPct: d.ctrl.Policy.Decide.MarginPct,
		MinReads: uint64(d.ctrl.Policy.MinRequests)}
	if r := rep.Report; r != nil {
		w.Simulated, w.PredictedGainPct, w.ADAOn, w.PredictedHitPct = true, r.CacheGainPct, r.ADA != nil && r.ADA.On, r.CacheReadHitPct
	}
	w.ReadNs, w.BlockReadNs = d.ctrl.ReadCosts()
	if c.Decide(w) {
		// Logged when the decision changes kind, not every window.
		e.log.Info("cache decision", "device", d.sys.Name, "cache", c.Info().Name, "mode", c.Info().Mode, "decision", c.Decision().Reason)
	}
	if mode := c.Wants(now); mode != "" && d.cacheGate(rep, g, now) {
		d.switchCache(mode, c.Decision().Reason, now, e)
		c.DecidedSwitch(now, d.ctrl.Policy.Backoff)
	}
	d.status.Cache = c.Status()
	if e.metrics != nil {
		info, dec, hit, pred := c.Info(), c.Decision(), c.HitPct(), c.PredictedHitPct()
		e.metrics.SetCache(d.sys.Name, &metrics.CacheState{Name: info.Name, Mode: info.Mode,
			HitRatio: hit / 100, HitMeasured: hit >= 0, PredictedHitRatio: pred / 100, PredictedHitKnown: pred >= 0,
			Gain: dec.GainPct / 100, Measured: dec.Measured, GainKnown: dec.Known, Dirty: info.Dirty})
	}
}

// verifyCache counts the window towards the verification of the last
// switch (dmcache.Governed.Verify) and, at its end, switches back when the
// application's mean read response time got worse than the window before
// the switch by more than the policy's tolerated regression (the mode
// switched to is then not set again for the policy's back-off).
func (d *device) verifyCache(now time.Time, e *windowEnv) {
	from, reason := d.cache.Verify(now, d.ctrl.Policy.ToleratedRegressionPct, d.ctrl.Policy.Backoff)
	if from == "" {
		return
	}
	d.switchCache(from, reason, now, e)
	d.cache.StopVerifying() // a revert is not verified again
	d.status.Reverts++
	d.status.LastRevertTime = ptrTime(now)
}

// cacheGate reports whether the cache may be switched now: Apply mode,
// the policy's gate, no other change or verification in progress, and
// minDwell since the cache's last switch.
func (d *device) cacheGate(rep window.Report, g window.Gate, now time.Time) bool {
	return d.apply() && !g.Paused && !g.Yielded && g.Granted && rep.Action.Kind == window.ActionNone &&
		!d.ctrl.Verifying() && d.cache.MayChange(now, g.MinDwell)
}

// switchCache sets the cache's mode through the actuator (which records
// the original first) and starts its verification, when the window
// measured the application's reads.
func (d *device) switchCache(mode, reason string, now time.Time, e *windowEnv) {
	c := d.cache
	name := c.Info().Name
	if err := e.act.SetCacheMode(name, d.sys.Name, mode); err != nil {
		d.status.LastError = err.Error()
		e.log.Error(err, "switch the cache", "device", d.sys.Name, "cache", name, "mode", mode)
		return
	}
	text := c.Switched(mode, reason, now, uint64(max(d.ctrl.Policy.MinRequests, 1)), d.ctrl.Policy.VerifyWindows)
	d.status.Changes++
	d.status.LastChangeTime, d.status.LastChange = ptrTime(now), "cache "+text
	if m := e.metrics; m != nil {
		m.IncChange(d.sys.Name)
	}
	kv := []any{"device", d.sys.Name, "cache", name, "change", text}
	if pred := c.PredictedHitPct(); mode == decide.CacheOn && pred >= 0 {
		kv = append(kv, "predictedReadHitPercent", v1alpha1.FormatPercent(pred))
	}
	e.log.Info("applied", kv...)
}

// setDMCacheModel sets the simulated cache that stands for the dm-cache
// info (kernel name dm) in front of the device (window.Controller.ModelDMCache):
// smq sized by the cache's origin, or by the device when the table gives
// no length, each hit charged the cache device's measured read time
// (dmcache.ProbeRead) on one of the engine's CPUs. When the probe fails
// the failure is logged and the hits keep the default RAM copy cost.
func (d *device) setDMCacheModel(info dmcache.CacheInfo, dm string, e *windowEnv) {
	origin := info.OriginSectors
	if origin == 0 {
		origin = d.sys.SizeBytes / trace.SectorSize
	}
	dev, ns, err := dmcache.ProbeRead(e.hostRoot, dm, info.Origin)
	if err != nil {
		d.ctrl.ModelDMCache(info.TotalBlocks, info.BlockSectors, origin, 0, 0)
		e.log.Info("cache read time not measured", "device", d.sys.Name, "cache", info.Name, "error", err.Error())
		return
	}
	servers := d.ctrl.ModelDMCache(info.TotalBlocks, info.BlockSectors, origin, max(ns, 1), runtime.NumCPU())
	e.log.Info("cache read time measured", "device", d.sys.Name, "cache", info.Name, "cacheDevice", dev,
		"readMicroseconds", float64(ns)/1e3, "hitServers", servers)
}
