package readahead

import (
	"fmt"
	"math"
	"time"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Settings are what a device's road needs from its policy and its
// device, besides the window.
type Settings struct {
	// CurrentKiB, OriginalKiB, MinKiB, MaxKiB, MarginPct, LowWastePct
	// and Seeks are Decide's (Input).
	CurrentKiB, OriginalKiB, MinKiB, MaxKiB int
	MarginPct, LowWastePct                  float64
	Seeks                                   bool
	// Model is the device's disk model: its class, capacity and caps,
	// for its costs (NewLineDevice).
	Model *model.Model
	// Caps are the blk-throttle caps of the device's readers
	// (agent/blkcaps): a request's share of them is a cost the service
	// times do not show (NewLineDevice).
	Caps model.Throttle
	// Horizon is the time constant of the evidence's decay
	// (spec.rollout.minDwell): a window's evidence weighs e^(−age/Horizon)
	// in later decisions; 0 keeps only the window's own.
	Horizon time.Duration
	// VerifyWindows is how many windows of the readers a change was made
	// for verify it; Backoff how long a direction that regressed is not
	// taken again (the policy's back-off).
	VerifyWindows int
	Backoff       time.Duration
	// PreviousKiB and RestorePrevious are Decide's (Input): the depth
	// before the device's default changed, and whether to put it back.
	PreviousKiB     int
	RestorePrevious bool
}

// Window is one window's measurements.
type Window struct {
	// Now is the window's end.
	Now time.Time
	// PageCache is the page-cache probe's counts of the window.
	PageCache PageCache
	// ReadScale multiplies the counts of read()'s pages, which the probe
	// follows only while the device is traced: the window's length over
	// its traced part (1, or 0, for a window traced whole).
	ReadScale float64
	// BusyNs is the device time of the window's read-ahead requests
	// (REQ_RAHEAD: the page cache's windows), ns: the time during which
	// at least one was in service (the union of their service
	// intervals, as io_ticks counts busy time); only a window traced
	// whole verifies a change.
	BusyNs int64
	// AheadSectors and AheadRequests are the window's read-ahead
	// requests' sectors (512 B) and count: under a token bucket
	// (Settings.Caps, the model's caps) their share of its rates is a
	// time the device's busy time does not show.
	AheadSectors, AheadRequests int64
	// Latencies are the service times of the window's read-ahead
	// requests by size, for the device's costs.
	Latencies Latencies
}

// Step is the road's answer to a window.
type Step struct {
	// Evidence and Latencies are the window's own; Decision the decision
	// over it and the recent windows' evidence; Device the costs it used.
	Evidence  Evidence
	Latencies Latencies
	Decision  Decision
	Device    LineDevice
	// Revert: the last change regressed; Decision.KiB is the depth it
	// replaced, which the agent must write back (a revert passes every
	// gate but Observe and a pause), and Message says why.
	Revert  bool
	Message string
	// Verifying is how many windows the last change still awaits.
	Verifying int
}

// Verification is the outcome of a change's verification.
type Verification struct {
	// FromKiB and ToKiB are the change's depths.
	FromKiB, ToKiB int
	// Outcome is Verified, Reverted or Superseded (the readers it was
	// made for did not read again within the evidence's horizon).
	Outcome string
	// BaselineNs is the device time per used page before the change,
	// MeasuredNs after it (ns; 0 when not measured), both with the caps
	// known at the verdict (work.nsPerPage).
	BaselineNs, MeasuredNs float64
}

// What names the change, e.g. "read_ahead_kb 2560 -> 128".
func (v Verification) What() string { return fmt.Sprintf("read_ahead_kb %d -> %d", v.FromKiB, v.ToKiB) }

// Road is one device's read-ahead state between windows: the evidence of
// the recent windows, the busy time per used page last measured for each
// kind of reader at the current depth, the verification of the last
// change and the back-off of a change that regressed. Its zero value is
// ready. It does no I/O.
type Road struct {
	mix   Evidence
	lat   Latencies
	mixAt time.Time
	// perPage holds, by kind of reader, the device's work and used
	// pages of the last windows of that kind alone at the current depth,
	// newest last, as many as a verification counts.
	perPage [3][]work
	verify  *pending
	// restoreKiB is the depth of the last window's decision when it put
	// a previous default back (ReasonPreviousDefault), else 0.
	restoreKiB int
	// backoff: no depth on the side of backoffKiB that regressed
	// (below it when backoffLower) until backoffUntil.
	backoffKiB   int
	backoffLower bool
	backoffUntil time.Time
	// Last is the outcome of the last verification (nil: none yet).
	Last *Verification
}

// pending is a change under verification. baseLeft is how many windows
// of readers still at the old depth may yet make its baseline: all the
// verification counts when the change was made with no measure of the
// old depth, else none.
type pending struct {
	from, to int
	kind     Kind
	// restore: the change put a previous default back; no other change
	// is made while it is verified, so that it verifies that one.
	restore    bool
	baseline   work
	baseLeft   int
	left, seen int
	counted    work
	until      time.Time
}

// work is the read-ahead requests' work of one or more windows, and the
// pages of what they read that resolved in them, used or wasted.
type work struct {
	busyNs, sectors, requests float64
	used, resolved            float64
}

func (w work) plus(o work) work {
	return work{w.busyNs + o.busyNs, w.sectors + o.sectors, w.requests + o.requests, w.used + o.used, w.resolved + o.resolved}
}

// nsPerPage is the device time per used page, ns (0: no used page): the
// time per page read (pageSectors) over the share of resolved pages
// used. The time is the busy time, or under a token bucket the time its
// rates need for the requests and their bytes when that is longer, the
// cost the line model charges a request (LineDevice: max of the line,
// 1/IOPS and bytes/BPS). A page resolves when its reader uses it or
// reclaim drops it unused, often windows after its read, so the used
// pages a window counts are a sample of those it read: the time is
// divided by the pages read, which the trace counts whole, and the
// sample gives the share of them used.
func (w work) nsPerPage(caps model.Throttle) float64 {
	if w.used <= 0 || w.sectors <= 0 {
		return 0
	}
	t := w.busyNs
	if caps.BytesPerSec > 0 {
		t = max(t, w.sectors*trace.SectorSize/caps.BytesPerSec*1e9)
	}
	if caps.IOPS > 0 {
		t = max(t, w.requests/caps.IOPS*1e9)
	}
	return t / (w.sectors / pageSectors) * w.resolved / w.used
}

// pageSectors is the sectors of a page-cache page (4 KiB).
const pageSectors = 4096 / trace.SectorSize

// caps are the tighter of the device model's caps and its readers'.
func (s Settings) caps() model.Throttle {
	if s.Model == nil {
		return s.Caps
	}
	return tighterCaps(s.Model.Throttle(), s.Caps)
}

// Evidence is the decayed evidence of the recent windows, as of the last
// window (their read-ahead requests' latencies decay alike).
func (r *Road) Evidence() Evidence { return r.mix }

// Latencies are the decayed read-ahead latencies of the recent windows,
// which the device's lines are fitted to (NewLineDevice).
func (r *Road) Latencies() Latencies { return r.lat }

// Window takes a window's measurements and returns the step: the
// verification of the last change first (a regression reverts it), then
// the decision over the window's evidence and the recent windows'.
func (r *Road) Window(w Window, s Settings) Step {
	scale := w.ReadScale
	if scale <= 0 {
		scale = 1
	}
	ev := FromPageCache(scaleRead(w.PageCache, scale))
	r.decay(w.Now, s.Horizon)
	r.mix, r.lat = r.mix.Plus(ev, 1), r.lat.plus(w.Latencies, 1)
	st := Step{Evidence: ev, Latencies: w.Latencies}
	whole := scale == 1
	if whole {
		r.measure(ev, w, s.LowWastePct, s.VerifyWindows)
	}
	if r.verify != nil {
		if kib, msg, revert := r.check(ev, w, whole, s); revert {
			st.Decision = Decision{KiB: kib, Reason: ReasonKeep}
			st.Revert, st.Message = true, msg
			return st
		}
	}
	if r.verify != nil {
		st.Verifying = r.verify.left
	}
	if s.Model == nil {
		return st
	}
	st.Device = NewLineDevice(r.lat, s.Model, s.Caps)
	st.Decision = Decide(Input{CurrentKiB: s.CurrentKiB, OriginalKiB: s.OriginalKiB, MinKiB: s.MinKiB, MaxKiB: s.MaxKiB,
		Evidence: r.mix, Window: ev, Device: st.Device, MarginPct: s.MarginPct, LowWastePct: s.LowWastePct, Seeks: s.Seeks,
		BackedOff: r.backedOff(w.Now), PreviousKiB: s.PreviousKiB, RestorePrevious: s.RestorePrevious})
	r.restoreKiB = 0
	switch {
	case st.Decision.Reason == ReasonPreviousDefault:
		r.restoreKiB = st.Decision.KiB
	case r.verify != nil && r.verify.restore && st.Decision.Reason != ReasonBounds:
		st.Decision.KiB, st.Decision.Reason = s.CurrentKiB, ReasonKeep
		return st
	}
	if v := r.verify; v != nil && v.counted.used > 0 && st.Decision.KiB != s.CurrentKiB && (st.Decision.KiB < s.CurrentKiB) != (v.to < v.from) {
		// A move back while the change is verified ends its verification
		// on the windows it counted: a regression makes the move the
		// change's revert, with its back-off.
		if msg, regressed := r.verdict(s); regressed {
			st.Decision = Decision{KiB: v.from, Reason: ReasonKeep}
			st.Revert, st.Message = true, msg
		}
	}
	return st
}

// verdict ends the pending verification on the windows it counted: it
// reports a regression (the device time per used page beyond the
// baseline by more than the tolerance, s.LowWastePct) with its message,
// keeping the verification for Reverted; else the change is Verified,
// or NotVerified when no window measured the old depth. Both sides are
// costed with the caps known now (work.nsPerPage).
func (r *Road) verdict(s Settings) (string, bool) {
	v := r.verify
	caps := s.caps()
	out := Verification{FromKiB: v.from, ToKiB: v.to, BaselineNs: v.baseline.nsPerPage(caps), MeasuredNs: v.counted.nsPerPage(caps)}
	if out.BaselineNs <= 0 {
		// No window measured the old depth, before the change or after it.
		out.Outcome = "NotVerified"
		r.Last, r.verify = &out, nil
		return "", false
	}
	if out.MeasuredNs > out.BaselineNs*(1+s.LowWastePct/100) {
		out.Outcome = "Reverted"
		r.Last = &out
		return fmt.Sprintf("regression: %.0f ns of device time per used page at read_ahead_kb %d vs %.0f at %d (+%.1f %% > %.1f %%)",
			out.MeasuredNs, v.to, out.BaselineNs, v.from, 100*(out.MeasuredNs/out.BaselineNs-1), s.LowWastePct), true
	}
	out.Outcome = "Verified"
	r.Last, r.verify = &out, nil
	return "", false
}

// scaleRead is pc with read()'s pages multiplied by scale (a sampled
// window's: the probe follows them only while the device is traced).
func scaleRead(pc PageCache, scale float64) PageCache {
	if scale == 1 {
		return pc
	}
	ru, rw := uint64(float64(pc.ReadUsed)*scale), uint64(float64(pc.ReadWasted)*scale)
	pc.Used += ru - pc.ReadUsed
	pc.Wasted += rw - pc.ReadWasted
	pc.ReadUsed, pc.ReadWasted = ru, rw
	return pc
}

// decay weighs the evidence kept by e^(−Δt/horizon) for the time since
// the last window (none kept with no horizon).
func (r *Road) decay(now time.Time, horizon time.Duration) {
	f := 0.0
	if horizon > 0 && !r.mixAt.IsZero() {
		f = math.Exp(-float64(now.Sub(r.mixAt)) / float64(horizon))
	}
	r.mix, r.lat, r.mixAt = r.mix.Scaled(f), Latencies{}.plus(r.lat, f), now
}

// windowWork is the window's read-ahead work and used pages.
func windowWork(ev Evidence, w Window) work {
	return work{busyNs: float64(w.BusyNs), sectors: float64(w.AheadSectors), requests: float64(w.AheadRequests),
		used: ev.Used(), resolved: ev.Resolved()}
}

// measure keeps the window's work for its kind of reader, when it is of
// one kind and used pages: the last n such.
func (r *Road) measure(ev Evidence, w Window, tolPct float64, n int) {
	if k := ev.kind(tolPct); k != Mixed && ev.Used() > 0 && w.BusyNs > 0 {
		r.perPage[k] = append(r.perPage[k], windowWork(ev, w))
		r.perPage[k] = r.perPage[k][max(0, len(r.perPage[k])-max(n, 1)):]
	}
}

// baseline is the summed work of kind's last n measures (zero: none).
func (r *Road) baseline(k Kind, n int) work {
	m := r.perPage[k]
	var sum work
	for _, x := range m[max(0, len(m)-n):] {
		sum = sum.plus(x)
	}
	return sum
}

// backedOff is the predicate of the depths in back-off at now.
func (r *Road) backedOff(now time.Time) func(int) bool {
	if r.backoffKiB == 0 || !now.Before(r.backoffUntil) {
		return nil
	}
	kib, lower := r.backoffKiB, r.backoffLower
	return func(k int) bool { return (lower && k < kib) || (!lower && k > kib) }
}

// Commit records that the agent set the depth from → to at now, a change
// the road decided (not a revert, nor a move to the policy's bounds): the
// verification starts, on the kind of reader the change serves (random
// readers for a cut, sequential ones for a raise), against the device
// time per used page last measured for that kind. The baseline is the
// work of as many of the kind's last windows as the verification counts.
// A change with no such measure (the window that decided it was of mixed
// readers) takes its baseline from the windows after it whose readers of
// that kind still read at the old depth: a reader keeps the depth its
// file was opened with (file_ra_state_init, mm/readahead.c), so the
// readers that asked for the change go on at the old depth until they
// open their files again; a verification that found none ends
// NotVerified (Last says so). A change
// that goes on in the direction of one still under verification extends
// it: readers at the new depth are compared with the baseline before the
// first, and a regression reverts to the depth before the first. A change
// in the other direction supersedes it. A change that put a previous
// default back (the window's decision was ReasonPreviousDefault) is
// verified alone: the road makes no other move until its verdict.
func (r *Road) Commit(from, to int, now time.Time, s Settings) {
	kind := RandomKind
	if to > from {
		kind = SequentialKind
	}
	base := r.baseline(kind, s.VerifyWindows)
	r.perPage = [3][]work{}
	if v := r.verify; v != nil && v.to == from && (to > from) == (v.to > v.from) {
		// The same direction again: verified as one change, from the
		// depth before the first.
		v.to, v.left, v.seen, v.counted, v.until = to, s.VerifyWindows, 0, work{}, now.Add(s.Horizon)
		v.restore = v.restore || to == r.restoreKiB
		return
	}
	if v := r.verify; v != nil {
		r.Last = &Verification{FromKiB: v.from, ToKiB: v.to, BaselineNs: v.baseline.nsPerPage(s.caps()), Outcome: "Superseded"}
	}
	r.verify = nil
	if s.VerifyWindows <= 0 {
		r.Last = &Verification{FromKiB: from, ToKiB: to, Outcome: "NotVerified"}
		return
	}
	v := &pending{from: from, to: to, kind: kind, baseline: base, left: s.VerifyWindows, until: now.Add(s.Horizon),
		restore: to == r.restoreKiB}
	if base.used <= 0 { // measures have used pages: base is empty
		v.baseLeft = s.VerifyWindows
	}
	r.verify = v
}

// Reverted records that the agent wrote the depth a regressed change
// replaced back: that direction backs off until now + s.Backoff.
func (r *Road) Reverted(now time.Time, s Settings) {
	if v := r.verify; v != nil {
		r.backoffKiB, r.backoffLower, r.backoffUntil = v.from, v.to < v.from, now.Add(s.Backoff)
	}
	r.verify = nil
	r.perPage = [3][]work{}
}

// Verifying reports whether a change is being verified.
func (r *Road) Verifying() bool { return r.verify != nil }

// Forget drops the verification and the measures of the current depth:
// the depth changed by other means (a bound, another writer, a restore).
func (r *Road) Forget() {
	r.verify = nil
	r.perPage = [3][]work{}
}

// readsAt reports whether the evidence's readers of the change's kind
// read at its new depth or at its old one: the mean depth their files
// were opened at is nearer to that one than to the other, on a log scale
// (neither when there are none). A reader keeps the depth its file was
// opened with (file_ra_state_init, mm/readahead.c): the windows after a
// change may still be those of readers opened before it, which measure
// nothing of the new depth but measure the old one. Sequential readers'
// short windows count with their full ones: a reader whose read-ahead
// pages reclaim took before it read them starts again with a window
// sized by the pages it still finds (page_cache_sync_ra's context
// read-ahead), shorter than its file's depth, and those are the windows
// a raise that thrashes leaves.
func (v *pending) readsAt(ev Evidence) (atNew, atOld bool) {
	c := ev.Random
	if v.kind != RandomKind {
		c = ev.Sequential
		c.Windows, c.Depth = c.Windows+ev.Short.Windows, c.Depth+ev.Short.Depth
	}
	if c.Windows <= 0 || c.Depth <= 0 {
		return false, false
	}
	f := math.Log(c.Depth / c.Windows)
	toNew, toOld := math.Abs(f-math.Log(float64(v.to)/4)), math.Abs(f-math.Log(float64(v.from)/4))
	return toNew < toOld, toOld < toNew
}

// check counts the window towards the pending verification: windows
// traced whole whose readers are of the kind the change was made for,
// reading at its new depth (readsAt), and, for a change made with no
// baseline, those reading at its old depth as the baseline.
// After VerifyWindows of them it decides: a busy time per used page
// beyond the baseline by more than the tolerance (s.LowWastePct, the
// policy's tolerated regression) reverts the change. Past its deadline
// (the evidence's horizon, and at least VerifyWindows windows) with no
// such window, the change is Superseded: its readers are gone.
func (r *Road) check(ev Evidence, w Window, whole bool, s Settings) (kib int, msg string, revert bool) {
	v := r.verify
	v.seen++
	if whole && ev.kind(s.LowWastePct) == v.kind && ev.Used() > 0 && w.BusyNs > 0 {
		switch atNew, atOld := v.readsAt(ev); {
		case atNew:
			v.counted = v.counted.plus(windowWork(ev, w))
			v.left--
		case v.baseLeft > 0 && atOld:
			v.baseline = v.baseline.plus(windowWork(ev, w))
			v.baseLeft--
		}
	}
	expired := !w.Now.Before(v.until) && v.seen >= s.VerifyWindows
	switch {
	case v.left <= 0:
		if msg, regressed := r.verdict(s); regressed {
			return v.from, msg, true
		}
		return 0, "", false
	case expired:
		r.Last = &Verification{FromKiB: v.from, ToKiB: v.to, BaselineNs: v.baseline.nsPerPage(s.caps()), Outcome: "Superseded"}
		r.verify = nil
	}
	return 0, "", false
}
