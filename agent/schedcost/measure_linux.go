package schedcost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
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
// had and is then detached. hostRoot prefixes /sys, as everywhere in the
// agent.
//
// A process killed while it measures (SIGKILL, out of memory) cannot put
// the scheduler back; the kernel keeps a loop device's queue settings
// across a detach, so a device detached then would come to its next user
// on the calibration's last scheduler. The device is therefore attached
// without autoclear: a killed calibration leaves it bound to its memfd,
// where no one else can take it, and recorded in Options.StateDir; the
// next Measure, or Recover at the agent's next start or `run --revert`,
// puts its scheduler back and only then detaches it.
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
	schedFile := filepath.Join(hostRoot, "/sys/block", lo.name, "queue/scheduler")
	offered, orig, err := offeredSchedulers(schedFile)
	if err != nil {
		lo.close()
		return Costs{}, err
	}
	// The loop device outlives its detachment: leave it with the
	// scheduler it had, recorded first, so that a crash meanwhile is
	// mended by Recover; then detach it; then drop the record.
	if err := writeRecord(opt.StateDir, loopRecord{Device: lo.name, Scheduler: orig, Backing: lo.backing}); err != nil {
		lo.close()
		return Costs{}, err
	}
	defer func() {
		if os.WriteFile(schedFile, []byte(orig), 0) != nil {
			lo.release() // still bound, never detached on the wrong scheduler: Recover's
			return
		}
		if lo.close() == nil {
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
	// Backing is the memfd's name (memName): the device is still the
	// calibration's while /sys/block/DEV/loop/backing_file names it.
	// Absent in records of agents that attached with autoclear.
	Backing string `json:"backing,omitempty"`
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

// Recover mends what a Measure killed while it measured left behind, from
// its record in stateDir (node/schedcost-loop.json; none: nothing to do):
//
//   - its loop device still bound to the calibration's memfd (a killed
//     Measure leaves it so: no one else could take it): the scheduler it
//     had is put back, then the device is detached;
//   - the device detached (a record of an agent that attached with
//     autoclear, or detached by hand) and still free: the scheduler is put
//     back;
//   - the device bound to another file: it is someone else's now, and is
//     left alone.
//
// The record is then dropped. hostRoot prefixes /sys. Errors: a record
// that cannot be read or parsed (naming it), a device still held open
// exclusively (a calibration that is alive: the record is kept), or the
// scheduler or the detach failing.
func Recover(hostRoot, stateDir string) error { return recoverLeftover(hostRoot, stateDir) }

// recoverLeftover is Recover.
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
	n := -1
	if err == nil {
		if _, serr := fmt.Sscanf(r.Device, "loop%d", &n); serr != nil || n < 0 || fmt.Sprintf("loop%d", n) != r.Device {
			err = fmt.Errorf("device %q is not a loop device", r.Device)
		}
	}
	if err != nil {
		return fmt.Errorf("schedcost: %s: %w", filepath.Join(stateDir, recordName), err)
	}
	dev := filepath.Join(hostRoot, "/sys/block", r.Device)
	schedFile := filepath.Join(dev, "queue/scheduler")
	backing, berr := os.ReadFile(filepath.Join(dev, "loop/backing_file"))
	switch {
	case berr == nil && r.Backing != "" && strings.HasPrefix(strings.TrimSpace(string(backing)), "/memfd:"+r.Backing):
		if err := restoreAndDetach(r, n, schedFile); err != nil {
			return err
		}
	case berr == nil:
		// Bound to another file: someone else's device now.
	case errors.Is(berr, fs.ErrNotExist):
		if err := os.WriteFile(schedFile, []byte(r.Scheduler), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("schedcost: put back %s's scheduler %s: %w", r.Device, r.Scheduler, err)
		}
	default:
		return fmt.Errorf("schedcost: %s: %w", r.Device, berr)
	}
	return statefs.Remove(stateDir, recordName)
}

// restoreAndDetach puts back the scheduler of the calibration's loop
// device n, still bound to its memfd, then detaches it. The device is
// opened exclusively first: a live calibration holds it so (EBUSY).
func restoreAndDetach(r loopRecord, n int, schedFile string) error {
	f, err := openLoop(r.Device, n, unix.O_EXCL)
	if err != nil {
		return fmt.Errorf("schedcost: %s, the calibration device of a run that did not finish: %w", r.Device, err)
	}
	defer f.Close()
	if err := os.WriteFile(schedFile, []byte(r.Scheduler), 0); err != nil {
		return fmt.Errorf("schedcost: put back %s's scheduler %s: %w", r.Device, r.Scheduler, err)
	}
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil {
		return fmt.Errorf("schedcost: detach %s: %w", r.Device, err)
	}
	return nil
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
	backing  string // memName
	dev, mem *os.File
}

// memName names the memfd and the loop device's backing file: the
// process's pid in it tells whose calibration a loop device serves
// (losetup -l, /sys/block/loopN/loop/backing_file), and a random part
// tells one calibration from another (a container's agent is often pid
// 1).
func memName() string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s%x", memPrefix(), r)
}

// memPrefix is what the names of this process's memfds begin with.
func memPrefix() string { return fmt.Sprintf("shadowtune-schedcost-%d-", os.Getpid()) }

// attachMemLoop creates an empty memfd and attaches it read-only to a
// free loop device (LOOP_CTL_GET_FREE, then LOOP_CONFIGURE on it, opened
// exclusively, without autoclear: see Measure), retrying when another
// process takes the same device first.
func attachMemLoop() (*memLoop, error) {
	name := memName()
	mfd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
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
		lo, err := configure(n, mem, name)
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

// configure attaches mem (named backing) to loop device n.
func configure(n int, mem *os.File, backing string) (*memLoop, error) {
	name := fmt.Sprintf("loop%d", n)
	dev, err := openLoop(name, n, unix.O_EXCL)
	if err != nil {
		return nil, err
	}
	cfg := unix.LoopConfig{Fd: uint32(mem.Fd()), Size: 4096}
	cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY // no autoclear: see Measure
	copy(cfg.Info.File_name[:], backing)
	if err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg); err != nil {
		dev.Close()
		return nil, fmt.Errorf("schedcost: attach %s: %w", name, err)
	}
	return &memLoop{name: name, backing: backing, dev: dev, mem: mem}, nil
}

// openLoop opens /dev/loopN for direct reads, with extra flags (O_EXCL:
// no one else holds it exclusively, or EBUSY). A container's /dev is a
// copy made when it started, without the loop devices the kernel created
// since: then a private device node is made for it, opened and unlinked.
func openLoop(name string, n, extra int) (*os.File, error) {
	flags := os.O_RDONLY | unix.O_DIRECT | unix.O_CLOEXEC | extra
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

// release closes the descriptors without detaching: the device stays
// bound to the memfd (the loop driver holds it), for Recover.
func (l *memLoop) release() {
	l.dev.Close()
	l.mem.Close()
}

// close detaches the loop device (at once, or at the last close when
// another process, udev say, has it open) and frees the memfd. A detach
// that fails leaves the device bound, its record in place for Recover.
func (l *memLoop) close() error {
	err := unix.IoctlSetInt(int(l.dev.Fd()), unix.LOOP_CLR_FD, 0)
	l.dev.Close()
	l.mem.Close()
	if err != nil {
		return fmt.Errorf("schedcost: detach %s: %w", l.name, err)
	}
	return nil
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
	rng := mrand.New(mrand.NewPCG(seed, 0x5c4ed))
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
