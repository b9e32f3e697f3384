package actuate

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// Integration tests on real loop devices. Each test attaches its own loop
// device to a 64 MiB file in t.TempDir(), checks through
// loop/backing_file that the device is its own before writing anything,
// and detaches it in t.Cleanup. No other device is ever written.

func sysRead(t *testing.T, name, attr string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", name, attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// sysWrite sets up the test's own loop device by hand (as an operator
// would), not through the Actuator.
func sysWrite(t *testing.T, name, attr, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", name, attr), []byte(v), 0); err != nil {
		t.Fatal(err)
	}
}

// needSchedulers needs the kernel to offer every scheduler of want for the
// device name: without one the test is skipped, or fails under CI=true
// (package need). Tests ask only for what they cannot do without
// (mq-deadline, which every kernel the project supports builds in); where
// any other scheduler does, they take one with offeredAmong.
func needSchedulers(t *testing.T, name string, want ...string) {
	t.Helper()
	list, _, err := sysfs.ParseScheduler(sysRead(t, name, AttrScheduler))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !slices.Contains(list, w) {
			need.Missing(t, "scheduler "+w, "kernel does not offer %s (offers %v)", w, list)
		}
		need.Have(t, "scheduler "+w)
	}
}

// offeredAmong returns the schedulers of prefer that the kernel offers for
// the device name, in prefer's order (bfq and kyber are optional in a
// kernel's build: this project's 6.18 test machines have no bfq). Fewer
// than atLeast skips the test, or fails it under CI=true.
func offeredAmong(t *testing.T, name string, atLeast int, prefer ...string) []string {
	t.Helper()
	list, _, err := sysfs.ParseScheduler(sysRead(t, name, AttrScheduler))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range prefer {
		if slices.Contains(list, p) {
			out = append(out, p)
		}
	}
	if len(out) < atLeast {
		need.Missing(t, "schedulers", "kernel offers %v: fewer than %d of %v", list, atLeast, prefer)
	}
	need.Have(t, "schedulers")
	t.Logf("schedulers used: %v (the kernel offers %v)", out, list)
	return out
}

func newLoopActuator(t *testing.T) *Actuator {
	t.Helper()
	// Claims in the test's own directory, not the host's /run.
	a, err := Open(Options{StateDir: t.TempDir(), ClaimDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func assertSameQueue(t *testing.T, name string, want map[string]string) {
	t.Helper()
	if diff := loopdev.Diff(want, loopdev.SnapshotQueue(t, name)); diff != "" {
		t.Errorf("/sys/block/%s/queue differs from before:\n%s", name, diff)
	} else {
		t.Logf("all %d files under /sys/block/%s/queue equal their snapshot", len(want), name)
	}
}

// TestLoopApplyRevert applies one setting per scheduler the kernel offers
// among bfq, kyber and mq-deadline (at least two), then reverts.
func TestLoopApplyRevert(t *testing.T) {
	name := loopdev.New(t, 64<<20)
	needSchedulers(t, name, "none", "mq-deadline")
	use := offeredAmong(t, name, 2, "bfq", "kyber", "mq-deadline")
	d, err := sysfs.Read("", name)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Loop || d.SizeBytes != 64<<20 || d.Dev != d.Major<<20|d.Minor || d.Major != 7 || d.BackingFile == "" {
		t.Errorf("sysfs.Read(%s) = %+v", name, d)
	}
	before := loopdev.SnapshotQueue(t, name)
	a := newLoopActuator(t)

	steps := []struct {
		s     Setting
		sched string
		check map[string]string
	}{
		{Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 512}, "bfq",
			map[string]string{"queue/iosched/slice_idle": "0", "queue/iosched/slice_idle_us": "0", "queue/read_ahead_kb": "512"}},
		{Setting{Scheduler: "kyber", Tunables: sched.Tunables{"read_lat_nsec": 1000000}}, "kyber",
			map[string]string{"queue/iosched/read_lat_nsec": "1000000", "queue/read_ahead_kb": "512"}},
		{Setting{Scheduler: "mq-deadline", Tunables: sched.Tunables{"fifo_batch": 8}}, "mq-deadline",
			map[string]string{"queue/iosched/fifo_batch": "8"}},
	}
	steps = slices.DeleteFunc(steps, func(st struct {
		s     Setting
		sched string
		check map[string]string
	}) bool {
		return !slices.Contains(use, st.sched)
	})
	if use[0] != "bfq" {
		// read_ahead_kb 512 was bfq's step's: give it to the first.
		steps[0].s.ReadAheadKiB = 512
	}
	for i, st := range steps {
		res, err := a.Apply(name, st.s)
		if err != nil {
			t.Fatalf("step %d: Apply(%+v): %v", i, st.s, err)
		}
		if got := sysRead(t, name, AttrScheduler); !strings.Contains(got, "["+st.sched+"]") {
			t.Errorf("step %d: %s", i, got)
		}
		for attr, want := range st.check {
			if got := sysRead(t, name, attr); got != want {
				t.Errorf("step %d: %s = %s, want %s", i, attr, got, want)
			}
		}
		t.Logf("step %d: wrote %v; nr_requests %s, wbt_lat_usec %s", i, res.Written,
			res.After.Queue["nr_requests"], res.After.Queue["wbt_lat_usec"])
	}
	if err := a.Revert(name); err != nil {
		t.Fatal(err)
	}
	assertSameQueue(t, name, before)
}

// TestLoopRevertHandTuned: the original is not the kernel default, and
// includes attributes a switch resets but shadowtune never sets.
func TestLoopRevertHandTuned(t *testing.T) {
	name := loopdev.New(t, 64<<20)
	needSchedulers(t, name, "mq-deadline", "none")
	use := offeredAmong(t, name, 1, "bfq", "kyber")
	sysWrite(t, name, AttrScheduler, "mq-deadline")
	sysWrite(t, name, "queue/iosched/read_expire", "200")
	sysWrite(t, name, "queue/iosched/writes_starved", "3")
	if _, err := os.Stat(filepath.Join("/sys/block", name, "queue/iosched/prio_aging_expire")); err == nil {
		sysWrite(t, name, "queue/iosched/prio_aging_expire", "4000")
	}
	sysWrite(t, name, "queue/nr_requests", "64")
	// (wbt_lat_usec is left alone: a write makes writeback throttling
	// "manual" for the life of the device, which no sysfs file shows.)
	sysWrite(t, name, AttrReadAhead, "256")
	before := loopdev.SnapshotQueue(t, name)

	a := newLoopActuator(t)
	var settings []Setting
	for _, s := range []Setting{
		{Scheduler: "bfq", Tunables: sched.Tunables{"low_latency": 0}},
		{Scheduler: "kyber", ReadAheadKiB: 1024},
	} {
		if slices.Contains(use, s.Scheduler) {
			settings = append(settings, s)
		}
	}
	for _, s := range append(settings, Setting{Scheduler: "none"}) {
		if _, err := a.Apply(name, s); err != nil {
			t.Fatalf("Apply(%+v): %v", s, err)
		}
	}
	if got := sysRead(t, name, "queue/nr_requests"); got == "64" {
		t.Logf("note: nr_requests kept 64 across switches on this kernel")
	} else {
		t.Logf("kernel reset nr_requests to %s on the switch", got)
	}
	if err := a.Revert(name); err != nil {
		t.Fatal(err)
	}
	assertSameQueue(t, name, before)
}

// TestLoopCrash kills a child actuator right after it switched the real
// device's scheduler, then reverts from a new actuator.
//
// The setting is bfq's slice_idle=0 where the kernel offers bfq, else
// kyber's read_lat_nsec, else mq-deadline's fifo_batch: a scheduler switch
// and one of the new scheduler's tunables either way.
func TestLoopCrash(t *testing.T) {
	name := loopdev.New(t, 64<<20)
	use := offeredAmong(t, name, 1, "bfq", "kyber", "mq-deadline")
	set := map[string]Setting{
		"bfq":         {Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 512},
		"kyber":       {Scheduler: "kyber", Tunables: sched.Tunables{"read_lat_nsec": 1000000}, ReadAheadKiB: 512},
		"mq-deadline": {Scheduler: "mq-deadline", Tunables: sched.Tunables{"fifo_batch": 8}, ReadAheadKiB: 512},
	}[use[0]]
	tunable := slices.Collect(maps.Keys(set.Tunables))[0]
	if cur := loopdev.Current(sysRead(t, name, AttrScheduler)); cur == set.Scheduler {
		// A detached loop device keeps the queue its last user left, and
		// the crash must be in a switch: start this one from none (every
		// blk-mq queue offers it; loopdev puts back what it had at the end).
		t.Logf("%s came on %s (left by its last user): starting from none", name, cur)
		sysWrite(t, name, AttrScheduler, "none")
	}
	before := loopdev.SnapshotQueue(t, name)
	stateDir, claimDir := t.TempDir(), t.TempDir()
	for _, point := range []string{"wrote " + AttrScheduler, "wrote queue/iosched/" + tunable} {
		runCrashChild(t, envCrashReal+"=1", envCrashState+"="+stateDir, envCrashPoint+"="+point,
			envCrashDev+"="+name, envCrashClaims+"="+claimDir, envCrashSet+"="+settingsJSON(t, set))
		if got := sysRead(t, name, AttrScheduler); !strings.Contains(got, "["+set.Scheduler+"]") {
			t.Fatalf("child did not switch before dying: %s", got)
		}
		a, err := open(Options{StateDir: stateDir, ClaimDir: claimDir}, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Interrupted(); !slices.Equal(got, []string{name}) {
			t.Errorf("Interrupted = %v", got)
		}
		if err := a.Revert(name); err != nil {
			t.Fatal(err)
		}
		a.Close()
		assertSameQueue(t, name, before)
	}
}

// TestLoopKernelBehaviour pins down the kernel semantics the package relies
// on, on the test's own loop device.
func TestLoopKernelBehaviour(t *testing.T) {
	name := loopdev.New(t, 64<<20)
	needSchedulers(t, name, "mq-deadline")
	away := offeredAmong(t, name, 1, "bfq", "kyber", "none")[0]
	a := newLoopActuator(t)

	// An unknown scheduler: EINVAL from the kernel → ErrRejected.
	err := a.write(name, AttrScheduler, "no-such-elevator")
	if !errors.Is(err, ErrRejected) || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("unknown scheduler: %v, want ErrRejected (EINVAL)", err)
	}
	t.Logf("unknown scheduler: %v", err)
	// A non-number tunable: EINVAL.
	sysWrite(t, name, AttrScheduler, "mq-deadline")
	if err := a.write(name, "queue/iosched/fifo_batch", "abc"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("fifo_batch=abc: %v", err)
	}
	// Rewriting the current scheduler keeps its tunables.
	sysWrite(t, name, "queue/iosched/fifo_batch", "7")
	sysWrite(t, name, AttrScheduler, "mq-deadline")
	if got := sysRead(t, name, "queue/iosched/fifo_batch"); got != "7" {
		t.Errorf("same-scheduler write reset fifo_batch to %s", got)
	}
	// Switching away and back resets them.
	sysWrite(t, name, AttrScheduler, away)
	sysWrite(t, name, AttrScheduler, "mq-deadline")
	if got := sysRead(t, name, "queue/iosched/fifo_batch"); got != "16" {
		t.Errorf("after a switch fifo_batch = %s, want the default 16", got)
	}
	// Read-ahead is whole pages: 5 KiB reads back as 4.
	sysWrite(t, name, AttrReadAhead, "5")
	if got, want := sysRead(t, name, AttrReadAhead), os.Getpagesize()/1024; got != strconv.Itoa(5/want*want) {
		t.Errorf("read_ahead_kb 5 read back as %s with %d KiB pages", got, want)
	}
	// A millisecond tunable below one jiffy: Apply reports the mismatch
	// and rolls back (unless HZ=1000, where 3 ms is exact).
	snap := loopdev.SnapshotQueue(t, name)
	_, err = a.Apply(name, Setting{Tunables: sched.Tunables{"write_expire": 3}})
	switch {
	case err == nil:
		t.Log("write_expire=3 is exact on this kernel (HZ=1000)")
		if err := a.Revert(name); err != nil {
			t.Fatal(err)
		}
	case errors.Is(err, ErrMismatch):
		t.Logf("as expected: %v", err)
		assertSameQueue(t, name, snap)
		if err := a.Revert(name); err != nil { // nothing recorded: no-op
			t.Fatal(err)
		}
	default:
		t.Fatalf("write_expire=3: %v", err)
	}
}
