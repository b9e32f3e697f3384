//go:build linux

package tracer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// needRoot needs t to run as root with loop devices available (skipped, or
// failed under CI=true: package need).
func needRoot(t testing.TB) {
	t.Helper()
	loopdev.NeedLoop(t, "creates loop devices and loads BPF programs")
}

// loopDev is a loop device this test created over a file in its TempDir.
type loopDev struct {
	path string // /dev/loopN
	name string // loopN
	dev  uint32
	size int64
}

// newLoop creates a loop device with direct I/O over a new file of size
// bytes (loopdev.NewForTest: only devices made here are ever written to or
// reconfigured, and their queue settings are restored before they are
// detached when the test ends), then allocates the file's blocks.
func newLoop(t testing.TB, size int64) *loopDev {
	t.Helper()
	d := loopdev.NewForTest(t, size)
	d.Allocate(t)
	dev, _, err := ResolveDevice(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	return &loopDev{path: d.Path, name: d.Name, dev: dev, size: size}
}

// setScheduler sets the I/O scheduler of l (a device this test created).
func (l *loopDev) setScheduler(t testing.TB, sched string) {
	t.Helper()
	p := filepath.Join("/sys/block", l.name, "queue/scheduler")
	if err := os.WriteFile(p, []byte(sched), 0); err != nil {
		need.Missing(t, "scheduler "+sched, "scheduler %s: %v", sched, err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "["+sched+"]") {
		t.Fatalf("scheduler of %s is %q, want %s", l.name, strings.TrimSpace(string(b)), sched)
	}
}

// diskStat holds the fields of /sys/block/NAME/stat the tests compare.
type diskStat struct {
	reads, readSectors, writes, writeSectors, discards, discardSectors, flushes uint64
}

func (l *loopDev) stat(t testing.TB) diskStat {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", l.name, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	get := func(i int) uint64 {
		if i >= len(f) {
			return 0
		}
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("stat field %d %q: %v", i, f[i], err)
		}
		return v
	}
	// Documentation/block/stat.rst: reads completed, merged, sectors, ms;
	// writes ...; in flight; io_ticks; time_in_queue; discards completed,
	// merged, sectors, ms; flushes completed, ms.
	return diskStat{get(0), get(2), get(4), get(6), get(11), get(13), get(15)}
}

func (a diskStat) sub(b diskStat) diskStat {
	return diskStat{a.reads - b.reads, a.readSectors - b.readSectors, a.writes - b.writes,
		a.writeSectors - b.writeSectors, a.discards - b.discards, a.discardSectors - b.discardSectors,
		a.flushes - b.flushes}
}

// ioRec is one I/O the workload issued.
type ioRec struct {
	op      trace.Op
	sector  uint64
	sectors uint32
}

// workload does n synchronous O_DIRECT reads and writes (4–64 KiB, at
// random 4 KiB-aligned offsets) on path from one OS thread, plus flushes
// (fsync) and a discard when discard is set. It returns what it issued and
// the thread id that issued it.
func workload(t testing.TB, path string, size int64, n int, seed uint64, discard bool) (ios []ioRec, tid int) {
	t.Helper()
	type result struct {
		ios []ioRec
		tid int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r result
		r.tid = unix.Gettid()
		r.ios, r.err = doIO(path, size, n, seed, discard)
		ch <- r
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.ios, r.tid
}

func doIO(path string, size int64, n int, seed uint64, discard bool) ([]ioRec, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	const maxLen = 64 << 10
	// mmap'd memory is page aligned, as O_DIRECT wants.
	buf, err := unix.Mmap(-1, 0, maxLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Munmap(buf) }()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var ios []ioRec
	blocks := size / 4096
	for i := range n {
		l := (1 + rng.IntN(16)) * 4096
		off := rng.Int64N(blocks-int64(l/4096)) * 4096
		rec := ioRec{sector: uint64(off / 512), sectors: uint32(l / 512)}
		if rng.IntN(3) == 0 {
			rec.op = trace.Write
			for j := range buf[:l] {
				buf[j] = byte(i + j)
			}
			if _, err := unix.Pwrite(fd, buf[:l], off); err != nil {
				return nil, fmt.Errorf("pwrite: %w", err)
			}
		} else {
			rec.op = trace.Read
			if _, err := unix.Pread(fd, buf[:l], off); err != nil {
				return nil, fmt.Errorf("pread: %w", err)
			}
		}
		ios = append(ios, rec)
		if i%100 == 99 {
			if err := unix.Fsync(fd); err != nil {
				return nil, fmt.Errorf("fsync: %w", err)
			}
		}
	}
	if discard {
		r := [2]uint64{1 << 20, 1 << 20}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&r[0])))
		if e != 0 && e != unix.EOPNOTSUPP {
			return nil, fmt.Errorf("BLKDISCARD: %w", e)
		}
	}
	return ios, nil
}

// randomReads does O_DIRECT 4 KiB random reads on path for n reads and
// returns them.
func randomReads(path string, size int64, n int, seed uint64) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Munmap(buf) }()
	rng := rand.New(rand.NewPCG(seed, 1))
	blocks := size / 4096
	for range n {
		if _, err := unix.Pread(fd, buf, rng.Int64N(blocks)*4096); err != nil {
			return err
		}
	}
	return nil
}
