package vmlab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// layoutVersion changes whenever the base initramfs's layout or init
// script changes in a way its key would not see.
const layoutVersion = "vmlab-base-1"

// bootModules are loaded by the guest's init before the script runs, in
// this order, with every module they depend on (modules.dep, which busybox
// depmod makes from each module's "depends"). crc32c_generic is
// libcrc32c's soft dependency ("softdep=pre: crc32c", which modules.dep
// does not list): without it dm-persistent-data, so dm-cache, fails to
// load. extraModules are in the initramfs for the script to load with
// options (brd rd_size=..., zram num_devices=...), or as needed (ext4,
// with jbd2, mbcache and crc16, which also mounts the ext2 file systems
// busybox mke2fs makes: a state directory that outlives an unclean reset;
// its soft dependency crc32c is crc32c_generic, loaded at boot).
var (
	bootModules  = []string{"crc32c_generic", "virtio_pci", "virtio_blk", "dm_mod", "dm_cache", "dm_cache_smq", "kyber_iosched", "bfq"}
	extraModules = []string{"brd", "zram", "null_blk", "dm_bufio", "dm_bio_prison", "dm_persistent_data", "ext4"}
)

// hostPrograms are copied into the base initramfs with their libraries
// (ldd), at the same paths as on the host: mke2fs (e2fsprogs) makes ext4
// file systems, tac (coreutils) reads a file backward in 8 KiB reads as
// KDSim's TAC does (busybox's tac reads it forward). The initramfs's key
// hashes these files and the modules' names, so a change here builds a
// new one.
var hostPrograms = []string{"fio", "dmsetup", "lvm", "mke2fs", "tac"}

// Assets are the cached kernel and base initramfs every VM boots.
type Assets struct {
	KernelPackage string // the Debian package, e.g. linux-image-6.1.0-56-amd64
	KernelRelease string // the guest's uname -r, e.g. 6.1.0-56-amd64
	// Kernel is the file QEMU boots: the uncompressed ELF vmlinux (PVH
	// entry, no in-guest decompression) or, when it could not be
	// extracted, the package's bzImage.
	Kernel    string
	Initramfs string // the base initramfs: an uncompressed newc cpio

	KernelTime, InitramfsTime     time.Duration // time to get each layer (fetch/build, or find it cached)
	KernelCached, InitramfsCached bool          // the layer was in the cache already
}

// CacheDir is where the layers are kept: $SHADOWTUNE_VM_CACHE, else
// shadowtune/vm under the user's cache directory (~/.cache).
func CacheDir() (string, error) {
	if d := os.Getenv("SHADOWTUNE_VM_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("vmlab: no cache directory (set SHADOWTUNE_VM_CACHE): %w", err)
	}
	return filepath.Join(d, "shadowtune", "vm"), nil
}

var (
	prepareOnce sync.Once
	prepared    *Assets
	prepareErr  error
)

// Prepare returns the kernel and base initramfs, fetching or building
// them into CacheDir the first time (the kernel with apt-get download,
// which needs up-to-date package lists). It runs once per process; later
// calls return the first call's result. ctx bounds the first call's
// commands.
func Prepare(ctx context.Context) (*Assets, error) {
	prepareOnce.Do(func() { prepared, prepareErr = prepare(ctx) })
	return prepared, prepareErr
}

func prepare(ctx context.Context) (*Assets, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("vmlab: cache: %w", err)
	}
	a := &Assets{}
	t0 := time.Now()
	kroot, err := a.kernel(ctx, cache)
	if err != nil {
		return nil, err
	}
	a.KernelTime = time.Since(t0)
	t0 = time.Now()
	if err := a.initramfs(ctx, cache, kroot); err != nil {
		return nil, err
	}
	a.InitramfsTime = time.Since(t0)
	return a, nil
}

// staleAfter is how long a cached layer may go unused before a new layer
// of its kind prunes it. Layers in use are touched at every Prepare.
const staleAfter = 14 * 24 * time.Hour

// pruneStale removes the cached layers matching pattern unused for
// staleAfter: initramfs files, or kernel folders by their release file.
func pruneStale(pattern string) {
	old, _ := filepath.Glob(pattern)
	for _, p := range old {
		fi, err := os.Stat(p)
		if err != nil || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		if filepath.Base(p) == "release" {
			p = filepath.Dir(p)
		}
		_ = os.RemoveAll(p)
	}
}

// kernelPackage is the package linux-image-amd64 depends on, or
// $SHADOWTUNE_VM_KERNEL_PKG.
func kernelPackage(ctx context.Context) (string, error) {
	if p := os.Getenv("SHADOWTUNE_VM_KERNEL_PKG"); p != "" {
		return p, nil
	}
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("vmlab: apt-cache depends linux-image-amd64: %w", err)
	}
	p, err := parseAptDepends(string(out), "linux-image-")
	if err != nil {
		return "", fmt.Errorf("vmlab: %w (run apt-get update?)", err)
	}
	return p, nil
}

// kernel finds or fetches the kernel package's files into
// cache/kernel/PKG and returns that folder (the package's tree, with
// modules.dep made by busybox depmod, and vmlinux if extracted).
func (a *Assets) kernel(ctx context.Context, cache string) (string, error) {
	pkg, err := kernelPackage(ctx)
	if err != nil {
		return "", err
	}
	a.KernelPackage = pkg
	dir := filepath.Join(cache, "kernel", pkg)
	if _, err := os.Stat(filepath.Join(dir, "release")); err != nil {
		if err := fetchKernel(ctx, pkg, dir); err != nil {
			return "", err
		}
		pruneStale(filepath.Join(cache, "kernel", "*", "release"))
	} else {
		a.KernelCached = true
		now := time.Now()
		_ = os.Chtimes(filepath.Join(dir, "release"), now, now) // in use: not pruned
	}
	rel, err := os.ReadFile(filepath.Join(dir, "release"))
	if err != nil {
		return "", fmt.Errorf("vmlab: kernel cache: %w", err)
	}
	a.KernelRelease = strings.TrimSpace(string(rel))
	a.Kernel = filepath.Join(dir, "vmlinux")
	if _, err := os.Stat(a.Kernel); err != nil {
		a.Kernel = filepath.Join(dir, "root", "boot", "vmlinuz-"+a.KernelRelease)
	}
	return dir, nil
}

// fetchKernel downloads pkg (apt-get download), unpacks it (dpkg -x),
// runs busybox depmod on its modules, extracts vmlinux, and renames the
// result into dir when complete.
func fetchKernel(ctx context.Context, pkg, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("vmlab: kernel cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return fmt.Errorf("vmlab: kernel cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("vmlab: kernel cache: %w", err)
	}
	if err := runIn(ctx, tmp, "apt-get", "download", "-q", pkg); err != nil {
		return err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("vmlab: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if err := runIn(ctx, tmp, "dpkg", "-x", debs[0], root); err != nil {
		return err
	}
	if err := os.Remove(debs[0]); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	rels, _ := filepath.Glob(filepath.Join(root, "lib", "modules", "*"))
	if len(rels) != 1 {
		return fmt.Errorf("vmlab: %s has %d module trees, want 1", pkg, len(rels))
	}
	rel := filepath.Base(rels[0])
	if err := runIn(ctx, tmp, "busybox", "depmod", "-b", root, rel); err != nil {
		return err
	}
	if err := extractVmlinux(ctx, filepath.Join(root, "boot", "vmlinuz-"+rel), filepath.Join(tmp, "vmlinux")); err != nil {
		// The bzImage boots too, only slower: say why and go on.
		fmt.Fprintf(os.Stderr, "vmlab: booting the compressed kernel: %v\n", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "release"), []byte(rel+"\n"), 0o644); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "release")); serr == nil {
			return nil // another process fetched it first
		}
		return fmt.Errorf("vmlab: kernel cache: %w", err)
	}
	return nil
}

// xzMagic starts an xz stream (the bzImage's payload with
// CONFIG_KERNEL_XZ, as Debian builds it).
var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}

// extractVmlinux writes the ELF kernel inside bzImage to out, with xz.
func extractVmlinux(ctx context.Context, bzImage, out string) error {
	b, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	i := bytes.Index(b, xzMagic)
	if i < 0 {
		return fmt.Errorf("vmlab: %s has no xz payload", bzImage)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	defer f.Close()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "xz", "-dc", "--single-stream")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(b[i:]), f, &stderr
	if err := cmd.Run(); err != nil {
		os.Remove(out)
		return fmt.Errorf("vmlab: xz -dc %s: %w: %s", bzImage, err, strings.TrimSpace(stderr.String()))
	}
	head := make([]byte, 4)
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != "\x7fELF" {
		os.Remove(out)
		return fmt.Errorf("vmlab: the xz payload of %s is not an ELF file", bzImage)
	}
	return nil
}

// hostFiles are the host's files the initramfs carries: busybox's path,
// and all of them (busybox, the programs it runs and their shared
// libraries), sorted.
func hostFiles(ctx context.Context) (busybox string, files []string, err error) {
	if busybox, err = lookPath("busybox"); err != nil {
		return "", nil, err
	}
	files = []string{busybox}
	for _, p := range hostPrograms {
		path, err := lookPath(p)
		if err != nil {
			return "", nil, err
		}
		libs, err := sharedLibs(ctx, path)
		if err != nil {
			return "", nil, err
		}
		files = append(files, path)
		files = append(files, libs...)
	}
	slices.Sort(files)
	return busybox, slices.Compact(files), nil
}

// initramfs finds or builds the base initramfs for a's kernel and the
// host's busybox and programs, keyed by a hash of everything in it.
func (a *Assets) initramfs(ctx context.Context, cache, kdir string) error {
	kroot := filepath.Join(kdir, "root")
	modDir := filepath.Join(kroot, "lib", "modules", a.KernelRelease)
	dep, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	mods, err := moduleClosure(string(dep), append(slices.Clone(bootModules), extraModules...))
	if err != nil {
		return fmt.Errorf("vmlab: %s: %w", a.KernelPackage, err)
	}
	busybox, files, err := hostFiles(ctx)
	if err != nil {
		return err
	}

	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", layoutVersion, a.KernelPackage, initScript, strings.Join(bootModules, " "))
	for _, m := range mods {
		fmt.Fprintf(h, "mod %s\n", m)
	}
	for _, f := range files {
		if err := hashFile(h, f); err != nil {
			return err
		}
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	a.Initramfs = filepath.Join(cache, "initramfs-"+a.KernelRelease+"-"+key+".cpio")
	if _, err := os.Stat(a.Initramfs); err == nil {
		a.InitramfsCached = true
		now := time.Now()
		_ = os.Chtimes(a.Initramfs, now, now) // in use: not pruned
		return nil
	}
	pruneStale(filepath.Join(cache, "initramfs-*.cpio"))

	stage, err := os.MkdirTemp(cache, ".initramfs-")
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	defer os.RemoveAll(stage)
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "proc", "sys", "dev", "tmp", "run", "root", "etc/vmlab", "vmlab", "mnt"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o755); err != nil {
			return fmt.Errorf("vmlab: %w", err)
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} { // merged /usr, as on Debian 12
		if err := os.Symlink("usr/"+l, filepath.Join(stage, l)); err != nil {
			return fmt.Errorf("vmlab: %w", err)
		}
	}
	if err := copyFile(busybox, filepath.Join(stage, "usr/bin/busybox"), 0o755); err != nil {
		return err
	}
	for _, f := range files[0:] {
		if f == busybox {
			continue
		}
		if err := copyResolved(f, stage); err != nil {
			return err
		}
	}
	for _, m := range mods {
		dst := filepath.Join(stage, "lib/modules", a.KernelRelease, m)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("vmlab: %w", err)
		}
		if err := copyFile(filepath.Join(modDir, m), dst, 0o644); err != nil {
			return err
		}
	}
	if err := runIn(ctx, stage, busybox, "depmod", "-b", stage, a.KernelRelease); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, "init"), []byte(initScript), 0o755); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stage, "etc/vmlab/modules"), []byte(strings.Join(bootModules, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", a.Initramfs, os.Getpid()) // another process may build it too
	if err := writeCpio(ctx, stage, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, a.Initramfs); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	return nil
}

// initScript is the guest's /init: it mounts the usual file systems,
// loads /etc/vmlab/modules, runs /vmlab/run.sh with its output to the
// second serial port (ttyS1), then writes the exit code there and powers
// off. Module load failures go to the console (ttyS0).
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DM_DISABLE_UDEV=1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
for m in $(cat /etc/vmlab/modules); do modprobe "$m" || echo "vmlab: modprobe $m failed"; done
stty -F /dev/ttyS1 raw -echo
read up _ </proc/uptime
echo "@@VMLAB-START $up" >/dev/ttyS1
cd /root
sh /vmlab/run.sh </dev/null >/dev/ttyS1 2>&1
rc=$?
read up _ </proc/uptime
printf '\n@@VMLAB-EXIT %d %s\n' "$rc" "$up" >/dev/ttyS1
sync
poweroff -f
`

// lookPath finds a program in PATH or the sbin folders.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name), nil
		}
	}
	return "", fmt.Errorf("vmlab: %s not found (hack/ensure-vm-deps.sh installs it)", name)
}

// sharedLibs lists the libraries ldd says prog loads, loader included.
func sharedLibs(ctx context.Context, prog string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", prog).Output()
	if err != nil {
		return nil, fmt.Errorf("vmlab: ldd %s: %w", prog, err)
	}
	return parseLdd(string(out))
}

// copyResolved copies the file at path (following symlinks) to the same
// real path under root, and makes path resolve to it there too.
func copyResolved(path, root string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	dst := filepath.Join(root, real)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	if err := copyFile(real, dst, fi.Mode().Perm()); err != nil {
		return err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	if link := filepath.Join(dir, filepath.Base(path)); link != real {
		l := filepath.Join(root, link)
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			return fmt.Errorf("vmlab: %w", err)
		}
		if err := os.Symlink(real, l); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("vmlab: %w", err)
		}
	}
	return nil
}

// copyFile copies src to dst (created or truncated) with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("vmlab: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	return nil
}

// hashFile adds path's name and contents to h.
func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(h, "file %s\n", path)
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("vmlab: hash %s: %w", path, err)
	}
	return nil
}

// writeCpio writes the tree under dir as an uncompressed newc cpio
// archive (GNU cpio), owned by root, to out.
func writeCpio(ctx context.Context, dir, out string) error {
	var names []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	defer f.Close()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "cpio", "-o", "-H", "newc", "-R", "0:0", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	cmd.Stdout, cmd.Stderr = bufio.NewWriterSize(f, 1<<20), &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("vmlab: cpio: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := cmd.Stdout.(*bufio.Writer).Flush(); err != nil {
		return fmt.Errorf("vmlab: %w", err)
	}
	return f.Close()
}

// runIn runs a command in dir; its error carries the command's output.
func runIn(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("vmlab: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
