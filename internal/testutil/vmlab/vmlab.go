// Package vmlab boots a Debian kernel in QEMU to run a shell script on it:
// for tests that need kernel features or a kernel version the host lacks
// (device-mapper, dm-cache, eBPF CO-RE on another kernel).
//
// The kernel is the one Debian's linux-image-amd64 depends on, fetched
// with apt-get download and unpacked with dpkg -x (never installed); the
// initramfs is busybox-static, the kernel modules block storage needs,
// and fio, dmsetup, lvm, mke2fs and tac from the host with their
// libraries. Both are cached under CacheDir, keyed by the package and a
// hash of the files.
// Each VM appends a small cpio with its script (and any Options.Files) to
// the cached initramfs. The script's output and exit code come back on a
// second serial port; the guest has no network.
//
// QEMU uses hardware KVM when kvm_intel or kvm_amd is loaded and TCG
// otherwise (a /dev/kvm from another hypervisor, such as PVM, does not
// boot a stock kernel). Under TCG a boot takes 3–8 s; CPU-heavy work is
// slow, so compare ratios measured inside one VM, not absolute times.
//
// hack/ensure-vm-deps.sh installs what it needs (qemu-system-x86,
// busybox-static, cpio, xz-utils, fio, dmsetup, lvm2, e2fsprogs).
package vmlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Throttle limits a virtio disk like a cloud volume (QEMU's
// throttling.iops-total and throttling.bps-total).
type Throttle struct {
	IOPS        int   // requests per second, reads and writes together; 0 for no limit
	BytesPerSec int64 // bytes per second, reads and writes together; 0 for no limit
}

// CloudDisk is a general-purpose cloud volume: 3,000 IOPS, 125 MiB/s.
var CloudDisk = Throttle{IOPS: 3000, BytesPerSec: 131072000}

// Disk is a virtio disk of the guest: the first is /dev/vda, the second
// /dev/vdb, and so on.
type Disk struct {
	// SizeMiB is the size in MiB of a new, zeroed (sparse) image in the
	// VM's temporary folder. Ignored when Image is set.
	SizeMiB int
	// Image is an existing raw image file to attach read-write instead.
	Image    string
	Throttle *Throttle // nil for an unthrottled disk
	// BlockSize is the disk's logical and physical block size in bytes
	// (virtio-blk's logical_block_size and physical_block_size: 512,
	// 4096); 0 for QEMU's default, 512.
	BlockSize int
}

// Options configure a VM. The zero value is a 2-CPU, 2 GiB VM without
// disks and a 5-minute timeout.
type Options struct {
	Disks     []Disk
	CPUs      int           // virtual CPUs; default 2
	MemoryMiB int           // guest memory in MiB; default 2048
	Timeout   time.Duration // the VM is killed after this; default 5 minutes
	// Files are host files to put into the guest: guest path (absolute)
	// → host path. Programs must be static or have their libraries in the
	// base initramfs.
	Files map[string]string
	// Accel is "kvm", "tcg" or "" for automatic (HardwareKVM, else TCG);
	// $SHADOWTUNE_VM_ACCEL overrides "".
	Accel string
	// Cmdline is added to the kernel command line.
	Cmdline string
}

// Result is how a VM's script ended.
type Result struct {
	Output   string // the script's standard output and error, interleaved
	ExitCode int    // the script's exit status
	Console  string // the guest's console (kernel log and init's notes)
	Accel    string // "kvm" or "tcg"
	// Boot is the guest's uptime when the script started; Script the
	// script's run time by the guest's clock; Wall the time from starting
	// QEMU to its exit, on the host.
	Boot, Script, Wall time.Duration
}

// VM is a running QEMU process.
type VM struct {
	cmd     *exec.Cmd
	dir     string // the VM's temporary folder: initramfs, logs, new images
	accel   string
	start   time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	waitErr error
	once    sync.Once
}

// HardwareKVM reports whether /dev/kvm is hardware KVM (kvm_intel or
// kvm_amd loaded) and usable.
func HardwareKVM() bool {
	hw := false
	for _, m := range []string{"kvm_intel", "kvm_amd"} {
		if _, err := os.Stat("/sys/module/" + m); err == nil {
			hw = true
		}
	}
	if !hw {
		return false
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// validate checks o and fills in the defaults.
func (o *Options) validate() error {
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 2048
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Accel == "" {
		o.Accel = os.Getenv("SHADOWTUNE_VM_ACCEL")
	}
	switch {
	case o.CPUs < 0 || o.MemoryMiB < 0 || o.Timeout < 0:
		return fmt.Errorf("vmlab: CPUs, MemoryMiB and Timeout must not be negative (got %d, %d, %v)", o.CPUs, o.MemoryMiB, o.Timeout)
	case o.Accel != "" && o.Accel != "kvm" && o.Accel != "tcg":
		return fmt.Errorf("vmlab: Accel must be kvm, tcg or empty, got %q", o.Accel)
	case len(o.Disks) > 20:
		return fmt.Errorf("vmlab: at most 20 disks, got %d", len(o.Disks))
	}
	for i, d := range o.Disks {
		if d.Image == "" && d.SizeMiB <= 0 {
			return fmt.Errorf("vmlab: disk %d: SizeMiB must be positive or Image set", i)
		}
		if d.Throttle != nil && (d.Throttle.IOPS < 0 || d.Throttle.BytesPerSec < 0) {
			return fmt.Errorf("vmlab: disk %d: negative throttle %+v", i, *d.Throttle)
		}
		if d.BlockSize != 0 && (d.BlockSize < 512 || d.BlockSize > 65536 || d.BlockSize&(d.BlockSize-1) != 0) {
			return fmt.Errorf("vmlab: disk %d: BlockSize %d is not a power of two from 512 to 65536", i, d.BlockSize)
		}
	}
	for g := range o.Files {
		if !path.IsAbs(g) || path.Clean(g) == "/" {
			return fmt.Errorf("vmlab: Files: guest path %q is not an absolute file path", g)
		}
	}
	return nil
}

// Start boots a VM that runs script (with busybox sh, as root, in /root,
// with DM_DISABLE_UDEV=1) and powers off. It returns once QEMU runs; Wait
// returns the script's result. The caller must call Close.
func Start(ctx context.Context, script string, o Options) (*VM, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	a, err := Prepare(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{"qemu-system-x86_64", "cpio"} {
		if _, err := lookPath(p); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "vmlab-")
	if err != nil {
		return nil, fmt.Errorf("vmlab: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	initrd, err := runInitramfs(ctx, a.Initramfs, dir, script, o.Files)
	if err != nil {
		return nil, err
	}
	accel := o.Accel
	if accel == "" {
		accel = "tcg"
		if HardwareKVM() {
			accel = "kvm"
		}
	}
	args := []string{"-machine", "q35", "-m", strconv.Itoa(o.MemoryMiB), "-smp", strconv.Itoa(o.CPUs),
		"-nographic", "-nodefaults", "-nic", "none", "-no-reboot",
		"-kernel", a.Kernel, "-initrd", initrd,
		"-append", strings.TrimSpace("console=ttyS0 panic=-1 quiet loglevel=4 " + o.Cmdline),
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-serial", "file:" + filepath.Join(dir, "serial1.out")}
	if accel == "kvm" {
		args = append(args, "-accel", "kvm", "-cpu", "host")
	} else {
		args = append(args, "-accel", "tcg,thread=multi", "-cpu", "max")
	}
	for i, d := range o.Disks {
		img := d.Image
		if img == "" {
			img = filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
			if err := newImage(img, int64(d.SizeMiB)<<20); err != nil {
				return nil, err
			}
		}
		if strings.Contains(img, ",") {
			return nil, fmt.Errorf("vmlab: disk %d: image path %q has a comma", i, img)
		}
		// -drive if=none plus -device keeps the disks in this order
		// (QEMU adds if=virtio's devices after every -device).
		drive := fmt.Sprintf("file=%s,if=none,id=disk%d,format=raw,%s", img, i, cacheMode(img))
		if t := d.Throttle; t != nil {
			if t.IOPS > 0 {
				drive += ",throttling.iops-total=" + strconv.Itoa(t.IOPS)
			}
			if t.BytesPerSec > 0 {
				drive += ",throttling.bps-total=" + strconv.FormatInt(t.BytesPerSec, 10)
			}
		}
		dev := fmt.Sprintf("virtio-blk-pci,drive=disk%d", i)
		if d.BlockSize > 0 {
			dev += fmt.Sprintf(",logical_block_size=%d,physical_block_size=%d", d.BlockSize, d.BlockSize)
		}
		args = append(args, "-drive", drive, "-device", dev)
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Timeout)
	cmd := exec.CommandContext(qctx, "qemu-system-x86_64", args...)
	cmd.Dir = dir
	qlog, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("vmlab: %w", err)
	}
	cmd.Stdout, cmd.Stderr = qlog, qlog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	vm := &VM{cmd: cmd, dir: dir, accel: accel, start: time.Now(), cancel: cancel, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		cancel()
		qlog.Close()
		return nil, fmt.Errorf("vmlab: qemu: %w", err)
	}
	// Stop QEMU when the caller's context ends, not only at the timeout.
	stop := context.AfterFunc(ctx, cancel)
	go func() {
		vm.waitErr = cmd.Wait()
		stop()
		qlog.Close()
		close(vm.done)
	}()
	ok = true
	return vm, nil
}

// Wait waits for the VM to power off and returns the script's result. The
// error says why there is none: QEMU failed, the VM was killed (timeout,
// Kill, the context of Start) or the guest stopped before the script
// ended; the Result then has the console and what output there was.
func (vm *VM) Wait() (Result, error) {
	<-vm.done
	r := Result{Accel: vm.accel, Wall: time.Since(vm.start)}
	con, _ := os.ReadFile(filepath.Join(vm.dir, "console.log"))
	r.Console = string(con)
	out, _ := os.ReadFile(filepath.Join(vm.dir, "serial1.out"))
	s, perr := parseSerial(out)
	r.Output, r.ExitCode, r.Boot, r.Script = s.output, s.exitCode, s.boot, s.script
	if vm.waitErr != nil {
		ql, _ := os.ReadFile(filepath.Join(vm.dir, "qemu.log"))
		return r, fmt.Errorf("vmlab: qemu after %.1f s: %w: %s", r.Wall.Seconds(), vm.waitErr, strings.TrimSpace(string(ql)))
	}
	if perr != nil {
		return r, fmt.Errorf("vmlab: after %.1f s: %w; console ends:\n%s", r.Wall.Seconds(), perr, tail(r.Console, 25))
	}
	return r, nil
}

// Kill stops QEMU (SIGKILL) if it runs and waits for it to exit.
func (vm *VM) Kill() {
	vm.cancel()
	<-vm.done
}

// Close kills the VM if it still runs and removes its temporary folder
// (initramfs, logs, the disk images it created). It is idempotent.
func (vm *VM) Close() error {
	vm.Kill()
	var err error
	vm.once.Do(func() {
		if e := os.RemoveAll(vm.dir); e != nil {
			err = fmt.Errorf("vmlab: %w", e)
		}
	})
	return err
}

// Run boots a VM running script and returns its result; the test fails
// (t.Fatal) when there is none (see VM.Wait), with the console's end. The
// VM is killed and its files removed at t's cleanup, or earlier when Run
// returns.
func Run(t testing.TB, script string, o Options) Result {
	t.Helper()
	vm, err := Start(t.Context(), script, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vm.Close() })
	r, err := vm.Wait()
	if err != nil {
		t.Fatalf("%v\nscript output:\n%s", err, tail(r.Output, 40))
	}
	if err := vm.Close(); err != nil {
		t.Error(err)
	}
	return r
}

// runInitramfs writes the VM's initramfs into dir: the base one followed
// by a cpio of the script (/vmlab/run.sh) and files.
func runInitramfs(ctx context.Context, base, dir, script string, files map[string]string) (string, error) {
	stage := filepath.Join(dir, "stage")
	if err := os.MkdirAll(filepath.Join(stage, "vmlab"), 0o755); err != nil {
		return "", fmt.Errorf("vmlab: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stage, "vmlab", "run.sh"), []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("vmlab: %w", err)
	}
	guests := make([]string, 0, len(files))
	for g := range files {
		guests = append(guests, g)
	}
	sort.Strings(guests)
	for _, g := range guests {
		fi, err := os.Stat(files[g])
		if err != nil {
			return "", fmt.Errorf("vmlab: Files[%s]: %w", g, err)
		}
		dst := filepath.Join(stage, filepath.FromSlash(path.Clean(g)))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("vmlab: %w", err)
		}
		if err := copyFile(files[g], dst, fi.Mode().Perm()); err != nil {
			return "", err
		}
	}
	extra := filepath.Join(dir, "run.cpio")
	if err := writeCpio(ctx, stage, extra); err != nil {
		return "", err
	}
	if err := os.RemoveAll(stage); err != nil {
		return "", fmt.Errorf("vmlab: %w", err)
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	out, err := os.Create(initrd)
	if err != nil {
		return "", fmt.Errorf("vmlab: %w", err)
	}
	defer out.Close()
	for _, p := range []string{base, extra} {
		in, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("vmlab: %w", err)
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			return "", fmt.Errorf("vmlab: initramfs: %w", err)
		}
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("vmlab: %w", err)
	}
	return initrd, os.Remove(extra)
}

// newImage creates a sparse file of size bytes.
func newImage(p string, size int64) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("vmlab: %w", err)
	}
	return f.Close()
}

// cacheMode is QEMU's cache=none,aio=native (O_DIRECT, the host's page
// cache out of the way) where img's file system supports O_DIRECT, else
// cache=writeback (tmpfs).
func cacheMode(img string) string {
	f, err := os.OpenFile(img, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) {
			return "cache=writeback,aio=threads"
		}
		return "cache=none,aio=native" // QEMU will say what is wrong
	}
	f.Close()
	return "cache=none,aio=native"
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
