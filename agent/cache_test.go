package agent

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/selection"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/agent/window/controllertest"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// fakeCacheTool is one dm-cache, "cached", whose origin is sda (8:0),
// with counters the test sets.
type fakeCacheTool struct {
	info  dmcache.CacheInfo
	calls []string
}

func (f *fakeCacheTool) Info(name string) (dmcache.CacheInfo, error) {
	if name != f.info.Name {
		return dmcache.CacheInfo{}, fmt.Errorf("%s: not a cache", name)
	}
	return f.info, nil
}

func (f *fakeCacheTool) Mode(name string) (string, uint64, error) {
	if name != f.info.Name {
		return "", 0, actuate.ErrDeviceGone
	}
	return f.info.Mode, f.info.Dirty, nil
}

func (f *fakeCacheTool) SetMode(name, mode string) error {
	f.calls = append(f.calls, name+"="+mode)
	f.info.Mode = mode
	return nil
}

// localityWindow is n random 4 KiB reads at queue depth 4 on a default
// HDD model, over hot bytes of the disk (all of it when hot is 0).
func localityWindow(seed uint64, n int, hot uint64, start int64) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 11))
	d := model.Default(model.HDD, 100*controllertest.GiB).NewDisk(0)
	span := hot / trace.SectorSize
	if span == 0 {
		span = 90 * controllertest.GiB // sectors
	}
	reqs := make([]trace.Request, 0, n)
	t := start
	for len(reqs) < n {
		sector := rng.Uint64N(span) &^ 7
		svc := d.Service(trace.Read, sector, 8)
		reqs = append(reqs, trace.Request{Arrival: t, Dispatch: t, Complete: t + svc, Sector: sector, Sectors: 8,
			Op: trace.Read, Flags: trace.Sync, PID: 100, Think: trace.Unknown})
		t += svc + 20_000
	}
	return reqs
}

func newCacheEnv(t *testing.T, mode v1alpha1.TuningMode) (*gateEnv, *fakeCacheTool) {
	t.Helper()
	p := testTuning("cache", 1, mode, func(s *v1alpha1.StorageTuningSpec) {
		s.Cache.Enabled = true
		s.Schedulers.Candidates = []v1alpha1.SchedulerName{"none"}
		s.Rollout.MinDwell = &metav1.Duration{}
	})
	e := newGateEnv(t, "sda", p)
	e.allow = true
	// sda's holder is dm-0, named "cached".
	if err := os.MkdirAll(filepath.Join(e.root, "sys/block/sda/holders/dm-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.root, "sys/block/dm-0/dm/name"), []byte("cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := &fakeCacheTool{info: dmcache.CacheInfo{Name: "cached", Origin: "8:0", BlockSectors: 128, TotalBlocks: 960, Mode: "passthrough"}}
	e.env.caches, e.env.hostRoot = tool, e.root
	a, err := actuate.Open(actuate.Options{Store: e.fake, StateDir: filepath.Join(t.TempDir(), "state"), Caches: tool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	e.env.act = a
	return e, tool
}

// setAppReads adds reads to the cache device's stat file (dm-0), each
// taking ms milliseconds.
func setAppReads(t *testing.T, root string, cum *[2]uint64, reads, ms uint64) {
	t.Helper()
	cum[0] += reads
	cum[1] += reads * ms
	line := fmt.Sprintf("%d 0 %d %d 0 0 0 0 0 %d %d 0 0 0 0 0 0\n", cum[0], cum[0]*8, cum[1], cum[1], cum[1])
	if err := os.WriteFile(filepath.Join(root, "sys/block/dm-0/stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Locality turns an off cache on after two windows predict it (recorded
// first), and the application's faster reads verify it; an on cache whose
// counters show promotions costing more than its hits save is turned off,
// and when the application's reads then get slower the cache is turned on
// again and passthrough backed off; the revert puts the original mode back.
func TestCacheOnByPredictionOffByCounters(t *testing.T) {
	e, tool := newCacheEnv(t, v1alpha1.ModeApply)
	var app [2]uint64
	setAppReads(t, e.root, &app, 0, 0)
	st := e.feed(t, localityWindow(1, 3000, 4<<20, 0))
	if len(tool.calls) != 0 || !strings.Contains(st.Cache.Reason, "waiting for a second window") {
		t.Fatalf("one window switched the cache: calls %v, status %+v", tool.calls, st.Cache)
	}
	setAppReads(t, e.root, &app, 3000, 8)
	st = e.feed(t, localityWindow(2, 3000, 4<<20, 20e9))
	if len(tool.calls) != 1 || tool.calls[0] != "cached=writethrough" {
		t.Fatalf("SetMode calls %v after two locality windows; cache status %+v", tool.calls, st.Cache)
	}
	if st.Cache == nil || st.Cache.Mode != "writethrough" || st.Cache.GainMeasured || st.Cache.VerifyingWindows != 2 ||
		st.Cache.MeanReadMicroseconds != 8000 || !strings.HasPrefix(st.Cache.LastChange, "passthrough -> writethrough") {
		t.Fatalf("cache status %+v", st.Cache)
	}
	if o := e.env.act.CacheOriginals()["cached"]; o.Mode != "passthrough" || o.Origin != "sda" {
		t.Fatalf("record %+v", o)
	}
	// The simulated cache's read hits the switch rested on are shown
	// beside the counters' while the cache is on.
	predHit := st.Cache.PredictedReadHitPercent
	if p, err := strconv.ParseFloat(predHit, 64); err != nil || p < 50 {
		t.Fatalf("predicted read hits %q on a 4 MiB hot set in a 60 MiB cache, want ≥ 50 %%", predHit)
	}
	// Verification: the application's reads take 2 ms instead of 8.
	for i := range 2 {
		setAppReads(t, e.root, &app, 3000, 2)
		st = e.feed(t, localityWindow(uint64(3+i), 3000, 0, int64(40+20*i)*1e9))
	}
	if !strings.Contains(st.Cache.LastChange, "verified: mean read response 2000 µs after, 8000 µs before") || st.Reverts != 0 {
		t.Fatalf("after verification: %+v", st.Cache)
	}
	if st.Cache.PredictedReadHitPercent != predHit {
		t.Fatalf("predicted read hits %q while on, want %q (the window the switch rested on)", st.Cache.PredictedReadHitPercent, predHit)
	}
	// On: the next window's counters first set the baseline, then two
	// windows of 20 % hits and a promotion per two misses (one is not
	// enough).
	setAppReads(t, e.root, &app, 3000, 2)
	e.feed(t, localityWindow(5, 3000, 0, 80e9))
	tool.info.ReadHits, tool.info.ReadMisses, tool.info.Promotions = 600, 2400, 1200
	setAppReads(t, e.root, &app, 3000, 2)
	st = e.feed(t, localityWindow(6, 3000, 0, 90e9))
	if len(tool.calls) != 1 || !strings.Contains(st.Cache.Reason, "waiting for a second window") {
		t.Fatalf("one costly window switched the cache off: calls %v, status %+v", tool.calls, st.Cache)
	}
	tool.info.ReadHits, tool.info.ReadMisses, tool.info.Promotions = 1200, 4800, 2400
	setAppReads(t, e.root, &app, 3000, 2)
	st = e.feed(t, localityWindow(6, 3000, 0, 100e9))
	if len(tool.calls) != 2 || tool.calls[1] != "cached=passthrough" {
		t.Fatalf("SetMode calls %v; cache status %+v", tool.calls, st.Cache)
	}
	if st.Cache.Mode != "passthrough" || !st.Cache.GainMeasured || st.Cache.ReadHitPercent != "20.0" {
		t.Fatalf("cache status %+v", st.Cache)
	}
	// Off, the application's reads take 8 ms again: back on, and
	// passthrough is not tried again for the back-off.
	for i := range 2 {
		setAppReads(t, e.root, &app, 3000, 8)
		st = e.feed(t, localityWindow(uint64(7+i), 3000, 0, int64(120+20*i)*1e9))
	}
	if len(tool.calls) != 3 || tool.calls[2] != "cached=writethrough" || st.Reverts != 1 || !strings.Contains(st.Cache.LastChange, "regression") {
		t.Fatalf("SetMode calls %v, reverts %d; cache status %+v", tool.calls, st.Reverts, st.Cache)
	}
	for i := range 3 {
		k := uint64(3 + i)
		tool.info.ReadHits, tool.info.ReadMisses, tool.info.Promotions = 600*k, 2400*k, 1200*k
		st = e.feed(t, localityWindow(9+k, 3000, 0, int64(160+20*i)*1e9))
	}
	if len(tool.calls) != 3 || !strings.Contains(st.Cache.Reason, "do not pay") {
		t.Fatalf("passthrough tried again within its back-off: calls %v, status %+v", tool.calls, st.Cache)
	}
	if _, err := e.env.act.RevertAll(); err != nil {
		t.Fatal(err)
	}
	if tool.info.Mode != "passthrough" {
		t.Errorf("mode after revert %s, want the original passthrough", tool.info.Mode)
	}
}

// Uniform reads over the disk keep the cache off; Observe mode never
// switches it, though it reports the prediction.
func TestCacheKeptOffAndObserve(t *testing.T) {
	e, tool := newCacheEnv(t, v1alpha1.ModeApply)
	st := e.feed(t, localityWindow(1, 3000, 0, 0))
	if len(tool.calls) != 0 || st.Cache == nil || st.Cache.Mode != "passthrough" || st.Cache.GainPercent == "" {
		t.Fatalf("uniform reads: calls %v, cache %+v", tool.calls, st.Cache)
	}
	if p, err := strconv.ParseFloat(st.Cache.PredictedReadHitPercent, 64); err != nil || p > 1 {
		t.Fatalf("predicted read hits %q for uniform reads over 90 GiB through a 60 MiB cache, want ≤ 1 %%", st.Cache.PredictedReadHitPercent)
	}
	o, tool2 := newCacheEnv(t, v1alpha1.ModeObserve)
	o.feed(t, localityWindow(1, 3000, 4<<20, 0))
	st = o.feed(t, localityWindow(2, 3000, 4<<20, 20e9))
	if len(tool2.calls) != 0 || st.Cache == nil || !strings.HasPrefix(st.Cache.Reason, "predicted") {
		t.Fatalf("observe: calls %v, cache %+v", tool2.calls, st.Cache)
	}
}

// Uniform reads over the whole disk, which a cache simulated from the
// window's requests cannot serve, turn an off cache on when its counters
// show that it already holds the blocks of half of them (in passthrough
// dm-cache counts such reads as hits), after two windows agree.
func TestCacheOnByResidentBlocks(t *testing.T) {
	e, tool := newCacheEnv(t, v1alpha1.ModeApply)
	var app [2]uint64
	setAppReads(t, e.root, &app, 0, 0)
	e.feed(t, localityWindow(1, 3000, 0, 0)) // the counters' baseline
	for i, want := range []string{"waiting for a second window", "two windows in a row"} {
		k := uint64(i + 1)
		tool.info.ReadHits, tool.info.ReadMisses = 1500*k, 1500*k
		setAppReads(t, e.root, &app, 3000, 8)
		st := e.feed(t, localityWindow(2+k, 3000, 0, int64(20*k)*1e9))
		if st.Cache == nil || !strings.Contains(st.Cache.Reason, "holds the blocks of 50.0 % of the reads") || !strings.Contains(st.Cache.Reason, want) {
			t.Fatalf("window %d: cache status %+v, want the resident blocks' gain and %q", i+2, st.Cache, want)
		}
	}
	if len(tool.calls) != 1 || tool.calls[0] != "cached=writethrough" {
		t.Fatalf("SetMode calls %v, want the cache on", tool.calls)
	}
}

// A cache whose origin is no longer governed in Apply mode with the cache
// enabled is put back when the policies change.
func TestCacheRestoredWhenUngoverned(t *testing.T) {
	e, tool := newCacheEnv(t, v1alpha1.ModeApply)
	e.feed(t, localityWindow(1, 3000, 4<<20, 0))
	e.feed(t, localityWindow(2, 3000, 4<<20, 20e9))
	if tool.info.Mode != "writethrough" {
		t.Fatalf("not switched on: %v", tool.calls)
	}
	observe := testTuning("cache", 2, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) { s.Cache.Enabled = true })
	sel := []selection.Governed{{Device: e.d.sys, Policy: observe}}
	done, err := selection.RestoreUngoverned(e.env.act, sel, nil, testr.New(t))
	if err != nil || !slices.Contains(done, "dm-cache/cached") || tool.info.Mode != "passthrough" {
		t.Fatalf("RestoreUngoverned = %v, %v; cache %s", done, err, tool.info.Mode)
	}
	if n := len(e.env.act.CacheOriginals()); n != 0 {
		t.Errorf("%d cache records left", n)
	}
}

// TestCacheOffByCountersBacksOff: a cache turned off because its counters
// measured promotions costing more than its hits saved is not turned on
// again for the back-off, though every window after predicts the filled
// cache's gain; once the back-off has passed, two such windows turn it on.
func TestCacheOffByCountersBacksOff(t *testing.T) {
	e, tool := newCacheEnv(t, v1alpha1.ModeApply)
	var app [2]uint64
	setAppReads(t, e.root, &app, 0, 0)
	e.feed(t, localityWindow(1, 3000, 4<<20, 0))
	setAppReads(t, e.root, &app, 3000, 8)
	e.feed(t, localityWindow(2, 3000, 4<<20, 20e9))
	for i := range 3 { // verified, then the counters' baseline
		setAppReads(t, e.root, &app, 3000, 2)
		e.feed(t, localityWindow(uint64(3+i), 3000, 0, int64(40+20*i)*1e9))
	}
	for k := uint64(1); k <= 2; k++ {
		tool.info.ReadHits, tool.info.ReadMisses, tool.info.Promotions = 600*k, 2400*k, 1200*k
		setAppReads(t, e.root, &app, 3000, 2)
		e.feed(t, localityWindow(5+k, 3000, 0, int64(100+20*k)*1e9))
	}
	if len(tool.calls) != 2 || tool.calls[1] != "cached=passthrough" {
		t.Fatalf("SetMode calls %v: want the cache on, then off on its counters", tool.calls)
	}
	// The application's reads do not get slower: the switch off holds.
	// Windows of locality predict the gain again.
	start := int64(160e9)
	var st v1alpha1.DeviceState
	for i := range 6 {
		setAppReads(t, e.root, &app, 3000, 2)
		st = e.feed(t, localityWindow(uint64(20+i), 3000, 4<<20, start+int64(i)*20e9))
	}
	if len(tool.calls) != 2 || st.Reverts != 0 {
		t.Fatalf("SetMode calls %v, reverts %d within the back-off; cache status %+v", tool.calls, st.Reverts, st.Cache)
	}
	if !strings.Contains(st.Cache.Reason, "predicted") {
		t.Fatalf("cache reason %q: want the windows to predict the cache's gain", st.Cache.Reason)
	}
	e.seq += int(window.RegressionBackoff / (5 * time.Second)) // the agent's clock: 5 s a window (feed)
	after := start + 200e9
	for i := range 2 {
		setAppReads(t, e.root, &app, 3000, 2)
		st = e.feed(t, localityWindow(uint64(30+i), 3000, 4<<20, after+int64(i)*20e9))
	}
	if len(tool.calls) != 3 || tool.calls[2] != "cached=writethrough" {
		t.Fatalf("SetMode calls %v after the back-off: want the cache on again; cache status %+v", tool.calls, st.Cache)
	}
}
