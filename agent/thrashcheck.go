package agent

// The thrash check: a window ends early when read-ahead thrashes.
//
// Read-ahead that thrashes the page cache is the costliest state the
// agent can leave a device in: in a memory-limited container each random
// mmap fault at the default read_ahead_kb of 2560 reads 2.5 MiB, and the
// application runs 10–30 times slower than at 16 KiB
// (docs/bench-decisions.md, MEM). The evidence, the page-cache probe's
// count of pages evicted unused, is a map read and costs nothing to
// look at, so the agent does not wait for the window's end to see it:
// every ThrashCheckEvery it takes each device's counts since the last
// check, and when a device's read-ahead would be cut on them at once (a
// waste of StrongWastePct or more that decide.ReadAhead cuts, where the
// cut would shrink the faults' read-around: PageCacheWindow.cutReaches),
// every device's window ends there, at least MinCheckedWindow after it began,
// and the next begins. The window's end then decides as any window's:
// the cut, its verification (whose windows may end early the same way),
// a revert and its back-off; but a device whose thrash ended the window
// takes its waste from the check's interval, where the thrash showed,
// when that is higher (the window's earlier part may have run another
// load, whose pages dilute the waste: 66 % over a 2 s window whose last
// second showed 94 %, in the decision-quality benchmark), and is
// evaluated even over the CPU budget, which would otherwise skip the cut
// the window was ended for. No other thrash ends a window early, so a
// device at the policy's lowest depth, one whose last cut regressed, one
// whose scheduler switch is being verified, and one whose gate would hold
// the cut back (Observe mode, a pause, another writer, minDwell, no grant
// at its last window) keeps its whole windows. A device whose tracing is
// paused for a sample (sampling.go) has, until the sample begins, counts
// of the pages its page faults read around alone (the page-cache probe
// follows those while it is paused, not read()'s): when their waste is
// the mapped files' and the agent holds mapped files, the check ends the
// window and the cut of the mapped files is made on them with no request
// traced (decideMappedThrash); in the decision-quality benchmark's MEM
// that cut came at the first check into the thrash, where a probe
// brought it at the second. Any other thrash of a paused device waits
// for its reads to be traced: a surge of its reads, or of its page
// faults' read-around, is probed for a second (samplewake.go) so that it
// is seen sooner.
//
// The check ends a window the same way when sequential readers use
// read-ahead again on a device whose read-ahead a cut lowered
// (restoresOnUse): the window's end then restores the depth at once. A
// cut made for random page faults leaves a sequential reader that comes
// after them at the cut depth, 5 times slower in the benchmark's MEM with
// 8 KiB reads, and the windows' own pacing (two windows agreeing, after
// the cut's verification) kept it there for 10 s or more. The raise
// keeps the mapped files at the cut depth (agent/openfiles, hold.go).
//
// Two more ends of a window concern the mapped files the agent holds at a
// cut depth (mappedrelease.go): the check ends the window when they are
// read in order (releasesHeld: its end puts them back to the device's
// depth), and when random faults return within ReleaseRecall of that
// release (recutsOnFaults: its end cuts them back).
//
// A thrash whose waste is the read-around of random page faults on
// mapped files (PageCacheWindow.mappedWaste) is cut on the mapped files
// alone when the agent follows open files (Action.mappedOnly, device.act):
// the device keeps its depth, and a sequential reader after the faults
// needs no restore. A window the check ended is evaluated on fewer than
// the policy's minimum of requests: in MEM the first half second of
// thrash was 82 requests of up to 2.5 MiB each, and the window that
// skipped them delayed the cut by another check.

import (
	"slices"
	"time"

	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
)

// ThrashCheckEvery is how often the page-cache counts are checked between
// window ends. At 500 ms, as until 2026-12-02, a mapping's lookups and
// scans in phases of well under a second (the decision-quality
// benchmark's MEMMAP) spent most of each phase at the last one's depth:
// 250 ms took MEMMAP from 4.52 s to 3.45 s (6 repetitions), and cost
// nothing that showed on the AIR/AIP suite (0.984×, 0.952–1.071, 8
// repetitions; 20 probes on read surges against 19).
const ThrashCheckEvery = 250 * time.Millisecond

// MinCheckedWindow is the shortest a window lasts before a check looks at
// it: the check after the one that began it. The checks tick on their own
// grid, and a window a check ended begins at that check, so the next tick
// comes a few microseconds either side of ThrashCheckEvery after it: with
// ThrashCheckEvery itself as the bound, a window the check ended had its
// next check skipped about half the time (at 500 ms, 499.0 ms against
// 500.9 ms in the decision-quality benchmark's MEMMAP), which put every
// decision after an early end off by a whole check.
const MinCheckedWindow = ThrashCheckEvery * 4 / 5

// checkDue reports whether a check at now looks at the window that began
// at start (MinCheckedWindow).
func checkDue(now, start time.Time) bool { return now.Sub(start) >= MinCheckedWindow }

// cutsOnThrash reports whether pc, a device's page-cache counts over the
// last check's interval, would make its window cut read-ahead at once
// (chooseReadAhead): in Apply mode and not held by the gate g (a pause,
// another writer, minDwell, no grant), with read-ahead governed, no
// scheduler switch being verified, a waste of StrongWastePct or more
// that decide.ReadAhead cuts on, and no back-off of lowering. It also
// returns the waste, percent.
func (c *deviceController) cutsOnThrash(pc PageCacheWindow, g Gate, now time.Time) (float64, bool) {
	if !c.mayCut(g, now) {
		return 0, false
	}
	waste, ok := pc.WastePct()
	if !ok || waste < StrongWastePct {
		return waste, false
	}
	cur := c.current.ReadAheadKiB
	kib, reason := decide.ReadAhead(c.readAheadInput(waste, true))
	if reason != decide.RAWaste || kib >= cur || !pc.cutReaches(kib) {
		return waste, false
	}
	return waste, !c.raBackedOff(cur, kib, now)
}

// mayCut reports whether a thrash could cut the device's read-ahead now,
// whatever its waste: in Apply mode, with read-ahead governed and above
// the policy's minKiB, no scheduler switch being verified, and the gate g
// not holding changes.
func (c *deviceController) mayCut(g Gate, now time.Time) bool {
	return c.policy.Apply && c.policy.ReadAhead && c.verify == nil && g.hold(c.lastChange, now) == HoldNone &&
		c.current.ReadAheadKiB > c.policy.Engine.ReadAhead.MinKiB
}

// readAheadInput is decide.ReadAhead's input for the device now, with the
// given waste and the last window's read-ahead requests.
func (c *deviceController) readAheadInput(wastePct float64, measured bool) decide.ReadAheadInput {
	return decide.ReadAheadInput{
		CurrentKiB: c.current.ReadAheadKiB, OriginalKiB: c.originalRA,
		MinKiB: c.policy.Engine.ReadAhead.MinKiB, MaxKiB: c.policy.Engine.ReadAhead.MaxKiB,
		WasteMeasured: measured, WastePct: wastePct,
		ReadAheadSharePct: c.ra.sharePct, Streams: c.ra.streams,
		Rotational: c.model.Class() == model.HDD, CompetitiveKiB: c.raAdvice,
	}
}

// thrashing is the thrash check at now of the window that began at
// start: it reports whether a device's read-ahead thrashes, or is used
// again after a cut (restoresOnUse), so that its window should end now,
// and returns each device's page-cache counts since the last check (none
// when the probe has none). early is false at the window's own end (the
// window ticker), which is a check too: a thrash that began in the
// check's last interval is then decided on that interval, as at a check,
// not on the whole window's counts, which the load before it dilutes
// (MEM after AIP-4 in the decision-quality benchmark: the window that
// ended 0.7 s into the thrash did not cut, and the next check did, 0.5 s
// later).
func (a *Agent) thrashing(now, start time.Time, early bool) (bool, pcInterval) {
	if a.pcache == nil || !checkDue(now, start) {
		return false, pcInterval{}
	}
	s, err := a.pcache.p.Stats()
	if err != nil {
		return false, pcInterval{} // the window's end reads them again and logs the error
	}
	iv := a.pcache.interval(s, now)
	return a.markThrash(iv, now, start, early), iv
}

// markThrash marks each device whose counts in iv, since the last check,
// show its read-ahead thrashing (d.thrash) or used again after a cut
// (d.used), and reports whether one was; now, start and early are
// thrashing's.
func (a *Agent) markThrash(iv pcInterval, now, start time.Time, early bool) bool {
	thrash := false
	for _, d := range a.devs {
		if d.status.Gone != "" {
			continue
		}
		pc, ok := iv.devs[d.sys.Name]
		if !ok {
			continue
		}
		waste, cut := d.ctrl.cutsOnThrash(pc, d.checkGate(), now)
		switch {
		case cut && a.cutsWhilePaused(d, pc, now, func() int { return a.follow.prune(d.sys.Name) }):
			a.endsOn(d, "read-ahead thrashes", early, now.Sub(start), "wastePct", waste)
			d.thrash, thrash = &pc, true
		case d.ctrl.restoresOnUse(pc, d.checkGate(), now):
			a.endsOn(d, "read-ahead used again", early, now.Sub(start), "wastePct", waste, "asyncReadAheads", pc.AsyncReadAhead)
			d.used, thrash = &pc, true
		case a.follow.holdsMapped() && d.ctrl.recutsOnFaults(pc, d.checkGate(), now):
			a.endsOn(d, "released mapped files read at random again", early, now.Sub(start), "faults", pc.Faults, "aroundPages", pc.AroundPages)
			d.recut, thrash = &pc, true
		case a.releasesHeld(d, pc, now):
			a.endsOn(d, "held mapped files read sequentially", early, now.Sub(start), "faults", pc.Faults, "faultAsyncReadAheads", pc.FaultAsync)
			d.release, thrash = &pc, true
		}
	}
	return thrash
}

// endsOn logs that d's window ends on why, after el, early or at its
// own end, and counts an early end.
func (a *Agent) endsOn(d *device, why string, early bool, el time.Duration, kv ...any) {
	msg := "window ended early: " + why
	if !early {
		msg = "window ends: " + why
	} else if a.opt.Metrics != nil {
		a.opt.Metrics.IncEarlyWindow(d.sys.Name)
	}
	kv = append([]any{"device", d.sys.Name, "readAheadKiB", d.ctrl.current.ReadAheadKiB, "after", el.Round(time.Millisecond)}, kv...)
	a.opt.Log.Info(msg, kv...)
}

// cutsWhilePaused reports whether a thrash in pc, a device's page-cache
// counts since the last check, can be cut now: always unless the device's
// tracing is paused (sampling.go). A paused device's counts are those of
// the pages its page faults read around (tracer.PageCacheProbe.Track), and
// its window has no request to evaluate, so only a cut of its mapped
// files alone can be made on them (deviceController.decideMappedThrash):
// when their waste is the mapped files' and the agent holds mapped files,
// and no such cut was made within MappedCutRetry before now, or none of
// the files it held is still open (heldOpen, called only then, returns how
// many are: raFollower.prune). Otherwise the surge probe (samplewake.go)
// traces the device first.
func (a *Agent) cutsWhilePaused(d *device, pc PageCacheWindow, now time.Time, heldOpen func() int) bool {
	if !slices.Contains(a.paused, d.sys.Dev) {
		return true
	}
	return pc.mappedWaste() && a.follow.holdsMapped() && (d.ctrl.mappedCutDue(now) || heldOpen() == 0)
}

// releasesHeld reports whether pc, a device's page-cache counts since the
// last check, would make d's window release the mapped files the agent
// holds of it (deviceController.releasesHeld, mappedrelease.go).
func (a *Agent) releasesHeld(d *device, pc PageCacheWindow, now time.Time) bool {
	_, kib := a.follow.held(d.sys.Name)
	return d.ctrl.releasesHeld(pc, kib, d.checkGate(), now)
}

// restoresOnUse reports whether pc, a device's page-cache counts over the
// last check's interval, would make its window restore the read-ahead a
// cut lowered (decide.RARestore): in Apply mode and not held by the gate
// g, with read-ahead governed, no scheduler switch and no raise being
// verified, no back-off of raising, and sequential readers using what
// was read ahead in the interval (PageCacheWindow.sequentialUse). A
// cut's verification in progress does not hold it back: the readers it
// was made for have gone (verifyReadAhead ends it as superseded).
func (c *deviceController) restoresOnUse(pc PageCacheWindow, g Gate, now time.Time) bool {
	if !c.policy.Apply || !c.policy.ReadAhead || c.verify != nil || g.hold(c.lastChange, now) != HoldNone {
		return false
	}
	if v := c.raVerify; v != nil && v.target > v.previous {
		return false
	}
	waste, ok := pc.sequentialUse()
	if !ok {
		return false
	}
	cur := c.current.ReadAheadKiB
	kib, reason := decide.ReadAhead(withSequentialUse(c.readAheadInput(waste, true)))
	return reason == decide.RARestore && kib > cur && !c.raBackedOff(cur, kib, now)
}

// pcInterval is each tracked device's page-cache counts over a check's
// interval, of el: from the last check or window end to the check.
type pcInterval struct {
	devs map[string]PageCacheWindow
	el   time.Duration
}

// interval is each tracked device's counts between the last check (or
// window end) and the probe's counts s, taken at now, which the next
// interval starts from.
func (w *pageCacheWatch) interval(s map[uint32]tracer.PageCacheStats, now time.Time) pcInterval {
	iv := pcInterval{devs: make(map[string]PageCacheWindow, len(w.devs))}
	if !w.checkedAt.IsZero() {
		iv.el = now.Sub(w.checkedAt)
	}
	for name, ids := range w.devs {
		iv.devs[name] = countsSince(ids, s, w.checked)
	}
	w.checked, w.checkedAt = s, now
	return iv
}

// checkGate is the device's gate at a thrash check: its policy's pause
// and minDwell, and the grant as the last window found it (a check does
// not ask the operator).
func (d *device) checkGate() Gate {
	g := Gate{Paused: d.policy.Spec.Paused, Yielded: d.yielded, Granted: !d.status.AwaitingGrant}
	if dw := d.policy.Spec.Rollout.MinDwell; dw != nil {
		g.MinDwell = dw.Duration
	}
	return g
}
