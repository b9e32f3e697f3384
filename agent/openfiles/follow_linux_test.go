//go:build linux

package openfiles

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// childEnv makes the test binary the mapping child (TestFollowChild).
const childEnv = "SHADOWTUNE_OPENFILES_CHILD"

// TestFollowChild is the process whose files are followed, when run with
// childEnv=PATH: it maps PATH once and opens it again with
// POSIX_FADV_RANDOM, prints "ready FD_MAPPED FD_RANDOM", then for each
// line read touches 32 random pages of the mapping and prints "done".
func TestFollowChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("the child of TestFollowReadAheadReachesOpenFiles")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(r.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ready %d %d\n", f.Fd(), r.Fd())
	rng := rand.New(rand.NewPCG(1, 2))
	sink := byte(0)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		for range 32 {
			sink ^= m[rng.IntN(len(m)/4096)*4096]
		}
		fmt.Println("done", sink%2) // sink used, so the loads are kept
	}
	// The descriptors must stay open while the parent lists them: an
	// os.File nothing refers to is closed by its finalizer at a GC, and
	// the mapping alone (vma->vm_file) is not in the task's file table.
	runtime.KeepAlive(f)
	runtime.KeepAlive(r)
}

// TestFollowReadAheadReachesOpenFiles: on ext4 over a loop device, a
// process maps a 256 MiB file with read_ahead_kb at 2560 and keeps it
// mapped. Cutting read_ahead_kb to 16 does not change what its page
// faults read; Follow does, and leaves the descriptor the process gave
// POSIX_FADV_RANDOM as it was. Following the change back restores the
// file's read-ahead exactly.
func TestFollowReadAheadReachesOpenFiles(t *testing.T) {
	fx := newFollowFixture(t, t.TempDir())
	f, l, pid, mapped, random := fx.f, fx.l, fx.pid, fx.mapped, fx.random
	if kib := fx.perFault(); kib < 2048 {
		t.Fatalf("at 2560 KiB a fault read %.0f KiB; want the read-around of about 2560", kib)
	}
	setRA(t, l.Name, 16)
	unfollowed := fx.perFault()
	r, err := f.Follow(l.Name, 2560, 16)
	if err != nil {
		t.Fatal(err)
	}
	followed := fx.perFault()
	t.Logf("KiB read per fault after the cut: %.0f before Follow, %.0f after; %+v", unfollowed, followed, r)
	if unfollowed < 2048 || followed > 64 {
		t.Errorf("per fault: %.0f KiB before Follow (want ≥ 2048: the file keeps its copy), %.0f after (want ≤ 64)", unfollowed, followed)
	}
	if r.Followed != 1 || r.Marked != 1 || r.Failed != 0 {
		t.Errorf("Follow = %+v; want the mapped file followed and the POSIX_FADV_RANDOM one left", r)
	}
	ra := filePages(t, f, l.Name, pid)
	if ra[mapped] != 4 || ra[random] != 640 {
		t.Errorf("read-ahead pages after the cut: mapped %d (want 4), random %d (want its own 640)", ra[mapped], ra[random])
	}
	setRA(t, l.Name, 2560)
	if _, err := f.Follow(l.Name, 16, 2560); err != nil {
		t.Fatal(err)
	}
	if ra := filePages(t, f, l.Name, pid); ra[mapped] != 640 || ra[random] != 640 {
		t.Errorf("read-ahead pages back at 2560: mapped %d, random %d; want 640 each", ra[mapped], ra[random])
	}
}

// followFixture is a Follower (state directory dir) and a child process
// (TestFollowChild) that maps a 256 MiB file on ext4 over a loop device at
// read_ahead_kb 2560, by descriptor mapped, and holds it again by
// descriptor random with POSIX_FADV_RANDOM.
type followFixture struct {
	f                   *Follower
	l                   *loopdev.Dev
	data                string
	pid, mapped, random uint32
	stdin               io.Writer
	out                 *bufio.Scanner
	t                   *testing.T
}

func newFollowFixture(t *testing.T, dir string) *followFixture {
	t.Helper()
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads a BPF iterator")
	f, err := New("", dir, testr.New(t), nil)
	if errors.Is(err, tracer.ErrOpenFilesUnsupported) {
		need.Missing(t, "kernel feature", "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	t.Setenv("TMPDIR", "/var/tmp")
	l := loopdev.NewForTest(t, 512<<20)
	l.Allocate(t)
	data := filepath.Join(l.MountExt4(t), "data")
	loopdev.WriteRandom(t, data, 256<<20)
	setRA(t, l.Name, 2560)

	cmd := exec.Command(os.Args[0], "-test.run=^TestFollowChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+data)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	fx := &followFixture{f: f, l: l, data: data, pid: uint32(cmd.Process.Pid), stdin: stdin, out: bufio.NewScanner(stdout), t: t}
	for fx.out.Scan() {
		if _, err := fmt.Sscanf(fx.out.Text(), "ready %d %d", &fx.mapped, &fx.random); err == nil {
			break
		}
	}
	return fx
}

// perFault is the KiB read per fault of 32 random faults of the child,
// the file's unmapped pages evicted first.
func (fx *followFixture) perFault() float64 {
	loopdev.Evict(fx.t, fx.data)
	before := loopdev.ReadStat(fx.t, fx.l.Name)
	fmt.Fprintln(fx.stdin, "go")
	for fx.out.Scan() && !strings.HasPrefix(fx.out.Text(), "done") {
	}
	return float64(loopdev.ReadStat(fx.t, fx.l.Name).Sub(before).ReadSectors) / 2 / 32
}

// filePages lists pid's files on disk: descriptor → read-ahead pages.
func filePages(t *testing.T, f *Follower, disk string, pid uint32) map[uint32]uint32 {
	t.Helper()
	d, err := sysfs.Read("", disk)
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := f.probe.List([]uint32{d.Dev}, MaxFiles)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]uint32{}
	for _, of := range files {
		if of.PID == pid {
			out[of.FD] = of.RAPages
		}
	}
	return out
}

func setRA(t *testing.T, disk string, kib int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", disk, "queue/read_ahead_kb"), []byte(strconv.Itoa(kib)), 0); err != nil {
		t.Fatal(err)
	}
}

// TestCalibrateSkipsTmpfs: fadvise does nothing to a tmpfs file, so the
// marks cannot be learned there; calibration says why and uses the next
// directory, on a file system with a backing device.
func TestCalibrateSkipsTmpfs(t *testing.T) {
	need.Root(t, "loads a BPF iterator")
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		need.Missing(t, "tmpfs", "needs /dev/shm on tmpfs")
	}
	disk := "/var/tmp"
	if err := unix.Statfs(disk, &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		need.Missing(t, "disk", "needs /var/tmp on a disk")
	}
	p, err := tracer.NewOpenFilesProbe()
	if errors.Is(err, tracer.ErrOpenFilesUnsupported) {
		need.Missing(t, "kernel feature", "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := calibrateIn(p, []string{"/dev/shm"}); err == nil || !strings.Contains(err.Error(), "tmpfs") {
		t.Errorf("calibrating on tmpfs: %v; want an error that names tmpfs", err)
	}
	marks, err := calibrateIn(p, []string{"/dev/shm", disk})
	if err != nil || marks == 0 {
		t.Fatalf("calibrating on tmpfs, then %s: marks %#x, %v", disk, marks, err)
	}
	t.Logf("marks %#x", marks)
}
