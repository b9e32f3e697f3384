package agent

// The release of held mapped files on sequential use.
//
// A cut made of the mapped files alone (Action.mappedOnly), or a raise
// that left them at a cut depth (Action.keepMapped), holds them at that
// depth (agent/openfiles, hold.go). That is right while their process
// reads them at random, and wrong once it reads them in order: a database
// or search index looks records up through its mapping, then scans or
// merges it. In the decision-quality benchmark's MEMMAP (random 4 KiB
// reads through the mapping of a 2 GiB file in a 256 MiB memory cgroup,
// then 512 MiB of the mapping in order) the scans at the held 16 KiB took
// 5.4 s, against 1.0 s at the device's 2560 KiB (docs/bench-decisions.md).
//
// The evidence is the page-cache probe's: a fault that finds its page
// cached and marked PG_readahead starts the next window itself
// (do_async_mmap_readahead, mm/filemap.c), which a sequential mmap reader
// does about once per window and a random one almost never
// (PageCacheWindow.mappedSequential). When a thrash check's interval
// shows it on a device that holds mapped files, and the faults read
// around nearer the held depth than the device's (the held files are the ones read),
// the check ends the window and its end puts the held files back to the
// device's depth (decideRelease, device.act). The gate applies as to any
// change. A later thrash of the same files is cut on the mapped files
// again at once (MappedCutRetry does not hold it), so a process that
// alternates lookups and scans gets each phase's depth, one change per
// phase. Random faults on the device's files again within ReleaseRecall
// of a release, reading around more than the depth the files were held
// at, are the readers whose waste made the cut: they are cut back to it
// at the next check, without waiting for their new read-around to be
// evicted unused (recutsOnFaults), which took 0.5–1 s of each lookup
// phase in MEMMAP. Readers that alternate faster than the checks follow
// them, or a mix of random and sequential readers of the same files,
// would make each release be cut again: ReleaseFlapCycles cuts in a row,
// each within MappedCutRetry of a release, back releases off
// (countCycle).

import (
	"fmt"
	"math"
	"time"
)

// ReasonMappedSequential is the recommendation's reason when the window
// ended because the mapped files the agent held at a cut depth were read
// sequentially, and released them (decideRelease).
const ReasonMappedSequential = "MappedSequential"

// ReasonMappedRandomAgain is the recommendation's reason when the window
// ended because the mapped files released to a sequential reader are read
// at random again, and cut them back to the depth they were held at
// (decideRecut).
const ReasonMappedRandomAgain = "MappedRandomAgain"

// ReleaseRecall is how long after a release of held mapped files random
// faults on the device's files are cut back at once, on the waste that
// made the first cut (recutsOnFaults). Later ones wait for their own
// waste to be measured: the memory the cut was made for may have changed.
const ReleaseRecall = time.Minute

// releaseBackoffKey names the release of held mapped files in the
// back-off map.
const releaseBackoffKey = "read_ahead_kb:release-mapped"

// mappedSequential reports whether the counts show sequential mmap
// readers: at least RestoreMinAsync asynchronous read-aheads started by
// page faults, and at least one for every two faults. On a 1 GiB mapping
// read in order (TestPageCacheLight), the faults started 65,536 for
// 65,537 faults at 16 KiB and 410 for 415 at 2560 KiB; random reads
// through it, 1 for 1,550.
func (p PageCacheWindow) mappedSequential() bool {
	return p.Measured && p.FaultAsync >= RestoreMinAsync && 2*p.FaultAsync >= p.Faults
}

// readsAroundNearer reports whether the counts' faults read around each,
// on average, less than the geometric mean of heldKiB and deviceKiB (AroundPages
// per fault, 4 KiB pages): nearer, on a log scale, the held files' depth
// than the device's, so that the held files are the ones read. The mean
// leaves room for windows rounded up to a large folio and for lookups at
// the device's depth in the same interval: in MEMMAP the scan at 16 KiB
// read 4.15 pages around each fault in the interval after the cut, and
// 8.2 where a few of the last lookups' faults read 2560 KiB around
// them; a file at 2560 KiB reads 637 (the bound at 16 and 2560 KiB is
// 50.6 pages).
func (p PageCacheWindow) readsAroundNearer(heldKiB, deviceKiB int) bool {
	return p.Faults > 0 && 4*float64(p.AroundPages)/float64(p.Faults) < math.Sqrt(float64(heldKiB)*float64(deviceKiB))
}

// releasesHeld reports whether pc, a device's page-cache counts over the
// last check's interval, would make its window release the mapped files
// held at heldKiB (0: none held): in Apply mode, with read-ahead governed,
// no scheduler switch being verified, the gate g not holding changes, no
// back-off of releases at now, and the held files read sequentially
// (mappedSequential, readsAroundNearer).
func (c *deviceController) releasesHeld(pc PageCacheWindow, heldKiB int, g Gate, now time.Time) bool {
	if heldKiB <= 0 || !c.policy.Apply || !c.policy.ReadAhead || c.verify != nil || g.hold(c.lastChange, now) != HoldNone {
		return false
	}
	if until, ok := c.backoff[releaseBackoffKey]; ok && now.Before(until) {
		return false
	}
	return pc.mappedSequential() && pc.readsAroundNearer(heldKiB, c.current.ReadAheadKiB)
}

// decideRelease decides a window the thrash check ended because the held
// mapped files are read sequentially (windowInput.Release): the
// recommendation is the current setting, and in Apply mode, unless the
// gate holds it, the action releases the files (Action.releaseMapped).
// It reports whether the window was such a one; its requests, learned
// already, are not evaluated.
func (c *deviceController) decideRelease(rep *WindowReport, in windowInput) bool {
	p := in.Release
	if !p.Measured || in.HeldKiB <= 0 {
		return false
	}
	target := c.current
	rep.Target, rep.Reason = &target, ReasonMappedSequential
	if !c.policy.Apply {
		return true
	}
	if rep.Held = in.Gate.hold(c.lastChange, in.Now); rep.Held == HoldNone {
		rep.Action = Action{Kind: ActionApply, Setting: target, guard: c.guard, releaseMapped: true, heldKiB: in.HeldKiB, Reason: fmt.Sprintf(
			"read-ahead of the mapped files: released (read sequentially: %d of %d faults started an asynchronous read-ahead); held at %d KiB, back to the device's %d KiB",
			p.FaultAsync, p.Faults, in.HeldKiB, c.current.ReadAheadKiB)}
	}
	return true
}

// ReleaseFlapCycles is how many cuts of the mapped files in a row, each
// within MappedCutRetry of the release before it, make releases back off
// for the policy's back-off: the files' readers alternate faster than
// the checks can follow them, or read at random and in order at once,
// and each release is cut again. As the thrash guard counts changes
// (DADS §4.2), the damping counts cycles, not their cause.
const ReleaseFlapCycles = 3

// countCycle counts a cut of the mapped files made at now (commit): one
// within MappedCutRetry of the last release continues a run of quick
// cycles, any other ends it; the ReleaseFlapCycles-th backs releases off.
func (c *deviceController) countCycle(now time.Time) {
	if c.releasedAt.IsZero() || now.Sub(c.releasedAt) >= MappedCutRetry {
		c.quickCycles = 0
		return
	}
	if c.quickCycles++; c.quickCycles >= ReleaseFlapCycles {
		c.backoff[releaseBackoffKey] = now.Add(c.policy.Backoff)
		c.quickCycles = 0
	}
}

// recutsOnFaults reports whether pc, a device's page-cache counts over the
// last check's interval, would make its window cut the mapped files
// released within ReleaseRecall before now back to the depth they were
// held at (c.releasedKiB): no cut was made since the release, a thrash
// could cut now (mayCut: Apply mode, read-ahead governed, no switch being
// verified, the gate g open), no back-off of lowering, and the interval
// has random faults that read around more than that depth
// (lookupFaults).
func (c *deviceController) recutsOnFaults(pc PageCacheWindow, g Gate, now time.Time) bool {
	if c.releasedAt.IsZero() || !c.mappedCutAt.IsZero() || now.Sub(c.releasedAt) >= ReleaseRecall || c.releasedKiB <= 0 {
		return false
	}
	cur := c.current.ReadAheadKiB
	return c.mayCut(g, now) && !c.raBackedOff(cur, c.releasedKiB, now) && pc.lookupFaults(c.releasedKiB)
}

// lookupFaults reports whether the counts hold at least RandomMinFaults
// faults that started no asynchronous read-ahead, and whether their
// faults read around more than kib KiB each on average. The faults that
// did start one are a sequential mmap reader's (mappedSequential); the
// others, a random one's. Counting them apart finds the lookups in the
// interval where the scan before them ends: in MEMMAP the scan's last
// 0.1 s at 2560 KiB started enough read-aheads that
// PageCacheWindow.randomFaults, which compares all read-aheads with all
// faults, waited another check.
func (p PageCacheWindow) lookupFaults(kib int) bool {
	return p.Measured && p.Faults >= p.FaultAsync+RandomMinFaults && float64(p.AroundPages)*4 > float64(kib)*float64(p.Faults)
}

// decideRecut decides a window the thrash check ended because the
// released mapped files are read at random again (windowInput.Recut):
// the cut of the mapped files alone back to c.releasedKiB (Action.mappedOnly),
// in Apply mode unless the gate holds it. It reports whether the window
// was such a one; its requests, learned already, are not evaluated.
func (c *deviceController) decideRecut(rep *WindowReport, in windowInput) bool {
	p := in.Recut
	if !p.Measured || c.releasedKiB <= 0 {
		return false
	}
	target := c.current
	target.ReadAheadKiB = c.releasedKiB
	rep.Target, rep.Reason = &target, ReasonMappedRandomAgain
	if !c.policy.Apply {
		return true
	}
	if rep.Held = in.Gate.hold(c.lastChange, in.Now); rep.Held == HoldNone {
		rep.Action = Action{Kind: ActionApply, Setting: target, guard: c.guard, mappedOnly: true,
			Reason: fmt.Sprintf("read-ahead of the mapped files: random faults again (%d faults, %.0f KiB read around each), cut back to the %d KiB their waste chose; the device keeps %d KiB",
				p.Faults, 4*float64(p.AroundPages)/float64(max(p.Faults, 1)), c.releasedKiB, c.current.ReadAheadKiB)}
	}
	return true
}
