package agent

import (
	"testing"
	"time"
)

// The counts of half a second of each reader, shaped as the page-cache
// probe counted them on a 1 GiB mapping (TestPageCacheLight): a mapping
// read in order at 16 KiB (one asynchronous read-ahead started by almost
// every fault, 4 pages around each) and at 2560 KiB, random reads through
// it at 16 KiB, and a read() scan (asynchronous read-aheads, no fault).
var (
	seqAt16   = PageCacheWindow{Measured: true, Faults: 8000, FaultAsync: 7999, AsyncReadAhead: 7999, AroundPages: 8000 * 4, UsedPages: 32000}
	seqAt2560 = PageCacheWindow{Measured: true, Faults: 100, FaultAsync: 98, AsyncReadAhead: 98, AroundPages: 100 * 640, UsedPages: 64000}
	randAt16  = PageCacheWindow{Measured: true, Faults: 3000, FaultAsync: 2, AsyncReadAhead: 2, AroundPages: 3000 * 4, UsedPages: 3000, WastedPages: 9000}
	readScan  = PageCacheWindow{Measured: true, AsyncReadAhead: 200, UsedPages: 128000}
)

func TestMappedSequential(t *testing.T) {
	few := seqAt16
	few.Faults, few.FaultAsync, few.AroundPages = 15, 15, 60
	half := randAt16
	half.FaultAsync = 1500
	for _, tc := range []struct {
		name string
		pc   PageCacheWindow
		want bool
	}{
		{"mapping read in order at 16 KiB", seqAt16, true},
		{"mapping read in order at 2560 KiB", seqAt2560, true},
		{"random reads through the mapping", randAt16, false},
		{"read() scan, no fault", readScan, false},
		{"fewer than RestoreMinAsync", few, false},
		{"one fault in two starts one", half, true},
		{"not measured", PageCacheWindow{FaultAsync: 100, Faults: 100}, false},
	} {
		if got := tc.pc.mappedSequential(); got != tc.want {
			t.Errorf("%s: mappedSequential = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReleasesHeld: the check releases held mapped files only when they
// are the ones read in order, and nothing holds changes back.
func TestReleasesHeld(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		pc      PageCacheWindow
		heldKiB int
		setup   func(c *deviceController) Gate
		want    bool
	}{
		{name: "held at 16, read in order at 16", pc: seqAt16, heldKiB: 16, want: true},
		{name: "nothing held", pc: seqAt16},
		{name: "held at 16, another file read in order at 2560", pc: seqAt2560, heldKiB: 16},
		{name: "held at 16, read at random", pc: randAt16, heldKiB: 16},
		{name: "held at 16, a read() scan", pc: readScan, heldKiB: 16},
		{name: "Observe mode", pc: seqAt16, heldKiB: 16, setup: func(c *deviceController) Gate {
			c.policy.Apply = false
			return Gate{Granted: true}
		}},
		{name: "a switch being verified", pc: seqAt16, heldKiB: 16, setup: func(c *deviceController) Gate {
			c.verify = &verification{left: 2}
			return Gate{Granted: true}
		}},
		{name: "paused", pc: seqAt16, heldKiB: 16, setup: func(*deviceController) Gate { return Gate{Paused: true, Granted: true} }},
		{name: "within minDwell of the cut", pc: seqAt16, heldKiB: 16, setup: func(c *deviceController) Gate {
			c.lastChange = now.Add(-time.Minute)
			return Gate{Granted: true, MinDwell: 10 * time.Minute}
		}},
		{name: "releases backed off", pc: seqAt16, heldKiB: 16, setup: func(c *deviceController) Gate {
			c.backoff[releaseBackoffKey] = now.Add(time.Minute)
			return Gate{Granted: true}
		}},
		{name: "their back-off over", pc: seqAt16, heldKiB: 16, want: true, setup: func(c *deviceController) Gate {
			c.backoff[releaseBackoffKey] = now.Add(-time.Second)
			return Gate{Granted: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, 2560)
			g := Gate{Granted: true}
			if tc.setup != nil {
				g = tc.setup(c)
			}
			if got := c.releasesHeld(tc.pc, tc.heldKiB, g, now); got != tc.want {
				t.Errorf("releasesHeld = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReleaseThenCut: a window the release ended releases the held files
// and leaves the device's setting; the next thrash of the files is cut
// on them at once (MappedCutRetry does not hold it).
func TestReleaseThenCut(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	c.mappedCutAt = now.Add(-2 * time.Second) // the cut the files are held by
	in := windowInput{Now: now, Gate: Gate{Granted: true}, PageCache: seqAt16, Release: seqAt16, HoldsMapped: true, HeldKiB: 16}
	rep, err := c.endWindow(in)
	if err != nil {
		t.Fatal(err)
	}
	if a := rep.Action; a.Kind != ActionApply || !a.releaseMapped || a.Setting.ReadAheadKiB != 2560 || rep.Reason != ReasonMappedSequential {
		t.Fatalf("the release window: action %+v, reason %q; want the release, the device at 2560, %q", a, rep.Reason, ReasonMappedSequential)
	}
	c.commit(rep.Action, now)
	if c.current.ReadAheadKiB != 2560 || !c.mappedCutDue(now.Add(time.Second)) || c.releasedAt != now || c.releasedKiB != 16 {
		t.Fatalf("after the release: device at %d KiB, mapped cut due %v, released at %v from %d KiB; want 2560, true, %v, 16",
			c.current.ReadAheadKiB, c.mappedCutDue(now.Add(time.Second)), c.releasedAt, c.releasedKiB, now)
	}
	if got, _ := (&deviceController{}).decideReleaseOf(windowInput{Now: now, Release: seqAt16}); got {
		t.Error("a window with nothing held released")
	}
	// The next lookups' thrash, a second later, with the files they
	// thrash still held open: cut on the files, not the device.
	thrash := PageCacheWindow{Measured: true, Faults: 80, AroundPages: 80 * 640, UsedPages: 80, WastedPages: 80 * 639}
	t1 := now.Add(time.Second)
	rep, err = c.endWindow(windowInput{Now: t1, Gate: Gate{Granted: true}, Sampled: true, PageCache: thrash, Thrash: thrash, HoldsMapped: true, HeldKiB: 16})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Action.mappedOnly {
		t.Fatalf("the thrash a second after the release: action %+v, want the mapped files' cut", rep.Action)
	}
}

// TestReleaseFlapDamping: ReleaseFlapCycles cuts of the mapped files in a
// row, each within MappedCutRetry of a release, back releases off; a cut
// longer after its release ends the run.
func TestReleaseFlapDamping(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gaps      []time.Duration // from each release to the cut after it
		wantBack  bool
		wantCount int
	}{
		{"two quick cycles (MEMMAP)", []time.Duration{time.Second, time.Second}, false, 2},
		{"three quick cycles", []time.Duration{time.Second, time.Second, time.Second}, true, 0},
		{"a slow cycle between", []time.Duration{time.Second, MappedCutRetry, time.Second}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, 2560)
			now := time.Unix(1000, 0)
			for _, gap := range tc.gaps {
				c.commit(Action{Kind: ActionApply, Setting: c.current, releaseMapped: true, heldKiB: 16}, now)
				now = now.Add(gap)
				target := c.current
				target.ReadAheadKiB = 16
				c.commit(c.mappedCut(target), now)
				now = now.Add(time.Second)
			}
			_, back := c.backoff[releaseBackoffKey]
			if back != tc.wantBack || c.quickCycles != tc.wantCount {
				t.Errorf("releases backed off %v (want %v), quick cycles %d (want %d)", back, tc.wantBack, c.quickCycles, tc.wantCount)
			}
			if g := (Gate{Granted: true}); c.releasesHeld(seqAt16, 16, g, now) == tc.wantBack {
				t.Errorf("releasesHeld after the cycles = %v, want %v", !tc.wantBack, !tc.wantBack)
			}
		})
	}
}

// decideReleaseOf is decideRelease on a fresh report.
func (c *deviceController) decideReleaseOf(in windowInput) (bool, WindowReport) {
	var rep WindowReport
	return c.decideRelease(&rep, in), rep
}

func TestReadsAroundNearer(t *testing.T) {
	first := seqAt16 // the interval after the cut, in MEMMAP
	first.Faults, first.AroundPages = 17970, 74668
	mixed := seqAt16 // with 20 lookups at 2560 KiB
	mixed.Faults, mixed.AroundPages = 3020, 3000*4+20*640
	at512 := seqAt16
	at512.AroundPages = seqAt16.Faults * 128
	for _, tc := range []struct {
		name         string
		pc           PageCacheWindow
		held, device int
		want         bool
	}{
		{"at 16 KiB, held at 16", seqAt16, 16, 2560, true},
		{"4.15 pages a fault, held at 16", first, 16, 2560, true},
		{"8.2 pages a fault, held at 16", mixed, 16, 2560, true},
		{"at 2560 KiB, held at 16", seqAt2560, 16, 2560, false},
		{"at 512 KiB, held at 512", at512, 512, 2560, true},
		{"at 2560 KiB, held at 512", seqAt2560, 512, 2560, false},
		{"no fault", readScan, 16, 2560, false},
	} {
		if got := tc.pc.readsAroundNearer(tc.held, tc.device); got != tc.want {
			t.Errorf("%s: readsAroundNearer(%d, %d) = %v, want %v", tc.name, tc.held, tc.device, got, tc.want)
		}
	}
}

// TestRecutsOnFaults: random faults again soon after a release are cut
// back to the depth the files were held at, at once; not without a
// release, after a cut since, past ReleaseRecall, or on faults that read
// around no more than that depth or are sequential.
func TestRecutsOnFaults(t *testing.T) {
	now := time.Unix(1000, 0)
	randAt2560 := PageCacheWindow{Measured: true, Faults: 100, AroundPages: 100 * 640, UsedPages: 100}
	for _, tc := range []struct {
		name  string
		pc    PageCacheWindow
		setup func(c *deviceController)
		want  bool
	}{
		{name: "random faults 5 s after the release", pc: randAt2560, want: true},
		{name: "no release", pc: randAt2560, setup: func(c *deviceController) { c.releasedAt = time.Time{} }},
		{name: "cut again since", pc: randAt2560, setup: func(c *deviceController) { c.mappedCutAt = now.Add(-time.Second) }},
		{name: "past ReleaseRecall", pc: randAt2560, setup: func(c *deviceController) { c.releasedAt = now.Add(-ReleaseRecall) }},
		{name: "faults at the held depth", pc: randAt16},
		{name: "sequential faults", pc: seqAt2560},
		{name: "Observe mode", pc: randAt2560, setup: func(c *deviceController) { c.policy.Apply = false }},
		{name: "lowering backed off", pc: randAt2560, setup: func(c *deviceController) {
			c.backoff[raBackoffKey(2560, 16)] = now.Add(time.Minute)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, 2560)
			c.releasedAt, c.releasedKiB = now.Add(-5*time.Second), 16
			if tc.setup != nil {
				tc.setup(c)
			}
			if got := c.recutsOnFaults(tc.pc, Gate{Granted: true}, now); got != tc.want {
				t.Errorf("recutsOnFaults = %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			rep, err := c.endWindow(windowInput{Now: now, Gate: Gate{Granted: true}, Sampled: true, PageCache: tc.pc, Recut: tc.pc, HoldsMapped: true})
			if err != nil {
				t.Fatal(err)
			}
			a := rep.Action
			if !a.mappedOnly || a.Setting.ReadAheadKiB != 16 || rep.Reason != ReasonMappedRandomAgain {
				t.Fatalf("the recut window: action %+v, reason %q; want the mapped files cut to 16 KiB, %q", a, rep.Reason, ReasonMappedRandomAgain)
			}
			c.commit(a, now)
			if c.current.ReadAheadKiB != 2560 || c.mappedCutAt != now || c.recutsOnFaults(tc.pc, Gate{Granted: true}, now.Add(time.Second)) {
				t.Errorf("after the recut: device at %d KiB, cut at %v, recut again %v; want 2560, %v, false",
					c.current.ReadAheadKiB, c.mappedCutAt, c.recutsOnFaults(tc.pc, Gate{Granted: true}, now.Add(time.Second)), now)
			}
		})
	}
}

// TestLookupFaults: the lookups are found in the interval where the scan
// before them ends, which randomFaults misses.
func TestLookupFaults(t *testing.T) {
	tail := PageCacheWindow{Measured: true, Faults: 60 + 90, FaultAsync: 60, AsyncReadAhead: 60, AroundPages: 150 * 640}
	if tail.randomFaults() {
		t.Fatal("the scan's tail and the lookups: randomFaults true, want false (the case lookupFaults is for)")
	}
	for _, tc := range []struct {
		name string
		pc   PageCacheWindow
		want bool
	}{
		{"the scan's tail and the lookups at 2560 KiB", tail, true},
		{"lookups at 2560 KiB alone", PageCacheWindow{Measured: true, Faults: 100, AroundPages: 100 * 640}, true},
		{"lookups at the held depth", randAt16, false},
		{"a scan at 2560 KiB", seqAt2560, false},
		{"a scan at 16 KiB", seqAt16, false},
		{"a read() scan", readScan, false},
	} {
		if got := tc.pc.lookupFaults(16); got != tc.want {
			t.Errorf("%s: lookupFaults(16) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
