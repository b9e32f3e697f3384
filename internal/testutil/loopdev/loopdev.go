// Package loopdev gives tests their own loop devices over files, with the
// guarantees the project promises: a test only ever writes to a device it
// attached itself (checked through loop/backing_file), every queue setting
// is put back before the device is detached, and the device is detached
// in t.Cleanup.
package loopdev

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// Dev is a loop device a test attached with NewForTest.
type Dev struct {
	Name      string // kernel name, "loop3"
	Path      string // device node, "/dev/loop3"
	Backing   string // the backing file, in t.TempDir()
	SizeBytes int64  // size, bytes
	// Queue is SnapshotQueue of the device as attached: what it is
	// restored to before it is detached.
	Queue map[string]string
}

// NeedLoop needs t to run as root with losetup and loop devices
// (/dev/loop-control): without them t is skipped, or fails under CI=true
// (package need). why says what the test needs root for, as in "needs
// root: why (run go test as root)".
func NeedLoop(t testing.TB, why string) {
	t.Helper()
	need.Root(t, why)
	need.Tool(t, "losetup", "util-linux has it")
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		need.Missing(t, "loop devices", "no /dev/loop-control: %v", err)
	}
	need.Have(t, "loop devices")
}

// New attaches a fresh loop device with NewForTest and returns its kernel
// name ("loop3").
func New(t testing.TB, sizeBytes int64) string {
	t.Helper()
	return NewForTest(t, sizeBytes).Name
}

// NewForTest attaches a fresh loop device (direct I/O on) to a sparse file
// of sizeBytes in t.TempDir(). It skips the test (fails it under CI=true)
// when not root, without losetup or when no loop device can be attached,
// and fails it when the device is not backed by that file. When t ends, every queue setting the
// test changed is put back (Dev.Queue) and the device is detached.
func NewForTest(t testing.TB, sizeBytes int64) *Dev {
	t.Helper()
	NeedLoop(t, "creates loop devices")
	img := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(sizeBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return Over(t, img)
}

// Over attaches a fresh loop device (direct I/O on) to the test's own file
// img, as NewForTest does, for a device over a file the test made
// elsewhere (on a file system on another of its loop devices, say). It
// fails t when the device is not backed by img. When t ends, every queue
// setting the test changed is put back and the device is detached; the
// file is left to its maker.
func Over(t testing.TB, img string) *Dev {
	t.Helper()
	NeedLoop(t, "creates loop devices")
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	devPath := attach(t, img)
	name := filepath.Base(devPath)
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop/backing_file"))
	if err != nil || strings.TrimSpace(string(b)) != img {
		t.Fatalf("%s is not backed by our %s (%q, %v): refusing to touch it", devPath, img, b, err)
	}
	t.Logf("attached %s to %s", devPath, img)
	resetScheduler(t, name)
	// A detached loop device keeps its queue settings for the next user:
	// put back everything the test changed before detaching (cleanups
	// run last-in first-out).
	attached := SnapshotQueue(t, name)
	t.Cleanup(func() { RestoreQueue(t, name, attached) })
	return &Dev{Name: name, Path: devPath, Backing: img, SizeBytes: st.Size(), Queue: maps.Clone(attached)}
}

// resetScheduler gives the freshly attached loop device name the
// scheduler the loop driver starts it with, none (loop_add sets
// BLK_MQ_F_NO_SCHED_BY_DEFAULT, drivers/block/loop.c; elevator_set_default,
// block/elevator.c). A loop device keeps its queue settings across detach
// and attach, so a test killed before its cleanups ran leaves its
// scheduler to the next test that gets the device.
func resetScheduler(t testing.TB, name string) {
	t.Helper()
	p := filepath.Join("/sys/block", name, "queue", "scheduler")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	cur := strings.TrimSpace(string(b))
	if Current(cur) == "none" {
		return
	}
	if err := os.WriteFile(p, []byte("none"), 0); err != nil {
		t.Fatalf("%s: the device came with %q left by an earlier user; setting none: %v", p, cur, err)
	}
	t.Logf("%s: came with %q left by an earlier user; set to none", name, cur)
}

// attach attaches img to a free loop device with direct I/O and returns
// the device node; t.Cleanup detaches it. It skips t (fails it under
// CI=true) when no device can be attached.
func attach(t testing.TB, img string) string {
	t.Helper()
	var out []byte
	var err error
	for range 5 { // --find can race with another losetup
		out, err = exec.Command("losetup", "--find", "--show", "--direct-io=on", img).CombinedOutput()
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		need.Missing(t, "loop devices", "cannot attach a loop device (no /dev/loop-control in this container?): %v: %s",
			err, strings.TrimSpace(string(out)))
	}
	devPath := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", devPath).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", devPath, err, out)
		}
	})
	return devPath
}

// Allocate allocates the backing file's blocks (best effort: where the
// file system cannot, the file stays sparse), so that reads reach the
// backing disk.
func (d *Dev) Allocate(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(d.Backing, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Fallocate(int(f.Fd()), 0, 0, d.SizeBytes)
	f.Close()
}

// Fill writes SizeBytes from r over the backing file and syncs it, so
// that reads reach allocated blocks and any write to the device changes
// the file's contents.
func (d *Dev) Fill(t testing.TB, r io.Reader) {
	t.Helper()
	f, err := os.OpenFile(d.Backing, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, r, d.SizeBytes); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// NeedHeavyIO is the preamble of the tests that keep a loop device under
// fio load for long: it skips t (fails it under CI=true) unless root
// with loop devices and fio
// (NeedLoop, NeedFio), waits for the other such tests (LockHeavyIO) and
// returns fio's path. why is as in NeedLoop.
func NeedHeavyIO(t testing.TB, why string) (fio string) {
	t.Helper()
	NeedLoop(t, why)
	fio = NeedFio(t)
	LockHeavyIO(t)
	return fio
}

// RestoreQueue writes back every writable file under /sys/block/NAME/queue
// that differs from snap: the scheduler first, then queue/*, then
// queue/iosched/*.
func RestoreQueue(t testing.TB, name string, snap map[string]string) {
	t.Helper()
	dir := filepath.Join("/sys/block", name, "queue")
	sched := Current(snap["scheduler"])
	if sched == "" {
		t.Errorf("restore %s: no current scheduler in %q", name, snap["scheduler"])
		return
	}
	sp := filepath.Join(dir, "scheduler")
	if b, err := os.ReadFile(sp); err != nil || Current(string(b)) != sched {
		if err := os.WriteFile(sp, []byte(sched), 0); err != nil {
			t.Errorf("restore %s: %v", sp, err)
		}
	}
	keys := slices.Sorted(maps.Keys(snap))
	for _, iosched := range []bool{false, true} {
		for _, k := range keys {
			if k == "scheduler" || strings.HasPrefix(k, "iosched/") != iosched || strings.HasPrefix(snap[k], "error: ") {
				continue
			}
			p := filepath.Join(dir, k)
			info, err := os.Stat(p)
			if err != nil || info.Mode().Perm()&0o200 == 0 {
				continue
			}
			if b, err := os.ReadFile(p); err == nil && string(b) == snap[k] {
				continue
			}
			if err := os.WriteFile(p, []byte(strings.TrimSpace(snap[k])), 0); err != nil {
				t.Errorf("restore %s: %v", p, err)
			}
		}
	}
	if diff := Diff(snap, SnapshotQueue(t, name)); diff != "" {
		t.Errorf("could not restore /sys/block/%s/queue as attached:\n%s", name, diff)
	}
}

// SnapshotQueue returns every file under /sys/block/NAME/queue, recursively
// (queue/iosched/ included): relative path → content, or the read error.
func SnapshotQueue(t testing.TB, name string) map[string]string {
	t.Helper()
	dir := filepath.Join("/sys/block", name, "queue")
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		b, rerr := os.ReadFile(p)
		if rerr != nil {
			var errno syscall.Errno
			errors.As(rerr, &errno)
			out[rel] = "error: " + errno.Error()
		} else {
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Diff lists the differences between two snapshots, one per line; "" when
// they are equal.
func Diff(want, got map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			fmt.Fprintf(&b, "  %s: missing (was %q)\n", k, want[k])
		} else if g != want[k] {
			fmt.Fprintf(&b, "  %s: %q, want %q\n", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  %s: new file %q\n", k, got[k])
		}
	}
	return b.String()
}

// Current returns the bracketed (current) entry of a queue/scheduler
// listing such as "none [mq-deadline] kyber bfq", or "" if there is none.
func Current(list string) string {
	for _, f := range strings.Fields(list) {
		if len(f) > 2 && f[0] == '[' && f[len(f)-1] == ']' {
			return f[1 : len(f)-1]
		}
	}
	return ""
}

// Offered returns the entries of a queue/scheduler listing, brackets
// removed, in the kernel's order: the elevators this kernel offers for
// the queue (which may lack bfq or kyber, when they are not built).
func Offered(list string) []string {
	var out []string
	for _, f := range strings.Fields(list) {
		out = append(out, strings.Trim(f, "[]"))
	}
	return out
}

// OtherScheduler returns an elevator the queue of device name offers
// other than its current one, preferring the order of prefer; it fails
// the test when the queue offers only one.
func OtherScheduler(t testing.TB, name string, prefer ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "queue/scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	cur, offered := Current(string(b)), Offered(string(b))
	for _, s := range append(prefer, offered...) {
		if s != cur && slices.Contains(offered, s) {
			return s
		}
	}
	t.Fatalf("%s offers only %q: no other scheduler to write", name, offered)
	return ""
}

// Stat is the part of /sys/block/NAME/stat that counts completed requests
// (Documentation/block/stat.rst).
type Stat struct {
	Reads, ReadSectors, Writes, WriteSectors, Discards, Flushes uint64
}

// ReadStat reads /sys/block/NAME/stat.
func ReadStat(t testing.TB, name string) Stat {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 11 {
		t.Fatalf("/sys/block/%s/stat: %d fields", name, len(f))
	}
	n := func(i int) uint64 {
		if i >= len(f) {
			return 0
		}
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("/sys/block/%s/stat field %d: %v", name, i+1, err)
		}
		return v
	}
	return Stat{Reads: n(0), ReadSectors: n(2), Writes: n(4), WriteSectors: n(6), Discards: n(11), Flushes: n(15)}
}

// Sub returns s − o field by field.
func (s Stat) Sub(o Stat) Stat {
	return Stat{s.Reads - o.Reads, s.ReadSectors - o.ReadSectors, s.Writes - o.Writes,
		s.WriteSectors - o.WriteSectors, s.Discards - o.Discards, s.Flushes - o.Flushes}
}

// NeedFio returns fio's path ($FIO when set, else fio from $PATH), or
// skips t, or fails it under CI=true (hack/ensure-test-deps.sh, run by
// `make test` as root, installs it).
func NeedFio(t testing.TB) string {
	t.Helper()
	return need.Tool(t, "fio", "hack/ensure-test-deps.sh, run as root by make test, installs it")
}

// LockHeavyIO serialises the tests that keep loop devices under fio load
// for long, across the test processes go test runs in parallel: on a
// two-core machine one's load would distort the other's measurements. The
// lock is released when t ends.
func LockHeavyIO(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "shadowtune-heavy-io-tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if w := time.Since(t0); w > time.Second {
		t.Logf("waited %.1f s for the other heavy I/O tests", w.Seconds())
	}
	t.Cleanup(func() { f.Close() })
}

// MajMin returns the device's "MAJ:MIN" (sysfs dev).
func (d *Dev) MajMin(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", d.Name, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
