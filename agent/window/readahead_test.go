package window

import (
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// raWindow is n requests of `sectors` sectors, one after another on one
// device, each served in svc ns; all flagged read-ahead (REQ_RAHEAD, as
// the page cache's windows and read-around are) when ra, else
// synchronous reads.
func raWindow(start int64, n int, sectors uint32, svc int64, ra bool) []trace.Request {
	reqs := make([]trace.Request, n)
	t := start
	for i := range reqs {
		f := trace.Sync
		if ra {
			f = trace.ReadAhead
		}
		reqs[i] = trace.Request{Arrival: t, Dispatch: t, Complete: t + svc, Sector: uint64(i) * uint64(sectors),
			Sectors: sectors, Op: trace.Read, Flags: f, PID: 100, Think: trace.Unknown}
		t += svc + 1000
	}
	return reqs
}

// thrashCounts are the page-cache counts of faults random mmap reads
// made at a read-around of kib KiB, each using its own page alone.
func thrashCounts(kib int, faults uint64) readahead.PageCache {
	pages := faults * uint64(kib) / 4
	return readahead.PageCache{Measured: true, Used: faults, Wasted: pages - faults, Windows: faults, Pages: pages,
		AroundWindows: faults, AroundPages: pages, Depth: pages, AroundDepth: pages}
}

// seqCounts are a sequential read()'s counts at kib KiB: pages read,
// all used.
func seqCounts(kib int, pages uint64) readahead.PageCache {
	w := pages * 4 / uint64(kib)
	return readahead.PageCache{Measured: true, Used: pages, ReadUsed: pages, Windows: w, Pages: pages, Depth: pages,
		FullWindows: w, FullPages: pages, FullDepth: pages}
}

func raController(t *testing.T, raKiB int) *Controller {
	t.Helper()
	p := testPolicy(true)
	p.ReadAhead = true
	p.Engine.ReadAhead = engine.ReadAheadBounds(16, 4096)
	c, err := New("loopz", model.Default(model.SSD, 100*gib),
		Setting{Candidate: engine.Candidate{Scheduler: "none"}, ReadAheadKiB: raKiB}, p)
	if err != nil {
		t.Fatal(err)
	}
	c.learn.calibrated, c.learn.online = true, true
	return c
}

// raStep ends a window of reqs with the page cache's counts pc under the
// CRD's default minDwell (10 minutes) and commits the action.
func raStep(c *Controller, reqs []trace.Request, pc readahead.PageCache, now time.Time) Report {
	return raStepGate(c, reqs, pc, now, Gate{Granted: true, MinDwell: 10 * time.Minute})
}

func raStepGate(c *Controller, reqs []trace.Request, pc readahead.PageCache, now time.Time, g Gate) Report {
	c.Add(reqs)
	rep, err := c.EndWindow(Input{Now: now, Gate: g, PageCache: pc})
	if err != nil {
		panic(err)
	}
	if rep.Action.Kind != ActionNone {
		c.Commit(rep.Action, now)
	}
	return rep
}

// TestReadAheadCutByRisk: a thrash of random readers is cut in the window
// that measured it, though the scheduler changed a minute before (minDwell
// 10 minutes) and no grant allows a change: a move of read-ahead within
// the policy's bounds is low risk. A paused policy, another writer the
// agent yields to, and Observe mode hold it; without a probe nothing is
// measured and nothing changes.
func TestReadAheadCutByRisk(t *testing.T) {
	now := time.Unix(1000, 0)
	thrash := raWindow(0, 400, 5120, 2_000_000, false)
	c := raController(t, 2560)
	c.Memo.LastChange = now.Add(-time.Minute)
	if rep := raStep(c, thrash, readahead.PageCache{}, now); rep.Action.Kind != ActionNone {
		t.Fatalf("without a probe the agent changed the device: %+v", rep.Action)
	}
	rep := raStepGate(c, thrash, thrashCounts(2560, 400), now.Add(5*time.Second), Gate{MinDwell: 10 * time.Minute})
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB >= 2560 || !strings.Contains(rep.Action.Reason, "ReadAheadWasted") {
		t.Fatalf("a thrash within minDwell and with no grant: action %+v, want the cut", rep.Action)
	}
	for _, tc := range []struct {
		name  string
		g     Gate
		apply bool
		want  Hold
	}{
		{"paused", Gate{Paused: true, Granted: true}, true, HoldPaused},
		{"yielded", Gate{Yielded: true, Granted: true}, true, HoldOtherWriter},
		{"observe", Gate{Granted: true}, false, HoldNone},
	} {
		c := raController(t, 2560)
		c.Policy.Apply = tc.apply
		rep := raStepGate(c, thrash, thrashCounts(2560, 400), now, tc.g)
		if rep.Action.Kind != ActionNone || rep.Held != tc.want || rep.Target == nil || rep.Target.ReadAheadKiB >= 2560 {
			t.Errorf("%s: action %+v, held %v, target %+v; want no action, held %v, the cut recommended", tc.name, rep.Action, rep.Held, rep.Target, tc.want)
		}
	}
}

// TestReadAheadRaisedOnSequentialDemand: after a cut, sequential readers
// at the cut depth bring the original depth back within a window, and
// none is made without them.
func TestReadAheadRaisedOnSequentialDemand(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	c.Current.ReadAheadKiB = 16
	if rep := raStep(c, raWindow(0, 100, 8, 100_000, false), readahead.PageCache{Measured: true}, now); rep.Action.Kind != ActionNone {
		t.Fatalf("no sequential demand: %+v", rep.Action)
	}
	seq := raWindow(0, 2000, 32, 100_000, true)
	rep := raStep(c, seq, seqCounts(16, 65536), now.Add(5*time.Second))
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB != 2560 || !strings.Contains(rep.Action.Reason, "SequentialDemand") {
		t.Fatalf("sequential readers at 16 KiB: action %+v, want read_ahead_kb back to 2560", rep.Action)
	}
}

// TestReadAheadChangeThatHurtsIsReverted: a cut after which the random
// readers cost the device more time per used page is reverted after the
// verification windows, and the cut is not made again in the back-off.
func TestReadAheadChangeThatHurtsIsReverted(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	// 400 read-arounds of 2560 KiB, each two requests of 1280 KiB (1 ms):
	// 2 ms of device time per used page.
	rep := raStep(c, raWindow(0, 800, 2560, 1_000_000, true), thrashCounts(2560, 400), now)
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB >= 2560 {
		t.Fatalf("action %+v, want a cut", rep.Action)
	}
	cut := rep.Action.Setting.ReadAheadKiB
	var last Report
	for i := 1; i <= 2; i++ { // 400 read-arounds of the cut depth, 6 ms each: 3 times the time per used page
		last = raStep(c, raWindow(int64(i)*10e9, 400, uint32(2*cut), 6_000_000, true), thrashCounts(cut, 400), now.Add(time.Duration(i)*5*time.Second))
	}
	if last.Action.Kind != ActionRevert || last.Action.Setting.ReadAheadKiB != 2560 || last.Reason != ReasonRegressionReverted {
		t.Fatalf("action %+v (%s), want a revert to 2560", last.Action, last.Reason)
	}
	if c.lastVerify == nil || c.lastVerify.Outcome != "Reverted" {
		t.Fatalf("last verification %+v", c.lastVerify)
	}
	for i := 3; i < 6; i++ {
		if rep := raStep(c, raWindow(0, 400, 2560, 1_000_000, false), thrashCounts(2560, 400), now.Add(time.Duration(i)*5*time.Second)); rep.Action.Kind != ActionNone {
			t.Fatalf("window %d: %+v during the back-off", i, rep.Action)
		}
	}
}

// TestReadAheadDecidedOnFewRequests: a window with fewer requests than
// the scheduler's evaluation needs still decides read-ahead.
func TestReadAheadDecidedOnFewRequests(t *testing.T) {
	c := raController(t, 2560)
	rep := raStep(c, raWindow(0, 20, 5120, 2_000_000, false), thrashCounts(2560, 300), time.Unix(1000, 0))
	if rep.Skipped == "" || rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB >= 2560 {
		t.Fatalf("20 requests of a thrash: skipped %q, action %+v; want the scheduler skipped and the cut made", rep.Skipped, rep.Action)
	}
}

// TestDwellEndsWithTheOriginal: a scheduler revert to the original ends
// the dwell its switch started.
func TestDwellEndsWithTheOriginal(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	c.Commit(Action{Kind: ActionApply, Setting: Setting{Candidate: engine.Candidate{Scheduler: "kyber"}}}, now)
	if !c.Memo.LastChange.Equal(now) {
		t.Fatalf("a switch: lastChange %v, want %v", c.Memo.LastChange, now)
	}
	c.Commit(Action{Kind: ActionRevert, Setting: Setting{Candidate: engine.Candidate{Scheduler: c.originalSched}}}, now.Add(time.Minute))
	if !c.Memo.LastChange.IsZero() {
		t.Errorf("the original back: lastChange %v, want none", c.Memo.LastChange)
	}
}
