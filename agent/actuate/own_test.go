package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// Issue 16, finding 1: two agents (two state directories) on one device.
// The second must be refused, naming the owner, and must not record the
// first one's change as the original.
func TestSecondActuatorRefused(t *testing.T) {
	e := newEnv(t)
	if _, err := e.a.Apply("sda", Setting{ReadAheadKiB: 24}); err != nil {
		t.Fatal(err)
	}
	dirB := filepath.Join(t.TempDir(), "stateB")
	b, err := NewWithStore(e.fake, dirB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Apply("sda", Setting{Scheduler: "bfq"})
	var oe *OwnedError
	if !errors.Is(err, ErrOwned) || !errors.As(err, &oe) {
		t.Fatalf("second actuator's Apply: %v, want ErrOwned", err)
	}
	if oe.StateDir != e.a.StateDir() || oe.PID != os.Getpid() || !oe.Live || oe.Device != "sda" || oe.MajorMinor != "8:0" {
		t.Errorf("OwnedError = %+v, want state dir %s pid %d", oe, e.a.StateDir(), os.Getpid())
	}
	if msg := err.Error(); !strings.Contains(msg, e.a.StateDir()) || !strings.Contains(msg, strconv.Itoa(os.Getpid())) {
		t.Errorf("message does not name the owner: %s", msg)
	}
	if got := e.read(t, "sda", AttrScheduler); !strings.Contains(got, "[mq-deadline]") {
		t.Errorf("second actuator switched the scheduler: %s", got)
	}
	if len(b.Originals()) != 0 {
		t.Errorf("second actuator recorded %v", b.Originals())
	}
	if err := b.Claim("sda"); !errors.Is(err, ErrOwned) {
		t.Errorf("Claim of an owned device: %v", err)
	}
	// Other devices are free.
	if err := b.Claim("vda"); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim("vda"); err != nil {
		t.Errorf("second Claim by the owner: %v", err)
	}
	if _, err := e.a.Apply("vda", Setting{ReadAheadKiB: 64}); !errors.Is(err, ErrOwned) {
		t.Errorf("first actuator on the device the second claimed: %v", err)
	}
	if err := b.Release("vda"); err != nil {
		t.Fatal(err)
	}
	// The owner reverts; its claim goes with its record.
	if err := e.a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda", "vda")
	if got := e.a.Claimed(); len(got) != 0 {
		t.Errorf("claims left after the revert: %v", got)
	}
	if _, err := b.Apply("sda", Setting{Scheduler: "bfq"}); err != nil {
		t.Fatalf("after the owner's revert: %v", err)
	}
	if o := b.Originals()["sda"]; o.State.ReadAheadKiB != 128 || o.State.Scheduler != "mq-deadline" {
		t.Errorf("second actuator's original = %+v", o.State)
	}
	// Revert by a non-owner is refused too.
	if err := e.a.Claim("sda"); !errors.Is(err, ErrOwned) {
		t.Errorf("claim of b's device: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(e.fake.ClaimDir()); len(ents) != 0 {
		t.Errorf("claim files left after Close: %v", ents)
	}
}

// An owner that died with the device changed keeps it: its state
// directory is the only one that knows the original.
func TestDeadOwnerWithRecordRefused(t *testing.T) {
	e := newEnv(t)
	if _, err := e.a.Apply("sda", Setting{Scheduler: "bfq"}); err != nil {
		t.Fatal(err)
	}
	// "Crash": the flocks go, the claim file stays.
	e.a.claims["sda"].f.Close()
	e.a.lock.Close()
	e.a.lock = nil
	b, err := NewWithStore(e.fake, filepath.Join(t.TempDir(), "stateB"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Apply("sda", Setting{Scheduler: "kyber"})
	var oe *OwnedError
	if !errors.As(err, &oe) || oe.Live || oe.StateDir != e.a.StateDir() || !strings.Contains(err.Error(), "--revert --state-dir "+e.a.StateDir()) {
		t.Fatalf("Apply over a dead owner's change: %v", err)
	}
	// The dead owner's state directory reverts it, then anyone may.
	a2, err := NewWithStore(e.fake, e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := a2.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	a2.Close()
	e.assertPristine(t, "sda")
	if err := b.Claim("sda"); err != nil {
		t.Errorf("claim after the revert: %v", err)
	}
}

// Finding 1 on a real device, as reported: loop on mq-deadline with
// read_ahead_kb 1024; A sets 24; B must not touch it; A's revert gives
// 1024 back.
func TestLoopTwoActuators(t *testing.T) {
	d := loopdev.NewForTest(t, 64<<20)
	name := d.Name
	needSchedulers(t, name, "mq-deadline")
	other := offeredAmong(t, name, 1, "bfq", "kyber", "none")[0]
	sysWrite(t, name, AttrScheduler, "mq-deadline")
	sysWrite(t, name, AttrReadAhead, "1024")
	before := loopdev.SnapshotQueue(t, name)
	claims := t.TempDir()
	a, err := Open(Options{StateDir: t.TempDir(), ClaimDir: claims})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(Options{StateDir: t.TempDir(), ClaimDir: claims})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Apply(name, Setting{ReadAheadKiB: 24}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(name, Setting{Scheduler: other}); !errors.Is(err, ErrOwned) || !strings.Contains(err.Error(), a.StateDir()) {
		t.Fatalf("B.Apply: %v, want ErrOwned naming %s", err, a.StateDir())
	} else {
		t.Logf("as expected: %v", err)
	}
	if err := b.Revert(name); err != nil { // B has no record: nothing to do
		t.Fatal(err)
	}
	if got := sysRead(t, name, AttrScheduler); !strings.Contains(got, "[mq-deadline]") {
		t.Errorf("B switched the scheduler: %s", got)
	}
	if err := a.Revert(name); err != nil {
		t.Fatal(err)
	}
	assertSameQueue(t, name, before)
	if got := sysRead(t, name, AttrReadAhead); got != "1024" {
		t.Errorf("read_ahead_kb = %s, want 1024", got)
	}
}

// Finding 2: a gone or replaced device never blocks the others; RevertAll
// sorts it apart.
func TestRevertAllReportsGoneApart(t *testing.T) {
	e := newEnv(t)
	for _, dev := range []string{"sda", "loop3", "nvme0n1"} {
		if _, err := e.a.Apply(dev, Setting{Scheduler: "kyber"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(e.fake.Path("loop3", "")); err != nil {
		t.Fatal(err)
	}
	done, err := e.a.RevertAll()
	var re *RevertError
	if !errors.As(err, &re) {
		t.Fatalf("RevertAll error %v is not a *RevertError", err)
	}
	if !slices.Equal(done, []string{"nvme0n1", "sda"}) || !re.AllRestored() || len(re.Gone) != 1 || re.Gone[0].Device != "loop3" || len(re.Failed) != 0 {
		t.Fatalf("RevertAll = %v, %+v", done, re)
	}
	e.assertPristine(t, "sda", "nvme0n1")
	// The next run is not blocked: a new actuator applies and reverts.
	e.a.Close()
	a := e.open(t)
	if _, err := a.Apply("sda", Setting{ReadAheadKiB: 256}); err != nil {
		t.Fatal(err)
	}
	if err := a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	if err := a.Forget("loop3"); err != nil {
		t.Fatal(err)
	}
	if done, err := a.RevertAll(); err != nil || len(done) != 0 {
		t.Errorf("RevertAll after Forget = %v, %v", done, err)
	}
}

// A loop device detached and another attached under its name is a new
// device: never written. The same disk after a reboot is restored.
func TestIdentityAcrossReboot(t *testing.T) {
	e := newEnv(t)
	bootFile := filepath.Join(e.root, "proc/sys/kernel/random/boot_id")
	setBoot := func(id string) {
		if err := os.MkdirAll(filepath.Dir(bootFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bootFile, []byte(id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setBoot("boot-1")
	e.a.Close()
	a := e.open(t)
	for _, dev := range []string{"sda", "vda", "loop3", "loop7"} {
		if _, err := a.Apply(dev, Setting{Scheduler: "kyber"}); err != nil {
			t.Fatal(err)
		}
	}
	if o := a.Originals()["sda"]; o.BootID != "boot-1" || o.StableID == "" {
		t.Errorf("sda record: boot %q stable id %q", o.BootID, o.StableID)
	}
	// Same boot: loop7 replaced (new diskseq) is gone.
	if err := os.WriteFile(e.fake.Path("loop7", "diskseq"), []byte("999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Revert("loop7"); !errors.Is(err, ErrDeviceGone) {
		t.Errorf("replaced loop7: %v", err)
	}
	a.Close()
	// Reboot: every diskseq changes.
	setBoot("boot-2")
	for _, dev := range []string{"sda", "vda", "loop3"} {
		if err := os.WriteFile(e.fake.Path(dev, "diskseq"), []byte("500\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a = e.open(t)
	done, err := a.RevertAll()
	var re *RevertError
	if !errors.As(err, &re) || !re.AllRestored() {
		t.Fatalf("RevertAll: %v", err)
	}
	if !slices.Equal(done, []string{"sda", "vda"}) {
		t.Errorf("restored after a reboot: %v, want the disks with a wwid/serial", done)
	}
	var gone []string
	for _, g := range re.Gone {
		gone = append(gone, g.Device)
	}
	if !slices.Equal(gone, []string{"loop3", "loop7"}) {
		t.Errorf("gone = %v", gone)
	}
	if got := e.read(t, "loop3", AttrScheduler); !strings.Contains(got, "[kyber]") {
		t.Errorf("a loop device of a new boot was written: %s", got)
	}
	// A disk whose serial changed across the reboot is another disk.
	e.snaps["vda"] = e.snapshot(t, "vda")
	if _, err := a.Apply("vda", Setting{ReadAheadKiB: 64}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	setBoot("boot-3")
	if err := os.WriteFile(e.fake.Path("vda", "serial"), []byte("OTHER\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a = e.open(t)
	if err := a.Revert("vda"); !errors.Is(err, ErrDeviceGone) || !strings.Contains(err.Error(), "serial") {
		t.Errorf("vda with another serial: %v", err)
	}
}

// Finding 3: one corrupt record does not block the others.
func TestCorruptRecordSkipped(t *testing.T) {
	e := newEnv(t)
	for _, dev := range []string{"sda", "vda"} {
		if _, err := e.a.Apply(dev, Setting{Scheduler: "bfq"}); err != nil {
			t.Fatal(err)
		}
	}
	e.a.Close()
	path := filepath.Join(e.stateDir, "vda.json")
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(Options{Store: e.fake, StateDir: e.stateDir})
	if err != nil {
		t.Fatalf("Open with one corrupt record: %v", err)
	}
	defer a.Close()
	if bad := a.BadRecords(); len(bad) != 1 || !errors.Is(bad["vda"], ErrCorruptState) || !strings.Contains(bad["vda"].Error(), path) {
		t.Errorf("BadRecords = %v", bad)
	}
	if _, err := a.Apply("vda", Setting{ReadAheadKiB: 64}); !errors.Is(err, ErrCorruptState) {
		t.Errorf("Apply on a device with a corrupt record: %v", err)
	}
	if _, err := a.Apply("nvme0n1", Setting{ReadAheadKiB: 64}); err != nil {
		t.Errorf("Apply on another device: %v", err)
	}
	done, err := a.RevertAll()
	var re *RevertError
	if !errors.As(err, &re) || re.AllRestored() || len(re.Failed) != 1 || re.Failed[0].Device != "vda" || !strings.Contains(err.Error(), path) {
		t.Fatalf("RevertAll: %v", err)
	}
	if !slices.Equal(done, []string{"nvme0n1", "sda"}) {
		t.Errorf("restored %v", done)
	}
	e.assertPristine(t, "sda", "nvme0n1")
	if got, _ := os.ReadFile(path); string(got) != "garbage\n" {
		t.Error("corrupt record modified")
	}
	if err := a.Forget("vda"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("forgotten record still there: %v", err)
	}
}

// Finding 3: a record replaced by a symlink (or any non-regular file) is
// refused loudly, never skipped silently.
func TestSymlinkRecordRefused(t *testing.T) {
	e := newEnv(t)
	if _, err := e.a.Apply("sda", Setting{Scheduler: "bfq"}); err != nil {
		t.Fatal(err)
	}
	e.a.Close()
	path := filepath.Join(e.stateDir, "sda.json")
	moved := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, path); err != nil {
		t.Fatal(err)
	}
	_, err := NewWithStore(e.fake, e.stateDir)
	if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("New with a symlinked record: %v", err)
	}
	a, err := Open(Options{Store: e.fake, StateDir: e.stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	done, err := a.RevertAll()
	if err == nil || len(done) != 0 || !strings.Contains(err.Error(), path) {
		t.Fatalf("RevertAll with a symlinked record: %v, %v", done, err)
	}
	if w := e.fake.Writes(); len(w) != 1 { // the Apply's switch only
		t.Errorf("writes %v", w)
	}
}

// Finding 3: values that parse but are invalid are refused at load, naming
// the field; values that do not fit the device are refused before any
// write (all or nothing).
func TestInvalidRecordValues(t *testing.T) {
	e := newEnv(t)
	if _, err := e.a.Apply("sda", Setting{Scheduler: "bfq", ReadAheadKiB: 512}); err != nil {
		t.Fatal(err)
	}
	e.a.Close()
	path := filepath.Join(e.stateDir, "sda.json")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, in string }{
		{"scheduler path", `"scheduler": "mq-deadline"`, `"scheduler": "../../x"`, `scheduler "../../x"`},
		{"huge read-ahead", `"read_ahead_kb": 128`, `"read_ahead_kb": 1000000000000`, "read_ahead_kb 1000000000000"},
		{"tunable not a number", `"read_expire": "500"`, `"read_expire": "abc"`, `read_expire="abc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := NewWithStore(e.fake, e.stateDir)
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("New: %v", err)
			}
		})
	}
	// Well-formed, but the kernel does not offer the scheduler and
	// mq-deadline has no such tunable: nothing at all is written.
	for _, tc := range []struct{ from, to, in string }{
		{`"scheduler": "mq-deadline"`, `"scheduler": "adios"`, `"adios" is not offered`},
		{`"read_expire": "500"`, `"no_such_tunable": "500"`, "no_such_tunable"},
	} {
		if err := os.WriteFile(path, []byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		a := e.open(t)
		n := len(e.fake.Writes())
		err := a.Revert("sda")
		if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), tc.in) || !strings.Contains(err.Error(), path) {
			t.Errorf("Revert of %s: %v", tc.to, err)
		}
		if w := e.fake.Writes()[n:]; len(w) != 0 {
			t.Errorf("Revert of %s half-applied: %v", tc.to, w)
		}
		a.Close()
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.open(t).Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda")
}

// mountFS mounts a file system of the test's own at a new directory (root
// only) and unmounts it when t ends.
func mountFS(t *testing.T, fstype, opts string) string {
	t.Helper()
	need.Root(t, "mounts a small file system")
	dir := t.TempDir()
	if err := syscall.Mount("shadowtune-test", dir, fstype, 0, opts); err != nil {
		need.Missing(t, fstype, "cannot mount %s: %v", fstype, err)
	}
	need.Have(t, fstype)
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func remountRO(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
}

// Finding 3: a read-only state directory still reverts, and says the
// record could not be removed.
func TestReadOnlyStateDirReverts(t *testing.T) {
	e := newEnv(t)
	mnt := mountFS(t, "tmpfs", "size=1m")
	stateDir := filepath.Join(mnt, "state")
	a, err := NewWithStore(e.fake, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply("sda", Setting{Scheduler: "bfq", ReadAheadKiB: 512}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	remountRO(t, mnt)
	a, err = NewWithStore(e.fake, stateDir)
	if err != nil {
		t.Fatalf("New on a read-only state dir: %v", err)
	}
	defer a.Close()
	if _, err := a.Apply("vda", Setting{ReadAheadKiB: 64}); err == nil {
		t.Error("a first change without a durable record succeeded")
	}
	done, err := a.RevertAll()
	var re *RevertError
	if !slices.Equal(done, []string{"sda"}) || !errors.As(err, &re) || !re.AllRestored() || len(re.RecordKept) != 1 ||
		!errors.Is(err, ErrRecordNotUpdated) || !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), filepath.Join(stateDir, "sda.json")) {
		t.Fatalf("RevertAll = %v, %v", done, err)
	}
	t.Logf("as expected: %v", err)
	e.assertPristine(t, "sda", "vda")
	// Again: verified, nothing written.
	n := len(e.fake.Writes())
	if done, _ := a.RevertAll(); !slices.Equal(done, []string{"sda"}) || len(e.fake.Writes()) != n {
		t.Errorf("second RevertAll = %v, wrote %v", done, e.fake.Writes()[n:])
	}
}

// Finding 4: on a full state file system a change back (a regression
// revert) is still made, and the record error is reported for a retry.
func TestFullStateDirChangeBack(t *testing.T) {
	e := newEnv(t)
	mnt := mountFS(t, "tmpfs", "size=64k")
	stateDir := filepath.Join(mnt, "state")
	a, err := NewWithStore(e.fake, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Apply("sda", Setting{Scheduler: "bfq"}); err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(mnt, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	res, err := a.Apply("sda", Setting{Scheduler: "mq-deadline"})
	if err != nil {
		t.Fatalf("change back on a full state fs: %v", err)
	}
	if res.RecordError == nil || !errors.Is(res.RecordError, syscall.ENOSPC) {
		t.Errorf("RecordError = %v, want ENOSPC", res.RecordError)
	}
	if got := e.read(t, "sda", AttrScheduler); !strings.Contains(got, "[mq-deadline]") {
		t.Errorf("scheduler %s", got)
	}
	// A first change to another device needs its record: refused.
	if _, err := a.Apply("vda", Setting{Scheduler: "bfq"}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("first change on a full state fs: %v", err)
	}
	e.assertPristine(t, "vda")
	if err := a.Flush(); err != nil {
		t.Errorf("Flush with nothing pending: %v", err)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if err := a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda")
}

// Finding 5: the agent's pacing memo survives a restart.
func TestDeviceMemo(t *testing.T) {
	e := newEnv(t)
	if _, ok, err := e.a.LoadDeviceState("sda"); ok || err != nil {
		t.Fatalf("memo before any save: %v, %v", ok, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cf := counterfactual.Record{Checks: 2, SumErrorPoints: 31.5, WrongSigns: 1, Last: counterfactual.Check{Predicted: 0.7, Measured: 1.2}, At: at}
	m := DeviceMemo{LastChange: at, GuardChanges: 3, GuardQuietChecks: 1, Pinned: true,
		Backoff: map[string]time.Time{"bfq": at.Add(time.Hour)}, Counterfactual: cf}
	if err := e.a.SaveDeviceState("sda", m); err != nil {
		t.Fatal(err)
	}
	e.a.Close()
	a := e.open(t)
	got, ok, err := a.LoadDeviceState("sda")
	if err != nil || !ok || !got.LastChange.Equal(at) || got.GuardChanges != 3 || got.GuardQuietChecks != 1 || !got.Pinned || !got.Backoff["bfq"].Equal(at.Add(time.Hour)) {
		t.Fatalf("LoadDeviceState = %+v, %v, %v", got, ok, err)
	}
	if got.Counterfactual != cf {
		t.Fatalf("counterfactual record %+v, want %+v", got.Counterfactual, cf)
	}
	if len(a.Originals()) != 0 || len(a.BadRecords()) != 0 {
		t.Errorf("the memo was read as a record: %v %v", a.Originals(), a.BadRecords())
	}
	// Another device under the name: no memo.
	if err := os.WriteFile(e.fake.Path("sda", "diskseq"), []byte("99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.LoadDeviceState("sda"); ok || err != nil {
		t.Errorf("memo of a replaced device: %v, %v", ok, err)
	}
	path := filepath.Join(e.stateDir, "memo", "sda.json")
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.LoadDeviceState("sda"); !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt memo: %v", err)
	}
}

// The claim of a device follows the explicit Claim and the record.
func TestClaimLifecycle(t *testing.T) {
	e := newEnv(t)
	if err := e.a.Claim("sda"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Apply("sda", Setting{ReadAheadKiB: 64}); err != nil {
		t.Fatal(err)
	}
	// Release keeps the claim while the device is changed.
	if err := e.a.Release("sda"); err != nil {
		t.Fatal(err)
	}
	if got := e.a.Claimed(); !slices.Equal(got, []string{"sda"}) {
		t.Errorf("Claimed after Release of a changed device = %v", got)
	}
	if err := e.a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	if got := e.a.Claimed(); len(got) != 0 {
		t.Errorf("Claimed = %v", got)
	}
	b, err := os.ReadFile(filepath.Join(e.fake.ClaimDir(), "8:0.lock"))
	if err == nil {
		t.Errorf("claim file left: %s", b)
	}
	if err := e.a.Claim("sdz"); !errors.Is(err, ErrDeviceGone) {
		t.Errorf("Claim of a missing device: %v", err)
	}
	if err := e.a.Claim("../sda"); !errors.Is(err, ErrInvalidSetting) {
		t.Errorf("Claim of a path: %v", err)
	}
	// Forget refuses a device that is still there.
	if _, err := e.a.Apply("vda", Setting{ReadAheadKiB: 64}); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Forget("vda"); !errors.Is(err, ErrNotGone) {
		t.Errorf("Forget of a present device: %v", err)
	}
	if err := e.a.Revert("vda"); err != nil {
		t.Fatal(err)
	}
	_ = fmt.Sprint()
	_ = actuatetest.Default
	_ = sched.Tunables{}
}

// A claim directory on a read-only file system (a container's read-only
// root without a mount for it) cannot hold claims: the Actuator works
// unclaimed and says why.
func TestClaimsUnavailableOnReadOnlyClaimDir(t *testing.T) {
	e := newEnv(t)
	mnt := mountFS(t, "tmpfs", "size=64k")
	remountRO(t, mnt)
	a, err := Open(Options{Store: e.fake, StateDir: filepath.Join(t.TempDir(), "s"), ClaimDir: filepath.Join(mnt, "claims")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Apply("vda", Setting{ReadAheadKiB: 64}); err != nil {
		t.Fatal(err)
	}
	if err := a.Claim("sda"); err != nil { // the agent claims every device it governs
		t.Errorf("Claim without claims = %v, want nil", err)
	}
	if err := a.ClaimsUnavailable(); !errors.Is(err, syscall.EROFS) {
		t.Errorf("ClaimsUnavailable = %v", err)
	}
	if err := a.Revert("vda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "vda")
}

// Open claims the devices its records say it changed, so that a restarted
// agent owns them again before its first window.
func TestOpenClaimsRecordedDevices(t *testing.T) {
	e := newEnv(t)
	if _, err := e.a.Apply("sda", Setting{ReadAheadKiB: 64}); err != nil {
		t.Fatal(err)
	}
	e.a.Close()
	a, err := Open(Options{Store: e.fake, StateDir: e.stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Claimed(); !slices.Equal(got, []string{"sda"}) {
		t.Errorf("Claimed after Open = %v", got)
	}
	b, err := Open(Options{Store: e.fake, StateDir: filepath.Join(t.TempDir(), "B")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Apply("sda", Setting{Scheduler: "bfq"}); !errors.Is(err, ErrOwned) {
		t.Errorf("Apply by another state dir: %v", err)
	}
	// A revert by the owner, then a Claim by B, goes through.
	if _, err := a.RevertAll(); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim("sda"); err != nil {
		t.Errorf("Claim after the owner's revert: %v", err)
	}
}
