package dmcache

// The per-window decision on a governed dm-cache, over plain inputs: the
// cache's counters (CacheInfo), the cache device's stat file (sysfs.Stat)
// and the window's simulation (Window). Governed does no I/O: the agent
// reads the counters and the stat file, switches the mode through the
// actuator and writes the status.

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Governed is the agent's state of one dm-cache.
type Governed struct {
	dmDev      string    // the cache device's kernel name, dm-N
	info, prev CacheInfo // at this window's end and the previous one's
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
	logged     string // the last decision logged (Decide)
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

// NewGoverned returns the state of the dm-cache info, whose device's
// kernel name is dmDev (dm-N), as first found: nothing measured yet.
func NewGoverned(info CacheInfo, dmDev string) *Governed {
	return &Governed{info: info, hitPct: -1, predHitPct: -1, dmDev: dmDev, backoff: map[string]time.Time{}}
}

// Refresh takes the cache's counters at this window's end (info); the
// ones it held become the previous window's.
func (c *Governed) Refresh(info CacheInfo) {
	c.prev, c.havePrev = c.info, true
	c.info = info
}

// Info is the cache's counters and mode at the last window's end (the
// mode as switched since).
func (c *Governed) Info() CacheInfo { return c.info }

// DMDev is the cache device's kernel name, dm-N.
func (c *Governed) DMDev() string { return c.dmDev }

// Decision is the last window's decision.
func (c *Governed) Decision() decide.CacheDecision { return c.dec }

// HitPct is the last window's read hits of the cache's counters, percent;
// -1 when not measured (off, or no reads).
func (c *Governed) HitPct() float64 { return c.hitPct }

// PredictedHitPct is the simulated cache's read hits, percent, the last
// decision while off rested on; -1 when none was simulated.
func (c *Governed) PredictedHitPct() float64 { return c.predHitPct }

// ObserveApp takes the cache device's stat file at the window's end (ok
// false: it could not be read) and sets the window's reads and their mean
// response time, as the application saw them.
func (c *Governed) ObserveApp(st sysfs.Stat, ok bool) {
	if !ok {
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

// Verifying reports whether a switch is being verified.
func (c *Governed) Verifying() bool { return c.verify != nil }

// Window is what Decide needs of one window besides the cache's counters.
type Window struct {
	// Active reports whether the cache is on (writethrough).
	Active bool
	// MarginPct is the policy's decision margin, percent; MinReads the
	// reads a window needs to be judged.
	MarginPct float64
	MinReads  uint64
	// Simulated reports whether the window was simulated; then
	// PredictedGainPct (percent; nil: not simulated with a cache), ADAOn
	// and PredictedHitPct (percent; nil: no simulated cache) are the
	// simulation's.
	Simulated        bool
	PredictedGainPct *float64
	ADAOn            bool
	PredictedHitPct  *float64
	// ReadNs and BlockReadNs are the origin's read costs learned by the
	// controller (window.Controller.ReadCosts), ns.
	ReadNs, BlockReadNs float64
}

// Decide decides on the cache after the window w (decide.Cache). changed
// reports whether the decision changed kind (kept or switched, and on
// what evidence) since the last one, which is when the agent logs it.
func (c *Governed) Decide(w Window) (changed bool) {
	in := decide.CacheInput{Active: w.Active, MarginPct: w.MarginPct, MinReads: w.MinReads,
		PrevPredictedOn: c.predOn, PrevMeasuredOff: c.measOff}
	if w.Simulated && !in.Active {
		in.PredictedGainPct = w.PredictedGainPct
		in.ADAOn = w.ADAOn
		c.predHitPct = -1
		if w.PredictedHitPct != nil {
			c.predHitPct = *w.PredictedHitPct
		}
	}
	c.hitPct = -1
	if c.havePrev && c.info.ReadHits >= c.prev.ReadHits && c.info.ReadMisses >= c.prev.ReadMisses {
		hits, misses := c.info.ReadHits-c.prev.ReadHits, c.info.ReadMisses-c.prev.ReadMisses
		in.ReadNs, in.BlockReadNs = w.ReadNs, w.BlockReadNs
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
	key := c.info.Mode + "|" + c.dec.Mode + "|" + firstWord(c.dec.Reason)
	if key == c.logged {
		return false
	}
	c.logged = key
	return true
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// Wants is the mode the last decision sets, when it differs from the
// cache's and is not backed off at now; "" when none.
func (c *Governed) Wants(now time.Time) string {
	if c.dec.Mode != "" && c.dec.Mode != c.info.Mode && now.After(c.backoff[c.dec.Mode]) {
		return c.dec.Mode
	}
	return ""
}

// MayChange reports whether minDwell has passed at now since the cache's
// last switch (or it never switched).
func (c *Governed) MayChange(now time.Time, minDwell time.Duration) bool {
	return c.lastChange.IsZero() || now.Sub(c.lastChange) >= minDwell
}

// DecidedSwitch follows a switch the decision made (Wants) at now: a loss
// measured on the cache's own counters refutes the prediction that turned
// it on, as a regression does a switch, so the simulation, which judges
// the filled cache, does not turn it on again for backoff.
func (c *Governed) DecidedSwitch(now time.Time, backoff time.Duration) {
	if c.dec.Measured && c.info.Mode == decide.CacheOff {
		c.backoff[decide.CacheOn] = now.Add(backoff)
	}
}

// Switched records that the cache's mode was set to mode at now for
// reason, and starts the switch's verification over verifyWindows windows
// when the window measured at least minReads of the application's reads
// (the baseline). It returns the change's text, "from -> mode: reason".
func (c *Governed) Switched(mode, reason string, now time.Time, minReads uint64, verifyWindows int) string {
	from := c.info.Mode
	c.info.Mode, c.havePrev, c.predOn, c.measOff = mode, false, false, false // counters of the new mode start at the next window
	c.lastChange = now
	c.lastText = fmt.Sprintf("%s -> %s: %s", from, mode, reason)
	if c.reads >= minReads {
		c.verify = &cacheVerify{from: from, to: mode, baselineNs: c.readNs, left: verifyWindows}
	}
	return c.lastText
}

// Verify counts the window towards the verification of the last switch
// and, at its end, judges it: when the application's mean read response
// time got worse than the window before the switch by more than
// toleratedPct percent, it returns the mode to switch back to (revertTo)
// and why, and backs the mode switched to off until now+backoff. A
// verified switch notes it in the last change's text. revertTo is ""
// when the switch stands or is still being verified.
func (c *Governed) Verify(now time.Time, toleratedPct float64, backoff time.Duration) (revertTo, reason string) {
	v := c.verify
	v.sumNs += c.readNs * float64(c.reads)
	v.reads += c.reads
	v.left--
	if v.left > 0 {
		return "", ""
	}
	c.verify = nil
	if v.reads == 0 || v.baselineNs <= 0 {
		return "", ""
	}
	after := v.sumNs / float64(v.reads)
	limit := v.baselineNs * (1 + toleratedPct/100)
	msg := fmt.Sprintf("mean read response %.0f µs after, %.0f µs before", after/1e3, v.baselineNs/1e3)
	if after <= limit {
		c.lastText += "; verified: " + msg
		return "", ""
	}
	c.backoff[v.to] = now.Add(backoff)
	return v.from, "regression: " + msg
}

// StopVerifying ends the verification in progress, if any (a revert is
// not verified again).
func (c *Governed) StopVerifying() { c.verify = nil }

// Status is the cache's state for the device's status.
func (c *Governed) Status() *v1alpha1.CacheState {
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
	return st
}
