//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

func TestKernelDev(t *testing.T) {
	for _, mm := range [][2]uint32{{0, 0}, {7, 3}, {8, 17}, {259, 1}, {4095, 255}, {4095, 256}, {511, 1<<20 - 1}} {
		u := unix.Mkdev(mm[0], mm[1])
		k := KernelDev(u)
		if k != Mkdev(mm[0], mm[1]) {
			t.Errorf("KernelDev(%d:%d) = %s", mm[0], mm[1], DevString(k))
		}
		if back := UnixDev(k); back != u {
			t.Errorf("UnixDev(%s) = %#x, want %#x", DevString(k), back, u)
		}
	}
}

func TestPageCacheStatsWaste(t *testing.T) {
	prev := PageCacheStats{AddedPages: 100, UsedPages: 50, WastedPages: 10}
	cur := PageCacheStats{AddedPages: 1100, UsedPages: 150, WastedPages: 910, MmapFaults: 3}
	d := cur.Sub(prev)
	if d.AddedPages != 1000 || d.UsedPages != 100 || d.WastedPages != 900 || d.MmapFaults != 3 {
		t.Fatalf("Sub = %+v", d)
	}
	if w, ok := d.WastePct(); !ok || w != 90 {
		t.Errorf("WastePct = %v, %v; want 90, true", w, ok)
	}
	if _, ok := (PageCacheStats{UsedPages: 100, WastedPages: 155}).WastePct(); ok {
		t.Error("WastePct resolved with 255 pages")
	}
	if d := prev.Sub(cur); d.UsedPages != 50 {
		t.Errorf("Sub of a reset counter = %d, want the new value 50", d.UsedPages)
	}
}

// pcChildEnv makes the test binary a workload child (pageCacheChild).
const pcChildEnv = "SHADOWTUNE_PAGECACHE_CHILD"

// TestPageCacheChild is the workload child of TestPageCacheWaste, run by
// re-executing the test binary: it waits for a line on stdin (the parent
// has moved it into the test's cgroup by then), then reads the file
// $SHADOWTUNE_PAGECACHE_CHILD names as "mmap:PATH" (2,000 random 4 KiB
// reads through a shared mapping) or "read:PATH" (sequential read() of
// 1 MiB).
func TestPageCacheChild(t *testing.T) {
	spec := os.Getenv(pcChildEnv)
	if spec == "" {
		t.Skip("workload child of TestPageCacheWaste")
	}
	loopdev.AwaitGo(t)
	mode, path, _ := strings.Cut(spec, ":")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var sum byte
	buf := make([]byte, 1<<20)
	switch mode {
	case "mmap":
		m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = unix.Munmap(m) }()
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			off := rng.Int64N(fi.Size()/4096) * 4096
			copy(buf[:4096], m[off:off+4096])
			sum ^= buf[0]
		}
	case "mmapseq":
		m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = unix.Munmap(m) }()
		for off := 0; off < len(m); off += 4096 {
			sum ^= m[off]
		}
	case "read":
		for {
			n, err := f.Read(buf)
			if n > 0 {
				sum ^= buf[0]
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	fmt.Println("checksum", sum)
}

// pcFixture is TestPageCacheWaste's ext4 file system on a loop device with
// a 1 GiB data file.
type pcFixture struct {
	loop *loopdev.Dev
	dir  string // mount point
	data string // the data file
	dev  uint32 // the file system's s_dev
}

// newPCFixture makes a 1.5 GiB loop device over a file in /var/tmp, an
// ext4 file system on it mounted in a temporary directory, and a 1 GiB
// data file written and synced; read_ahead_kb of the device is 2560.
// Everything is undone when t ends.
func newPCFixture(t *testing.T) *pcFixture {
	t.Helper()
	loopdev.LockHeavyIO(t)
	t.Setenv("TMPDIR", "/var/tmp") // the backing file and mount point
	l := loopdev.NewForTest(t, 1536<<20)
	l.Allocate(t)
	dir := l.MountExt4(t)
	fx := &pcFixture{loop: l, dir: dir, data: filepath.Join(dir, "data")}
	loopdev.WriteRandom(t, fx.data, 1<<30)
	var st unix.Stat_t
	if err := unix.Stat(fx.data, &st); err != nil {
		t.Fatal(err)
	}
	fx.dev = KernelDev(st.Dev)
	setDeviceRA(t, l.Name, 2560)
	return fx
}

// setDeviceRA sets read_ahead_kb of the test's own loop device name.
func setDeviceRA(t *testing.T, name string, kib int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", name, "queue/read_ahead_kb"), []byte(strconv.Itoa(kib)), 0); err != nil {
		t.Fatal(err)
	}
}

// evict drops the data file's pages from the page cache.
func (fx *pcFixture) evict(t *testing.T) { loopdev.Evict(t, fx.data) }

// runChild runs the workload child (TestPageCacheChild) on spec inside the
// cgroup whose cgroup.procs file is procs, and waits for it.
func runChild(t *testing.T, procs, spec string) {
	t.Helper()
	t0, _ := loopdev.RunChild(t, procs, "TestPageCacheChild", pcChildEnv+"="+spec)
	t.Logf("child %s: %.2f s", spec, time.Since(t0).Seconds())
}

// phases runs one workload and returns each probe's counters of it, after
// evicting what stayed cached so that every page added is resolved.
func (fx *pcFixture) phases(t *testing.T, ps []*PageCacheProbe, procs, spec string) []PageCacheStats {
	t.Helper()
	fx.evict(t)
	before := make([]PageCacheStats, len(ps))
	for i, p := range ps {
		before[i] = pcStats(t, p, fx.dev)
	}
	runChild(t, procs, spec)
	fx.evict(t)
	out := make([]PageCacheStats, len(ps))
	for i, p := range ps {
		d := pcStats(t, p, fx.dev).Sub(before[i])
		w, ok := d.WastePct()
		t.Logf("%s, probe %d: added %d used %d (mapped %d) wasted %d pages (waste %.2f%%, resolved %v); sync RA %d async RA %d (by faults %d), RA pages %d (read-around %d), mmap faults %d, fault-around %d, unwalked %d",
			spec, i, d.AddedPages, d.UsedPages, d.MappedPages, d.WastedPages, w, ok, d.SyncReadAhead, d.AsyncReadAhead, d.FaultAsyncReadAhead, d.ReadAheadPages, d.AroundPages, d.MmapFaults, d.MapEvents, d.UnwalkedPages)
		out[i] = d
	}
	return out
}

func pcStats(t *testing.T, p *PageCacheProbe, dev uint32) PageCacheStats {
	t.Helper()
	all, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := all[dev]
	if !ok {
		t.Fatalf("no counters for %s", DevString(dev))
	}
	return s
}

func newProbe(t *testing.T, every uint64) *PageCacheProbe {
	t.Helper()
	p, err := NewPageCacheProbe(PageCacheOptions{SampleEvery: every})
	if errors.Is(err, ErrPageCacheUnsupported) {
		need.Missing(t, "page-cache probe", "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestPageCacheWaste checks the probe's read-ahead waste on an ext4 file
// system with read_ahead_kb 2560, in a 256 MiB memory cgroup: random 4 KiB
// reads through mmap waste most of the read-around (> 90 %), sequential
// read() almost nothing (< 5 %), and so does a sequential mmap reader
// (91 % before the asynchronous read-ahead credited the pages it
// passed). Two probes count the same I/O at once: one following every
// page, and one following 1 in PageCacheSampleEvery chunks (the
// agent's), whose ratios must meet the same bounds. A third probe follows
// every page too, with eight other devices tracked before the file
// system's, which its programs then find in the hash map, not the array:
// it must count what the first one counts.
func TestPageCacheWaste(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	exact, sampled, many := newProbe(t, 1), newProbe(t, PageCacheSampleEvery), newProbe(t, 1)
	procs := loopdev.MemCgroup(t, 256<<20)
	fx := newPCFixture(t)
	for _, p := range []*PageCacheProbe{exact, sampled} {
		if err := p.Track([]uint32{fx.dev}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Devices 0:1…0:8 sort first, so the file system's gets index 8.
	if err := many.Track([]uint32{1, 2, 3, 4, 5, 6, 7, 8, fx.dev}, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("file system %s on %s", DevString(fx.dev), fx.loop.Path)
	const filePages = 1 << 30 >> 12
	probes := []*PageCacheProbe{exact, sampled, many}

	mm := fx.phases(t, probes, procs, "mmap:"+fx.data)
	for i, name := range []string{"every page", "sampled"} {
		if w, ok := mm[i].WastePct(); !ok || w <= 90 {
			t.Errorf("random mmap reads, %s: waste %.2f%% (measured %v), want > 90%%", name, w, ok)
		}
	}
	if mm[0].MmapFaults < 1000 || mm[0].UsedPages < 1000 {
		t.Errorf("random mmap reads: %d faults, %d pages used; want ≥ 1000 each (2000 reads)", mm[0].MmapFaults, mm[0].UsedPages)
	}

	seq := fx.phases(t, probes, procs, "read:"+fx.data)
	for _, ph := range [][]PageCacheStats{mm, seq} {
		a, b := ph[0], ph[2]
		for _, c := range [][2]uint64{{a.AddedPages, b.AddedPages}, {a.UsedPages, b.UsedPages}, {a.WastedPages, b.WastedPages}} {
			if d := max(c[0], c[1]) - min(c[0], c[1]); d > c[0]/100+16 {
				t.Errorf("the probe beyond the array of 8 devices counted %+v, the one within it %+v", b, a)
				break
			}
		}
	}
	for i, name := range []string{"every page", "sampled"} {
		if w, ok := seq[i].WastePct(); !ok || w >= 5 {
			t.Errorf("sequential read(), %s: waste %.2f%% (measured %v), want < 5%%", name, w, ok)
		}
	}
	if seq[0].UsedPages < 9*filePages/10 {
		t.Errorf("sequential read(): %d pages used, want ≥ 90%% of the file's %d", seq[0].UsedPages, filePages)
	}
	// The agent tells random mmap reads, whose fault-around mapped pages
	// it counts as unused (agent.PageCacheWindow.WastePct), by fewer than
	// one asynchronous read-ahead in 8 faults that missed: a sequential
	// mmap reader reaches the PG_readahead page of about every window.
	if r := mm[0]; 8*r.AsyncReadAhead > r.MmapFaults || r.MappedPages == 0 {
		t.Errorf("random mmap reads: %d asynchronous read-aheads, %d pages first mapped, for %d faults; want under 1 in 8, and pages mapped",
			r.AsyncReadAhead, r.MappedPages, r.MmapFaults)
	}
	// A sequential mmap reader touches most pages through minor faults
	// that fire no event; the asynchronous read-ahead credits them.
	ms := fx.phases(t, probes[:1], procs, "mmapseq:"+fx.data)[0]
	if w, ok := ms.WastePct(); !ok || w >= 5 || 8*ms.AsyncReadAhead <= ms.MmapFaults {
		t.Errorf("sequential mmap reads: waste %.2f%% (measured %v), %d asynchronous read-aheads for %d faults; want < 5%% and more than 1 in 8",
			w, ok, ms.AsyncReadAhead, ms.MmapFaults)
	}
	// The sample is about 1 in 8 chunks; the hash must not pick far fewer.
	if want := uint64(filePages / PageCacheSampleEvery); seq[1].UsedPages < want*6/10 || seq[1].UsedPages > want*14/10 {
		t.Errorf("sequential read(), sampled: %d pages used, want about %d (1 in %d)", seq[1].UsedPages, want, PageCacheSampleEvery)
	}
}

// TestPageCacheDropIsNoWaste: pages that leave the page cache unused
// without memory reclaim (here fadvise(POSIX_FADV_DONTNEED); drop_caches
// and truncation alike) are not wasted read-ahead: the decision-quality
// benchmark drops caches before every workload, and the pages a workload
// left unread counted as the next one's waste. A sequential read() of
// the file's first 8 MiB at read_ahead_kb 2560 leaves read-ahead pages
// unread; removing them must count none as wasted. In a 256 MiB memory
// cgroup, random mmap reads that reclaim evicts unused still count (more
// than 90 % waste).
func TestPageCacheDropIsNoWaste(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	p := newProbe(t, 1)
	procs := loopdev.MemCgroup(t, 256<<20)
	fx := newPCFixture(t)
	if err := p.Track([]uint32{fx.dev}, nil); err != nil {
		t.Fatal(err)
	}
	fx.evict(t)
	before := pcStats(t, p, fx.dev)
	readFirst(t, fx.data, 8<<20)
	fx.evict(t)
	d := pcStats(t, p, fx.dev).Sub(before)
	t.Logf("8 MiB read, then dropped: added %d, used %d, wasted %d pages", d.AddedPages, d.UsedPages, d.WastedPages)
	if d.AddedPages < d.UsedPages+256 {
		t.Fatalf("%d pages added for %d used: read-ahead left fewer than 256 unread, the test's premise failed", d.AddedPages, d.UsedPages)
	}
	if d.WastedPages != 0 {
		t.Errorf("%d pages counted as wasted when dropped unused; want 0 (no memory reclaim evicted them)", d.WastedPages)
	}
	mm := fx.phases(t, []*PageCacheProbe{p}, procs, "mmap:"+fx.data)[0]
	if w, ok := mm.WastePct(); !ok || w <= 90 {
		t.Errorf("random mmap reads in the memory cgroup: waste %.2f%% (measured %v), want > 90%%", w, ok)
	}
}

// TestPageCacheAttachedWhileTracking: the probe's programs are attached
// only while it tracks a device, so that a node whose read-ahead no policy
// governs does not pay for them on every page-cache event; tracked again,
// it counts from zero with no state left from before.
func TestPageCacheAttachedWhileTracking(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	p := newProbe(t, 1)
	if len(p.links) != 0 {
		t.Fatalf("a new probe tracking nothing has %d programs attached, want 0", len(p.links))
	}
	fx := newPCFixture(t)
	const readBytes = 64 << 20
	for round := range 2 {
		if err := p.Track([]uint32{fx.dev}, nil); err != nil {
			t.Fatal(err)
		}
		if len(p.links) != len(pageCacheHooks) {
			t.Fatalf("round %d: tracking a device, %d programs attached, want %d", round, len(p.links), len(pageCacheHooks))
		}
		fx.evict(t)
		readFirst(t, fx.data, readBytes)
		s := pcStats(t, p, fx.dev)
		if want := uint64(readBytes >> 12); s.UsedPages < want*9/10 || s.UsedPages > want*2 {
			t.Errorf("round %d: %d pages used after reading %d, want about that (counted from zero)", round, s.UsedPages, want)
		}
		if err := p.Track(nil, nil); err != nil {
			t.Fatal(err)
		}
		if len(p.links) != 0 {
			t.Fatalf("round %d: tracking nothing, %d programs attached, want 0", round, len(p.links))
		}
		for _, name := range []string{pagecacheMapChunks, pagecacheMapTasks} {
			n := 0
			key, val := make([]byte, p.coll.Maps[name].KeySize()), make([]byte, p.coll.Maps[name].ValueSize())
			for it := p.coll.Maps[name].Iterate(); it.Next(key, val); {
				n++
			}
			if n != 0 {
				t.Errorf("round %d: detached, map %s holds %d entries, want 0", round, name, n)
			}
		}
	}
}

// TestPageCacheOverhead times a buffered sequential read of the 1 GiB file
// (1 MiB read() calls, from a cold cache) without and with the probe
// attached and tracking the device, alternating, and logs the medians and
// the probe's BPF run time per program. It runs only with
// SHADOWTUNE_TRACER_BENCH=1 (rounds: SHADOWTUNE_TRACER_BENCH_ROUNDS,
// default 3).
func TestPageCacheOverhead(t *testing.T) {
	if os.Getenv("SHADOWTUNE_TRACER_BENCH") != "1" {
		t.Skip("set SHADOWTUNE_TRACER_BENCH=1 to measure the page-cache probe's overhead")
	}
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	newProbe(t, 1).Close() // skips where unsupported
	fx := newPCFixture(t)
	st, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("BPF statistics: %v", err)
	}
	defer st.Close()
	secs := map[bool][]float64{}
	for round := range envInt("SHADOWTUNE_TRACER_BENCH_ROUNDS", 3) {
		for i := range 2 {
			on := i != round%2 // alternate which goes first
			var p *PageCacheProbe
			if on {
				if p, err = NewPageCacheProbe(PageCacheOptions{SampleEvery: PageCacheSampleEvery}); err != nil {
					t.Fatal(err)
				}
				if err := p.Track([]uint32{fx.dev}, nil); err != nil {
					t.Fatal(err)
				}
			}
			fx.evict(t)
			t0 := time.Now()
			readAll(t, fx.data)
			d := time.Since(t0).Seconds()
			secs[on] = append(secs[on], d)
			if p != nil {
				logProgStats(t, p)
				_ = p.Close()
			}
			t.Logf("round %d probe %-5v %.3f s (%.0f MiB/s)", round, on, d, 1024/d)
		}
	}
	off, on := median(secs[false]), median(secs[true])
	t.Logf("median: without %.3f s (%.0f MiB/s), with %.3f s (%.0f MiB/s): %+.1f%% time",
		off, 1024/off, on, 1024/on, 100*(on-off)/off)
}

// TestPageCacheReadCost times 4 KiB read() calls of the 1 GiB file while
// it is all in the page cache (CPU only: one event per call): without the
// probe, with the probe tracking another device (what every other file
// system on the node pays), and with it tracking the file's device, in
// rotated order; it logs the median cost per call. It runs only with
// SHADOWTUNE_TRACER_BENCH=1 (rounds: SHADOWTUNE_TRACER_BENCH_ROUNDS,
// default 3).
func TestPageCacheReadCost(t *testing.T) {
	if os.Getenv("SHADOWTUNE_TRACER_BENCH") != "1" {
		t.Skip("set SHADOWTUNE_TRACER_BENCH=1 to measure the page-cache probe's cost per read()")
	}
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	newProbe(t, 1).Close() // skips where unsupported
	fx := newPCFixture(t)
	const passes = 4
	calls := float64(passes * (1 << 30) / 4096)
	readCached(t, fx.data, 1<<20) // into the page cache
	modes := []string{"off", "other", "tracked"}
	ns := map[string][]float64{}
	for round := range envInt("SHADOWTUNE_TRACER_BENCH_ROUNDS", 3) {
		for i := range modes {
			mode := modes[(i+round)%len(modes)]
			var p *PageCacheProbe
			if mode != "off" {
				var err error
				if p, err = NewPageCacheProbe(PageCacheOptions{SampleEvery: PageCacheSampleEvery}); err != nil {
					t.Fatal(err)
				}
				dev := fx.dev
				if mode == "other" {
					dev++ // a minor number no file system here has
				}
				if err := p.Track([]uint32{dev}, nil); err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Now()
			for range passes {
				readCached(t, fx.data, 4096)
			}
			per := float64(time.Since(t0).Nanoseconds()) / calls
			ns[mode] = append(ns[mode], per)
			if p != nil {
				_ = p.Close()
			}
			t.Logf("round %d %-7s %.0f ns per 4 KiB read()", round, mode, per)
		}
	}
	off := median(ns["off"])
	for _, m := range modes[1:] {
		v := median(ns[m])
		t.Logf("median %-7s %.0f ns per read(), without the probe %.0f ns: %+.0f ns (%+.1f%%)", m, v, off, v-off, 100*(v-off)/off)
	}
}

// readCached reads path to its end in reads of size bytes.
func readCached(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, size)
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func readAll(t *testing.T, path string) { readFirst(t, path, math.MaxInt64) }

// readFirst reads the first n bytes of path (all of it if shorter) in
// 1 MiB read() calls.
func readFirst(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n > 0 {
		got, err := f.Read(buf[:min(int64(len(buf)), n)])
		n -= int64(got)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// logProgStats logs each of p's programs' run count and mean run time.
func logProgStats(t *testing.T, p *PageCacheProbe) {
	t.Helper()
	var total time.Duration
	for name, prog := range p.coll.Programs {
		s, err := prog.Stats()
		if err != nil || s.RunCount == 0 {
			continue
		}
		total += s.Runtime
		t.Logf("  %-16s %8d runs %6.0f ns/run", name, s.RunCount, float64(s.Runtime.Nanoseconds())/float64(s.RunCount))
	}
	t.Logf("  BPF time in all: %.1f ms", float64(total.Microseconds())/1000)
}

// TestPageCacheUnsupported checks that a kernel without one of the
// tracepoints gets ErrPageCacheUnsupported naming it, as on Linux 6.1.
func TestPageCacheUnsupported(t *testing.T) {
	loopdev.NeedLoop(t, "loads BPF programs")
	saved := pageCacheHooks
	t.Cleanup(func() { pageCacheHooks = saved })
	pageCacheHooks = append(slices.Clone(saved), pageCacheHook{"filemap", "mm_filemap_no_such_event", pagecacheProgPcAdd, false})
	p, err := NewPageCacheProbe(PageCacheOptions{})
	if err == nil {
		_ = p.Close()
		t.Fatal("NewPageCacheProbe succeeded with a tracepoint the kernel lacks")
	}
	if !errors.Is(err, ErrPageCacheUnsupported) || !strings.Contains(err.Error(), "filemap:mm_filemap_no_such_event") {
		t.Fatalf("error %q: want ErrPageCacheUnsupported naming filemap:mm_filemap_no_such_event", err)
	}
}

// TestPageCacheLight: a device counted lightly (its tracing paused) has
// the programs of faults, read-ahead windows and folios attached, not
// those of every read() and read() miss. It counts the faults of random
// mmap reads, their read-around windows (2560 KiB around each fault) and
// what became of the pages the read-around added: more than 90 % waste,
// as counted fully (TestPageCacheWaste). A sequential mmap reader's
// pages are used (under 5 % waste), and a sequential read()'s pages are
// not followed at all: neither used nor wasted. Counted fully again, it
// resolves read() pages as before, and its counters went on from where
// they were.
func TestPageCacheLight(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	p := newProbe(t, 1)
	procs := loopdev.MemCgroup(t, 256<<20)
	fx := newPCFixture(t)
	if err := p.Track([]uint32{fx.dev}, []uint32{fx.dev}); err != nil {
		t.Fatal(err)
	}
	light := 0
	for _, h := range pageCacheHooks {
		if h.light {
			light++
		}
	}
	if len(p.links) != light || light >= len(pageCacheHooks) {
		t.Fatalf("counting lightly, %d programs attached, want %d of %d", len(p.links), light, len(pageCacheHooks))
	}
	for _, name := range []string{pagecacheProgPcGetPages, pagecacheProgPcSyncRa} {
		if _, ok := p.links[name]; ok {
			t.Errorf("counting lightly, %s attached: it runs on every read()", name)
		}
	}
	ph := func(spec string) PageCacheStats { return fx.phases(t, []*PageCacheProbe{p}, procs, spec)[0] }
	mm := ph("mmap:" + fx.data)
	if w, ok := mm.WastePct(); !ok || w <= 90 {
		t.Errorf("random mmap reads counted lightly: waste %.2f%% (measured %v), want > 90%%", w, ok)
	}
	if mm.MmapFaults < 1000 || mm.AroundPages < 64*mm.MmapFaults {
		t.Errorf("counted lightly: %d faults, %d read-around pages; want ≥ 1000 faults (2000 reads) and ≥ 64 pages each", mm.MmapFaults, mm.AroundPages)
	}
	if 8*mm.FaultAsyncReadAhead > mm.MmapFaults {
		t.Errorf("random mmap reads counted lightly: %d asynchronous read-aheads started by faults, for %d faults; want under 1 in 8", mm.FaultAsyncReadAhead, mm.MmapFaults)
	}
	ms := ph("mmapseq:" + fx.data)
	if ms.UsedPages < 1<<30>>12/2 {
		t.Errorf("sequential mmap reads counted lightly: %d pages used, want ≥ half the file's", ms.UsedPages)
	} else if w, ok := ms.WastePct(); !ok || w >= 5 {
		t.Errorf("sequential mmap reads counted lightly: waste %.2f%% (measured %v), want < 5%%", w, ok)
	}
	if ms.FaultAsyncReadAhead < 16 || 10*ms.FaultAsyncReadAhead < 9*ms.AsyncReadAhead {
		t.Errorf("sequential mmap reads counted lightly: %d of %d asynchronous read-aheads started by faults, want ≥ 16 and ≥ 90 %%", ms.FaultAsyncReadAhead, ms.AsyncReadAhead)
	}
	rd := ph("read:" + fx.data)
	if rd.UsedPages+rd.WastedPages > 64 {
		t.Errorf("sequential read() counted lightly: %d pages used, %d wasted; want none followed", rd.UsedPages, rd.WastedPages)
	}
	if rd.AsyncReadAhead < 16 || rd.FaultAsyncReadAhead > 1 {
		t.Errorf("sequential read() counted lightly: %d asynchronous read-aheads, %d of them said to be started by faults; want ≥ 16, and none", rd.AsyncReadAhead, rd.FaultAsyncReadAhead)
	}
	// A mapping scanned at a small depth: the faults start an
	// asynchronous read-ahead about every window, the evidence that
	// makes page faults' windows sequential (agent/readahead).
	setDeviceRA(t, fx.loop.Name, 16)
	low := ph("mmapseq:" + fx.data)
	if low.FaultAsyncReadAhead < 1000 || 2*low.FaultAsyncReadAhead < low.MmapFaults {
		t.Errorf("sequential mmap reads at 16 KiB counted lightly: %d asynchronous read-aheads started by faults, for %d faults; want ≥ 1000 and ≥ 1 in 2", low.FaultAsyncReadAhead, low.MmapFaults)
	}
	setDeviceRA(t, fx.loop.Name, 2560)
	if err := p.Track([]uint32{fx.dev}, nil); err != nil {
		t.Fatal(err)
	}
	if len(p.links) != len(pageCacheHooks) {
		t.Fatalf("counting fully, %d programs attached, want %d", len(p.links), len(pageCacheHooks))
	}
	before := pcStats(t, p, fx.dev)
	if before.MmapFaults < mm.MmapFaults {
		t.Errorf("the counters restarted when the device was counted fully: %d faults, %d before", before.MmapFaults, mm.MmapFaults)
	}
	seq := ph("read:" + fx.data)
	if want := uint64(1 << 30 >> 12); seq.UsedPages < 9*want/10 || seq.AroundPages != 0 {
		t.Errorf("sequential read() counted fully: %d pages used, %d read-around; want ≥ 90%% of %d, and none", seq.UsedPages, seq.AroundPages, want)
	}
}

// TestPageCacheOrigin: ReadUsedPages and ReadWastedPages count the pages
// read() brought in, not those a page fault's read-around added, and
// Windows and AroundWindows count the read-ahead windows and those faults
// read. In a 256 MiB memory cgroup, random mmap reads of the 1 GiB file
// at read_ahead_kb 2560 fill the cgroup with read-around pages; then a
// sequential read() of a second 256 MiB file evicts them unused. The mmap
// reads must count almost nothing as read(), and about one read-around
// window per fault that missed; the scan's interval counts the evicted
// pages as wasted read-around, while the waste of the pages read()
// brought in stays under 5 %, as for any sequential reader, and those
// pages are at least 90 % of the scanned file.
func TestPageCacheOrigin(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device and a file system, loads BPF programs")
	p := newProbe(t, 1)
	procs := loopdev.MemCgroup(t, 256<<20)
	fx := newPCFixture(t)
	scan := filepath.Join(fx.dir, "scan")
	loopdev.WriteRandom(t, scan, 256<<20)
	loopdev.Evict(t, scan)
	if err := p.Track([]uint32{fx.dev}, nil); err != nil {
		t.Fatal(err)
	}
	fx.evict(t)
	before := pcStats(t, p, fx.dev)
	runChild(t, procs, "mmap:"+fx.data)
	mid := pcStats(t, p, fx.dev)
	mm := mid.Sub(before)
	t.Logf("mmap reads: used %d (%d by read()), %d faults, %d read-around windows of %d pages, %d windows in all",
		mm.UsedPages, mm.ReadUsedPages, mm.MmapFaults, mm.AroundWindows, mm.AroundPages, mm.Windows)
	if mm.UsedPages < 1000 || mm.ReadUsedPages > mm.UsedPages/20 {
		t.Errorf("mmap reads: %d pages used, %d of them counted as read(); want ≥ 1000, and ≤ 5 %% of them", mm.UsedPages, mm.ReadUsedPages)
	}
	if mm.AroundWindows < 1000 || mm.AroundWindows > mm.MmapFaults || mm.Windows < mm.AroundWindows {
		t.Errorf("mmap reads: %d read-around windows, %d windows, %d faults; want ≥ 1000 (2000 random reads), at most one a fault, within the windows", mm.AroundWindows, mm.Windows, mm.MmapFaults)
	}
	if per := float64(mm.AroundPages) / float64(max(mm.AroundWindows, 1)); per < 320 || per > 640 {
		t.Errorf("mmap reads: %.0f pages per read-around window, want about read_ahead_kb 2560 (640 pages; 320 at a file's start or end)", per)
	}
	if mm.AroundDepthPages != 640*mm.AroundWindows || mm.DepthPages != 640*mm.Windows {
		t.Errorf("mmap reads: the windows' files' depth sums %d (around %d) for %d windows (%d around), want 640 pages each",
			mm.DepthPages, mm.AroundDepthPages, mm.Windows, mm.AroundWindows)
	}
	runChild(t, procs, "read:"+scan)
	d := pcStats(t, p, fx.dev).Sub(mid)
	all, _ := d.WastePct()
	rd, ok := PageCacheStats{UsedPages: d.ReadUsedPages, WastedPages: d.ReadWastedPages}.WastePct()
	t.Logf("the scan's interval: used %d (%d read()), wasted %d (%d read()): waste %.1f %%, of read() %.2f %%; %d windows, %d around",
		d.UsedPages, d.ReadUsedPages, d.WastedPages, d.ReadWastedPages, all, rd, d.Windows, d.AroundWindows)
	if old := d.WastedPages - d.ReadWastedPages; old < 16384 {
		t.Errorf("%d pages of the mmap reads' read-around were evicted unused during the scan; want ≥ 16384 (64 MiB): the test's premise failed", old)
	}
	if !ok || rd >= 5 {
		t.Errorf("waste of the pages read() brought in %.2f %% (measured %v), want < 5 %%", rd, ok)
	}
	const scanPages = 256 << 20 >> 12
	if d.ReadUsedPages < 9*scanPages/10 {
		t.Errorf("%d pages read() brought in were used, want ≥ 90 %% of the scanned file's %d", d.ReadUsedPages, scanPages)
	}
	if d.AroundWindows != 0 || d.Windows < 16 {
		t.Errorf("the scan: %d windows, %d of them read around faults; want ≥ 16 and none", d.Windows, d.AroundWindows)
	}
	if 10*d.FullWindows < 9*d.Windows || mm.FullWindows != 0 {
		t.Errorf("windows as long as their file's depth: %d of the scan's %d (want ≥ 90 %%), %d of the mmap reads' (want none: read around faults)",
			d.FullWindows, d.Windows, mm.FullWindows)
	}
}
