package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/openfiles"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// TestCutsOnThrash: a check's interval ends the window exactly when the
// window's end would cut read-ahead at once on it.
func TestCutsOnThrash(t *testing.T) {
	now := time.Unix(1000, 0)
	thrash := PageCacheWindow{Measured: true, UsedPages: 100, WastedPages: 1900}   // 95 %
	moderate := PageCacheWindow{Measured: true, UsedPages: 600, WastedPages: 1400} // 70 %: two windows must agree
	for _, tc := range []struct {
		name string
		pc   PageCacheWindow
		ra   int
		set  func(c *deviceController)
		g    *Gate // nil: open
		want bool
	}{
		{name: "strong waste", pc: thrash, ra: 2560, want: true},
		{name: "strong waste, 128 KiB", pc: thrash, ra: 128, want: true},
		{name: "waste under the strong threshold", pc: moderate, ra: 2560},
		{name: "too few pages resolved", pc: PageCacheWindow{Measured: true, UsedPages: 1, WastedPages: 19}, ra: 2560},
		{name: "not measured", pc: PageCacheWindow{}, ra: 2560},
		{name: "at the policy's lowest depth", pc: thrash, ra: 16},
		{name: "observe mode", pc: thrash, ra: 2560, set: func(c *deviceController) { c.policy.Apply = false }},
		{name: "read-ahead not governed", pc: thrash, ra: 2560, set: func(c *deviceController) { c.policy.ReadAhead = false }},
		{name: "paused", pc: thrash, ra: 2560, g: &Gate{Paused: true, Granted: true}},
		{name: "yielded to another writer", pc: thrash, ra: 2560, g: &Gate{Yielded: true, Granted: true}},
		{name: "awaiting the operator's grant", pc: thrash, ra: 2560, g: &Gate{}},
		{name: "within minDwell of the last change", pc: thrash, ra: 2560, g: &Gate{Granted: true, MinDwell: time.Hour},
			set: func(c *deviceController) { c.lastChange = now.Add(-time.Minute) }},
		{name: "minDwell over", pc: thrash, ra: 2560, g: &Gate{Granted: true, MinDwell: time.Minute}, want: true,
			set: func(c *deviceController) { c.lastChange = now.Add(-time.Hour) }},
		{name: "a scheduler switch being verified", pc: thrash, ra: 2560,
			set: func(c *deviceController) { c.verify = &verification{left: 2} }},
		{name: "a read-ahead cut being verified", pc: thrash, ra: 128, want: true,
			set: func(c *deviceController) { c.raVerify = &raVerification{previous: 2560, target: 128, left: 2} }},
		{name: "lowering in back-off", pc: thrash, ra: 2560,
			set: func(c *deviceController) { c.backoff[raBackoffKey(2560, 16)] = now.Add(time.Minute) }},
		{name: "lowering's back-off over", pc: thrash, ra: 2560, want: true,
			set: func(c *deviceController) { c.backoff[raBackoffKey(2560, 16)] = now.Add(-time.Second) }},
		{name: "raising in back-off", pc: thrash, ra: 2560, want: true,
			set: func(c *deviceController) { c.backoff[raBackoffKey(16, 2560)] = now.Add(time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, tc.ra)
			if tc.set != nil {
				tc.set(c)
			}
			g := Gate{Granted: true}
			if tc.g != nil {
				g = *tc.g
			}
			if _, got := c.cutsOnThrash(tc.pc, g, now); got != tc.want {
				t.Errorf("cutsOnThrash = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPageCacheWatchInterval: a check's interval runs from the last check
// or window end, whichever came later, and a device tracked anew counts
// from zero.
func TestPageCacheWatchInterval(t *testing.T) {
	const sda, sdb = 8 << 20, 8<<20 | 16
	w := &pageCacheWatch{}
	w.zeroNew(map[string][]uint32{"sda": {sda}})
	t0 := time.Unix(1000, 0)
	iv := w.interval(map[uint32]tracer.PageCacheStats{sda: {UsedPages: 10, WastedPages: 90}}, t0)
	if iv.el != 0 {
		t.Errorf("first interval's length = %v, want 0 (no check or window end before it)", iv.el)
	}
	if got := iv.devs["sda"]; !got.Measured || got.UsedPages != 10 || got.WastedPages != 90 {
		t.Errorf("first interval = %+v, want 10 used and 90 wasted", got)
	}
	iv = w.interval(map[uint32]tracer.PageCacheStats{sda: {UsedPages: 15, WastedPages: 190}}, t0.Add(time.Second))
	if iv.el != time.Second {
		t.Errorf("second interval's length = %v, want 1s", iv.el)
	}
	if got := iv.devs["sda"]; got.UsedPages != 5 || got.WastedPages != 100 {
		t.Errorf("second interval = %+v, want 5 used and 100 wasted", got)
	}
	w.advance(map[uint32]tracer.PageCacheStats{sda: {UsedPages: 20, WastedPages: 200}}, t0.Add(1500*time.Millisecond)) // a window ends
	if got := w.window("sda"); got.UsedPages != 20 || got.WastedPages != 200 {
		t.Errorf("the window = %+v, want all of its counts, checks or not", got)
	}
	iv = w.interval(map[uint32]tracer.PageCacheStats{sda: {UsedPages: 21, WastedPages: 260}}, t0.Add(3500*time.Millisecond))
	if iv.el != 2*time.Second {
		t.Errorf("the interval after the window's end lasted %v, want 2s (from the window's end)", iv.el)
	}
	if got := iv.devs["sda"]; got.UsedPages != 1 || got.WastedPages != 60 {
		t.Errorf("the interval after the window's end = %+v, want 1 used and 60 wasted", got)
	}
	w.zeroNew(map[string][]uint32{"sda": {sda}, "sdb": {sdb}})
	iv = w.interval(map[uint32]tracer.PageCacheStats{sda: {UsedPages: 22, WastedPages: 260}, sdb: {UsedPages: 3, WastedPages: 4}}, t0.Add(4500*time.Millisecond))
	if got := iv.devs["sdb"]; got.UsedPages != 3 || got.WastedPages != 4 {
		t.Errorf("a device tracked anew = %+v, want its counts from zero", got)
	}
	if _, ok := iv.devs["sdc"]; ok {
		t.Error("an untracked device has an interval")
	}
}

// TestBudgetRefillProRata: a window ended early adds its share of a
// window's allowance, not a whole one.
func TestBudgetRefillProRata(t *testing.T) {
	b := newCPUBudget(10*time.Second, 10) // 1 s of CPU a window
	b.spend(time.Second)
	b.refill(time.Second)
	if b.tokens != 100*time.Millisecond {
		t.Errorf("after a 1 s window: %v, want 100ms", b.tokens)
	}
	b.refill(time.Hour)
	if b.tokens != 2*time.Second {
		t.Errorf("after a long gap: %v, want the cap of two windows, 2s", b.tokens)
	}
}

func TestSurges(t *testing.T) {
	for _, tc := range []struct {
		r    readRates
		want bool
	}{
		{readRates{Window: 0, Windowed: true, Interval: 2 * SurgeFloorSectorsPerSec}, true},
		{readRates{Window: 0, Interval: 2 * SurgeFloorSectorsPerSec}, false},                        // no window ended yet
		{readRates{Window: 0, Windowed: true, Interval: SurgeFloorSectorsPerSec / 2}, false},        // under the floor
		{readRates{Window: 100000, Windowed: true, Interval: 300000}, false},                        // 3×
		{readRates{Window: 100000, Windowed: true, Interval: 400000}, true},                         // 4×
		{readRates{Window: 1000, Windowed: true, Interval: SurgeFloorSectorsPerSec - 1}, false},     // 16× but under the floor
		{readRates{Window: 1000000, Windowed: true, Interval: SurgeFloorSectorsPerSec * 10}, false}, // a fall
	} {
		if got := surges(tc.r); got != tc.want {
			t.Errorf("surges(%+v) = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestReadWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var first readWatch // at the agent's start: the loop marks the reads, then checks
	first.endWindow(t0, 100)
	if r, known := first.check(t0.Add(time.Second), 100100); !known || r.Windowed || surges(r) {
		t.Errorf("a check before the first window's end = %+v (known %v), want a rate, no window's and no surge", r, known)
	}
	var w readWatch
	if _, known := w.check(t0, 100); known {
		t.Error("the first check knows a rate")
	}
	w.endWindow(t0.Add(5*time.Second), 5100) // 1000 sectors/s over the window
	r, known := w.check(t0.Add(6*time.Second), 105100)
	if !known || r.Window != 1000 || !r.Windowed || r.Interval != 100000 {
		t.Errorf("check after the window = %+v (known %v), want window 1000, interval 100000 sectors/s", r, known)
	}
	r, _ = w.check(t0.Add(8*time.Second), 105100)
	if r.Interval != 0 || r.Window != 1000 {
		t.Errorf("an idle interval = %+v, want 0 over a window of 1000", r)
	}
	w.endWindow(t0.Add(10*time.Second), 105100) // 100000 sectors over 5 s
	if w.windowRate != 20000 {
		t.Errorf("window rate %v, want 20000 sectors/s (the window's, checks or not)", w.windowRate)
	}
	// A check 10 ms after the window's end (its tick waited behind the
	// evaluation) knows no rate: 5,000 sectors in 10 ms is not a surge of
	// 500,000 sectors/s. The next check takes the whole interval.
	if r, known := w.check(t0.Add(10*time.Second+10*time.Millisecond), 110100); known {
		t.Errorf("a check 10 ms after the last = %+v, want no rate", r)
	}
	r, known = w.check(t0.Add(11*time.Second), 125100)
	if !known || r.Interval != 20000 {
		t.Errorf("the check after it = %+v (known %v), want 20000 sectors/s over the second since the window's end", r, known)
	}
}

// pauseTracer records the devices SetPaused was last given.
type pauseTracer struct {
	tracer.Tracer
	paused []uint32
}

func (p *pauseTracer) SetPaused(devs []uint32) error {
	p.paused = slices.Clone(devs)
	return nil
}

// TestWakeOnSurge: of the paused devices, the one whose reads surged in
// sysfs since the window's end is probed (resumed) and the others stay
// paused; a device whose read-ahead is not governed is not probed. A probe
// that found no thrash is paused again at the next check, and the device
// is not probed again in the window however its reads go; a new window
// may probe it again, and no device is paused again once its sample began.
func TestWakeOnSurge(t *testing.T) {
	root := t.TempDir()
	setReads := func(name string, sectors int) {
		dir := filepath.Join(root, "sys/block", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("1 0 %d 0 0 0 0 0 0 0 0\n", sectors)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev := func(name string, id uint32, ra bool) *device {
		c := raController(t, 2560)
		c.policy.ReadAhead = ra
		return &device{sys: sysfs.Device{Name: name, Dev: id}, ctrl: c, policy: &v1alpha1.StorageTuning{}}
	}
	sda, sdb, sdc := dev("sda", 8<<20, true), dev("sdb", 8<<20|16, true), dev("sdc", 8<<20|32, false)
	tr := &pauseTracer{}
	a := &Agent{opt: Options{HostRoot: root, Log: logr.Discard()}, devs: []*device{sda, sdb, sdc}, tr: tr}
	all := []uint32{sda.sys.Dev, sdb.sys.Dev, sdc.sys.Dev}
	t0 := time.Unix(1000, 0)
	sampleAt := t0.Add(4 * time.Second)
	reads := 1000
	surge := func(at time.Duration) { // sda and sdc read 200,000 sectors (~98 MiB) a second, sdb 2,000
		reads += 200000
		setReads("sda", reads)
		setReads("sdb", 1000+int(at/time.Second)*2000)
		setReads("sdc", reads)
	}
	for _, n := range []string{"sda", "sdb", "sdc"} {
		setReads(n, 1000)
	}
	a.markReads(t0.Add(-5 * time.Second)) // the agent's start
	a.markReads(t0)                       // its first window's end: 0 sectors/s
	a.paused = slices.Clone(all)
	surge(time.Second)
	a.wakeOnSurge(t0.Add(time.Second), pcInterval{})
	if want := []uint32{sdb.sys.Dev, sdc.sys.Dev}; !slices.Equal(tr.paused, want) || !slices.Equal(a.paused, want) {
		t.Errorf("paused after the surge: tracer %v, agent %v; want %v (sda probed)", tr.paused, a.paused, want)
	}
	for i := 1; i < ProbeChecks; i++ { // the probe lasts ProbeChecks checks
		a.endProbes(t0.Add(time.Second+time.Duration(i)*ThrashCheckEvery), sampleAt)
		if want := []uint32{sdb.sys.Dev, sdc.sys.Dev}; !slices.Equal(tr.paused, want) {
			t.Errorf("paused %d checks into the probe: %v, want %v (sda still probed)", i, tr.paused, want)
		}
	}
	surge(2 * time.Second)
	a.endProbes(t0.Add(2*time.Second), sampleAt)
	a.wakeOnSurge(t0.Add(2*time.Second), pcInterval{})
	if got := slices.Sorted(slices.Values(tr.paused)); !slices.Equal(got, all) {
		t.Errorf("paused after the probe: %v, want all again %v (sda probed once a window)", tr.paused, all)
	}
	for _, d := range a.devs {
		d.wake = wakeState{} // a new window (startSamples)
	}
	surge(3 * time.Second)
	a.wakeOnSurge(t0.Add(3*time.Second), pcInterval{})
	if want := []uint32{sdb.sys.Dev, sdc.sys.Dev}; !slices.Equal(tr.paused, want) {
		t.Errorf("paused in a new window's surge: %v, want %v", tr.paused, want)
	}
	a.setPaused(nil) // the sample begins
	a.endProbes(sampleAt.Add(time.Second), sampleAt)
	if len(tr.paused) != 0 {
		t.Errorf("paused after the sample began: %v, want none", tr.paused)
	}
}

// TestReadsAround: a check's faults read large read-around windows when
// there are enough of them, each reading 256 KiB or more on average, at
// 8 MiB/s or more.
func TestReadsAround(t *testing.T) {
	for _, c := range []struct {
		name           string
		faults, around uint64
		el             time.Duration
		want           bool
	}{
		{"MEM at 2560 KiB: 640 pages a fault", 300, 300 * 640, time.Second, true},
		{"256 KiB a fault", 40, 40 * 64, time.Second, true},
		{"128 KiB a fault", 1000, 1000 * 32, time.Second, false},
		{"too few faults", AroundMinFaults - 1, (AroundMinFaults - 1) * 640, time.Second, false},
		{"under 8 MiB/s", 40, 40 * 64, 2 * time.Second, false},
		{"no faults", 0, 0, time.Second, false},
		{"no time", 300, 300 * 640, 0, false},
		{"an interval too short to divide", 300, 300 * 640, MinCheckInterval - time.Millisecond, false},
		{"the shortest interval", 300, 300 * 640, MinCheckInterval, true},
	} {
		pc := PageCacheWindow{Measured: true, Faults: c.faults, AroundPages: c.around}
		if got := readsAround(pc, c.el); got != c.want {
			t.Errorf("%s: readsAround = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWakeOnAround: a paused device whose reads did not surge but whose
// faults read 2.5 MiB around each is probed, though a surge probed it
// earlier in the window, and not again on its faults in that window; one
// whose faults read 64 KiB each is not, nor is one whose read-ahead a
// thrash could not cut now (at the policy's minKiB), whatever its reads
// and faults.
func TestWakeOnAround(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"sda", "sdb", "sdc"} {
		dir := filepath.Join(root, "sys/block", n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("1 0 1000 0 0 0 0 0 0 0 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev := func(name string, id uint32, raKiB int) *device {
		return &device{sys: sysfs.Device{Name: name, Dev: id}, ctrl: raController(t, raKiB), policy: &v1alpha1.StorageTuning{}}
	}
	sda, sdb, sdc := dev("sda", 8<<20, 2560), dev("sdb", 8<<20|16, 2560), dev("sdc", 8<<20|32, 16)
	tr := &pauseTracer{}
	a := &Agent{opt: Options{HostRoot: root, Log: logr.Discard()}, devs: []*device{sda, sdb, sdc}, tr: tr}
	t0 := time.Unix(1000, 0)
	a.markReads(t0)
	a.paused = []uint32{sda.sys.Dev, sdb.sys.Dev, sdc.sys.Dev}
	thrash := PageCacheWindow{Measured: true, Faults: 300, AroundPages: 300 * 640}
	iv := pcInterval{el: time.Second, devs: map[string]PageCacheWindow{
		"sda": thrash,
		"sdb": {Measured: true, Faults: 3000, AroundPages: 3000 * 16},
		"sdc": thrash,
	}}
	sda.wake.surged = true // a surge probed it earlier in the window
	a.wakeOnSurge(t0.Add(time.Second), iv)
	if want := []uint32{sdb.sys.Dev, sdc.sys.Dev}; !slices.Equal(tr.paused, want) {
		t.Errorf("paused: %v, want %v (sda probed)", tr.paused, want)
	}
	if sda.wake.probing != ProbeChecks || !sda.wake.around || sdb.wake.around || sdc.wake.around {
		t.Errorf("wake states sda %+v sdb %+v sdc %+v, want sda probing alone", sda.wake, sdb.wake, sdc.wake)
	}
	for i := 1; i < ProbeChecks; i++ { // the probe lasts ProbeChecks checks
		now := t0.Add(time.Second + time.Duration(i)*ThrashCheckEvery)
		a.endProbes(now, t0.Add(4*time.Second))
		a.wakeOnSurge(now, iv)
		if want := []uint32{sdb.sys.Dev, sdc.sys.Dev}; !slices.Equal(tr.paused, want) {
			t.Errorf("paused %d checks into the probe: %v, want %v (sda still probed)", i, tr.paused, want)
		}
	}
	a.endProbes(t0.Add(2*time.Second), t0.Add(4*time.Second))
	a.wakeOnSurge(t0.Add(2*time.Second), iv)
	if want := []uint32{sdb.sys.Dev, sdc.sys.Dev, sda.sys.Dev}; !slices.Equal(tr.paused, want) {
		t.Errorf("paused after the probe: %v, want %v (sda probed on its faults once a window)", tr.paused, want)
	}
}

// TestRestoresOnUse: a check's interval ends the window of a device whose
// read-ahead was cut exactly when sequential readers use read-ahead in it
// again and the window's end would restore the depth at once on it.
func TestRestoresOnUse(t *testing.T) {
	now := time.Unix(1000, 0)
	seq := PageCacheWindow{Measured: true, UsedPages: 4000, WastedPages: 40, UsedNow: 4000, WastedNow: 40, AsyncReadAhead: 900} // 1 % waste
	for _, tc := range []struct {
		name string
		pc   PageCacheWindow
		ra   int
		set  func(c *deviceController)
		g    *Gate // nil: open
		want bool
	}{
		{name: "sequential use after a cut", pc: seq, ra: 16, want: true},
		{name: "at the original depth", pc: seq, ra: 2560},
		{name: "the old depth's pages wasted", want: true, ra: 16,
			pc: PageCacheWindow{Measured: true, UsedPages: 4000, WastedPages: 4000, UsedNow: 4000, AsyncReadAhead: 900}},
		{name: "the current depth's pages wasted over 5 %", ra: 16,
			pc: PageCacheWindow{Measured: true, UsedPages: 4000, WastedPages: 400, UsedNow: 4000, WastedNow: 400, AsyncReadAhead: 900}},
		{name: "too few asynchronous read-aheads", ra: 16,
			pc: PageCacheWindow{Measured: true, UsedPages: 4000, UsedNow: 4000, AsyncReadAhead: RestoreMinAsync - 1}},
		{name: "random mmap faults", ra: 16,
			pc: PageCacheWindow{Measured: true, UsedPages: 4000, UsedNow: 4000, AsyncReadAhead: 20, Faults: 1000}},
		{name: "too few pages of the current depth resolved", ra: 16,
			pc: PageCacheWindow{Measured: true, UsedPages: 4000, UsedNow: 10, AsyncReadAhead: 900}},
		{name: "not measured", pc: PageCacheWindow{UsedNow: 4000, AsyncReadAhead: 900}, ra: 16},
		{name: "observe mode", pc: seq, ra: 16, set: func(c *deviceController) { c.policy.Apply = false }},
		{name: "read-ahead not governed", pc: seq, ra: 16, set: func(c *deviceController) { c.policy.ReadAhead = false }},
		{name: "paused", pc: seq, ra: 16, g: &Gate{Paused: true, Granted: true}},
		{name: "awaiting the operator's grant", pc: seq, ra: 16, g: &Gate{}},
		{name: "a scheduler switch being verified", pc: seq, ra: 16,
			set: func(c *deviceController) { c.verify = &verification{left: 2} }},
		{name: "a cut being verified", pc: seq, ra: 16, want: true,
			set: func(c *deviceController) { c.raVerify = &raVerification{previous: 2560, target: 16, left: 2} }},
		{name: "a raise being verified", pc: seq, ra: 64,
			set: func(c *deviceController) { c.raVerify = &raVerification{previous: 16, target: 64, left: 2} }},
		{name: "raising in back-off", pc: seq, ra: 16,
			set: func(c *deviceController) { c.backoff[raBackoffKey(16, 2560)] = now.Add(time.Minute) }},
		{name: "raising's back-off over", pc: seq, ra: 16, want: true,
			set: func(c *deviceController) { c.backoff[raBackoffKey(16, 2560)] = now.Add(-time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raController(t, 2560)
			c.current.ReadAheadKiB = tc.ra
			if tc.set != nil {
				tc.set(c)
			}
			g := Gate{Granted: true}
			if tc.g != nil {
				g = *tc.g
			}
			if got := c.restoresOnUse(tc.pc, g, now); got != tc.want {
				t.Errorf("restoresOnUse = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCutsWhilePaused: a thrash ends the window of a device that is
// traced whatever its kind; of a paused one only when the window can cut
// its mapped files on it (decideMappedThrash): the waste is random
// faults' read-around, the agent holds mapped files, and no cut of them
// was made within MappedCutRetry.
func TestCutsWhilePaused(t *testing.T) {
	mapped := PageCacheWindow{Measured: true, Faults: 80, AroundPages: 80 * 640, UsedPages: 80, WastedPages: 80 * 639}
	sequential := mapped
	sequential.AsyncReadAhead = 80
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name           string
		paused, holds  bool
		pc             PageCacheWindow
		cutAgo         time.Duration // 0: none made
		closed         bool          // the files it held are closed
		wantEndsWindow bool
	}{
		{name: "traced, sequential faults", pc: sequential, wantEndsWindow: true},
		{name: "paused, mapped waste, held", paused: true, holds: true, pc: mapped, wantEndsWindow: true},
		{name: "paused, mapped waste, not held", paused: true, pc: mapped},
		{name: "paused, sequential faults", paused: true, holds: true, pc: sequential},
		{name: "paused, a mapped cut 5 s before", paused: true, holds: true, pc: mapped, cutAgo: 5 * time.Second},
		{name: "paused, a mapped cut 10 s before", paused: true, holds: true, pc: mapped, cutAgo: MappedCutRetry, wantEndsWindow: true},
		{name: "paused, a mapped cut 5 s before, its files closed", paused: true, holds: true, pc: mapped, cutAgo: 5 * time.Second, closed: true, wantEndsWindow: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &device{sys: sysfs.Device{Name: "sda", Dev: 8 << 20}, ctrl: raController(t, 2560)}
			if tc.cutAgo > 0 {
				d.ctrl.mappedCutAt = now.Add(-tc.cutAgo)
			}
			a := &Agent{devs: []*device{d}, follow: &raFollower{}}
			if tc.holds {
				a.follow.files = &openfiles.Follower{}
			}
			if tc.paused {
				a.paused = []uint32{d.sys.Dev}
			}
			open := 1
			if tc.closed {
				open = 0
			}
			if got := a.cutsWhilePaused(d, tc.pc, now, func() int { return open }); got != tc.wantEndsWindow {
				t.Errorf("cutsWhilePaused = %v, want %v", got, tc.wantEndsWindow)
			}
		})
	}
}

// TestMarkThrash: a check marks the devices whose interval thrashes (and
// only those), early or at the window's own end; an early end is counted
// in the metrics, the window's own end is not.
func TestMarkThrash(t *testing.T) {
	now := time.Unix(1000, 0)
	thrash := PageCacheWindow{Measured: true, UsedPages: 100, WastedPages: 1900}
	for _, early := range []bool{true, false} {
		sda := &device{sys: sysfs.Device{Name: "sda", Dev: 8 << 20}, ctrl: raController(t, 2560), policy: &v1alpha1.StorageTuning{}}
		sdb := &device{sys: sysfs.Device{Name: "sdb", Dev: 8<<20 | 16}, ctrl: raController(t, 2560), policy: &v1alpha1.StorageTuning{}}
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{opt: Options{Log: logr.Discard(), Metrics: m}, devs: []*device{sda, sdb}}
		iv := pcInterval{el: ThrashCheckEvery, devs: map[string]PageCacheWindow{"sda": thrash, "sdb": {Measured: true, UsedPages: 1900, WastedPages: 100}}}
		if !a.markThrash(iv, now, now.Add(-5*time.Second), early) || sda.thrash == nil || sdb.thrash != nil {
			t.Errorf("early %v: thrash marked sda %v, sdb %v; want sda alone", early, sda.thrash != nil, sdb.thrash != nil)
		}
		want := 0.0
		if early {
			want = 1
		}
		if got := earlyEnds(t, reg); got != want {
			t.Errorf("early %v: %v early window ends counted, want %v", early, got, want)
		}
	}
}

// earlyEnds is the sum of shadowtune_agent_windows_ended_early_total in
// reg.
func earlyEnds(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "shadowtune_agent_windows_ended_early_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// TestCheckDue: the check after the one that began a window looks at it,
// its tick a little early or late; one soon after the window began does
// not.
func TestCheckDue(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{
		{499 * time.Millisecond, true},
		{501 * time.Millisecond, true},
		{MinCheckedWindow, true},
		{MinCheckedWindow - time.Millisecond, false},
		{100 * time.Millisecond, false},
	} {
		if got := checkDue(start.Add(tc.after), start); got != tc.want {
			t.Errorf("checkDue %v after the start = %v, want %v", tc.after, got, tc.want)
		}
	}
}
