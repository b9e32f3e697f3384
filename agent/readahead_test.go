package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// raWindow is n requests of `sectors` sectors, one after another on one
// device, each served in svc ns; every other one is flagged read-ahead
// when ra (sequential reading), else all are synchronous reads.
func raWindow(start int64, n int, sectors uint32, svc int64, ra bool) []trace.Request {
	reqs := make([]trace.Request, n)
	t := start
	for i := range reqs {
		f := trace.Sync
		if ra && i%2 == 1 {
			f = trace.ReadAhead
		}
		reqs[i] = trace.Request{Arrival: t, Dispatch: t, Complete: t + svc, Sector: uint64(i) * uint64(sectors),
			Sectors: sectors, Op: trace.Read, Flags: f, PID: 100, Think: trace.Unknown}
		t += svc + 1000
	}
	return reqs
}

func raController(t *testing.T, raKiB int) *deviceController {
	t.Helper()
	p := testPolicy(true)
	p.ReadAhead = true
	p.Engine.ReadAhead = engine.ReadAheadBounds(16, 4096)
	c, err := newDeviceController("loopz", model.Default(model.SSD, 100*gib),
		Setting{Candidate: engine.Candidate{Scheduler: "none"}, ReadAheadKiB: raKiB}, p)
	if err != nil {
		t.Fatal(err)
	}
	c.calibrated, c.online = true, true
	return c
}

// raStep ends a window of reqs with the page cache's counts pc and commits
// the action.
func raStep(c *deviceController, reqs []trace.Request, pc PageCacheWindow, now time.Time) WindowReport {
	c.add(reqs)
	rep, err := c.endWindow(windowInput{Now: now, Gate: Gate{Granted: true}, PageCache: pc})
	if err != nil {
		panic(err)
	}
	if rep.Action.Kind != ActionNone {
		c.commit(rep.Action, now)
	}
	return rep
}

func TestReadAheadIsCutOnlyOnMeasuredWaste(t *testing.T) {
	now := time.Unix(1000, 0)
	// A thrashing mmap reader: 2.5 MiB read-arounds, one page used of each.
	thrash := raWindow(0, 400, 5120, 2_000_000, false)
	c := raController(t, 2560)
	rep := raStep(c, thrash, PageCacheWindow{}, now)
	if rep.Action.Kind != ActionNone {
		t.Fatalf("without a probe the agent changed the device: %+v", rep.Action)
	}
	rep = raStep(c, thrash, PageCacheWindow{Measured: true, UsedPages: 400, WastedPages: 400 * 639}, now.Add(5*time.Second))
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB != 16 {
		t.Fatalf("99.8 %% waste: action %+v, want read_ahead_kb 16 at once", rep.Action)
	}
	if !strings.Contains(rep.Action.Reason, "ReadAheadWasted") || c.raVerify == nil {
		t.Fatalf("reason %q, verification %+v", rep.Action.Reason, c.raVerify)
	}
}

// TestReadAheadChangeThatHurtsIsReverted: a cut that makes the device work
// longer for each page the application uses is reverted after the
// verification windows, and not tried again during the back-off.
func TestReadAheadChangeThatHurtsIsReverted(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	// 60 % waste: cut to 1024, on two agreeing windows.
	before := raWindow(0, 400, 5120, 2_000_000, true) // 0.8 s busy
	pc := PageCacheWindow{Measured: true, UsedPages: 100_000, WastedPages: 150_000}
	raStep(c, before, pc, now)
	rep := raStep(c, before, pc, now.Add(5*time.Second))
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB != 1024 {
		t.Fatalf("action %+v, want read_ahead_kb 1024", rep.Action)
	}
	// After the cut the device is busy 3× as long for the same used pages.
	after := raWindow(20e9, 1200, 2048, 2_000_000, true)
	var last WindowReport
	for i := 2; i < 4; i++ {
		last = raStep(c, after, pc, now.Add(time.Duration(i)*5*time.Second))
	}
	if last.Action.Kind != ActionRevert || last.Action.Setting.ReadAheadKiB != 2560 {
		t.Fatalf("action %+v, want a revert to 2560", last.Action)
	}
	if c.lastVerify == nil || c.lastVerify.Outcome != "Reverted" {
		t.Fatalf("last verification %+v", c.lastVerify)
	}
	for i := 4; i < 7; i++ {
		if rep := raStep(c, before, pc, now.Add(time.Duration(i)*5*time.Second)); rep.Action.Kind != ActionNone {
			t.Fatalf("window %d: %+v during the back-off", i, rep.Action)
		}
	}
}

// TestReadAheadIsRestoredWhenUsed: after a cut, sequential readers that use
// every page bring the original depth back after two windows, and the
// change is verified when it helps.
func TestReadAheadIsRestoredWhenUsed(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	c.current.ReadAheadKiB = 16
	seq := raWindow(0, 2000, 32, 100_000, true)
	pc := PageCacheWindow{Measured: true, UsedPages: 8000, WastedPages: 0}
	if rep := raStep(c, seq, pc, now); rep.Action.Kind != ActionNone {
		t.Fatalf("first window acted: %+v", rep.Action)
	}
	rep := raStep(c, seq, pc, now.Add(5*time.Second))
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB != 2560 {
		t.Fatalf("action %+v, want read_ahead_kb back to 2560", rep.Action)
	}
	faster := raWindow(20e9, 100, 5120, 1_000_000, true) // 0.1 s busy for the same pages
	for i := 2; i < 4; i++ {
		if rep := raStep(c, faster, pc, now.Add(time.Duration(i)*5*time.Second)); rep.Action.Kind != ActionNone {
			t.Fatalf("window %d: %+v", i, rep.Action)
		}
	}
	if c.raVerify != nil || c.lastVerify == nil || c.lastVerify.Outcome != "Verified" {
		t.Fatalf("verification %+v, last %+v", c.raVerify, c.lastVerify)
	}
}

// TestCorrectionAfterRefutedSwitch: a switch that measured slower than
// predicted leaves a correction > 1 for its target, large enough that the
// same window no longer predicts a gain for it.
func TestCorrectionAfterRefutedSwitch(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	w := fifoWindow(1, 2000, 4, 4, 0, 1)
	rep, err := stepConfirmed(t, c, w, now)
	if err != nil || rep.Action.Kind != ActionApply {
		t.Fatalf("first window: %v %+v", err, rep.Action)
	}
	target := rep.Action.Setting.Candidate.Name()
	for i := 2; i < 4; i++ {
		if _, err := step(c, fifoWindow(uint64(i), 2000, 4, 4, int64(i)*10e9, 3), now.Add(time.Duration(i)*5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	f := c.corrections[target]
	if f <= 1 {
		t.Fatalf("correction of %s = %.2f after a refuted switch, want > 1 (all: %v)", target, f, c.corrections)
	}
	// Past its back-off, the same window no longer predicts a gain for it.
	c.backoff = map[string]time.Time{}
	rep, err = step(c, w, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind == ActionApply && rep.Action.Setting.Candidate.Name() == target {
		t.Fatalf("switched to %s again despite its correction %.2f: %s", target, f, rep.Action.Reason)
	}
}

// TestThrashIntervalDecidesTheWindow: a window whose earlier part ran
// another load measures 66 % waste over the whole window, which alone
// asks for a second window before a cut; when the thrash check ended it
// on an interval of 94 % (windowInput.Thrash), it cuts at once, and the
// window's own used pages stay the verification's baseline.
func TestThrashIntervalDecidesTheWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	reqs := raWindow(0, 400, 5120, 2_000_000, false)
	window := PageCacheWindow{Measured: true, UsedPages: 3400, WastedPages: 6600}
	interval := PageCacheWindow{Measured: true, UsedPages: 600, WastedPages: 9400}
	for _, tc := range []struct {
		name   string
		thrash PageCacheWindow
		cut    bool
	}{
		{"the window's counts alone", PageCacheWindow{}, false},
		{"ended by the thrash check", interval, true},
		{"an interval below the window's waste", PageCacheWindow{Measured: true, UsedPages: 8000, WastedPages: 2000}, false},
	} {
		c := raController(t, 2560)
		c.add(reqs)
		rep, err := c.endWindow(windowInput{Now: now, Gate: Gate{Granted: true}, PageCache: window, Thrash: tc.thrash})
		if err != nil {
			t.Fatal(err)
		}
		if cut := rep.Action.Kind == ActionApply && rep.Action.Setting.ReadAheadKiB < 2560; cut != tc.cut {
			t.Errorf("%s: action %+v, want a cut %v", tc.name, rep.Action, tc.cut)
		}
		if c.ra.pc.UsedPages != window.UsedPages {
			t.Errorf("%s: the evidence's used pages %d, want the window's %d", tc.name, c.ra.pc.UsedPages, window.UsedPages)
		}
	}
}

// TestPageCacheWindowWaste: pages that fault-around mapped and nothing
// else touched count as wasted when the window's faults are random mmap
// reads (64 faults or more, under one asynchronous read-ahead in 8), and
// as used otherwise.
func TestPageCacheWindowWaste(t *testing.T) {
	// MEM at 128 KiB in one second, sampled 1 in 8: 2,700 faults, 32
	// pages read around each, 16 of them mapped.
	mem := PageCacheWindow{Measured: true, UsedPages: 5700, WastedPages: 4000, MappedPages: 5400, Faults: 2700}
	for _, tc := range []struct {
		name string
		pc   PageCacheWindow
		want float64
	}{
		{"random mmap reads", mem, 100 * 9400.0 / 9700},
		{"sequential mmap reads", func() PageCacheWindow { p := mem; p.AsyncReadAhead = 2700; return p }(), 100 * 4000.0 / 9700},
		{"one asynchronous read-ahead in 8 faults", func() PageCacheWindow { p := mem; p.AsyncReadAhead = 2700/8 + 1; return p }(), 100 * 4000.0 / 9700},
		{"too few faults", func() PageCacheWindow { p := mem; p.Faults = RandomMinFaults - 1; return p }(), 100 * 4000.0 / 9700},
		{"read() alone", PageCacheWindow{Measured: true, UsedPages: 9000, WastedPages: 1000}, 10},
		{"more mapped than used", PageCacheWindow{Measured: true, UsedPages: 300, WastedPages: 700, MappedPages: 900, Faults: 100}, 100},
	} {
		got, ok := tc.pc.WastePct()
		if !ok || got < tc.want-0.01 || got > tc.want+0.01 {
			t.Errorf("%s: waste %.2f%% (%v), want %.2f%%", tc.name, got, ok, tc.want)
		}
	}
}

// TestUsedIntervalSupersedesTheCut: a window ended by the check because
// sequential readers use read-ahead again restores the depth a cut
// lowered at once, though the cut's verification had windows left and
// the window's own counts (most of it the random load the cut was made
// for) show waste; the cut's verification ends as superseded, and the
// restore starts its own.
func TestUsedIntervalSupersedesTheCut(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	c.current.ReadAheadKiB = 16
	c.raVerify = &raVerification{previous: 2560, target: 16, beforeNs: 50_000, left: 2}
	reqs := raWindow(0, 400, 32, 100_000, true)
	window := PageCacheWindow{Measured: true, UsedPages: 3000, WastedPages: 3000, AsyncReadAhead: 300}
	used := PageCacheWindow{Measured: true, UsedPages: 2000, WastedPages: 1500, UsedNow: 2000, WastedNow: 10, AsyncReadAhead: 250}
	c.add(reqs)
	rep, err := c.endWindow(windowInput{Now: now, Gate: Gate{Granted: true}, PageCache: window, Used: used})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB != 2560 || rep.Action.raVerify == nil || !rep.Action.keepMapped {
		t.Fatalf("action %+v, want read_ahead_kb back to 2560 with a verification, keeping mapped files", rep.Action)
	}
	if c.lastVerify == nil || c.lastVerify.Outcome != "Superseded" {
		t.Errorf("the cut's verification ended %+v, want Superseded", c.lastVerify)
	}

	// The same window without the check's interval: the cut's
	// verification goes on, and nothing is restored.
	c = raController(t, 2560)
	c.current.ReadAheadKiB = 16
	c.raVerify = &raVerification{previous: 2560, target: 16, beforeNs: 50_000, left: 2}
	c.add(reqs)
	if rep, err = c.endWindow(windowInput{Now: now, Gate: Gate{Granted: true}, PageCache: window}); err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind != ActionNone || c.raVerify == nil || c.raVerify.left != 1 {
		t.Errorf("without the interval: action %+v, verification %+v; want none, one window left", rep.Action, c.raVerify)
	}
}

// TestCutReachesFaults: a cut is not made on the waste of random page
// faults that read around no more than the cut's depth each (files at a
// lower depth of their own); it is on faults that read around more, and
// on waste that is not of random faults.
func TestCutReachesFaults(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		pc   PageCacheWindow
		cut  bool
	}{
		{"random faults reading 2560 KiB around", PageCacheWindow{Measured: true, UsedPages: 500, WastedPages: 9500,
			Faults: 1000, AroundPages: 640 * 1000}, true},
		{"random faults reading 16 KiB around", PageCacheWindow{Measured: true, UsedPages: 500, WastedPages: 9500,
			Faults: 1000, AroundPages: 4 * 1000}, false},
		{"waste of reads, not faults", PageCacheWindow{Measured: true, UsedPages: 500, WastedPages: 9500}, true},
	} {
		c := raController(t, 2560)
		rep := raStep(c, raWindow(0, 400, 32, 100_000, false), tc.pc, now)
		if cut := rep.Action.Kind == ActionApply && rep.Action.Setting.ReadAheadKiB < 2560; cut != tc.cut {
			t.Errorf("%s: action %+v (reason %s), want a cut %v", tc.name, rep.Action, c.ra.reason, tc.cut)
		}
		if _, got := c.cutsOnThrash(tc.pc, Gate{Granted: true}, now); got != tc.cut {
			t.Errorf("%s: cutsOnThrash = %v, want %v", tc.name, got, tc.cut)
		}
	}
}

// TestKeepMappedOnlyOnEvidence: a raise to the policy's minKiB (the
// administrator's bound, not readers' evidence) brings mapped files
// along; a restore on sequential use keeps them (as in
// TestUsedIntervalSupersedesTheCut).
func TestKeepMappedOnlyOnEvidence(t *testing.T) {
	c := raController(t, 2560)
	c.policy.Engine.ReadAhead = engine.ReadAheadBounds(128, 4096)
	c.current.ReadAheadKiB = 16
	reqs := raWindow(0, 400, 32, 100_000, true)
	raStep(c, reqs, PageCacheWindow{}, time.Unix(1000, 0)) // two windows must agree
	rep := raStep(c, reqs, PageCacheWindow{}, time.Unix(1005, 0))
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB != 128 {
		t.Fatalf("action %+v, want read_ahead_kb raised to the policy's 128", rep.Action)
	}
	if rep.Action.keepMapped {
		t.Errorf("a raise to the policy's bound keeps mapped files below it: %+v", rep.Action)
	}
}

// TestMappedWasteCutsTheMappedFiles: a thrash whose waste is the
// read-around of random page faults cuts the mapped files alone when the
// agent can hold them; read()'s waste, no way to hold them, or a thrash
// soon after such a cut cuts the device.
func TestMappedWasteCutsTheMappedFiles(t *testing.T) {
	mapped := PageCacheWindow{Measured: true, Faults: 400, AroundPages: 400 * 640, UsedPages: 400, WastedPages: 400 * 639}
	read := mapped
	read.WastedNow = read.WastedPages / 2
	slightRead := mapped
	slightRead.WastedNow = mapped.WastedPages / 25 // 4 %
	sequential := mapped
	sequential.AsyncReadAhead = 400
	for _, tc := range []struct {
		name        string
		pc          PageCacheWindow
		holds       bool
		lastMapped  time.Duration // before now; 0: none
		heldKiB     int           // the depth of the files it holds still open; 0: none open
		wantMapped  bool
		wantVerify  bool
		wantCurrent int
	}{
		{name: "mapped waste", pc: mapped, holds: true, wantMapped: true, wantCurrent: 2560},
		{name: "read() wasted 4 %", pc: slightRead, holds: true, wantMapped: true, wantCurrent: 2560},
		{name: "no open-files follower", pc: mapped, wantVerify: true, wantCurrent: 16},
		{name: "read() wasted half", pc: read, holds: true, wantVerify: true, wantCurrent: 16},
		{name: "sequential faults", pc: sequential, holds: true, wantVerify: true, wantCurrent: 16},
		{name: "thrash 5 s after a mapped cut", pc: mapped, holds: true, lastMapped: 5 * time.Second, heldKiB: 16, wantVerify: true, wantCurrent: 16},
		{name: "thrash 5 s after a mapped cut whose files are closed", pc: mapped, holds: true, lastMapped: 5 * time.Second, wantMapped: true, wantCurrent: 2560},
		{name: "thrash 10 s after a mapped cut", pc: mapped, holds: true, lastMapped: MappedCutRetry, heldKiB: 16, wantMapped: true, wantCurrent: 2560},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			c := raController(t, 2560)
			if tc.lastMapped > 0 {
				c.mappedCutAt = now.Add(-tc.lastMapped)
			}
			c.add(raWindow(0, 400, 5120, 2_000_000, false))
			rep, err := c.endWindow(windowInput{Now: now, Gate: Gate{Granted: true}, PageCache: tc.pc, HoldsMapped: tc.holds, HeldKiB: tc.heldKiB})
			if err != nil {
				t.Fatal(err)
			}
			a := rep.Action
			if a.Kind != ActionApply || a.Setting.ReadAheadKiB != 16 {
				t.Fatalf("action %+v, want a cut to 16", a)
			}
			if a.mappedOnly != tc.wantMapped || (a.raVerify != nil) != tc.wantVerify {
				t.Fatalf("mappedOnly %v (want %v), verified %v (want %v): %s", a.mappedOnly, tc.wantMapped, a.raVerify != nil, tc.wantVerify, a.Reason)
			}
			c.commit(a, now)
			if c.current.ReadAheadKiB != tc.wantCurrent {
				t.Errorf("the controller's depth %d after the cut, want %d", c.current.ReadAheadKiB, tc.wantCurrent)
			}
			if tc.wantMapped && (!c.mappedCutAt.Equal(now) || !c.lastChange.Equal(now) || c.raVerify != nil) {
				t.Errorf("after a mapped cut: mappedCutAt %v lastChange %v raVerify %+v", c.mappedCutAt, c.lastChange, c.raVerify)
			}
		})
	}
}

// TestThrashWindowWithFewRequestsCuts: a window the thrash check ended is
// evaluated on fewer requests than the policy's minimum (its cut rests on
// the page-cache counts); any other such window is skipped.
func TestThrashWindowWithFewRequestsCuts(t *testing.T) {
	thrash := PageCacheWindow{Measured: true, Faults: 80, AroundPages: 80 * 640, UsedPages: 80, WastedPages: 80 * 639}
	for _, tc := range []struct {
		name    string
		in      windowInput
		wantCut bool
	}{
		{name: "ended by the thrash check", in: windowInput{PageCache: thrash, Thrash: thrash}, wantCut: true},
		{name: "a whole window", in: windowInput{PageCache: thrash}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, 2560)
			n := c.policy.MinRequests / 2
			c.add(raWindow(0, n, 5120, 2_000_000, false))
			in := tc.in
			in.Now, in.Gate = time.Unix(1000, 0), Gate{Granted: true}
			rep, err := c.endWindow(in)
			if err != nil {
				t.Fatal(err)
			}
			if cut := rep.Action.Kind == ActionApply && rep.Action.Setting.ReadAheadKiB < 2560; cut != tc.wantCut {
				t.Fatalf("%d requests (minimum %d): cut %v, want %v; skipped %q, action %+v", n, c.policy.MinRequests, cut, tc.wantCut, rep.Skipped, rep.Action)
			}
		})
	}
}

// TestPausedThrashCutsTheMappedFiles: a window that the thrash check
// ended on a paused device, with no request traced, cuts the mapped files
// alone when their waste is the read-around of random page faults and the
// agent holds mapped files (decideMappedThrash); anything else is skipped
// as before, since the device's depth was not measured.
func TestPausedThrashCutsTheMappedFiles(t *testing.T) {
	thrash := PageCacheWindow{Measured: true, Faults: 80, AroundPages: 80 * 640, UsedPages: 80, WastedPages: 80 * 639}
	sequential := thrash
	sequential.AsyncReadAhead = 80 // a sequential mmap reader: its faults are not random
	read := thrash
	read.WastedNow = thrash.WastedPages / 2 // read() brought half the waste in
	for _, tc := range []struct {
		name       string
		in         windowInput
		wantMapped bool
	}{
		{name: "mapped thrash, files held", in: windowInput{PageCache: thrash, Thrash: thrash, HoldsMapped: true}, wantMapped: true},
		{name: "mapped thrash, files not held", in: windowInput{PageCache: thrash, Thrash: thrash}},
		{name: "sequential faults", in: windowInput{PageCache: sequential, Thrash: sequential, HoldsMapped: true}},
		{name: "read() waste", in: windowInput{PageCache: read, Thrash: read, HoldsMapped: true}},
		{name: "no thrash check", in: windowInput{PageCache: thrash, HoldsMapped: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, 2560)
			in := tc.in
			in.Now, in.Gate, in.Sampled = time.Unix(1000, 0), Gate{Granted: true}, true
			rep, err := c.endWindow(in)
			if err != nil {
				t.Fatal(err)
			}
			mapped := rep.Action.Kind == ActionApply && rep.Action.mappedOnly && rep.Action.Setting.ReadAheadKiB < 2560
			if mapped != tc.wantMapped || !tc.wantMapped && (rep.Action.Kind != ActionNone || rep.Skipped == "") {
				t.Fatalf("no request traced: mapped cut %v, want %v; skipped %q, action %+v", mapped, tc.wantMapped, rep.Skipped, rep.Action)
			}
			if tc.wantMapped {
				if rep.Reason != ReasonMappedWaste || rep.Target == nil || rep.Target.ReadAheadKiB >= 2560 {
					t.Errorf("recommendation %v, reason %q; want a cut, %q", rep.Target, rep.Reason, ReasonMappedWaste)
				}
				c.commit(rep.Action, in.Now)
				if c.current.ReadAheadKiB != 2560 || c.mappedCutAt != in.Now {
					t.Errorf("after the mapped cut the device is at %d KiB (want 2560), cut at %v", c.current.ReadAheadKiB, c.mappedCutAt)
				}
			}
		})
	}
}
