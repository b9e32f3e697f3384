package agent

// Read-ahead by evidence (issue 14 items 3 and 4): the page-cache probe's
// count of pages used and evicted unused, and the window's read-ahead
// requests, go into decide.ReadAhead; a change is verified on what the
// application gets from the device, its busy time per page it used, and
// reverted when that got worse.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// PageCacheWindow is what the page-cache probe counted of the files on a
// device in one window, in pages of 4 KiB.
type PageCacheWindow struct {
	// Measured: a probe counted the device's files during the window.
	Measured bool
	// UsedPages were read or mapped for the first time since they entered
	// the page cache; WastedPages left it without ever being used.
	UsedPages, WastedPages uint64
	// Faults are the page faults on the files that missed the page cache,
	// and AroundPages the pages (4 KiB) of the read-around windows they
	// read; both are counted while the device's tracing is paused too
	// (tracer.PageCacheProbe.Track).
	Faults, AroundPages uint64
	// MappedPages are the used pages whose first access was fault-around
	// mapping them, and AsyncReadAhead the asynchronous read-aheads (a
	// reader reached a PG_readahead page).
	MappedPages, AsyncReadAhead uint64
	// FaultAsync are the asynchronous read-aheads that page faults
	// started: sequential mmap readers (mappedSequential).
	FaultAsync uint64
	// UsedNow and WastedNow are the part of UsedPages and WastedPages
	// that read() brought in at the device's current depth: since the
	// agent last changed a device's read-ahead
	// (tracer.PageCacheProbe.NewEpoch), and not around a page fault.
	UsedNow, WastedNow uint64
}

// Random mmap reads: a window with at least RandomMinFaults faults that
// missed the page cache and fewer than one asynchronous read-ahead in
// RandomFaultsPerAsync of them.
const (
	RandomMinFaults      = 64
	RandomFaultsPerAsync = 8
)

// randomFaults reports whether the window's faults are random mmap
// reads. A sequential mmap reader reaches the PG_readahead page of about
// every window it faults in (TestPageCacheWaste: 415 asynchronous
// read-aheads for 429 faults), a random one almost never (1 for 1,564).
func (p PageCacheWindow) randomFaults() bool {
	return p.Faults >= RandomMinFaults && RandomFaultsPerAsync*p.AsyncReadAhead < p.Faults
}

// RestoreMinAsync is the fewest asynchronous read-aheads in a thrash
// check's interval that show sequential readers using read-ahead
// (sequentialUse): a reader that reaches the PG_readahead page of a
// window read ahead of it starts the next one (page_cache_async_ra,
// mm/readahead.c), about one for every depth it reads, so 16 is 256 KiB
// read at the lowest depth, 16 KiB.
const RestoreMinAsync = 16

// sequentialUse reports whether the counts show sequential readers using
// what read-ahead brought in at the current depth: at least
// RestoreMinAsync asynchronous read-aheads, faults that are not random
// mmap reads, and a waste of the pages read() brought in at the current
// depth (UsedNow, WastedNow) of at most decide.LowWastePct, which it
// returns. The pages read before the last change, and those read around
// page faults, do not count: after a cut, a sequential reader evicts the
// pages the cut was made for, never used, and in the decision-quality
// benchmark's MEM their eviction kept the whole waste above 5 % for two
// seconds of sequential reading; and the raise it makes leaves the mapped
// files at their depth (agent/openfiles, hold.go).
func (p PageCacheWindow) sequentialUse() (float64, bool) {
	if !p.Measured || p.AsyncReadAhead < RestoreMinAsync || p.randomFaults() {
		return 0, false
	}
	w, ok := tracer.PageCacheStats{UsedPages: p.UsedNow, WastedPages: p.WastedNow}.WastePct()
	return w, ok && w <= decide.LowWastePct
}

// cutReaches reports whether a cut to kib KiB would shrink what the
// counts' page faults read around: true unless the faults are random mmap
// reads that read around kib or less each (AroundPages per fault). Such
// faults are on files at a depth of their own, lower than the device's:
// mapped files a raise left at a cut depth (agent/openfiles, hold.go), or
// files opened at a lower depth; their waste says nothing of the device's
// depth, which they no longer read by.
func (p PageCacheWindow) cutReaches(kib int) bool {
	if !p.randomFaults() {
		return true
	}
	return float64(p.AroundPages)*4 > float64(kib)*float64(p.Faults)
}

// MappedReadWastePct is the largest share of the wasted pages, percent,
// that read() may have brought in at the current depth (WastedNow) for a
// thrash to be the mapped files' (mappedWaste).
const MappedReadWastePct = 5

// mappedWaste reports whether the counts' waste is the read-around of
// page faults on mapped files: the faults are random mmap reads
// (randomFaults), and read() brought in at most MappedReadWastePct of the
// wasted pages at the current depth. A cut made on such a waste is a cut
// of the mapped files (Action.mappedOnly): the device keeps its depth for
// the readers that did not waste it. Pages read() brought in before the
// last change of the device's depth count as the faults' (the probe tags
// a page's epoch, not its reader, once the epoch is over).
func (p PageCacheWindow) mappedWaste() bool {
	return p.Measured && p.randomFaults() && p.WastedPages > 0 &&
		100*p.WastedNow <= MappedReadWastePct*p.WastedPages
}

// WastePct is the share of resolved pages that were wasted, percent, and
// whether the probe measured the window and resolved enough pages
// (tracer.PageCacheStats.WastePct). When the window's faults are random
// mmap reads (randomFaults), the pages fault-around mapped (the kernel
// maps up to 16 cached pages around each fault, filemap_map_pages) and
// nothing else touched count as wasted: a random reader faults on each
// page it reads, and the probe cannot see whether it touched a page once
// mapped. The read-around they came with is then judged by the pages the
// faults and reads used: at a read-around of 128 KiB, fault-around made
// about 97 % waste look like 42 %.
func (p PageCacheWindow) WastePct() (float64, bool) {
	if !p.Measured {
		return 0, false
	}
	used, wasted := p.UsedPages, p.WastedPages
	if p.randomFaults() {
		m := min(p.MappedPages, used)
		used, wasted = used-m, wasted+m
	}
	return tracer.PageCacheStats{UsedPages: used, WastedPages: wasted}.WastePct()
}

// raEvidence is one window's evidence about read-ahead.
type raEvidence struct {
	pc PageCacheWindow
	// wastePct is pc's waste when wasteOK, or the thrash check's
	// interval's when that is higher (windowInput.Thrash).
	wastePct float64
	wasteOK  bool
	// sharePct is the share of read sectors issued as read-ahead, percent;
	// streams the processes that issued read-ahead.
	sharePct float64
	streams  int
	// busyNs is the time the device had a request in service (the union
	// of the requests' dispatch-to-completion intervals), ns.
	busyNs int64
	// seqUse: the window was ended early because sequential readers use
	// read-ahead again after a cut (windowInput.Used); a restore is then
	// made at once, and the cut's verification is superseded.
	seqUse bool
	// mappedWaste: the waste that makes a cut is the read-around of
	// random page faults on mapped files (PageCacheWindow.mappedWaste),
	// over the thrash check's interval that ended the window or else the
	// window.
	mappedWaste bool
	// reason is the rule decide.ReadAhead applied.
	reason decide.ReadAheadReason
}

// nsPerUsedPage is the device's busy time per page the application used,
// ns, and whether any page was used.
func (e raEvidence) nsPerUsedPage() (float64, bool) {
	if e.pc.UsedPages == 0 {
		return 0, false
	}
	return float64(e.busyNs) / float64(e.pc.UsedPages), true
}

// StrongWastePct is the waste at which a cut is made after one window;
// below it two consecutive windows must agree.
const StrongWastePct = 80.0

// raVerification is the verification of a read-ahead change: the busy
// time per used page before it, against the windows after it.
type raVerification struct {
	previous, target int // KiB
	beforeNs         float64
	left             int
	busyNs           int64
	usedPages        uint64
}

// readAheadEvidence gathers the window's evidence (reqs are its newest
// requests).
func readAheadEvidence(reqs []trace.Request, pc PageCacheWindow, scratch *[][2]int64) raEvidence {
	e := raEvidence{pc: pc}
	e.wastePct, e.wasteOK = pc.WastePct()
	var reads, ra uint64
	pids := map[uint32]struct{}{}
	for i := range reqs {
		q := &reqs[i]
		if q.Op != trace.Read {
			continue
		}
		reads += uint64(q.Sectors)
		if q.Flags&trace.ReadAhead != 0 {
			ra += uint64(q.Sectors)
			pids[q.PID] = struct{}{}
		}
	}
	if reads > 0 {
		e.sharePct = 100 * float64(ra) / float64(reads)
	}
	e.streams = len(pids)
	e.busyNs = busyTime(reqs, scratch)
	return e
}

// busyTime is the length of the union of reqs' [Dispatch, Complete]
// intervals, ns; requests without both times are left out.
func busyTime(reqs []trace.Request, scratch *[][2]int64) int64 {
	iv := (*scratch)[:0]
	for i := range reqs {
		if reqs[i].HasService() {
			iv = append(iv, [2]int64{reqs[i].Dispatch, reqs[i].Complete})
		}
	}
	*scratch = iv
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var busy, end int64 = 0, -1 << 62
	for _, x := range iv {
		if x[0] > end {
			busy += x[1] - x[0]
			end = x[1]
		} else if x[1] > end {
			busy += x[1] - end
			end = x[1]
		}
	}
	return busy
}

// chooseReadAhead applies decide.ReadAhead to the window's evidence and
// the pacing: a cut on StrongWastePct or more is made at once, in a
// sampled window too (a sample's waste can only understate its pages':
// a page counts as wasted once it left the page cache unused, and one
// still cached when the sample ends counts as neither); any other change
// when the previous window asked for a change the same way; a direction
// that regressed before waits out its back-off. It returns the depth to
// set (the current one for none).
func (c *deviceController) chooseReadAhead(e *raEvidence, now time.Time) int {
	cur := c.current.ReadAheadKiB
	in := c.readAheadInput(e.wastePct, e.wasteOK)
	in.ReadAheadSharePct, in.Streams = e.sharePct, e.streams
	if e.seqUse {
		in = withSequentialUse(in)
	}
	kib, reason := decide.ReadAhead(in)
	if reason == decide.RAWaste && !e.pc.cutReaches(kib) {
		kib, reason = cur, decide.RAKeep
	}
	e.reason = reason
	if kib == cur || cur <= 0 {
		c.raPending = 0
		return cur
	}
	strong := (reason == decide.RAWaste && e.wastePct >= StrongWastePct) || (reason == decide.RARestore && e.seqUse)
	agree := c.raPending != 0 && (c.raPending < cur) == (kib < cur)
	c.raPending = kib
	if !strong && !agree {
		return cur
	}
	if c.raBackedOff(cur, kib, now) {
		return cur
	}
	return kib
}

// withSequentialUse is in with read-ahead's share of the read sectors at
// least decide.MinReadAheadSharePct: a check's interval whose
// asynchronous read-aheads show sequential use (sequentialUse) stands for
// the block trace's share, which a sampled window may have missed.
func withSequentialUse(in decide.ReadAheadInput) decide.ReadAheadInput {
	in.ReadAheadSharePct = max(in.ReadAheadSharePct, decide.MinReadAheadSharePct)
	return in
}

// raBackedOff reports whether a change of read-ahead from cur to kib KiB
// goes the way a change regressed before, within its back-off at now.
func (c *deviceController) raBackedOff(cur, kib int, now time.Time) bool {
	until, ok := c.backoff[raBackoffKey(cur, kib)]
	return ok && now.Before(until)
}

// raBackoffKey names a read-ahead direction in the back-off map.
func raBackoffKey(from, to int) string {
	if to < from {
		return "read_ahead_kb:lower"
	}
	return "read_ahead_kb:raise"
}

// verifyReadAhead counts the window towards the verification of the last
// read-ahead change. When the busy time per used page after the change
// exceeds the one before by more than the tolerated regression, it asks
// for the previous depth back (rep.Action) and reports true. Windows in
// which no page was used do not count.
func (c *deviceController) verifyReadAhead(rep *WindowReport, e raEvidence, now time.Time) bool {
	v := c.raVerify
	if v != nil && e.seqUse && v.target < v.previous {
		// Sequential readers use read-ahead again: the readers the cut
		// was made for have gone, and what the windows after it measure
		// is another load. The cut is neither verified nor reverted.
		c.lastVerify = &verificationResult{What: fmt.Sprintf("read_ahead_kb %d -> %d", v.previous, v.target),
			BaselineNs: v.beforeNs, Unit: "ns of device time per used page", Outcome: "Superseded"}
		c.raVerify = nil
		return false
	}
	if v == nil || e.pc.UsedPages == 0 {
		return false
	}
	v.busyNs += e.busyNs
	v.usedPages += e.pc.UsedPages
	v.left--
	rep.Verifying = max(v.left, 0)
	if v.left > 0 {
		return false
	}
	after := float64(v.busyNs) / float64(v.usedPages)
	c.lastVerify = &verificationResult{What: fmt.Sprintf("read_ahead_kb %d -> %d", v.previous, v.target),
		BaselineNs: v.beforeNs, MeasuredNs: after, Unit: "ns of device time per used page"}
	if after <= v.beforeNs*(1+c.policy.ToleratedRegressionPct/100) {
		c.raVerify = nil
		c.lastVerify.Outcome = "Verified"
		return false
	}
	c.lastVerify.Outcome = "Reverted"
	c.backoff[raBackoffKey(v.previous, v.target)] = now.Add(c.policy.Backoff)
	prev := c.current
	prev.ReadAheadKiB = v.previous
	rep.Action = Action{Kind: ActionRevert, Setting: prev, guard: c.guard, Reason: fmt.Sprintf(
		"regression: %.0f ns of device time per used page at read_ahead_kb %d vs %.0f at %d (+%.1f %% > %.1f %%)",
		after, v.target, v.beforeNs, v.previous, 100*(after/v.beforeNs-1), c.policy.ToleratedRegressionPct)}
	rep.Target, rep.Reason = &prev, ReasonRegressionReverted
	return true
}
