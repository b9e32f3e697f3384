package readahead

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/model"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func settings(cur int) Settings {
	return Settings{CurrentKiB: cur, OriginalKiB: 2560, MinKiB: 16, MaxKiB: 4096, MarginPct: 5, LowWastePct: 5,
		Model: model.Default(model.SSD, 1<<30), Horizon: 10 * time.Minute, VerifyWindows: 2, Backoff: 30 * time.Minute}
}

// priorCut is the competitive depth of the SSD class's prior (a device
// with no read-ahead requests measured yet): 32 KiB.
const priorCut = 32

// randomWindow is a window of random mmap reads whose faults read depth
// KiB around each; seqWindow one of a sequential reader at depth KiB.
func randomWindow(kib int, faults uint64) PageCache {
	pages := faults * uint64(kib) / 4
	return PageCache{Measured: true, Used: faults, Wasted: pages - faults, Windows: faults, Pages: pages,
		AroundWindows: faults, AroundPages: pages, Depth: pages, AroundDepth: pages}
}

func seqWindow(kib int, pages uint64) PageCache {
	w := pages * 4 / uint64(kib)
	return PageCache{Measured: true, Used: pages, ReadUsed: pages, Windows: w, Pages: pages, Depth: pages,
		FullWindows: w, FullPages: pages, FullDepth: pages}
}

// TestRoadCutVerified: a thrash of random readers is cut in the window
// that measured it; the next windows of random readers, new ones reading
// at the cut depth, cost less device time per used page: Verified.
func TestRoadCutVerified(t *testing.T) {
	var r Road
	s := settings(2560)
	st := r.Window(window(t0, randomWindow(2560, 1500), 1500*900e3), s)
	if st.Decision.KiB != priorCut || st.Decision.Reason != ReasonWaste {
		t.Fatalf("thrash: %d KiB (%s), want a cut to %d", st.Decision.KiB, st.Decision.Reason, priorCut)
	}
	r.Commit(2560, priorCut, t0, s)
	s.CurrentKiB = priorCut
	for i := 1; i <= 2; i++ {
		st = r.Window(window(t0.Add(time.Duration(i)*5*time.Second), randomWindow(priorCut, 3000), 3000*70e3), s)
		if st.Revert || st.Decision.KiB != priorCut {
			t.Fatalf("window %d after the cut: %+v", i, st)
		}
	}
	if r.Last == nil || r.Last.Outcome != "Verified" || r.Last.MeasuredNs >= r.Last.BaselineNs {
		t.Fatalf("verification %+v, want Verified with less time per used page", r.Last)
	}
}

// TestRoadCutReverted: a cut after which the random readers' records
// need many more faults (their pages near a fault were used, though
// fault-around mapped them and they counted as wasted) costs more device
// time per used page: reverted, and no cut is made again during the
// back-off.
func TestRoadCutReverted(t *testing.T) {
	var r Road
	s := settings(2560)
	r.Window(window(t0, randomWindow(2560, 1500), 1500*900e3), s)
	r.Commit(2560, priorCut, t0, s)
	s.CurrentKiB = priorCut
	var st Step
	for i := 1; i <= 2; i++ {
		st = r.Window(window(t0.Add(time.Duration(i)*5*time.Second), randomWindow(priorCut, 1500), 1500*1200e3), s)
	}
	if !st.Revert || st.Decision.KiB != 2560 || !strings.HasPrefix(st.Message, "regression:") {
		t.Fatalf("after a regression: %+v, want the revert to 2560", st)
	}
	if r.Last.Outcome != "Reverted" {
		t.Errorf("verification %+v, want Reverted", r.Last)
	}
	r.Reverted(t0.Add(10*time.Second), s)
	s.CurrentKiB = 2560
	st = r.Window(window(t0.Add(15*time.Second), randomWindow(2560, 1500), 1500*900e3), s)
	if st.Decision.KiB != 2560 {
		t.Errorf("a thrash within the back-off: %d KiB (%s), want it kept", st.Decision.KiB, st.Decision.Reason)
	}
	st = r.Window(window(t0.Add(31*time.Minute), randomWindow(2560, 1500), 1500*900e3), s)
	if st.Decision.KiB != priorCut {
		t.Errorf("a thrash after the back-off: %d KiB (%s), want the cut", st.Decision.KiB, st.Decision.Reason)
	}
}

// TestRoadAlternating: random readers and sequential ones in turns, each
// a new process opening its files at the device's depth. The cut serves
// both; sequential windows at the cut depth do not raise it back while
// the random readers' evidence outweighs theirs, and do once the random
// readers are long gone.
func TestRoadAlternating(t *testing.T) {
	var r Road
	s := settings(2560)
	now := t0
	step := func(pc PageCache, busy float64) Step {
		now = now.Add(5 * time.Second)
		st := r.Window(window(now, pc, float64(busy)), s)
		if st.Decision.KiB != s.CurrentKiB && !st.Revert {
			r.Commit(s.CurrentKiB, st.Decision.KiB, now, s)
			s.CurrentKiB = st.Decision.KiB
		}
		return st
	}
	step(seqWindow(2560, 262144), 0.4e9)
	step(randomWindow(2560, 1500), 1.4e9)
	cut := s.CurrentKiB
	if cut < 128 || cut > 512 {
		t.Fatalf("after a sequential reader then a thrash: %d KiB, want a depth serving both (128-512)", cut)
	}
	for i := range 3 {
		step(seqWindow(cut, 262144), 0.8e9)
		step(randomWindow(cut, 1500), 0.3e9)
		if s.CurrentKiB != cut {
			t.Fatalf("round %d: the depth moved %d -> %d KiB", i, cut, s.CurrentKiB)
		}
	}
	now = now.Add(2 * time.Hour) // the random readers' evidence has decayed
	for range 2 {
		step(seqWindow(s.CurrentKiB, 262144), 0.8e9)
	}
	if s.CurrentKiB != 2560 {
		t.Errorf("sequential readers alone, hours after the last random one: %d KiB, want 2560", s.CurrentKiB)
	}
}

// TestRoadRaiseSuperseded: a raise whose sequential readers read no more
// ends Superseded once the evidence's horizon has passed.
func TestRoadRaiseSuperseded(t *testing.T) {
	r, s := raisedFrom(128, 0.8e9)
	r.Window(window(t0.Add(5*time.Second), randomWindow(2560, 10), 1e6), s)
	if r.Last != nil {
		t.Fatalf("verification ended early: %+v", r.Last)
	}
	r.Window(Window{Now: t0.Add(11 * time.Minute), PageCache: PageCache{Measured: true}}, s)
	if r.Last == nil || r.Last.Outcome != "Superseded" {
		t.Errorf("verification %+v, want Superseded", r.Last)
	}
}

// TestRoadSampled: a sampled window's read() pages are scaled to the
// window; its busy time verifies nothing.
func TestRoadSampled(t *testing.T) {
	var r Road
	s := settings(2560)
	st := r.Window(Window{Now: t0, PageCache: seqWindow(2560, 1000), ReadScale: 5, BusyNs: 1e6}, s)
	if st.Evidence.Sequential.Used != 5000 {
		t.Errorf("sampled window: %v pages used, want 5000", st.Evidence.Sequential.Used)
	}
	if len(r.perPage[0])+len(r.perPage[1])+len(r.perPage[2]) > 0 {
		t.Errorf("a sampled window measured %v", r.perPage)
	}
}

// TestRoadHorizon: with no horizon (minDwell 0) only the window's own
// evidence decides.
func TestRoadHorizon(t *testing.T) {
	var r Road
	s := settings(128)
	s.Horizon = 0
	r.Window(Window{Now: t0, PageCache: randomWindow(2560, 1500)}, s)
	st := r.Window(Window{Now: t0.Add(5 * time.Second), PageCache: seqWindow(128, 262144)}, s)
	if st.Decision.KiB != 2560 {
		t.Errorf("no horizon: sequential window after a thrash, %d KiB, want 2560", st.Decision.KiB)
	}
	if r.Evidence().Random.Resolved() != 0 {
		t.Errorf("the thrash's evidence was kept: %+v", r.Evidence())
	}
}

// TestRoadMoveBackEndsVerification: a raise whose new readers measured
// slower in the one window counted so far, followed by a window that
// decides to move back down, reverts the raise (with its back-off)
// rather than making a new change.
func TestRoadMoveBackEndsVerification(t *testing.T) {
	r, s := raisedFrom(16, 1e9)
	// New readers at 2560, 3 times the device time per used page: one
	// window counted; then random readers thrash.
	r.Window(window(t0.Add(5*time.Second), seqWindow(2560, 262144), 3e9), s)
	st := r.Window(window(t0.Add(10*time.Second), randomWindow(2560, 5000), 0), s)
	if !st.Revert || st.Decision.KiB != 16 || r.Last == nil || r.Last.Outcome != "Reverted" {
		t.Fatalf("a move back after a measured regression: %+v (last %+v), want the revert to 16", st, r.Last)
	}
	r.Reverted(t0.Add(10*time.Second), s)
	if f := r.backedOff(t0.Add(time.Minute)); f == nil || !f(2560) || f(16) {
		t.Error("the raise is not backed off")
	}
}

// window is a window traced whole of pc's pages and busy ns of read-ahead
// requests, one request per read-ahead window.
func window(now time.Time, pc PageCache, busyNs float64) Window {
	ev := FromPageCache(pc)
	return Window{Now: now, PageCache: pc, BusyNs: int64(busyNs), AheadSectors: int64(8 * ev.Pages()),
		AheadRequests: int64(ev.Random.Windows + ev.Sequential.Windows + ev.Short.Windows)}
}

// TestWorkNsPerPage: the device time per used page is the time per page
// read over the share of resolved pages used, whatever share of the
// pages read resolved in the windows; under a token bucket the time its
// rates need counts when the device's busy time is shorter.
func TestWorkNsPerPage(t *testing.T) {
	const page = 8 // sectors
	// 1000 pages read in 100 requests, 1 ms busy: 1 µs a page.
	base := work{busyNs: 1e6, sectors: 1000 * page, requests: 100}
	with := func(w work, used, resolved float64) work { w.used, w.resolved = used, resolved; return w }
	for _, c := range []struct {
		name string
		w    work
		caps model.Throttle
		want float64
	}{
		{"every page resolved and used", with(base, 1000, 1000), model.Throttle{}, 1000},
		{"a tenth resolved, all used", with(base, 100, 100), model.Throttle{}, 1000},
		{"half the resolved pages wasted", with(base, 50, 100), model.Throttle{}, 2000},
		{"nothing used", with(base, 0, 100), model.Throttle{}, 0},
		// 4 MB at 400 MB/s: 10 ms, ten times the busy time.
		{"the bandwidth cap's time", with(base, 100, 100), model.Throttle{BytesPerSec: 1000 * 4096 / 10e-3}, 10e3},
		// 100 requests at 1000 IOPS: 100 ms.
		{"the IOPS cap's time", with(base, 100, 100), model.Throttle{IOPS: 1000}, 100e3},
		// caps the device's reads stay below: the busy time.
		{"caps the device does not reach", with(base, 100, 100), model.Throttle{IOPS: 1e6, BytesPerSec: 1e12}, 1000},
	} {
		if got := c.w.nsPerPage(c.caps); math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("%s: %.1f ns per used page, want %.1f", c.name, got, c.want)
		}
	}
}

// TestRoadRaiseThrashReverted: after a raise, new sequential readers
// whose read-ahead reclaim takes before they read it leave short windows
// (the context read-ahead of a reader that lost its pages) of files
// opened at the new depth. They count towards the raise's verification:
// nine in ten of their pages wasted at the same device time per page
// read is a regression, and the move back the window decides is the
// raise's revert, with its back-off.
func TestRoadRaiseThrashReverted(t *testing.T) {
	r, s := raisedFrom(16, 1e9)
	const w = 4096 // short windows of 64 pages, of files opened at 2560 KiB
	pages := uint64(w * 64)
	short := PageCache{Measured: true, Windows: w, Pages: pages, Depth: w * 640,
		Used: pages / 10, Wasted: pages - pages/10, ReadUsed: pages / 10, ReadWasted: pages - pages/10}
	st := r.Window(window(t0.Add(5*time.Second), short, 1e9), s)
	if !st.Revert || st.Decision.KiB != 16 || r.Last == nil || r.Last.Outcome != "Reverted" {
		t.Fatalf("short windows of thrash after a raise: %+v (last %+v), want the revert to 16", st, r.Last)
	}
	r.Reverted(t0.Add(5*time.Second), s)
	if f := r.backedOff(t0.Add(time.Minute)); f == nil || !f(2560) {
		t.Error("the raise is not backed off")
	}
}

// raisedFrom is a road whose sequential readers at from KiB (a window of
// 262,144 pages used, busyNs of device time) made it raise to 2560 KiB,
// and its settings at the new depth: the raise's verification pending.
func raisedFrom(from int, busyNs float64) (*Road, Settings) {
	r := &Road{}
	s := settings(from)
	r.Window(window(t0, seqWindow(from, 262144), busyNs), s)
	r.Commit(from, 2560, t0, s)
	s.CurrentKiB = 2560
	return r, s
}

// plusPC is the page-cache counts of two windows' readers together.
func plusPC(a, b PageCache) PageCache {
	return PageCache{Measured: a.Measured || b.Measured, Used: a.Used + b.Used, Wasted: a.Wasted + b.Wasted,
		ReadUsed: a.ReadUsed + b.ReadUsed, ReadWasted: a.ReadWasted + b.ReadWasted, Mapped: a.Mapped + b.Mapped,
		Windows: a.Windows + b.Windows, Pages: a.Pages + b.Pages, AroundWindows: a.AroundWindows + b.AroundWindows,
		AroundPages: a.AroundPages + b.AroundPages, Depth: a.Depth + b.Depth, AroundDepth: a.AroundDepth + b.AroundDepth,
		FullWindows: a.FullWindows + b.FullWindows, FullPages: a.FullPages + b.FullPages, FullDepth: a.FullDepth + b.FullDepth,
		FaultAsync: a.FaultAsync + b.FaultAsync}
}

// mixedRaise is a road that raised from 32 KiB in a window whose
// sequential readers came with the tail of random ones (more than the
// tolerance's share of its pages): no measure of the sequential readers
// at 32 KiB before the raise.
func mixedRaise(t *testing.T) (*Road, Settings) {
	t.Helper()
	r := &Road{}
	s := settings(32)
	pc := plusPC(seqWindow(32, 262144), randomWindow(32, 2500))
	st := r.Window(window(t0, pc, 1e9), s)
	if st.Decision.KiB <= 32 {
		t.Fatalf("mixed window: %d KiB (%s), want a raise", st.Decision.KiB, st.Decision.Reason)
	}
	if b := r.baseline(SequentialKind, s.VerifyWindows); b.used > 0 {
		t.Fatalf("the mixed window measured the sequential readers: %+v", b)
	}
	r.Commit(32, st.Decision.KiB, t0, s)
	s.CurrentKiB = st.Decision.KiB
	return r, s
}

// TestRoadRaiseBaselineAfter: a raise decided in a window of mixed
// readers takes its baseline from the windows after it whose sequential
// readers still read at the old depth (their files opened before the
// raise); readers at the new depth that cost more device time per used
// page revert it to the old depth.
func TestRoadRaiseBaselineAfter(t *testing.T) {
	r, s := mixedRaise(t)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 2 * time.Second) }
	for i := 1; i <= 2; i++ { // the readers opened at 32 KiB: the baseline
		if st := r.Window(window(at(i), seqWindow(32, 262144), 1e9), s); st.Revert || st.Verifying != 2 {
			t.Fatalf("old-depth window %d: %+v, want the verification still counting 2", i, st)
		}
	}
	var st Step
	for i := 3; i <= 4; i++ { // new readers at the raised depth, 4 times the time per page
		st = r.Window(window(at(i), seqWindow(s.CurrentKiB, 262144), 4e9), s)
	}
	if !st.Revert || st.Decision.KiB != 32 || r.Last == nil || r.Last.Outcome != "Reverted" {
		t.Fatalf("after the raise: %+v (last %+v), want the revert to 32", st, r.Last)
	}
	if math.Abs(r.Last.MeasuredNs/r.Last.BaselineNs-4) > 1e-9 {
		t.Errorf("measured %.0f vs baseline %.0f ns per used page, want 4 times", r.Last.MeasuredNs, r.Last.BaselineNs)
	}
}

// TestRoadRaiseNoBaseline: a raise with no window of its readers at the
// old depth, before or after it, ends NotVerified once its windows at
// the new depth are counted, however slow they are: there is nothing to
// compare them with.
func TestRoadRaiseNoBaseline(t *testing.T) {
	r, s := mixedRaise(t)
	var st Step
	for i := 1; i <= 2; i++ {
		st = r.Window(window(t0.Add(time.Duration(i)*2*time.Second), seqWindow(s.CurrentKiB, 262144), 4e9), s)
	}
	if st.Revert || r.Last == nil || r.Last.Outcome != "NotVerified" || r.verify != nil {
		t.Fatalf("no baseline: %+v (last %+v), want NotVerified and no revert", st, r.Last)
	}
}

// TestRoadRestoreVerifiedAlone: a new default of 2560 KiB that thrashes,
// with the previous default of 256 KiB asked back, is restored in the
// window that measured the thrash; the road makes no other move (its own
// cut to the competitive depth) until the restore's verification ends
// Verified, and then cuts on.
func TestRoadRestoreVerifiedAlone(t *testing.T) {
	var r Road
	s := settings(2560)
	s.PreviousKiB, s.RestorePrevious = 256, true
	st := r.Window(window(t0, randomWindow(2560, 1500), 1500*900e3), s)
	if st.Decision.KiB != 256 || st.Decision.Reason != ReasonPreviousDefault {
		t.Fatalf("thrash at the new default: %d KiB (%s), want the previous 256 back", st.Decision.KiB, st.Decision.Reason)
	}
	r.Commit(2560, 256, t0, s)
	s.CurrentKiB = 256
	for i := 1; i <= 2; i++ {
		st = r.Window(window(t0.Add(time.Duration(i)*5*time.Second), randomWindow(256, 1500), 1500*150e3), s)
		if i == 1 && (st.Revert || st.Decision.KiB != 256) {
			t.Fatalf("window %d after the restore: %+v, want it kept while verified", i, st.Decision)
		}
	}
	if r.Last == nil || r.Last.Outcome != "Verified" || r.Last.FromKiB != 2560 || r.Last.ToKiB != 256 {
		t.Fatalf("verification %+v, want 2560 -> 256 Verified", r.Last)
	}
	st = r.Window(window(t0.Add(15*time.Second), randomWindow(256, 1500), 1500*150e3), s)
	if st.Decision.KiB >= 256 || st.Decision.Reason != ReasonWaste {
		t.Errorf("after the verdict: %d KiB (%s), want the road's own cut below 256", st.Decision.KiB, st.Decision.Reason)
	}
}
