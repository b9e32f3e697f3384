package schedcost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/statefs"
)

// memBytes is the size of the memory file behind the calibration's loop
// device. Its pages are never written: reads of a hole in a memfd map the
// shared zero page, so the calibration allocates no page cache.
const memBytes = 16 << 20

// Measure attaches a private loop device over an empty memfd (RAM, no
// disk), reads it with 4 KiB O_DIRECT random reads from Options.Workers
// threads under each scheduler in Options.Schedulers in rotated phases,
// and returns each scheduler's CPU time per request beyond none's. Before
// Measure returns, whatever happens, the device gets back the scheduler it
// had and is detached. hostRoot prefixes /sys, as everywhere in the agent.
//
// Errors: the loop device could not be created or attached (no
// /dev/loop-control, not root), a scheduler could not be selected,
// ErrContended, or ctx was cancelled.
func Measure(ctx context.Context, hostRoot string, opt Options) (Costs, error) {
	opt.defaults()
	if err := recoverLeftover(hostRoot, opt.StateDir); err != nil {
		return Costs{}, err
	}
	lo, err := attachMemLoop()
	if err != nil {
		return Costs{}, err
	}
	defer lo.close()
	schedFile := filepath.Join(hostRoot, "/sys/block", lo.name, "queue/scheduler")
	offered, orig, err := offeredSchedulers(schedFile)
	if err != nil {
		return Costs{}, err
	}
	// The loop device outlives its detachment: leave it with the
	// scheduler it had (runs before the detach, deferred above), recorded
	// first, so that a crash meanwhile is mended by the next Measure.
	if err := writeRecord(opt.StateDir, loopRecord{Device: lo.name, Scheduler: orig}); err != nil {
		return Costs{}, err
	}
	defer func() {
		if os.WriteFile(schedFile, []byte(orig), 0) == nil {
			removeRecord(opt.StateDir)
		}
	}()
	var scheds []string
	for _, s := range opt.Schedulers {
		if slices.Contains(offered, s) {
			scheds = append(scheds, s)
		}
	}
	if !slices.Contains(scheds, "none") {
		return Costs{}, fmt.Errorf("schedcost: %s offers no \"none\" to measure against", lo.name)
	}
	samples, err := lo.rounds(ctx, schedFile, scheds, opt)
	if err != nil {
		return Costs{}, err
	}
	c, err := costsOf(samples)
	if err != nil {
		return Costs{}, err
	}
	c.Kernel, c.Device, c.Time = Kernel(), lo.name, time.Now().UTC().Truncate(time.Second)
	return c, nil
}

// rounds measures scheds in rotated rounds until each has opt.Rounds
// uncontended phases, for at most 3 × opt.Rounds rounds; it returns
// ErrContended when they did not come, or as soon as 2 × len(scheds)
// phases were contended: on a busy node the agent measures at every start
// until it succeeds, and each contended phase takes a CPU from the node's
// work (beside a fio load on 2 CPUs, a start took 10.4 s, 4.5 s of it
// CPU, before this limit).
func (l *memLoop) rounds(ctx context.Context, schedFile string, scheds []string, opt Options) (map[string][]phaseResult, error) {
	samples := make(map[string][]phaseResult, len(scheds))
	enough := func() bool {
		for _, s := range scheds {
			if len(samples[s]) < opt.Rounds {
				return false
			}
		}
		return true
	}
	contended, worst := 0, 0.0
	for round := 0; round < 3*opt.Rounds && !enough(); round++ {
		order := slices.Clone(scheds)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := os.WriteFile(schedFile, []byte(s), 0); err != nil {
				return nil, fmt.Errorf("schedcost: select %s on %s: %w", s, l.name, err)
			}
			r, err := l.phase(opt)
			if err != nil {
				return nil, err
			}
			if ratio := r.waitRatio(); ratio > MaxWaitRatio {
				contended, worst = contended+1, max(worst, ratio)
				if contended >= 2*len(scheds) {
					return nil, fmt.Errorf("%w: %d phases of %d, up to %.1f× their CPU time waiting for a CPU", ErrContended,
						contended, contended+countPhases(samples), worst)
				}
				continue
			}
			samples[s] = append(samples[s], r)
		}
	}
	if !enough() {
		return nil, fmt.Errorf("%w: %d phases of %d, up to %.1f× their CPU time waiting for a CPU", ErrContended,
			contended, contended+countPhases(samples), worst)
	}
	return samples, nil
}

func countPhases(m map[string][]phaseResult) int {
	n := 0
	for _, rs := range m {
		n += len(rs)
	}
	return n
}

// loopRecord is the calibration loop device's scheduler before Measure
// changed it, kept in Options.StateDir's node/ while it measures.
type loopRecord struct {
	Device    string `json:"device"`
	Scheduler string `json:"scheduler"`
}

// recordName is the record's file in Options.StateDir.
const recordName = "node/schedcost-loop.json"

func writeRecord(stateDir string, r loopRecord) error {
	if stateDir == "" {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := statefs.WriteFile(stateDir, recordName, 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}); err != nil {
		return fmt.Errorf("schedcost: record %s's scheduler before changing it: %w", r.Device, err)
	}
	return nil
}

func removeRecord(stateDir string) {
	if stateDir != "" {
		_ = statefs.Remove(stateDir, recordName)
	}
}

// recoverLeftover puts back the scheduler a Measure that did not finish
// (a crash, SIGKILL) left on its loop device, when that device is still
// detached (no loop/ directory in sysfs); a device attached since belongs
// to whoever attached it, and is left alone. The record is then dropped.
// A record that cannot be read or parsed is an error naming it.
func recoverLeftover(hostRoot, stateDir string) error {
	if stateDir == "" {
		return nil
	}
	b, err := statefs.ReadFile(stateDir, recordName, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("schedcost: %w", err) // it names the file
	}
	var r loopRecord
	err = json.Unmarshal(b, &r)
	if err == nil && !strings.HasPrefix(r.Device, "loop") {
		err = fmt.Errorf("device %q is not a loop device", r.Device)
	}
	if err != nil {
		return fmt.Errorf("schedcost: %s: %w", filepath.Join(stateDir, recordName), err)
	}
	dev := filepath.Join(hostRoot, "/sys/block", r.Device)
	if _, err := os.Stat(filepath.Join(dev, "loop")); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(filepath.Join(dev, "queue/scheduler"), []byte(r.Scheduler), 0); err != nil &&
			!errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("schedcost: put back %s's scheduler %s: %w", r.Device, r.Scheduler, err)
		}
	}
	return statefs.Remove(stateDir, recordName)
}

// Kernel is the running kernel's release (uname -r), "" when uname fails.
func Kernel() string {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return ""
	}
	return unix.ByteSliceToString(uts.Release[:])
}

// memLoop is the calibration's loop device.
type memLoop struct {
	name     string
	dev, mem *os.File
}

// memName names the memfd and the loop device's backing file: the
// process's pid in it tells whose calibration a loop device serves
// (losetup -l, /sys/block/loopN/loop/backing_file).
func memName() string { return fmt.Sprintf("shadowtune-schedcost-%d", os.Getpid()) }

// attachMemLoop creates an empty memfd and attaches it read-only to a
// free loop device (LOOP_CTL_GET_FREE, LOOP_CONFIGURE with autoclear),
// retrying when another process takes the same device first.
func attachMemLoop() (*memLoop, error) {
	mfd, err := unix.MemfdCreate(memName(), unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("schedcost: memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(mfd), "memfd")
	if err := unix.Ftruncate(mfd, memBytes); err != nil {
		mem.Close()
		return nil, fmt.Errorf("schedcost: size the memfd: %w", err)
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		mem.Close()
		return nil, fmt.Errorf("schedcost: %w", err)
	}
	defer ctl.Close()
	for range 8 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			mem.Close()
			return nil, fmt.Errorf("schedcost: LOOP_CTL_GET_FREE: %w", err)
		}
		lo, err := configure(n, mem)
		if errors.Is(err, unix.EBUSY) {
			continue // another process attached it first
		}
		if err != nil {
			mem.Close()
			return nil, err
		}
		return lo, nil
	}
	mem.Close()
	return nil, errors.New("schedcost: every free loop device was taken before it could be attached")
}

// configure attaches mem to loop device n.
func configure(n int, mem *os.File) (*memLoop, error) {
	name := fmt.Sprintf("loop%d", n)
	dev, err := openLoop(name, n)
	if err != nil {
		return nil, err
	}
	cfg := unix.LoopConfig{Fd: uint32(mem.Fd()), Size: 4096}
	cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY | unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:], memName())
	if err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg); err != nil {
		dev.Close()
		return nil, fmt.Errorf("schedcost: attach %s: %w", name, err)
	}
	return &memLoop{name: name, dev: dev, mem: mem}, nil
}

// openLoop opens /dev/loopN for direct reads. A container's /dev is a
// copy made when it started, without the loop devices the kernel created
// since: then a private device node is made for it, opened and unlinked.
func openLoop(name string, n int) (*os.File, error) {
	const flags = os.O_RDONLY | unix.O_DIRECT | unix.O_CLOEXEC
	dev, err := os.OpenFile("/dev/"+name, flags, 0)
	if !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return nil, fmt.Errorf("schedcost: %w", err)
		}
		return dev, nil
	}
	dir, err := os.MkdirTemp("", "shadowtune-schedcost-")
	if err != nil {
		return nil, fmt.Errorf("schedcost: %w", err)
	}
	defer os.RemoveAll(dir)
	node := filepath.Join(dir, name)
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(loopMajor, uint32(n)))); err != nil {
		return nil, fmt.Errorf("schedcost: no /dev/%s, and mknod: %w", name, err)
	}
	dev, err = os.OpenFile(node, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("schedcost: %w", err)
	}
	return dev, nil
}

// loopMajor is the loop driver's block major (Documentation/admin-guide/devices.txt).
const loopMajor = 7

// close detaches the loop device (autoclear: at the last close) and frees
// the memfd.
func (l *memLoop) close() {
	_ = unix.IoctlSetInt(int(l.dev.Fd()), unix.LOOP_CLR_FD, 0)
	l.dev.Close()
	l.mem.Close()
}

// phase runs opt.Workers readers for opt.Warmup + opt.Phase and counts
// the requests, CPU and wall time of the measured part.
func (l *memLoop) phase(opt Options) (phaseResult, error) {
	var (
		mu    sync.Mutex
		total phaseResult
		first error
		wg    sync.WaitGroup
	)
	start := time.Now().Add(opt.Warmup)
	end := start.Add(opt.Phase)
	for w := range opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := l.read(uint64(w)+1, start, end)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			total.requests += r.requests
			total.cpuNs += r.cpuNs
			total.waitNs += r.waitNs
		}()
	}
	wg.Wait()
	return total, first
}

// read issues 4 KiB random reads on its own OS thread until end, counting
// those completed after start and the thread's CPU time meanwhile.
func (l *memLoop) read(seed uint64, start, end time.Time) (phaseResult, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := alignedBuf(4096)
	rng := rand.New(rand.NewPCG(seed, 0x5c4ed))
	var r phaseResult
	var at0 schedStat
	counting := false
	for {
		now := time.Now()
		if !counting && !now.Before(start) {
			counting, at0 = true, threadSchedStat()
		}
		if !now.Before(end) {
			break
		}
		off := int64(rng.IntN(memBytes/4096)) * 4096
		if _, err := unix.Pread(int(l.dev.Fd()), buf, off); err != nil {
			return r, fmt.Errorf("schedcost: read %s: %w", l.name, err)
		}
		if counting {
			r.requests++
		}
	}
	at1 := threadSchedStat()
	r.cpuNs, r.waitNs = at1.cpuNs-at0.cpuNs, at1.waitNs-at0.waitNs
	return r, nil
}

// schedStat is a thread's /proc/thread-self/schedstat: the time it ran on
// a CPU and the time it waited on a run queue, runnable, ns (the
// scheduler's sum_exec_runtime and run_delay).
type schedStat struct{ cpuNs, waitNs int64 }

func threadSchedStat() schedStat {
	var st schedStat
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return st
	}
	_, _ = fmt.Sscan(string(b), &st.cpuNs, &st.waitNs)
	return st
}

// alignedBuf returns n bytes aligned to 4096, as O_DIRECT needs.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 0
	if a := int(uintptr(unsafe.Pointer(&b[0])) & 4095); a != 0 {
		off = 4096 - a
	}
	return b[off : off+n]
}

// offeredSchedulers reads queue/scheduler: the schedulers offered and
// the selected one (sysfs.ParseScheduler).
func offeredSchedulers(path string) (offered []string, current string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("schedcost: %w", err)
	}
	if offered, current, err = sysfs.ParseScheduler(string(b)); err != nil {
		return nil, "", fmt.Errorf("schedcost: %s: %w", path, err)
	}
	return offered, current, nil
}
