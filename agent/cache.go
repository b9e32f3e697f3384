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
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// CacheInfo is what the agent reads of a dm-cache (`dmsetup table` and
// `dmsetup status`, Documentation/admin-guide/device-mapper/cache.rst).
type CacheInfo struct {
	// Name is the device-mapper name; Origin the origin's "MAJOR:MINOR".
	Name, Origin string
	// BlockSectors is the cache block size, TotalBlocks the capacity in
	// blocks (sectors of 512 B).
	BlockSectors, TotalBlocks uint64
	// Mode is writethrough, passthrough or writeback.
	Mode string
	// Cumulative counters since the table was loaded.
	ReadHits, ReadMisses, Promotions, Dirty uint64
}

// CacheTool reads and switches dm-caches: package dmcache's tool, adapted
// by the command. Info's error for a device-mapper device that is not a
// cache is not an error of the agent: the device is not governed.
type CacheTool interface {
	actuate.CacheModes
	Info(name string) (CacheInfo, error)
}

// governedCache is the agent's state of one dm-cache.
type governedCache struct {
	info, prev CacheInfo // at this window's end and the previous one's
	havePrev   bool
	dec        decide.CacheDecision
	hitPct     float64 // the window's read hits, percent; -1: no reads
	lastChange time.Time
	lastText   string
	logged     string // the last decision logged (cacheAfter)
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// findCache returns the dm-cache whose origin is the device sd (its
// holder under HOSTROOT/sys/block/DEV/holders), if there is one.
func findCache(hostRoot, dev, majorMinor string, tool CacheTool) (CacheInfo, bool) {
	root := hostRoot
	if root == "" {
		root = "/"
	}
	ents, err := os.ReadDir(filepath.Join(root, "sys", "block", dev, "holders"))
	if err != nil {
		return CacheInfo{}, false
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "dm-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "sys", "block", e.Name(), "dm", "name"))
		if err != nil {
			continue
		}
		info, err := tool.Info(strings.TrimSpace(string(b)))
		if err == nil && info.Origin == majorMinor {
			return info, true
		}
	}
	return CacheInfo{}, false
}

// cacheConfig is the simulated cache of the real one: a segment per cache
// block (REDCAP's segment model; dm-cache's smq policy is not modelled
// yet).
func cacheConfig(info CacheInfo, capacitySectors uint64) redcap.Config {
	return redcap.Config{Segments: int(min(info.TotalBlocks, 1<<20)), SegmentSectors: uint32(info.BlockSectors),
		CapacitySectors: capacitySectors}
}

// cacheBefore finds or refreshes the device's dm-cache before its window
// is evaluated, and tells the controller whether it is on: an active
// cache's window is judged without cached candidates.
func (d *device) cacheBefore(e *windowEnv) {
	if e.caches == nil || !d.policy.Spec.Cache.Enabled {
		d.cache, d.status.Cache = nil, nil
		return
	}
	info, ok := findCache(e.hostRoot, d.sys.Name, d.sys.MajorMinor, e.caches)
	if !ok {
		d.cache, d.status.Cache = nil, nil
		d.ctrl.cacheActive = false
		return
	}
	if d.cache == nil || d.cache.info.Name != info.Name {
		d.cache = &governedCache{hitPct: -1}
		d.ctrl.policy.Engine.Cache = cacheConfig(info, d.sys.SizeBytes/trace.SectorSize)
	} else {
		d.cache.prev, d.cache.havePrev = d.cache.info, true
	}
	d.cache.info = info
	d.ctrl.cacheActive = info.Mode == decide.CacheOn
}

// cacheAfter decides on the cache after the window (rep) and, in Apply
// mode when the gate allows and nothing else changed in the window,
// switches it.
func (d *device) cacheAfter(rep WindowReport, g Gate, now time.Time, e *windowEnv) {
	c := d.cache
	if c == nil {
		return
	}
	in := decide.CacheInput{Active: d.ctrl.cacheActive, MarginPct: d.ctrl.policy.Decide.MarginPct,
		MinReads: uint64(d.ctrl.policy.MinRequests)}
	if r := rep.Report; r != nil && !in.Active {
		in.PredictedGainPct = r.CacheGainPct
		in.ADAOn = r.ADA != nil && r.ADA.On
	}
	c.hitPct = -1
	if in.Active && c.havePrev && c.info.ReadHits >= c.prev.ReadHits && c.info.ReadMisses >= c.prev.ReadMisses {
		in.ReadHits, in.ReadMisses = c.info.ReadHits-c.prev.ReadHits, c.info.ReadMisses-c.prev.ReadMisses
		in.Promotions = c.info.Promotions - min(c.prev.Promotions, c.info.Promotions)
		in.ReadNs, in.BlockReadNs = d.ctrl.readNs, d.ctrl.blockReadNs
		if n := in.ReadHits + in.ReadMisses; n > 0 {
			c.hitPct = 100 * float64(in.ReadHits) / float64(n)
		}
	}
	c.dec = decide.Cache(in)
	// The decision is logged when it changes kind (kept or switched, and
	// on what evidence), not every window.
	if key := c.info.Mode + "|" + c.dec.Mode + "|" + firstWord(c.dec.Reason); key != c.logged {
		c.logged = key
		e.log.Info("cache decision", "device", d.sys.Name, "cache", c.info.Name, "mode", c.info.Mode, "decision", c.dec.Reason)
	}
	if c.dec.Mode != "" && c.dec.Mode != c.info.Mode && d.cacheGate(rep, g, now) {
		d.switchCache(c.dec, now, e)
	}
	d.showCache()
}

// cacheGate reports whether the cache may be switched now: Apply mode,
// the policy's gate, no other change or verification in progress, and
// minDwell since the cache's last switch.
func (d *device) cacheGate(rep WindowReport, g Gate, now time.Time) bool {
	c := d.cache
	return d.apply() && !g.Paused && !g.Yielded && g.Granted && rep.Action.Kind == ActionNone &&
		d.ctrl.verify == nil && d.ctrl.raVerify == nil &&
		(c.lastChange.IsZero() || now.Sub(c.lastChange) >= g.MinDwell)
}

// switchCache sets the cache's mode through the actuator (which records
// the original first).
func (d *device) switchCache(dec decide.CacheDecision, now time.Time, e *windowEnv) {
	c := d.cache
	from := c.info.Mode
	if err := e.act.SetCacheMode(c.info.Name, d.sys.Name, dec.Mode); err != nil {
		d.status.LastError = err.Error()
		e.log.Error(err, "switch the cache", "device", d.sys.Name, "cache", c.info.Name, "mode", dec.Mode)
		return
	}
	c.info.Mode, c.havePrev = dec.Mode, false // counters of the new mode start at the next window
	c.lastChange = now
	c.lastText = fmt.Sprintf("%s -> %s: %s", from, dec.Mode, dec.Reason)
	d.status.Changes++
	d.status.LastChangeTime, d.status.LastChange = ptrTime(now), "cache "+c.lastText
	if m := e.metrics; m != nil {
		m.IncChange(d.sys.Name)
	}
	e.log.Info("applied", "device", d.sys.Name, "cache", c.info.Name, "change", c.lastText)
}

// showCache puts the cache's state into the device's status.
func (d *device) showCache() {
	c := d.cache
	st := &v1alpha1.CacheState{Name: c.info.Name, Mode: c.info.Mode, BlockBytes: int64(c.info.BlockSectors * trace.SectorSize),
		SizeBytes:   int64(min(c.info.TotalBlocks*c.info.BlockSectors*trace.SectorSize, 1<<62)),
		DirtyBlocks: int64(min(c.info.Dirty, 1<<62)), Reason: c.dec.Reason, GainMeasured: c.dec.Measured,
		LastChange: c.lastText}
	if c.dec.Reason != "" && (c.dec.Measured || !strings.HasPrefix(c.dec.Reason, "not simulated")) {
		st.GainPercent = v1alpha1.FormatPercent(c.dec.GainPct)
	}
	if c.hitPct >= 0 {
		st.ReadHitPercent = v1alpha1.FormatPercent(c.hitPct)
	}
	if !c.lastChange.IsZero() {
		t := metav1.NewTime(c.lastChange)
		st.LastChangeTime = &t
	}
	d.status.Cache = st
}

// readServiceNs is the mean service time (dispatch to completion) of the
// reads in reqs smaller than blockSectors and of those at least that
// large, ns; 0 for a class without reads. A class without reads borrows
// the other's time.
func readServiceNs(reqs []trace.Request, blockSectors uint64) (readNs, blockNs float64) {
	var small, large, ns, nl float64
	for i := range reqs {
		r := &reqs[i]
		if r.Op != trace.Read || !r.HasService() {
			continue
		}
		if uint64(r.Sectors) >= blockSectors {
			large += float64(r.Complete - r.Dispatch)
			nl++
		} else {
			small += float64(r.Complete - r.Dispatch)
			ns++
		}
	}
	if ns > 0 {
		readNs = small / ns
	}
	if nl > 0 {
		blockNs = large / nl
	}
	if readNs == 0 {
		readNs = blockNs
	}
	if blockNs == 0 {
		blockNs = readNs
	}
	return readNs, blockNs
}
