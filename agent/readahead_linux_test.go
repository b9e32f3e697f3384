//go:build linux

package agent_test

// Live tests of the read-ahead road (agent/readahead) as shipped: the
// CRD's defaults (minDwell 10 minutes), open files not followed, on ext4
// over a loop device in a 256 MiB memory cgroup, each phase of the load a
// new process that opens its files afresh, as real jobs do.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// raChildEnv makes the test binary TestRAChild: "MODE:PATH:SECONDS".
const raChildEnv = "SHADOWTUNE_RA_CHILD"

// raWindowLen is the agent's window in these tests: shorter than the
// default 5 s, so that a test of several phases takes seconds.
const raWindowLen = 2 * time.Second

// TestRAChild is the load's process, run by re-executing the test binary
// in the memory cgroup (loopdev.RunChild). Modes:
//   - mmap: map PATH and read random 4 KiB pages of it through the
//     mapping for SECONDS (no madvise: the kernel's fault read-around,
//     sized by the file's read-ahead, applies);
//   - scan: read PATH in order in 64 KiB read()s, two streams (from its
//     start and from its middle), from its start again at its end, for
//     SECONDS.
//
// It prints "done SECONDS UNITS": pages read (mmap) or bytes (scan).
func TestRAChild(t *testing.T) {
	spec := os.Getenv(raChildEnv)
	if spec == "" {
		t.Skip("the load of the read-ahead live tests")
	}
	f := strings.SplitN(spec, ":", 3)
	secs, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		t.Fatal(err)
	}
	loopdev.AwaitGo(t)
	run := time.Duration(secs * float64(time.Second))
	t0 := time.Now()
	var n int64
	switch f[0] {
	case "mmap":
		m := mapRA(t, f[1])
		rng := rand.New(rand.NewPCG(5, 6))
		var sum byte
		for ; time.Since(t0) < run; n++ {
			sum ^= m[rng.Int64N(int64(len(m))/4096)*4096]
		}
		fmt.Println("checksum", sum) // the reads are used: not optimized away
	case "scan":
		n = scanRA(t, f[1], run)
	default:
		t.Fatalf("mode %q", f[0])
	}
	fmt.Printf("done %.3f %d\n", time.Since(t0).Seconds(), n)
}

// mapRA maps the file at path whole, read-only and shared.
func mapRA(t *testing.T, path string) []byte {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(m) })
	return m
}

// scanRA reads path in order for run with two streams, one from its
// start and one from its middle, each from its start again at its end,
// and returns the bytes read: two readers keep the device busier than
// one, so that the scan waits on the device on a busy host too.
func scanRA(t *testing.T, path string, run time.Duration) int64 {
	t.Helper()
	var wg sync.WaitGroup
	var n [2]int64
	var errs [2]error
	for i := range 2 {
		wg.Go(func() { n[i], errs[i] = scanFrom(path, i, run) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return n[0] + n[1]
}

// scanFrom is one stream of scanRA: half h of the file, then the whole
// file from its start, in 64 KiB read()s of a descriptor of its own.
func scanFrom(path string, h int, run time.Duration) (int64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if _, err := unix.Seek(fd, int64(h)*st.Size/2, 0); err != nil {
		return 0, err
	}
	buf := make([]byte, 64<<10)
	var n int64
	for t0 := time.Now(); time.Since(t0) < run; {
		k, err := unix.Read(fd, buf)
		if err != nil {
			return n, err
		}
		if k == 0 {
			if _, err := unix.Seek(fd, 0, 0); err != nil {
				return n, err
			}
			continue
		}
		n += int64(k)
	}
	return n, nil
}

// raFixture is the loop device (read_ahead_kb 2560), ext4 with a 1 GiB
// file to map and another to scan, the 256 MiB memory cgroup and the
// agent's state directory of the read-ahead live tests.
type raFixture struct {
	l                           *loopdev.Dev
	mapped, scanned, procs, dir string
	// capped, when set, is the cgroup.procs of a blk-throttle cgroup the
	// load's processes join too.
	capped string
}

func newRAFixture(t *testing.T) *raFixture {
	t.Helper()
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs and changes queue settings")
	loopdev.LockHeavyIO(t)
	t.Setenv("TMPDIR", "/var/tmp") // the backing file, mount point and state directory: not tmpfs
	fx := &raFixture{l: loopdev.NewForTest(t, 2560<<20), dir: t.TempDir()}
	fx.l.Allocate(t)
	mnt := fx.l.MountExt4(t)
	fx.mapped, fx.scanned = filepath.Join(mnt, "mapped"), filepath.Join(mnt, "scanned")
	loopdev.WriteRandom(t, fx.mapped, 1<<30)
	loopdev.WriteRandom(t, fx.scanned, 1<<30)
	fx.setRA(t, 2560)
	fx.procs = loopdev.MemCgroup(t, 256<<20)
	return fx
}

func (fx *raFixture) setRA(t *testing.T, kib int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", fx.l.Name, "queue/read_ahead_kb"), []byte(strconv.Itoa(kib)), 0); err != nil {
		t.Fatal(err)
	}
}

// start runs the agent as shipped on the loop device: the policy sets the
// mode and the device, and the window; every other field is the CRD's
// default (minDwell 10 minutes); open files are not followed.
func (fx *raFixture) start(t *testing.T) *runningAgent {
	t.Helper()
	return fx.startWith(t, fx.spec(t))
}

// startWith runs the agent with spec on the loop device, logging the
// read-ahead decisions' costs.
func (fx *raFixture) startWith(t *testing.T, spec v1alpha1.StorageTuningSpec) *runningAgent {
	t.Helper()
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	return startAgent(t, agent.Options{StateDir: fx.dir, Spec: spec, Tracer: tracer.KindAuto, Log: log})
}

// spec is the agent's policy in these tests: the mode, the device and
// the window set, every other field the CRD's default.
func (fx *raFixture) spec(t *testing.T) v1alpha1.StorageTuningSpec {
	t.Helper()
	spec := v1alpha1.StorageTuningSpec{
		Mode:       v1alpha1.ModeApply,
		Devices:    v1alpha1.DeviceSelector{Include: []string{fx.l.Name}},
		Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: raWindowLen}},
	}
	spec.Default()
	if d := spec.Rollout.MinDwell; d == nil || d.Duration != 10*time.Minute {
		t.Fatalf("the CRD's default minDwell is %v, want 10m", d)
	}
	return spec
}

// load runs one phase of the load, a new process in the memory cgroup,
// and returns when it began and ended, and its rate (units a second).
func (fx *raFixture) load(t *testing.T, mode, path string, secs float64) (start, end time.Time, rate float64) {
	t.Helper()
	loopdev.Evict(t, path)
	start, out := loopdev.RunChildIn(t, fx.cgroups(), "TestRAChild", fmt.Sprintf("%s=%s:%s:%g", raChildEnv, mode, path, secs))
	end = time.Now()
	for _, line := range strings.Split(out, "\n") {
		var s float64
		var n int64
		if _, err := fmt.Sscanf(line, "done %g %d", &s, &n); err == nil && s > 0 {
			return start, end, float64(n) / s
		}
	}
	t.Fatalf("%s of %s: no result in %q", mode, path, out)
	return
}

// cgroups are the cgroup.procs files of the load's cgroups.
func (fx *raFixture) cgroups() []string {
	if fx.capped != "" {
		return []string{fx.procs, fx.capped}
	}
	return []string{fx.procs}
}

// streams runs n sequential readers of the scanned file (1 GiB) for
// secs, in the load's cgroups, and returns their rate (bytes a second):
// fio's threads, reader i through part i of n in 16 KiB pread()s, from
// the start of its part again at its end. Each reader's descriptor has
// its own read-ahead state (file_ra_state_init, mm/readahead.c), so the
// page cache holds up to two read-ahead windows of each reader ahead of
// its reads (the window and its asynchronous part): about
// 2 × n × read_ahead_kb.
func (fx *raFixture) streams(t *testing.T, fio string, n int, secs float64) float64 {
	t.Helper()
	loopdev.Evict(t, fx.scanned)
	part := (1 << 30) / n &^ (16<<10 - 1)
	_, out := loopdev.RunIn(t, fx.cgroups(), fio, "--name=streams", "--thread", "--filename="+fx.scanned, "--rw=read",
		"--bs=16k", "--ioengine=psync", fmt.Sprintf("--numjobs=%d", n), fmt.Sprintf("--size=%d", part),
		fmt.Sprintf("--offset_increment=%d", part), "--time_based", fmt.Sprintf("--runtime=%g", secs),
		"--group_reporting", "--output-format=terse")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, ";"); len(f) > 7 && f[0] == "3" {
			kib, err := strconv.ParseFloat(f[6], 64)
			if err == nil {
				return kib * 1024
			}
		}
	}
	t.Fatalf("fio streams: no read bandwidth in %q", out)
	return 0
}

// depthAt is the device's read_ahead_kb in the status of the first
// window that ended after t, and that window's number (0: none yet).
func (a *runningAgent) depthAt(name string, after time.Time) (kib, window int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.wins {
		if a.at[i].After(after) {
			d, _ := deviceStatus(s, name)
			return d.ReadAheadKiB, s.Windows
		}
	}
	return 0, 0
}

// lastVerification is the device's last verification in the last
// window's status, for the log.
func (a *runningAgent) lastVerification(name string) string {
	w := a.windows()
	for i := len(w) - 1; i >= 0; i-- {
		for _, d := range w[i].Devices {
			if d.Name == name && d.LastVerification != nil {
				return fmt.Sprintf("%+v", *d.LastVerification)
			}
		}
	}
	return "none"
}

// depthNow is the device's read_ahead_kb in the last window's status.
func (a *runningAgent) depthNow(name string) int {
	w := a.windows()
	if len(w) == 0 {
		return 0
	}
	d, _ := deviceStatus(w[len(w)-1], name)
	return d.ReadAheadKiB
}

// thrashThenCut runs random mmap reads at the device's 2560 KiB for 6 s
// and checks that the agent cut read-ahead in a window that measured the
// thrash: by the end of the second window after the load began (a
// window of raWindowLen may have started just before it). It returns the
// cut depth and the load's rate.
func (fx *raFixture) thrashThenCut(t *testing.T, a *runningAgent) (int, float64) {
	t.Helper()
	start, _, rate := fx.load(t, "mmap", fx.mapped, 6)
	by := start.Add(2*raWindowLen + raWindowLen/2)
	a.waitWindowAfter(t, by)
	kib, w := a.depthAt(fx.l.Name, by)
	t.Logf("random mmap reads at 2560 KiB: %.0f pages/s; read_ahead_kb %d at window %d, 2 windows into the load; changes %v", rate, kib, w, a.changeLog())
	if kib <= 0 || kib >= 2560 {
		t.Fatalf("no cut within 2 windows of a thrash: read_ahead_kb %d (window %d); changes %v", kib, w, a.changeLog())
	}
	return kib, rate
}

// TestReadAheadCutLive: random mmap reads thrash the memory cgroup's
// page cache at the device's 2560 KiB; the agent, as shipped (minDwell 10
// minutes, open files not followed), cuts read-ahead in a window that
// measured the thrash, and the next process of the same load, which
// opens its file at the cut depth, reads at least 3 times as many pages
// a second.
func TestReadAheadCutLive(t *testing.T) {
	fx := newRAFixture(t)
	a := fx.start(t)
	a.waitWindowAfter(t, time.Now())
	kib, before := fx.thrashThenCut(t, a)
	_, _, after := fx.load(t, "mmap", fx.mapped, 3)
	t.Logf("the next process at %d KiB: %.0f pages/s (%.1f×)", kib, after, after/before)
	if after < 3*before {
		t.Errorf("random mmap reads at the cut depth %d KiB: %.0f pages/s, want ≥ 3 × %.0f", kib, after, before)
	}
	a.stop(t)
	if _, ra := readSetting(fx.l.Name); ra != 2560 {
		t.Errorf("read_ahead_kb %d after the agent's exit, want 2560 restored", ra)
	}
}

// TestReadAheadRaiseLive: after a cut, the agent keeps the cut depth
// through windows with no sequential demand, and raises read-ahead again
// within two windows of a sequential reader's start, minutes within
// minDwell of the cut. The scan's next process, opening its file at the
// raised depth, reads faster than the one at the cut depth.
func TestReadAheadRaiseLive(t *testing.T) {
	fx := newRAFixture(t)
	a := fx.start(t)
	a.waitWindowAfter(t, time.Now())
	cut, _ := fx.thrashThenCut(t, a)
	idle := time.Now()
	a.waitWindowAfter(t, idle.Add(3*raWindowLen))
	if kib := a.depthNow(fx.l.Name); kib != cut {
		t.Fatalf("three windows with no sequential demand after the cut: read_ahead_kb %d, want %d kept; changes %v", kib, cut, a.changeLog())
	}
	start, _, slow := fx.load(t, "scan", fx.scanned, 6)
	by := start.Add(2*raWindowLen + raWindowLen/2)
	a.waitWindowAfter(t, by)
	kib, w := a.depthAt(fx.l.Name, by)
	t.Logf("a scan at %d KiB: %.0f MiB/s; read_ahead_kb %d at window %d; changes %v", cut, slow/(1<<20), kib, w, a.changeLog())
	if kib <= cut {
		t.Fatalf("no raise within 2 windows of sequential demand: read_ahead_kb %d (cut %d); changes %v", kib, cut, a.changeLog())
	}
	_, _, fast := fx.load(t, "scan", fx.scanned, 3)
	t.Logf("the next scan at %d KiB: %.0f MiB/s", kib, fast/(1<<20))
	if fast <= slow {
		t.Errorf("the scan at the raised depth %d KiB read %.0f MiB/s, not more than the %.0f at the cut %d", kib, fast/(1<<20), slow/(1<<20), cut)
	}
}

// TestReadAheadRestartLive: an agent cuts read-ahead and exits, putting
// the original back; an agent started again on the same state directory
// (a DaemonSet's pod restarting) cuts again on its first thrash: no dwell
// carried over holds it.
func TestReadAheadRestartLive(t *testing.T) {
	fx := newRAFixture(t)
	a := fx.start(t)
	a.waitWindowAfter(t, time.Now())
	fx.thrashThenCut(t, a)
	a.stop(t)
	if _, ra := readSetting(fx.l.Name); ra != 2560 {
		t.Fatalf("read_ahead_kb %d after the first agent's exit, want 2560", ra)
	}
	b := fx.start(t)
	b.waitWindowAfter(t, time.Now())
	fx.thrashThenCut(t, b)
}

// TestReadAheadRevertLive: a read-ahead change that measures slower is
// reverted exactly, and its direction backs off. After a cut, a scan
// raises read-ahead again (sequential demand, in one step or several);
// then, as the next scan opens its file at the raised depth, a competing
// reader (fio's direct 1 MiB random reads at depth 16, another tenant of
// the disk) starts, and the scan's read-ahead requests take longer for
// each page used than they did before the raises. The agent cannot tell
// the change from the competitor: its verification measures a
// regression, it writes the cut depth back (raises in a row are verified
// as one change), and raises no more while the back-off lasts.
func TestReadAheadRevertLive(t *testing.T) {
	fio := loopdev.NeedFio(t)
	fx := newRAFixture(t)
	a := fx.start(t)
	a.waitWindowAfter(t, time.Now())
	cut, _ := fx.thrashThenCut(t, a)
	fx.load(t, "scan", fx.scanned, 6)
	a.waitWindowAfter(t, time.Now().Add(raWindowLen)) // the last raise made
	if _, to, ok := lastRAChange(a.changeLog()); !ok || to <= cut {
		t.Fatalf("no raise on a scan after the cut to %d KiB; changes %v", cut, a.changeLog())
	}
	loopdev.Background(t, fio, "--name=other", "--thread", "--filename="+fx.l.Path, "--direct=1", "--rw=randread", "--bs=1m",
		"--ioengine=libaio", "--iodepth=16", "--time_based", "--runtime=60", "--output-format=terse")
	fx.load(t, "scan", fx.scanned, 8)
	a.waitWindowAfter(t, time.Now())
	t.Logf("cut %d; changes %v", cut, a.changeLog())
	fx.checkRevertAndBackoff(t, a)
}

// checkRevertAndBackoff checks that the agent reverted a raise as a
// regression, wrote the depth before it back exactly, and raises no more
// while its back-off lasts: a scan of 4 s, another tenant's demand for
// read-ahead, makes no raise.
func (fx *raFixture) checkRevertAndBackoff(t *testing.T, a *runningAgent) {
	t.Helper()
	log := a.changeLog()
	var from, to int
	for _, c := range log {
		var w int
		if _, err := fmt.Sscanf(c, "w%d reverted read_ahead_kb %d -> %d: regression", &w, &from, &to); err == nil {
			break
		}
		from, to = 0, 0
	}
	if to == 0 || to >= from {
		t.Fatalf("no revert of a raise measured slower; changes %v", log)
	}
	if _, ra := readSetting(fx.l.Name); ra != to {
		t.Errorf("read_ahead_kb %d after the revert, want %d written back", ra, to)
	}
	n := len(log)
	fx.load(t, "scan", fx.scanned, 4)
	a.waitWindowAfter(t, time.Now())
	if later := a.changeLog(); len(later) > n {
		for _, c := range later[n:] {
			if f, tt, ok := parseRAChange(c); ok && tt > f {
				t.Errorf("a raise during the back-off: %s", c)
			}
		}
	}
}

// TestReadAheadRegressionLive: a raise that is slower in fact is
// measured, reverted exactly and backed off. After a cut, a scan raises
// read-ahead (sequential demand). Then the load changes to a pod's
// sequential readers, many of them, in a memory cgroup too small for
// their read-ahead at the raised depth and behind a cloud volume's
// bandwidth cap (blk-throttle, 200 MiB/s of reads): the page cache holds
// about 2 × readers × depth of read-ahead (raFixture.streams): the room
// the cgroup's limit leaves for the page cache holds four times that at
// the cut depth, and at most half of it at the raised depth. Reclaim evicts read-ahead pages before their readers reach
// them, and the readers read them again: at the raised depth the device
// spends more time per used page, and the cap's bytes carry fewer used
// pages. Nothing else shares the device. After the agent exits, the same
// load is run at both depths (rotated) to show that the raise is slower
// in fact by more than the policy's tolerated regression.
func TestReadAheadRegressionLive(t *testing.T) {
	const (
		readers = 128       // fio's threads
		bps     = 200 << 20 // their reads' cap, bytes a second: a tenth of the loop device's
	)
	fio := loopdev.NeedFio(t)
	fx := newRAFixture(t)
	_, capped := loopdev.ThrottleCgroup(t, fx.l.MajMin(t), 0, bps)
	fx.capped = capped
	pinned := fx.streamsPinned(t, fio, readers)
	fx.capped = ""
	a := fx.start(t)
	a.waitWindowAfter(t, time.Now())
	cut, _ := fx.thrashThenCut(t, a)
	fx.load(t, "scan", fx.scanned, 6)
	a.waitWindowAfter(t, time.Now().Add(raWindowLen)) // the last raise made
	_, raised, ok := lastRAChange(a.changeLog())
	if !ok || raised <= cut {
		t.Fatalf("no raise on a scan after the cut to %d KiB; changes %v", cut, a.changeLog())
	}
	// The page cache's room: four times the readers' read-ahead at the
	// cut depth, so at most half of it at a raise of 8 times or more.
	// A room that small fills within a second at the cap, so reclaim
	// starts early in the first window at the raised depth.
	room := 4 * 2 * int64(readers*cut) << 10
	if raised < 8*cut {
		t.Fatalf("raise %d -> %d KiB: less than 8 times, the readers' read-ahead at the raised depth fits the room (%d MiB)",
			cut, raised, room>>20)
	}
	limit := pinned + room
	loopdev.SetMemLimit(t, fx.procs, limit)
	loopdev.NoOOMKill(t, fx.procs) // read-ahead pages queued behind the cap cannot be reclaimed
	fx.capped = capped
	rate := fx.streams(t, fio, readers, 8)
	a.waitWindowAfter(t, time.Now())
	t.Logf("raised %d -> %d KiB; %d readers in %d MiB (%d MiB their own): %.0f MiB/s; changes %v; last verification %s",
		cut, raised, readers, limit>>20, pinned>>20, rate/(1<<20), a.changeLog(), a.lastVerification(fx.l.Name))
	loopdev.SetMemLimit(t, fx.procs, 256<<20)
	fx.capped = ""
	fx.checkRevertAndBackoff(t, a)
	a.stop(t)

	// The premise: the load is slower at the raised depth, in fact.
	loopdev.SetMemLimit(t, fx.procs, limit)
	fx.capped = capped
	var at [2]float64 // MiB read at the cut, raised depth
	for _, i := range []int{0, 1, 1, 0} {
		fx.setRA(t, []int{cut, raised}[i])
		at[i] += fx.streams(t, fio, readers, 3) / (1 << 20)
	}
	fx.setRA(t, 2560)
	tol := *fx.spec(t).Rollout.ToleratedRegressionPercent
	t.Logf("%d readers in %d MiB: %.0f MiB/s at %d KiB, %.0f at %d KiB (tolerated regression %d %%)",
		readers, limit>>20, at[0]/2, cut, at[1]/2, raised, tol)
	if at[1]*(1+float64(tol)/100) >= at[0] {
		t.Errorf("the load is not slower at %d KiB than at %d KiB by more than %d %%: not a regression in fact", raised, cut, tol)
	}
}

// streamsPinned runs the readers of streams for 2 s in the load's
// cgroups and returns the most memory they pinned meanwhile
// (loopdev.MemPinned: fio's own, which reclaim cannot take back).
func (fx *raFixture) streamsPinned(t *testing.T, fio string, n int) int64 {
	t.Helper()
	type result struct {
		most int64
		err  error
	}
	stop, done := make(chan struct{}), make(chan result)
	go func() {
		var r result
		for r.err == nil {
			select {
			case <-stop:
				done <- r
				return
			case <-time.After(50 * time.Millisecond):
				var m int64
				m, r.err = loopdev.MemPinned(fx.procs)
				r.most = max(r.most, m)
			}
		}
		<-stop
		done <- r
	}()
	fx.streams(t, fio, n, 2)
	close(stop)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	most := r.most
	t.Logf("%d fio readers pin %d MiB", n, most>>20)
	return most
}

// lastRAChange is the last read-ahead change (not a revert) in a
// runningAgent's change log.
func lastRAChange(log []string) (from, to int, ok bool) {
	for i := len(log) - 1; i >= 0; i-- {
		if from, to, ok = parseRAChange(log[i]); ok {
			return from, to, true
		}
	}
	return 0, 0, false
}

// parseRAChange reads "wN read_ahead_kb A -> B" (a change, not a revert).
func parseRAChange(c string) (from, to int, ok bool) {
	var w int
	if _, err := fmt.Sscanf(c, "w%d read_ahead_kb %d -> %d", &w, &from, &to); err != nil {
		return 0, 0, false
	}
	return from, to, true
}
