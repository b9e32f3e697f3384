//go:build linux

package agent_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

const (
	thrashChildEnv = "SHADOWTUNE_THRASH_CHILD"
	// thrashWindow is the agent's window in TestThrashCutWithinAWindow:
	// long, so that a cut made at a window's end cannot pass for one made
	// early.
	thrashWindow = 12 * time.Second
	// thrashRun is how long the child reads.
	thrashRun = 10 * time.Second
	// thrashTick is the child's reporting interval.
	thrashTick = 250 * time.Millisecond
)

// TestThrashChild is the workload child of TestThrashCutWithinAWindow,
// run by re-executing the test binary: it waits for a line on stdin (the
// parent has moved it into the memory cgroup by then), maps the file
// $SHADOWTUNE_THRASH_CHILD names, and for thrashRun reads random 4 KiB
// pages of it through the mapping (no madvise: the kernel's fault
// read-around, sized by the file's read-ahead, applies), printing the
// pages read so far every thrashTick.
func TestThrashChild(t *testing.T) {
	path := os.Getenv(thrashChildEnv)
	if path == "" {
		t.Skip("workload child of TestThrashCutWithinAWindow")
	}
	loopdev.AwaitGo(t)
	m := mapFile(t, path)
	rng := rand.New(rand.NewPCG(5, 6))
	var sum byte
	t0 := time.Now()
	next := thrashTick
	for n := 0; ; n++ {
		el := time.Since(t0)
		if el >= next {
			fmt.Printf("reads %d %d\n", el.Milliseconds(), n)
			next += thrashTick
		}
		if el >= thrashRun {
			break
		}
		sum ^= m[rng.Int64N(int64(len(m))/4096)*4096]
	}
	fmt.Println("checksum", sum)
}

// mapFile maps the file at path whole, read-only and shared, for a
// workload child; the mapping and the file are closed when t ends.
func mapFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(m) })
	return m
}

// TestThrashCutWithinAWindow: a process in a 256 MiB memory cgroup maps
// a 1 GiB file on ext4 over a loop device and reads random pages of it;
// at the device's read_ahead_kb of 2560 each fault reads up to 2.5 MiB
// and the read-around thrashes the cgroup's page cache. With a 12 s
// window the agent must cut read-ahead within the first 6 s of the load
// (the thrash check ends the window early: agent/thrashcheck.go), of
// the mapped file alone since its waste is the faults' (Action.mappedOnly),
// sysfs must show what the status says after every window, and the
// process, whose open mapping the agent follows (agent/openfiles), must
// read at least 3 times as many pages a second in the 2 s after the cut
// as in the 1 s before it.
func TestThrashCutWithinAWindow(t *testing.T) {
	fx := newThrashFixture(t, 0)
	fx.run(t, -1, nil)
}

// TestThrashCutWhileSampled is TestThrashCutWithinAWindow on a device the
// agent learned in an earlier run, whose windows it therefore samples
// from the first: traced for their last second only (sampling.go). The
// load begins in the pause, so the cut within 6 s needs the pause to end
// on the surge of reads (agent/samplewake.go).
func TestThrashCutWhileSampled(t *testing.T) {
	fio := loopdev.NeedFio(t)
	fx := newThrashFixture(t, 0)
	fx.learn(t, fio)
	fx.run(t, time.Second, nil)
}

// TestThrashCutAfterHeavyReader is TestThrashCutWhileSampled with a
// heavier reader before the load: direct sequential reads of the device
// through the agent's whole first window, stopped when it ends. The load
// then reads less a second than that window did, which is no surge, so
// the cut within 6 s needs the pause to end on the faults' read-around,
// which the page-cache probe counts while the device is paused
// (agent/samplewake.go). Before that, the cut came at the window's
// sample, 11 s into the load. The test checks its premise: the load's
// read rate must stay under 4 times the heavy reader's.
func TestThrashCutAfterHeavyReader(t *testing.T) {
	fio := loopdev.NeedFio(t)
	fx := newThrashFixture(t, 0)
	fx.learn(t, fio)
	fx.run(t, time.Second, func(a *runningAgent) func() {
		return fx.heavyReader(t, a, fio)
	})
}

// heavyReader reads the device directly and sequentially with fio from
// now until the agent's next window ends, and returns a function that
// checks, once the load has run, that the load's read rate over any
// second stayed under SurgeFactor times the heavy reader's.
func (fx *thrashFixture) heavyReader(t *testing.T, a *runningAgent, fio string) func() {
	t.Helper()
	sectors := func() (uint64, error) {
		b, err := os.ReadFile(filepath.Join("/sys/block", fx.l.Name, "stat"))
		if err != nil {
			return 0, err
		}
		if f := strings.Fields(string(b)); len(f) >= 3 {
			return strconv.ParseUint(f[2], 10, 64)
		}
		return 0, fmt.Errorf("the stat of %s: %q: fewer than 3 fields", fx.l.Name, b)
	}
	mustSectors := func() uint64 {
		n, err := sectors()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cmd := exec.Command(fio, "--name=heavy", "--filename="+fx.l.Path, "--direct=1", "--rw=read", "--bs=1m",
		"--ioengine=libaio", "--iodepth=8", "--thread", "--time_based", "--runtime=60", "--output-format=terse")
	t0, s0 := time.Now(), mustSectors()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := len(a.windows())
	for len(a.windows()) == n && time.Since(t0) < 3*thrashWindow {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	heavy := float64(mustSectors()-s0) / time.Since(t0).Seconds()
	t.Logf("the heavy reader read %.0f MiB/s for %.1f s", heavy/2048, time.Since(t0).Seconds())
	stop := make(chan struct{})
	done := make(chan float64)
	go func() { // the load's highest rate over a second, sampled every 250 ms
		var ring []uint64
		peak := 0.0
		tk := time.NewTicker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			if n, err := sectors(); err == nil {
				ring = append(ring, n)
			}
			if len(ring) > 5 {
				ring = ring[1:]
			}
			if len(ring) == 5 {
				peak = max(peak, float64(ring[4]-ring[0]))
			}
			select {
			case <-stop:
				done <- peak
				return
			case <-tk.C:
			}
		}
	}()
	return func() {
		close(stop)
		peak := <-done
		t.Logf("the load read at most %.0f MiB/s over a second", peak/2048)
		if peak >= agent.SurgeFactor*heavy {
			t.Errorf("the load's %.0f MiB/s is a surge over the heavy reader's %.0f: the test's premise failed", peak/2048, heavy/2048)
		}
	}
}

// thrashFixture is the loop device, file system, data file, memory
// cgroup and state directory of the thrash tests; newThrashFixture makes
// the device extra bytes larger than the 1.5 GiB they need.
type thrashFixture struct {
	l                     *loopdev.Dev
	data, procs, stateDir string
}

func newThrashFixture(t *testing.T, extra int64) *thrashFixture {
	t.Helper()
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs and changes queue settings")
	loopdev.LockHeavyIO(t)
	t.Setenv("TMPDIR", "/var/tmp") // the backing file, mount point and state directory: not tmpfs
	fx := &thrashFixture{l: loopdev.NewForTest(t, 1536<<20+extra), stateDir: t.TempDir()}
	fx.l.Allocate(t)
	fx.data = filepath.Join(fx.l.MountExt4(t), "data")
	loopdev.WriteRandom(t, fx.data, 1<<30)
	if err := os.WriteFile(filepath.Join("/sys/block", fx.l.Name, "queue/read_ahead_kb"), []byte("2560"), 0); err != nil {
		t.Fatal(err)
	}
	fx.procs = loopdev.MemCgroup(t, 256<<20)
	return fx
}

// spec is the policy of the thrash tests: Apply on the loop device, with
// the given window.
func (fx *thrashFixture) spec(window time.Duration) v1alpha1.StorageTuningSpec {
	spec := v1alpha1.StorageTuningSpec{
		Mode:       v1alpha1.ModeApply,
		Devices:    v1alpha1.DeviceSelector{Include: []string{fx.l.Name}},
		Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: window}},
	}
	spec.Default()
	return spec
}

// learn runs the agent over 6 s of direct random reads of the device,
// so that it saves a calibrated model of it in the state directory.
func (fx *thrashFixture) learn(t *testing.T, fio string) {
	t.Helper()
	a := startAgent(t, agent.Options{StateDir: fx.stateDir, Spec: fx.spec(2 * time.Second), Tracer: tracer.KindAuto,
		Log: testr.New(t), TraceSample: -1})
	if out, err := exec.Command(fio, "--name=learn", "--filename="+fx.l.Path, "--direct=1", "--rw=randread", "--bs=4k",
		"--ioengine=psync", "--time_based", "--runtime=6", "--output-format=terse").CombinedOutput(); err != nil {
		a.stop(t)
		t.Fatalf("fio: %v\n%s", err, out)
	}
	a.waitWindowAfter(t, time.Now())
	st := a.stop(t)
	if d, ok := deviceStatus(st, fx.l.Name); !ok || d.TotalRequests == 0 {
		t.Fatalf("the learning run traced nothing: %+v", st)
	}
	if err := os.WriteFile(filepath.Join("/sys/block", fx.l.Name, "queue/read_ahead_kb"), []byte("2560"), 0); err != nil {
		t.Fatal(err)
	}
}

// run runs the agent (window thrashWindow, trace sample as given) while
// the child thrashes, and checks the cut, sysfs and the child's rate.
// pre, if not nil, runs first, once the agent has started; the check it
// returns runs after the child.
func (fx *thrashFixture) run(t *testing.T, sample time.Duration, pre func(*runningAgent) func()) {
	t.Helper()
	loopdev.Evict(t, fx.data)
	a := startAgent(t, agent.Options{StateDir: fx.stateDir, Spec: fx.spec(thrashWindow), Tracer: tracer.KindAuto,
		Log: testr.New(t), TraceSample: sample, FollowOpenFiles: true})
	check := func() {}
	if pre != nil {
		check = pre(a)
	}
	start, reads := runThrashChild(t, fx.procs, fx.data)
	check()
	final := a.stop(t)

	cut, ok := a.firstCut(fx.l.Name)
	if !ok {
		t.Fatalf("no read-ahead cut in %d windows; changes %v; final %+v", len(a.windows()), a.changeLog(), final)
	}
	after := cut.at.Sub(start)
	t.Logf("read_ahead_kb 2560 -> %d at %.2f s of the load (window %d, sampled %v, mapped files only %v); changes %v",
		cut.kib, after.Seconds(), cut.window, cut.sampled, cut.mapped, a.changeLog())
	if after > thrashWindow/2 {
		t.Errorf("the cut came %.2f s into the load; want within %v (the window is %v)", after.Seconds(), thrashWindow/2, thrashWindow)
	}
	if sample > 0 && !cut.sampled {
		t.Errorf("the window of the cut was traced whole; want a sampled one (a model learned before)")
	}
	for w := 1; w <= len(a.windows()); w++ {
		if m := a.sysAt(w); m != "" {
			t.Errorf("sysfs differs from the status:%s", m)
		}
	}
	before, later := rateAround(reads, after-time.Second, after), rateAround(reads, after, after+2*time.Second)
	t.Logf("the child read %.0f pages/s in the second before the cut, %.0f in the 2 s after it", before, later)
	if before <= 0 || later < 3*before {
		t.Errorf("pages/s %.0f before the cut, %.0f after: want at least 3 times as many", before, later)
	}
}

// runThrashChild runs TestThrashChild on data inside the cgroup whose
// cgroup.procs file is procs, and returns when it started reading and its
// progress: elapsed time → pages read.
func runThrashChild(t *testing.T, procs, data string) (time.Time, map[time.Duration]int) {
	t.Helper()
	start, out := loopdev.RunChild(t, procs, "TestThrashChild", thrashChildEnv+"="+data)
	reads := map[time.Duration]int{0: 0}
	for _, line := range strings.Split(out, "\n") {
		var ms int64
		var n int
		if _, err := fmt.Sscanf(line, "reads %d %d", &ms, &n); err == nil {
			reads[time.Duration(ms)*time.Millisecond] = n
		}
	}
	return start, reads
}

// rateAround is the child's pages a second between from and to, taken at
// the reports nearest to them.
func rateAround(reads map[time.Duration]int, from, to time.Duration) float64 {
	near := func(at time.Duration) (time.Duration, int) {
		best, n := time.Duration(-1), 0
		for d, v := range reads {
			if best < 0 || (d-at).Abs() < (best-at).Abs() {
				best, n = d, v
			}
		}
		return best, n
	}
	t0, n0 := near(from)
	t1, n1 := near(to)
	if t1 <= t0 {
		return 0
	}
	return float64(n1-n0) / (t1 - t0).Seconds()
}

// cutAt is the first window whose status shows read-ahead below 2560,
// and when it ended.
type cutAt struct {
	window  int
	kib     int
	sampled bool
	at      time.Time
	// mapped: the cut was made of the mapped files alone; the device
	// kept its depth.
	mapped bool
}

// firstCut is the first window whose status shows a cut of read-ahead
// below 2560: of the device, or of its mapped files alone (the last
// change reads "read_ahead_kb 2560 -> N of the mapped files").
func (a *runningAgent) firstCut(name string) (cutAt, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.wins {
		d, ok := deviceStatus(s, name)
		if !ok {
			continue
		}
		if d.ReadAheadKiB > 0 && d.ReadAheadKiB < 2560 {
			return cutAt{window: s.Windows, kib: d.ReadAheadKiB, sampled: d.Sampled, at: a.at[i]}, true
		}
		var from, to int
		if _, err := fmt.Sscanf(d.LastChangeWhat, "read_ahead_kb %d -> %d of the mapped files", &from, &to); err == nil && to < from {
			return cutAt{window: s.Windows, kib: to, sampled: d.Sampled, at: a.at[i], mapped: true}, true
		}
	}
	return cutAt{}, false
}
