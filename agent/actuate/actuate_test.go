package actuate

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"

	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// fakeRoot copies the fake sysfs tree of package sysfs into a temporary
// directory and returns it.
func fakeRoot(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS("../sysfs/testdata")); err != nil {
		t.Fatal(err)
	}
	return dst
}

type env struct {
	root, stateDir string
	fake           *actuatetest.Store
	a              *Actuator
	// snaps are the device trees before the test changed anything.
	snaps map[string]map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{root: fakeRoot(t), stateDir: filepath.Join(t.TempDir(), "state")}
	e.fake = actuatetest.New(e.root)
	e.snaps = map[string]map[string]string{}
	for _, d := range []string{"sda", "nvme0n1", "vda", "loop3", "loop7", "zram0", "dm-0"} {
		e.snaps[d] = e.snapshot(t, d)
	}
	e.a = e.open(t)
	return e
}

func (e *env) open(t *testing.T) *Actuator {
	t.Helper()
	a, err := NewWithStore(e.fake, e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func (e *env) snapshot(t *testing.T, dev string) map[string]string {
	t.Helper()
	s, err := e.fake.Snapshot(dev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// assertPristine checks that every file of dev is as before the test.
func (e *env) assertPristine(t *testing.T, devs ...string) {
	t.Helper()
	for _, dev := range devs {
		got := e.snapshot(t, dev)
		if diff := loopdev.Diff(e.snaps[dev], got); diff != "" {
			t.Errorf("%s differs from its original:\n%s", dev, diff)
		}
	}
}

func (e *env) read(t *testing.T, dev, attr string) string {
	t.Helper()
	b, err := os.ReadFile(e.fake.Path(dev, attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestApplyRevertSequence(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		s       Setting
		sched   string
		check   map[string]string
		written []string
	}{
		{Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 512}, "bfq",
			map[string]string{"queue/iosched/slice_idle": "0", "queue/iosched/slice_idle_us": "0", "queue/read_ahead_kb": "512",
				"queue/nr_requests": "64", "queue/wbt_lat_usec": "0"},
			[]string{AttrScheduler, "queue/iosched/slice_idle", AttrReadAhead}},
		{Setting{Scheduler: "kyber", Tunables: sched.Tunables{"read_lat_nsec": 1000000}}, "kyber",
			map[string]string{"queue/iosched/read_lat_nsec": "1000000", "queue/iosched/write_lat_nsec": "10000000",
				"queue/read_ahead_kb": "512", "queue/wbt_lat_usec": "75000"},
			[]string{AttrScheduler, "queue/iosched/read_lat_nsec"}},
		{Setting{Scheduler: "mq-deadline", Tunables: sched.Tunables{"fifo_batch": 8}}, "mq-deadline",
			map[string]string{"queue/iosched/fifo_batch": "8", "queue/iosched/read_expire": "500"},
			[]string{AttrScheduler, "queue/iosched/fifo_batch"}},
		// Tunables alone, for the current scheduler.
		{Setting{Tunables: sched.Tunables{"read_expire": 248}}, "mq-deadline",
			map[string]string{"queue/iosched/read_expire": "248", "queue/iosched/fifo_batch": "8"},
			[]string{"queue/iosched/read_expire"}},
		// Already so: nothing written.
		{Setting{Scheduler: "mq-deadline", Tunables: sched.Tunables{"read_expire": 248}}, "mq-deadline", nil, nil},
	}
	for i, st := range steps {
		res, err := e.a.Apply("sda", st.s)
		if err != nil {
			t.Fatalf("step %d: Apply(%+v): %v", i, st.s, err)
		}
		if !slices.Equal(res.Written, st.written) {
			t.Errorf("step %d: Written = %v, want %v", i, res.Written, st.written)
		}
		if res.After.Scheduler != st.sched {
			t.Errorf("step %d: After.Scheduler = %q", i, res.After.Scheduler)
		}
		if got := e.read(t, "sda", AttrScheduler); !strings.Contains(got, "["+st.sched+"]") {
			t.Errorf("step %d: scheduler file %q", i, got)
		}
		for attr, want := range st.check {
			if got := e.read(t, "sda", attr); got != want {
				t.Errorf("step %d: %s = %q, want %q", i, attr, got, want)
			}
		}
		if len(e.a.Interrupted()) != 0 {
			t.Errorf("step %d: Interrupted = %v after a clean Apply", i, e.a.Interrupted())
		}
	}
	orig := e.a.Originals()["sda"]
	if orig.State.Scheduler != "mq-deadline" || orig.State.ReadAheadKiB != 128 ||
		orig.State.Tunables["read_expire"] != "500" || orig.State.Queue["nr_requests"] != "64" || orig.MajorMinor != "8:0" || orig.DiskSeq != 1 {
		t.Errorf("original record = %+v", orig)
	}
	if err := e.a.Revert("sda"); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	e.assertPristine(t, "sda", "nvme0n1", "vda", "loop3", "loop7", "zram0", "dm-0")
	if len(e.a.Originals()) != 0 {
		t.Errorf("record kept after a clean revert: %v", e.a.Originals())
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "sda.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file still there: %v", err)
	}
	for _, w := range e.fake.Writes() {
		if !strings.HasPrefix(w, "sda ") {
			t.Errorf("wrote to another device: %s", w)
		}
	}
	// Revert again: nothing to do.
	if err := e.a.Revert("sda"); err != nil {
		t.Errorf("second Revert: %v", err)
	}
}

func TestRevertRestoresWhatASwitchResets(t *testing.T) {
	e := newEnv(t)
	// The operator had tuned sda by hand, including attributes shadowtune
	// never writes itself.
	for attr, v := range map[string]string{
		"queue/iosched/async_depth": "48", "queue/iosched/prio_aging_expire": "2000",
		"queue/iosched/read_expire": "100", "queue/nr_requests": "48", "queue/wbt_lat_usec": "5000",
	} {
		if err := os.WriteFile(e.fake.Path("sda", attr), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.snaps["sda"] = e.snapshot(t, "sda")
	if _, err := e.a.Apply("sda", Setting{Scheduler: "bfq"}); err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, "sda", "queue/nr_requests"); got != "64" {
		t.Fatalf("fake did not reset nr_requests: %s", got)
	}
	if err := e.a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda")
	// Revert wrote back only what differed.
	reverted := e.fake.Writes()[1:]
	want := []string{"sda queue/scheduler=mq-deadline", "sda queue/nr_requests=48",
		"sda queue/iosched/async_depth=48", "sda queue/iosched/prio_aging_expire=2000", "sda queue/iosched/read_expire=100"}
	if !slices.Equal(reverted, want) {
		t.Errorf("revert writes = %q, want %q", reverted, want)
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		dev  string
		s    Setting
		kind error
		in   string // substring of the message
	}{
		{"unknown scheduler", "sda", Setting{Scheduler: "cfq"}, ErrInvalidSetting, `"cfq"`},
		{"not offered", "dm-0", Setting{Scheduler: "bfq"}, ErrNotAllowed, "offers only none"},
		{"no scheduler file", "zram0", Setting{Scheduler: "bfq"}, ErrNotAllowed, "zram0/queue/scheduler"},
		{"tunable not allowlisted", "sda", Setting{Tunables: sched.Tunables{"async_depth": 8}}, ErrNotAllowed, "queue/iosched/async_depth"},
		{"tunable of another scheduler", "sda", Setting{Scheduler: "bfq", Tunables: sched.Tunables{"read_lat_nsec": 1}}, ErrNotAllowed, `"bfq"`},
		{"tunable with none", "nvme0n1", Setting{Tunables: sched.Tunables{"fifo_batch": 1}}, ErrNotAllowed, `"none"`},
		{"negative tunable", "sda", Setting{Tunables: sched.Tunables{"fifo_batch": -1}}, ErrInvalidSetting, "negative"},
		{"both slice_idle", "sda", Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0, "slice_idle_us": 0}}, ErrInvalidSetting, "not both"},
		{"read-ahead not whole pages", "sda", Setting{ReadAheadKiB: 130}, ErrInvalidSetting, "multiple"},
		{"negative read-ahead", "sda", Setting{ReadAheadKiB: -4}, ErrInvalidSetting, "negative"},
		{"partition", "sda1", Setting{ReadAheadKiB: 256}, ErrDeviceGone, "sda1"},
		{"unknown device", "sdz", Setting{ReadAheadKiB: 256}, ErrDeviceGone, "sdz/dev"},
		{"path in name", "../block/sda", Setting{ReadAheadKiB: 256}, ErrInvalidSetting, "device name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.a.Apply(tc.dev, tc.s)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.kind, tc.in)
			}
		})
	}
	if w := e.fake.Writes(); len(w) != 0 {
		t.Errorf("invalid settings wrote %v", w)
	}
	if o := e.a.Originals(); len(o) != 0 {
		t.Errorf("invalid settings recorded %v", o)
	}
	e.assertPristine(t, "sda", "nvme0n1", "zram0", "dm-0")
}

func TestReadAheadOnlyDevices(t *testing.T) {
	e := newEnv(t)
	for _, dev := range []string{"zram0", "dm-0", "nvme0n1"} {
		if _, err := e.a.Apply(dev, Setting{ReadAheadKiB: 1024}); err != nil {
			t.Fatalf("%s: %v", dev, err)
		}
		if got := e.read(t, dev, AttrReadAhead); got != "1024" {
			t.Errorf("%s: read_ahead_kb = %s", dev, got)
		}
	}
	done, err := e.a.RevertAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dm-0", "nvme0n1", "zram0"}; !slices.Equal(done, want) {
		t.Errorf("RevertAll = %v, want %v", done, want)
	}
	e.assertPristine(t, "zram0", "dm-0", "nvme0n1")
}

func TestReadOnlySysfs(t *testing.T) {
	e := newEnv(t)
	e.fake.ReadOnly = true
	_, err := e.a.Apply("sda", Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 512})
	if !errors.Is(err, ErrReadOnly) || !errors.Is(err, syscall.EROFS) {
		t.Fatalf("err = %v, want ErrReadOnly", err)
	}
	if errors.Is(err, ErrRollback) {
		t.Errorf("rollback reported as failed: %v", err)
	}
	if want := e.fake.Path("sda", AttrScheduler); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "EROFS") {
		t.Errorf("message %q does not name %s and EROFS", err, want)
	}
	e.assertPristine(t, "sda")
	if o := e.a.Originals(); len(o) != 0 {
		t.Errorf("a change that never happened left a record: %v", o)
	}
	if ents, _ := os.ReadDir(e.stateDir); len(ents) != 1 { // .lock
		t.Errorf("state dir holds %v", ents)
	}
}

// TestFailureMidChangeRollsBack fails the last write of a change with each
// errno and checks the device is exactly as before.
func TestFailureMidChangeRollsBack(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		kind  error
	}{
		{syscall.EROFS, ErrReadOnly},
		{syscall.EBUSY, ErrBusy},
		{syscall.EACCES, ErrPermission},
		{syscall.EPERM, ErrPermission},
		{syscall.EINVAL, ErrRejected},
		{syscall.ENODEV, ErrDeviceGone},
		{syscall.EIO, nil},
	}
	for _, tc := range tests {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			e := newEnv(t)
			// A first, successful change, so the rollback target differs
			// from the original.
			if _, err := e.a.Apply("sda", Setting{Scheduler: "kyber", Tunables: sched.Tunables{"write_lat_nsec": 5000000}}); err != nil {
				t.Fatal(err)
			}
			mid := e.snapshot(t, "sda")
			e.fake.FailWrite = func(dev, attr, value string) error {
				if attr == AttrReadAhead && value == "512" {
					return &fs.PathError{Op: "write", Path: e.fake.Path(dev, attr), Err: tc.errno}
				}
				return nil
			}
			res, err := e.a.Apply("sda", Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 512})
			if err == nil {
				t.Fatal("no error")
			}
			var ce *ChangeError
			if !errors.As(err, &ce) || ce.Rollback != nil {
				t.Fatalf("err = %v, want a ChangeError with a clean rollback", err)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("err = %v, want kind %v", err, tc.kind)
			}
			if !errors.Is(err, tc.errno) {
				t.Errorf("err = %v does not wrap %v", err, tc.errno)
			}
			if !strings.Contains(err.Error(), e.fake.Path("sda", AttrReadAhead)) {
				t.Errorf("message does not name the file: %v", err)
			}
			if want := []string{AttrScheduler, "queue/iosched/slice_idle"}; !slices.Equal(res.Written, want) {
				t.Errorf("Written = %v, want %v", res.Written, want)
			}
			if diff := loopdev.Diff(mid, e.snapshot(t, "sda")); diff != "" {
				t.Errorf("not rolled back to the state before the change:\n%s", diff)
			}
			if len(e.a.Interrupted()) != 0 {
				t.Errorf("journal left after a clean rollback")
			}
			e.fake.FailWrite = nil
			if err := e.a.Revert("sda"); err != nil {
				t.Fatal(err)
			}
			e.assertPristine(t, "sda")
		})
	}
}

func TestReadBackMismatch(t *testing.T) {
	e := newEnv(t)
	// 3 ms is less than a jiffy at HZ=250: the kernel shows 4.
	_, err := e.a.Apply("sda", Setting{ReadAheadKiB: 256, Tunables: sched.Tunables{"write_expire": 3}})
	var ae *AttrError
	if !errors.Is(err, ErrMismatch) || !errors.As(err, &ae) || ae.Value != "3" || ae.Got != "4" {
		t.Fatalf("err = %v, want a mismatch 3 → 4", err)
	}
	e.assertPristine(t, "sda")
}

func TestRollbackFailure(t *testing.T) {
	e := newEnv(t)
	// The change fails at read-ahead; the rollback cannot switch the
	// scheduler back either.
	e.fake.FailWrite = func(dev, attr, value string) error {
		if attr == AttrReadAhead || (attr == AttrScheduler && value == "mq-deadline") {
			return &fs.PathError{Op: "write", Path: e.fake.Path(dev, attr), Err: syscall.EBUSY}
		}
		return nil
	}
	_, err := e.a.Apply("sda", Setting{Scheduler: "bfq", ReadAheadKiB: 512})
	if !errors.Is(err, ErrRollback) || !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want ErrRollback and ErrBusy", err)
	}
	if got := e.a.Interrupted(); !slices.Equal(got, []string{"sda"}) {
		t.Errorf("Interrupted = %v", got)
	}
	// A restart sees the same.
	e.a.Close()
	e.fake.FailWrite = nil
	a2 := e.open(t)
	if got := a2.Interrupted(); !slices.Equal(got, []string{"sda"}) {
		t.Errorf("after restart Interrupted = %v", got)
	}
	// The next Apply first restores the pre-change state, then applies.
	if _, err := a2.Apply("sda", Setting{ReadAheadKiB: 256}); err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, "sda", AttrScheduler); !strings.Contains(got, "[mq-deadline]") {
		t.Errorf("scheduler %q: interrupted change not undone", got)
	}
	if err := a2.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda")
}

func TestDeviceGone(t *testing.T) {
	e := newEnv(t)
	for _, dev := range []string{"sda", "loop3", "nvme0n1"} {
		if _, err := e.a.Apply(dev, Setting{Scheduler: "kyber"}); err != nil {
			t.Fatal(err)
		}
	}
	// loop3 is detached; nvme0n1's name now belongs to a new disk.
	if err := os.RemoveAll(e.fake.Path("loop3", "")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.fake.Path("nvme0n1", "diskseq"), []byte("77\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done, err := e.a.RevertAll()
	if !slices.Equal(done, []string{"sda"}) {
		t.Errorf("reverted %v, want [sda]", done)
	}
	if !errors.Is(err, ErrDeviceGone) || !strings.Contains(err.Error(), "loop3") || !strings.Contains(err.Error(), "nvme0n1") {
		t.Fatalf("err = %v", err)
	}
	e.assertPristine(t, "sda")
	if got := slices.Sorted(maps.Keys(e.a.Originals())); !slices.Equal(got, []string{"loop3", "nvme0n1"}) {
		t.Errorf("records = %v", got)
	}
	// The new nvme0n1 was not touched.
	if got := e.read(t, "nvme0n1", AttrScheduler); !strings.Contains(got, "[kyber]") {
		t.Errorf("the replaced device was written: %s", got)
	}
	if _, err := e.a.Apply("nvme0n1", Setting{Scheduler: "none"}); !errors.Is(err, ErrDeviceGone) {
		t.Errorf("Apply on a replaced device: %v", err)
	}
	for _, dev := range []string{"loop3", "nvme0n1"} {
		if err := e.a.Forget(dev); err != nil {
			t.Fatal(err)
		}
	}
	if o := e.a.Originals(); len(o) != 0 {
		t.Errorf("records after Forget: %v", o)
	}
}

func TestOriginalNeverOverwritten(t *testing.T) {
	e := newEnv(t)
	for _, s := range []Setting{{Scheduler: "bfq"}, {Scheduler: "kyber"}, {ReadAheadKiB: 64}} {
		if _, err := e.a.Apply("vda", s); err != nil {
			t.Fatal(err)
		}
		e.a.Close()
		e.a = e.open(t) // a restart between changes
	}
	if o := e.a.Originals()["vda"]; o.State.Scheduler != "mq-deadline" || o.State.ReadAheadKiB != 8192 {
		t.Fatalf("original = %+v", o.State)
	}
	// A stray second record creation is refused.
	o := e.a.Originals()["vda"]
	if err := writeState(e.stateDir, &o, true); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("writeState(create) over an existing record: %v", err)
	}
	if err := e.a.Revert("vda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "vda")
}

func TestStateFile(t *testing.T) {
	e := newEnv(t)
	if _, err := e.a.Apply("sda", Setting{Scheduler: "bfq"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.stateDir, "sda.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"version": 1`, `"device": "sda"`, `"dev": "8:0"`, `"diskseq": 1`,
		`"scheduler": "mq-deadline"`, `"read_expire": "500"`, `"nr_requests": "64"`, `"read_ahead_kb": 128`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("state file lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "in_progress") {
		t.Errorf("journal left in a finished change:\n%s", b)
	}
	e.a.Close()

	corrupt := []struct {
		name, content, in string
	}{
		{"truncated", string(b[:len(b)/2]), "unexpected EOF"},
		{"empty", "", "EOF"},
		{"future version", strings.Replace(string(b), `"version": 1`, `"version": 2`, 1), "version 2"},
		{"wrong device", strings.Replace(string(b), `"device": "sda"`, `"device": "sdb"`, 1), `"sdb"`},
		{"unknown field", strings.Replace(string(b), `"version": 1`, `"version": 1, "extra": true`, 1), "extra"},
		{"no original", `{"version": 1, "device": "sda", "dev": "8:0"}`, "original"},
		{"path in tunable", strings.Replace(string(b), `"read_expire"`, `"../../scheduler"`, 1), "bad tunable"},
	}
	for _, tc := range corrupt {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := NewWithStore(e.fake, e.stateDir)
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("New: %v", err)
			}
			if got, _ := os.ReadFile(path); string(got) != tc.content {
				t.Error("corrupt state file was modified")
			}
		})
	}
	// Restored, with a stale temporary file from a crash mid-write.
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(e.stateDir, ".sda.json.tmp123")
	if err := os.WriteFile(stale, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := e.open(t)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if err := a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda")
}

func TestStateDirLocked(t *testing.T) {
	e := newEnv(t)
	if _, err := NewWithStore(e.fake, e.stateDir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second actuator on one state dir: %v", err)
	}
	e.a.Close()
	if _, err := e.a.Apply("sda", Setting{Scheduler: "bfq"}); err == nil {
		t.Error("Apply after Close succeeded")
	}
	e.open(t)
}

func TestConcurrent(t *testing.T) {
	e := newEnv(t)
	devs := []string{"sda", "vda", "nvme0n1", "loop3"}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 4 {
		for _, dev := range devs {
			wg.Go(func() {
				s := []Setting{{Scheduler: "bfq"}, {Scheduler: "kyber"}, {ReadAheadKiB: 256}, {Scheduler: "mq-deadline", Tunables: sched.Tunables{"fifo_batch": 4}}}[i]
				if _, err := e.a.Apply(dev, s); err != nil {
					errs <- err
				}
				_ = e.a.Originals()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	done, err := e.a.RevertAll()
	if err != nil || len(done) != len(devs) {
		t.Fatalf("RevertAll = %v, %v", done, err)
	}
	e.assertPristine(t, devs...)
}

func TestErrorMessages(t *testing.T) {
	e := &AttrError{Op: "write", Device: "sda", Path: "/sys/block/sda/queue/scheduler", Value: "bfq",
		Kind: ErrBusy, Err: &fs.PathError{Op: "write", Path: "/sys/block/sda/queue/scheduler", Err: syscall.EBUSY}}
	want := `actuate: write "bfq" to /sys/block/sda/queue/scheduler: busy, retry later (EBUSY: device or resource busy)`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	if !errors.Is(e, ErrBusy) || !errors.Is(e, syscall.EBUSY) {
		t.Error("errors.Is does not see both kinds")
	}
	v := &AttrError{Op: "verify", Path: "/sys/block/sda/queue/read_ahead_kb", Value: "5", Got: "4", Kind: ErrMismatch}
	if got := v.Error(); got != `actuate: /sys/block/sda/queue/read_ahead_kb: wrote "5", read back "4": read-back differs from the value written` {
		t.Errorf("verify message: %s", got)
	}
}

func TestClassifyWriteENOENT(t *testing.T) {
	e := newEnv(t)
	// The kernel's elv_iosched_store returns ENOENT while elevator
	// switching is blocked: the file exists, the device too.
	e.fake.FailWrite = func(dev, attr, value string) error {
		return &fs.PathError{Op: "write", Path: e.fake.Path(dev, attr), Err: syscall.ENOENT}
	}
	_, err := e.a.Apply("sda", Setting{Scheduler: "bfq"})
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	e.assertPristine(t, "sda")
}

func TestSettingHelpers(t *testing.T) {
	if !(Setting{}).IsZero() || (Setting{ReadAheadKiB: 4}).IsZero() {
		t.Error("IsZero")
	}
	if got := Schedulers(); !reflect.DeepEqual(got, []string{"bfq", "kyber", "mq-deadline", "none"}) {
		t.Errorf("Schedulers = %v", got)
	}
	if got := AllowedTunables("kyber"); !reflect.DeepEqual(got, []string{"read_lat_nsec", "write_lat_nsec"}) {
		t.Errorf("AllowedTunables(kyber) = %v", got)
	}
	if AllowedTunables("none") != nil || AllowedTunables("cfq") != nil {
		t.Error("AllowedTunables of none/cfq not nil")
	}
	e := newEnv(t)
	res, err := e.a.Apply("sda", Setting{})
	if err != nil || len(res.Written) != 0 || len(e.a.Originals()) != 0 {
		t.Errorf("zero Setting: %+v, %v, records %v", res, err, e.a.Originals())
	}
}
