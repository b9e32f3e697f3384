package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// constDisk serves every request in a fixed time plus a per-sector cost.
type constDisk struct{ base, perSector int64 }

func (d constDisk) Service(_ trace.Op, _ uint64, sectors uint32) int64 {
	return d.base + d.perSector*int64(sectors)
}

func constModel(base, perSector int64) func(int64) DeviceModel {
	return func(int64) DeviceModel { return constDisk{base, perSector} }
}

const ms = int64(1e6)

func openReq(at int64, sector uint64, sectors uint32, op trace.Op) trace.Request {
	return trace.Request{Arrival: at, Dispatch: trace.Unknown, Complete: trace.Unknown, Sector: sector, Sectors: sectors, Op: op, Think: trace.Unknown}
}

func mustWindow(t *testing.T, reqs []trace.Request, loop Loop) *Window {
	t.Helper()
	w, err := NewWindow(reqs, loop)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustRun(t *testing.T, w *Window, cfg Config) Result {
	t.Helper()
	res, err := Run(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestOpenLoopQueueing(t *testing.T) {
	// Three 4 KiB reads far apart on disk arrive together; one server,
	// 10 ms each: responses 10, 20, 30 ms.
	reqs := []trace.Request{
		openReq(0, 0, 8, trace.Read),
		openReq(0, 1<<20, 8, trace.Read),
		openReq(0, 2<<20, 8, trace.Read),
	}
	w := mustWindow(t, reqs, LoopOpen)
	res := mustRun(t, w, Config{Scheduler: "none", NewDisk: constModel(10*ms, 0), KeepPerRequest: true})
	if got, want := res.ResponseNs, []int64{10 * ms, 20 * ms, 30 * ms}; !reflect.DeepEqual(got, want) {
		t.Fatalf("response times = %v, want %v", got, want)
	}
	if res.TotalServiceNs != 30*ms || res.MakespanNs != 30*ms || res.P99ResponseNs != 30*ms {
		t.Fatalf("total %d makespan %d p99 %d", res.TotalServiceNs, res.MakespanNs, res.P99ResponseNs)
	}
	if res.Loop != LoopOpen || res.Simulated != 3 || res.DeviceRequests != 3 {
		t.Fatalf("result %+v", res)
	}
}

func TestParallelServers(t *testing.T) {
	reqs := []trace.Request{
		openReq(0, 0, 8, trace.Read),
		openReq(0, 1<<20, 8, trace.Read),
		openReq(0, 2<<20, 8, trace.Read),
		openReq(0, 3<<20, 8, trace.Read),
	}
	w := mustWindow(t, reqs, LoopOpen)
	dev := sched.Device{Rotational: false, MaxSectors: 2560, QueueDepth: 4}
	res := mustRun(t, w, Config{Scheduler: "none", Device: dev, Servers: 2, NewDisk: constModel(10*ms, 0), KeepPerRequest: true})
	if got, want := res.ResponseNs, []int64{10 * ms, 10 * ms, 20 * ms, 20 * ms}; !reflect.DeepEqual(got, want) {
		t.Fatalf("response times = %v, want %v", got, want)
	}
}

func TestMergeContiguous(t *testing.T) {
	// Four contiguous 4 KiB writes queued behind a busy device merge into
	// one 12 KiB request under none.
	reqs := []trace.Request{
		openReq(0, 1<<20, 8, trace.Read),
		openReq(1, 0, 8, trace.Write),
		openReq(2, 8, 8, trace.Write),
		openReq(3, 16, 8, trace.Write),
	}
	w := mustWindow(t, reqs, LoopOpen)
	res := mustRun(t, w, Config{Scheduler: "none", NewDisk: constModel(ms, 1000), KeepPerRequest: true})
	if res.DeviceRequests != 2 || res.Merged != 2 {
		t.Fatalf("device requests %d merged %d, want 2 and 2", res.DeviceRequests, res.Merged)
	}
	// All three writes complete together.
	if res.ResponseNs[1]+1 != res.ResponseNs[2]+2 || res.ResponseNs[2]+2 != res.ResponseNs[3]+3 {
		t.Fatalf("merged writes did not complete together: %v", res.ResponseNs)
	}
}

// serial builds a DiskSim-like closed-loop trace: one process, each request
// issued think ns after the previous one completed, recorded service svc.
func serial(n int, svc, think int64) []trace.Request {
	reqs := make([]trace.Request, n)
	now := int64(0)
	for i := range reqs {
		reqs[i] = trace.Request{
			Arrival: now, Dispatch: now, Complete: now + svc,
			Sector: uint64(i) * 1000, Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: 7, Think: trace.Unknown,
		}
		now += svc + think
	}
	return reqs
}

func TestClosedLoopFollowsSimulatedCompletions(t *testing.T) {
	reqs := serial(100, 10*ms, 2*ms)
	w := mustWindow(t, reqs, LoopAuto)
	if !w.Closed() {
		t.Fatal("a trace with pids and completion times should replay closed loop")
	}
	// A disk twice as fast: the process issues sooner, so the makespan is
	// 100 × (5 + 2) − 2 ms instead of the recorded 100 × 12 − 2 ms.
	res := mustRun(t, w, Config{Scheduler: "none", NewDisk: constModel(5*ms, 0)})
	if want := 100*7*ms - 2*ms; res.MakespanNs != want {
		t.Fatalf("closed-loop makespan = %d, want %d", res.MakespanNs, want)
	}
	if res.MeanResponseNs != float64(5*ms) {
		t.Fatalf("mean response = %v, want 5 ms (no queueing in a serial loop)", res.MeanResponseNs)
	}
	// Open loop on the same window keeps recorded arrivals.
	wo := mustWindow(t, reqs, LoopOpen)
	reso := mustRun(t, wo, Config{Scheduler: "none", NewDisk: constModel(5*ms, 0)})
	if want := 99*12*ms + 5*ms; reso.MakespanNs != want {
		t.Fatalf("open-loop makespan = %d, want %d", reso.MakespanNs, want)
	}
	// A slower disk delays the process rather than building a queue.
	ress := mustRun(t, w, Config{Scheduler: "none", NewDisk: constModel(20*ms, 0)})
	if ress.MeanResponseNs != float64(20*ms) {
		t.Fatalf("slow disk mean response = %v, want 20 ms", ress.MeanResponseNs)
	}
}

func TestClosedLoopKeepsRecordedConcurrency(t *testing.T) {
	// A process with two requests in flight at a time (AIO, iodepth 2):
	// each new request is issued when one completes. Replayed closed loop
	// on two servers with the recorded service time, the timing is the
	// recorded one.
	var reqs []trace.Request
	svc := 4 * ms
	for i := 0; i < 20; i++ {
		at := int64(i/2) * svc
		reqs = append(reqs, trace.Request{Arrival: at, Dispatch: at, Complete: at + svc, Sector: uint64(i) * 64, Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: 1, Think: trace.Unknown})
	}
	w := mustWindow(t, reqs, LoopClosed)
	dev := sched.Device{MaxSectors: 2560, QueueDepth: 2}
	res := mustRun(t, w, Config{Scheduler: "none", Device: dev, Servers: 2, NewDisk: constModel(svc, 0)})
	if want := 10 * svc; res.MakespanNs != want {
		t.Fatalf("makespan = %d, want %d", res.MakespanNs, want)
	}
}

func TestAsyncRequestsMoveWithTheirProcess(t *testing.T) {
	// A sync read, then (5 ms after it arrived) a read-ahead of the same
	// process. The read-ahead keeps its offset from the sync read's release.
	reqs := serial(3, 10*ms, 0)
	ra := trace.Request{Arrival: reqs[1].Arrival + 5*ms, Dispatch: trace.Unknown, Complete: trace.Unknown, Sector: 1 << 30, Sectors: 8, Op: trace.Read, Flags: trace.ReadAhead, PID: 7, Think: trace.Unknown}
	reqs = append(reqs[:2], append([]trace.Request{ra}, reqs[2:]...)...)
	w := mustWindow(t, reqs, LoopClosed)
	res := mustRun(t, w, Config{Scheduler: "none", NewDisk: constModel(ms, 0), KeepPerRequest: true})
	// Sync reads released at 0 and 1 ms (1 ms disk); the read-ahead at 1+5 ms.
	if res.Simulated != 4 {
		t.Fatalf("simulated %d", res.Simulated)
	}
	r := newRunner(w, Config{Scheduler: "none", NewDisk: constModel(ms, 0)}, mustSched(t, "none"))
	r.run()
	if got := r.rel[2]; got != 6*ms {
		t.Fatalf("read-ahead released at %d, want %d", got, 6*ms)
	}
}

func mustSched(t *testing.T, name string) sched.Scheduler {
	t.Helper()
	s, err := sched.New(name, nil, sched.DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDeterministic(t *testing.T) {
	reqs := serial(500, 3*ms, ms)
	for i := range reqs {
		reqs[i].Sector = uint64(i*7919) % 100000
	}
	w := mustWindow(t, reqs, LoopAuto)
	for _, s := range sched.Names() {
		a := mustRun(t, w, Config{Scheduler: s, NewDisk: constModel(ms, 100), KeepPerRequest: true})
		b := mustRun(t, w, Config{Scheduler: s, NewDisk: constModel(ms, 100), KeepPerRequest: true})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two runs differ", s)
		}
	}
}

func TestWindowErrors(t *testing.T) {
	if _, err := NewWindow(nil, LoopAuto); !errors.Is(err, ErrEmptyWindow) {
		t.Fatalf("empty window: %v", err)
	}
	if _, err := NewWindow([]trace.Request{openReq(5, 0, 8, trace.Read), openReq(4, 0, 8, trace.Read)}, LoopOpen); err == nil {
		t.Fatal("out-of-order arrivals accepted")
	}
	if _, err := NewWindow([]trace.Request{openReq(0, 0, 8, trace.Read)}, LoopClosed); err == nil {
		t.Fatal("closed loop accepted a trace without completion times")
	}
	w := mustWindow(t, []trace.Request{openReq(0, 0, 8, trace.Read)}, LoopOpen)
	if _, err := Run(w, Config{Scheduler: "none"}); !errors.Is(err, ErrNoModel) {
		t.Fatalf("nil model: %v", err)
	}
	if _, err := Run(w, Config{Scheduler: "cfq", NewDisk: constModel(ms, 0)}); err == nil {
		t.Fatal("unknown scheduler accepted")
	}
}

func TestFlushAndDiscardFlowThrough(t *testing.T) {
	var reqs []trace.Request
	for i := 0; i < 200; i++ {
		at := int64(i) * ms
		op := []trace.Op{trace.Read, trace.Write, trace.Flush, trace.Discard}[i%4]
		q := openReq(at, uint64(i)*64, 8, op)
		if op == trace.Flush {
			q.Sector, q.Sectors = 0, 0
		}
		reqs = append(reqs, q)
	}
	w := mustWindow(t, reqs, LoopOpen)
	for _, s := range sched.Names() {
		res := mustRun(t, w, Config{Scheduler: s, NewDisk: constModel(ms/2, 10)})
		if res.Simulated != len(reqs) {
			t.Errorf("%s: simulated %d of %d", s, res.Simulated, len(reqs))
		}
		if res.Merged != 0 {
			t.Errorf("%s: merged %d requests of different ops", s, res.Merged)
		}
	}
}

// TestKth checks the selection against sorting, for every k, on random,
// ascending, descending and constant inputs.
func TestKth(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	inputs := map[string]func(i int) int64{
		"random":     func(int) int64 { return rng.Int64N(1000) },
		"ascending":  func(i int) int64 { return int64(i) },
		"descending": func(i int) int64 { return int64(-i) },
		"constant":   func(int) int64 { return 7 },
	}
	for name, gen := range inputs {
		for _, n := range []int{1, 2, 3, 10, 101} {
			v := make([]int64, n)
			for i := range v {
				v[i] = gen(i)
			}
			sorted := slices.Sorted(slices.Values(v))
			for k := range n {
				if got := kth(slices.Clone(v), k); got != sorted[k] {
					t.Fatalf("%s n=%d: kth(%d) = %d, want %d", name, n, k, got, sorted[k])
				}
			}
		}
	}
}

// TestRunReusesBuffers runs windows of different sizes, with merging
// sequential reads, under every scheduler one after another (so each run
// takes buffers an earlier run used): every result equals the first run of
// the same window.
func TestRunReusesBuffers(t *testing.T) {
	window := func(n int, seed uint64) *Window {
		rng := rand.New(rand.NewPCG(seed, 2))
		reqs := make([]trace.Request, n)
		at := int64(0)
		for i := range reqs {
			at += rng.Int64N(200_000)
			sector := rng.Uint64N(1<<24) &^ 7
			if i > 0 && rng.IntN(3) == 0 {
				sector = reqs[i-1].End() // back-merges into the previous one
			}
			reqs[i] = openReq(at, sector, 8, trace.Read)
			reqs[i].PID = uint32(1 + i%3)
			reqs[i].Flags = trace.Sync
		}
		return mustWindow(t, reqs, LoopOpen)
	}
	big, small := window(3000, 1), window(500, 2)
	dev := sched.Device{Rotational: true, MaxSectors: 2560, QueueDepth: 4}
	first := map[string]Result{}
	for round := range 3 {
		for _, w := range []*Window{big, small} {
			for _, name := range sched.Names() {
				res := mustRun(t, w, Config{Scheduler: name, Device: dev, Servers: 2, NewDisk: constModel(ms, 1000), KeepPerRequest: true})
				key := fmt.Sprintf("%s/%d", name, w.Len())
				if round == 0 {
					first[key] = res
					continue
				}
				if !reflect.DeepEqual(res, first[key]) {
					t.Fatalf("round %d, %s: result differs from the first run", round, key)
				}
			}
		}
	}
	if first["mq-deadline/3000"].Merged == 0 {
		t.Error("no request merged: the windows do not exercise the merge lists")
	}
}

// ResponseQuantiles keeps a bounded, sorted set of exact quantiles of the
// response times: all of them when there are few, else the requested
// number from the fastest to the slowest, the same on every run; it
// changes nothing else in the result.
func TestResponseQuantiles(t *testing.T) {
	reqs := serial(500, 3*ms, ms)
	for i := range reqs {
		reqs[i].Sector = uint64(i*7919) % 100000
	}
	w := mustWindow(t, reqs, LoopAuto)
	full := mustRun(t, w, Config{Scheduler: "mq-deadline", NewDisk: constModel(ms, 100), KeepPerRequest: true})
	sorted := slices.Sorted(slices.Values(full.ResponseNs))
	for _, m := range []int{1, 2, 7, 499, 500, 5000} {
		r := mustRun(t, w, Config{Scheduler: "mq-deadline", NewDisk: constModel(ms, 100), KeepPerRequest: true, ResponseQuantiles: m})
		q := r.ResponseQuantilesNs
		if want := min(m, len(sorted)); len(q) != want {
			t.Fatalf("m=%d: %d quantiles, want %d", m, len(q), want)
		}
		if !slices.IsSorted(q) || q[len(q)-1] != sorted[len(sorted)-1] || m > 1 && q[0] != sorted[0] {
			t.Errorf("m=%d: quantiles %v… not sorted from the fastest %d to the slowest %d", m, q[:min(len(q), 5)], sorted[0], sorted[len(sorted)-1])
		}
		for _, x := range q {
			if _, ok := slices.BinarySearch(sorted, x); !ok {
				t.Fatalf("m=%d: %d is not a response time of the run", m, x)
			}
		}
		again := mustRun(t, w, Config{Scheduler: "mq-deadline", NewDisk: constModel(ms, 100), KeepPerRequest: true, ResponseQuantiles: m})
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("m=%d: two runs differ", m)
		}
		r.ResponseQuantilesNs = nil
		if !reflect.DeepEqual(r, full) {
			t.Fatalf("m=%d: keeping quantiles changed the result", m)
		}
	}
}

// HitServers: reads the cache serves queue FIFO for k servers, each held
// for the hit's cost; without a bound each takes its cost in parallel.
func TestCacheHitServers(t *testing.T) {
	var reqs []trace.Request
	for i := range uint64(8) {
		reqs = append(reqs, openReq(0, i*8, 8, trace.Read))
	}
	w := mustWindow(t, reqs, LoopOpen)
	for _, tc := range []struct {
		servers int
		want    []int64 // response times, µs, sorted
	}{
		{0, []int64{100, 100, 100, 100, 100, 100, 100, 100}},
		{2, []int64{100, 100, 200, 200, 300, 300, 400, 400}},
	} {
		cfg := CacheConfig{Segments: 16, SegmentSectors: 8, HitOverheadNs: 100e3, CopyBytesPerSec: 1e18, HitServers: tc.servers}
		res := mustRun(t, w, Config{Scheduler: "none", NewDisk: constModel(10*ms, 0), KeepPerRequest: true,
			Cache: &cfg, CacheWarm: redcap.Warm{Segments: []uint64{0, 1, 2, 3, 4, 5, 6, 7}}})
		got := slices.Clone(res.ResponseNs)
		slices.Sort(got)
		for i := range got {
			got[i] /= 1000
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("HitServers %d: responses %v µs, want %v", tc.servers, got, tc.want)
		}
	}
}
