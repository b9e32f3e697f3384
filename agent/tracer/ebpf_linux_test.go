//go:build linux

package tracer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// startReaperRecording records a new loop device with the eBPF tracer, for
// the tests of its reaper; if the kernel cannot run the reaper it skips the
// test, or fails it under CI=true (package need).
func startReaperRecording(t *testing.T) (*loopDev, *recording, *ebpfTracer) {
	t.Helper()
	needRoot(t)
	l := newLoop(t, 64<<20)
	rec := startRecording(t, KindEBPF, l.dev)
	et := rec.tr.(*ebpfTracer)
	if et.reap == nil {
		need.Missing(t, "BPF reaper", "kernel cannot run the reaper (%s)", strings.Join(et.notes, "; "))
	}
	return l, rec, et
}

// missOneCompletion does 10 reads on l, then one more while the programs'
// block_rq_complete link is closed (so they miss its completion), then
// attaches it again. It returns when the missed read began.
func missOneCompletion(t *testing.T, l *loopDev, et *ebpfTracer) time.Time {
	t.Helper()
	if err := randomReads(l.path, l.size, 10, 1); err != nil {
		t.Fatal(err)
	}
	// links[0] is block_rq_complete.
	if err := et.links[0].Close(); err != nil {
		t.Fatal(err)
	}
	missed := time.Now()
	if err := randomReads(l.path, l.size, 1, 2); err != nil {
		t.Fatal(err)
	}
	lk, err := link.AttachTracing(link.TracingOptions{Program: et.coll.Programs[blocktraceProgBlockRqComplete], AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		t.Fatal(err)
	}
	et.links[0] = lk
	return missed
}

// TestEBPFMissedCompletionIsReaped makes the programs miss one completion
// (their links are closed around one read), then checks that the request
// is counted lost and that it does not hold back the delivery of the
// requests after it.
func TestEBPFMissedCompletionIsReaped(t *testing.T) {
	l, rec, et := startReaperRecording(t)
	missOneCompletion(t, l, et)
	if err := randomReads(l.path, l.size, 20, 3); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.reqs)
		rec.mu.Unlock()
		if n == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 30 requests delivered 5 s after the missed completion; stats %+v", n, rec.tr.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	reqs := rec.stop(t)
	if st := rec.tr.Stats(); len(reqs) != 30 || st.Lost != 1 {
		t.Errorf("%d requests, stats %+v; want 30 and 1 lost", len(reqs), st)
	}
}

// TestEBPFMissedCompletionCountedAtStop misses one completion just before
// the tracer stops, well within the periodic reaper's one-second age
// limit: the last run of the reaper at stop must still count it lost, so
// that traced + lost equals what the device did.
//
// A stop that comes a reap period or more after the miss cannot tell the
// last run from a periodic one: the test tries again, up to three times,
// and fails when no stop came in time (it used to skip, so a loaded
// machine passed it without checking).
func TestEBPFMissedCompletionCountedAtStop(t *testing.T) {
	const attempts = 3
	for i := 1; i <= attempts; i++ {
		l, rec, et := startReaperRecording(t)
		missed := missOneCompletion(t, l, et)
		if err := randomReads(l.path, l.size, 5, 3); err != nil {
			t.Fatal(err)
		}
		reqs := rec.stop(t)
		if age := time.Since(missed); age >= reapEvery {
			t.Logf("attempt %d: the stop came %v after the missed completion: the periodic reaper may have counted it", i, age)
			continue
		}
		if st := rec.tr.Stats(); len(reqs) != 15 || st.Lost != 1 {
			t.Errorf("%d requests, stats %+v; want 15 and 1 lost", len(reqs), st)
		}
		return
	}
	t.Fatalf("in %d attempts no stop came within %v of the missed completion: the last run of the reaper was not checked", attempts, reapEvery)
}

// newFilterTracer is an eBPF tracer selecting no disk, for the tests of
// its device filter; it is closed when the test ends.
func newFilterTracer(t *testing.T) (Tracer, *ebpfTracer) {
	t.Helper()
	needRoot(t)
	tr, err := New(Options{Kind: KindEBPF})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, tr.(*ebpfTracer)
}

// TestEBPFDeviceFilter checks the programs' device filter as SetDevices
// leaves it: up to fastDevs disks in the global array, more in the map
// (fast_many set), and back.
func TestEBPFDeviceFilter(t *testing.T) {
	tr, et := newFilterTracer(t)
	check := func(devs []uint32, many uint32) {
		t.Helper()
		if err := tr.SetDevices(devs); err != nil {
			t.Fatal(err)
		}
		var fast [fastDevs]uint32
		var gotMany uint32
		if err := et.fastDevs.Get(&fast); err != nil {
			t.Fatal(err)
		}
		if err := et.fastMany.Get(&gotMany); err != nil {
			t.Fatal(err)
		}
		if gotMany != many {
			t.Errorf("%d devices: fast_many %d, want %d", len(devs), gotMany, many)
		}
		if many == 0 {
			got := slices.DeleteFunc(slices.Clone(fast[:]), func(d uint32) bool { return d == 0 })
			slices.Sort(got)
			if !slices.Equal(got, devs) {
				t.Errorf("fast_devs %v, want %v", fast, devs)
			}
		}
		var n int
		var k uint32
		var v uint8
		for it := et.devs.Iterate(); it.Next(&k, &v); {
			n++
			if !slices.Contains(devs, k) {
				t.Errorf("devices map holds %s, not selected", DevString(k))
			}
		}
		if n != len(devs) {
			t.Errorf("devices map holds %d disks, want %d", n, len(devs))
		}
	}
	var many []uint32
	for i := range uint32(fastDevs + 3) {
		many = append(many, Mkdev(7, 100+i))
	}
	check(many[:1], 0)
	check(many[:fastDevs], 0)
	check(many, 1)
	check(many[2:4], 0)
	check(nil, 0)
}

// TestEBPFInflightOverflow traces with an in-flight array of 4 slots, so
// that most requests of 16 concurrent threads go to the overflow map, and
// checks the counts against the kernel's.
func TestEBPFInflightOverflow(t *testing.T) {
	needRoot(t)
	l := newLoop(t, 64<<20)
	l.setScheduler(t, "none")
	tr, err := New(Options{Kind: KindEBPF, Devices: []uint32{l.dev}, MaxInflight: 4, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	et := tr.(*ebpfTracer)
	if len(et.slots) != 4 {
		t.Fatalf("%d slots, want 4", len(et.slots))
	}
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(b []trace.Request) { n.Add(int64(len(b))) }) }()
	before := l.stat(t)
	// The most entries seen in the overflow map while the I/O runs.
	var most atomic.Uint64
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			var used uint64
			if et.coll.Variables[blocktraceVarOverflowUsed].Get(&used) == nil && used > most.Load() {
				most.Store(used)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, err := doIO(l.path, l.size, 300, uint64(i), false); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-polled
	k := l.stat(t).sub(before)
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var used uint64
	if err := et.coll.Variables[blocktraceVarOverflowUsed].Get(&used); err != nil {
		t.Fatal(err)
	}
	st := tr.Stats()
	kernel := k.reads + k.writes + k.flushes - st.Unissued
	t.Logf("traced %d, kernel %d, stats %+v, overflow entries: at most %d, left %d", n.Load(), kernel, st, most.Load(), used)
	if most.Load() == 0 {
		t.Error("the overflow map was never used")
	}
	if uint64(n.Load())+st.Lost != kernel || st.Lost > maxLost(kernel) || st.Dropped != 0 {
		t.Errorf("traced %d + lost %d, kernel %d (%+v)", n.Load(), st.Lost, kernel, k)
	}
	for i := range et.slots {
		if et.slots[i].Key != 0 {
			t.Errorf("slot %d still taken after the I/O: %+v", i, et.slots[i])
		}
	}
	if used != 0 {
		t.Errorf("overflow_used %d after the I/O, want 0", used)
	}
}

func TestPollInterval(t *testing.T) {
	const ring = 4 << 20 // a quarter: 1 MiB
	for _, c := range []struct {
		name    string
		drained int
		elapsed time.Duration
		want    time.Duration
	}{
		{"idle", 0, 100 * time.Millisecond, maxPoll},
		{"no time passed", 1 << 20, 0, maxPoll},
		{"a quarter in 1 s: longest", 1 << 20, time.Second, maxPoll},
		{"a quarter in 100 ms: longest", 1 << 20, 100 * time.Millisecond, maxPoll},
		{"a quarter in 50 ms", 1 << 20, 50 * time.Millisecond, 50 * time.Millisecond},
		{"half the ring in 100 ms", 2 << 20, 100 * time.Millisecond, 50 * time.Millisecond},
		{"64 MiB/s", 2 << 20, time.Second / 32, time.Second / 64},
		{"faster than minPoll allows", 2 << 20, 1500 * time.Microsecond, minPoll},
		{"three quarters full: perhaps overflowing", 3 << 20, time.Second, minPoll},
		{"full", 4 << 20, 100 * time.Millisecond, minPoll},
	} {
		if got := pollInterval(maxPoll, ring, c.drained, c.elapsed); got != c.want {
			t.Errorf("%s: pollInterval(%v, %d, %d, %v) = %v, want %v", c.name, maxPoll, ring, c.drained, c.elapsed, got, c.want)
		}
	}
	if got := ringRecordBytes(eventSize); got != 8+eventSize {
		t.Errorf("ringRecordBytes(%d) = %d, want %d", eventSize, got, 8+eventSize)
	}
	if got := ringRecordBytes(5); got != 16 {
		t.Errorf("ringRecordBytes(5) = %d, want 16", got)
	}
}

// TestEBPFSmallRingKeepsUp traces random reads from four threads of
// another process through a ring buffer of 1024 records, with deliveries
// 2 s apart: the reader must drain it every few milliseconds, woken by the
// programs when it is half full and then polling at the rate it sees. A
// reader that polled every maxPoll would drop most records (all but 1024
// of every maxPoll).
func TestEBPFSmallRingKeepsUp(t *testing.T) {
	needRoot(t)
	if raceDetector {
		t.Skip("the race detector slows the reader down more than this test allows for")
	}
	l := newLoop(t, 256<<20)
	l.setScheduler(t, "none")
	const ring = 64 << 10
	tr, err := New(Options{Kind: KindEBPF, Devices: []uint32{l.dev}, RingBufferBytes: ring, FlushInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(b []trace.Request) { n.Add(int64(len(b))) }) }()
	time.Sleep(2 * maxPoll) // idle: the reader polls every maxPoll
	before := l.stat(t)
	start := time.Now()
	// The reads run in another process, as an application's would: in
	// this one, threads blocked in pread hold the Go scheduler's Ps and
	// delay the reader's timer.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRandomReads$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("SHADOWTUNE_TEST_READS=%s %d 4 40000", l.path, l.size))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reads: %v: %s", err, out)
	}
	secs := time.Since(start).Seconds()
	k := l.stat(t).sub(before)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := tr.Stats()
	t.Logf("%d reads in %.2f s (%.0f/s; %.0f records per maxPoll, the ring holds %d); traced %d, dropped %d, lost %d",
		k.reads, secs, float64(k.reads)/secs, float64(k.reads)/secs*maxPoll.Seconds(), ring/ringRecordBytes(eventSize), n.Load(), st.Dropped, st.Lost)
	if uint64(n.Load())+st.Dropped+st.Lost != k.reads || st.Lost > maxLost(k.reads) {
		t.Errorf("traced %d + dropped %d + lost %d, kernel %d reads", n.Load(), st.Dropped, st.Lost, k.reads)
	}
	if allowed := k.reads / 20; st.Dropped > allowed {
		t.Errorf("dropped %d of %d records (at most %d allowed): the reader did not keep up", st.Dropped, k.reads, allowed)
	}
}

// TestHelperRandomReads is the reading process of TestEBPFSmallRingKeepsUp:
// with SHADOWTUNE_TEST_READS="PATH SIZE THREADS N" it does N random 4 KiB
// reads of PATH from each of THREADS threads.
func TestHelperRandomReads(t *testing.T) {
	spec := os.Getenv("SHADOWTUNE_TEST_READS")
	if spec == "" {
		t.Skip("the reading process of TestEBPFSmallRingKeepsUp")
	}
	var path string
	var size int64
	var threads, n int
	if _, err := fmt.Sscan(spec, &path, &size, &threads, &n); err != nil {
		t.Fatalf("SHADOWTUNE_TEST_READS=%q: %v", spec, err)
	}
	var wg sync.WaitGroup
	for i := range threads {
		wg.Go(func() {
			if err := randomReads(path, size, n, uint64(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestEBPFReaperRaceCountsOnce runs the reaper over and over, with no age
// limit, while requests complete: a request the reaper examines while it
// completes (its entry read as issued before, its struct request found
// freed after) must be counted once, delivered or lost, never both. Under
// TCG a completion can come more than the reaper's one-second age limit
// after its issue, so the periodic reaper meets such requests all the
// time; this makes the race frequent on the host.
//
// With SHADOWTUNE_TEST_RACE_DEVICE="PATH SIZE N" it runs on that disk
// (written to: a scratch disk), N requests per thread, instead of a new
// loop device: the VM lab runs it on the 6.1 guest under TCG that way.
func TestEBPFReaperRaceCountsOnce(t *testing.T) {
	var l *loopDev
	perThread := 3000
	if spec := os.Getenv("SHADOWTUNE_TEST_RACE_DEVICE"); spec != "" {
		l = &loopDev{}
		if _, err := fmt.Sscan(spec, &l.path, &l.size, &perThread); err != nil {
			t.Fatalf("SHADOWTUNE_TEST_RACE_DEVICE=%q: %v", spec, err)
		}
		l.name = filepath.Base(l.path)
		dev, _, err := ResolveDevice(l.path)
		if err != nil {
			t.Fatal(err)
		}
		l.dev = dev
	} else {
		needRoot(t)
		l = newLoop(t, 64<<20)
	}
	l.setScheduler(t, "none")
	tr, err := New(Options{Kind: KindEBPF, Devices: []uint32{l.dev}, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	et := tr.(*ebpfTracer)
	if et.reap == nil {
		need.Missing(t, "BPF reaper", "kernel cannot run the reaper (%s)", strings.Join(et.notes, "; "))
	}
	if err := et.reapAfter.Set(uint64(0)); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(b []trace.Request) { n.Add(int64(len(b))) }) }()
	before := l.stat(t)
	stop := make(chan struct{})
	reaped := make(chan int)
	go func() {
		runs := 0
		defer func() { reaped <- runs }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := et.reap.Run(&ebpf.RunOptions{}); err != nil {
				t.Error(err)
				return
			}
			runs++
		}
	}()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			// 99 at a time: doIO's fsync (every 100) would add pre-flush
			// shells, which the kernel counts as writes and a kernel
			// without block_io_start (6.1) never shows the programs.
			for j := 0; j < perThread; j += 99 {
				if _, err := doIO(l.path, l.size, min(99, perThread-j), uint64(i*1000+j), false); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	runs := <-reaped
	k := l.stat(t).sub(before)
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := tr.Stats()
	kernel := k.reads + k.writes + k.flushes - st.Unissued
	t.Logf("%d reaper runs; traced %d + lost %d, kernel %d; stats %+v", runs, n.Load(), st.Lost, kernel, st)
	// With no age limit the reaper may also take a request between its
	// issue event and its state turning in-flight (on a slow guest that
	// is a while): it is counted lost, and its completion then finds no
	// entry (an orphan). Counted once all the same.
	if uint64(n.Load())+st.Lost != kernel || st.Dropped != 0 || st.Orphans > st.Lost {
		t.Errorf("traced %d + lost %d (orphans %d, dropped %d), the kernel completed %d", n.Load(), st.Lost, st.Orphans, st.Dropped, kernel)
	}
}
