package train

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// ErrInUse matches (errors.Is) the [InUseError] returned when writes are
// asked for on a disk that is mounted, holds mounted partitions, is used
// as swap or by a device-mapper, md or other holder, or that the kernel
// reports busy.
var ErrInUse = errors.New("device in use")

// InUseError says why a disk may not be written.
type InUseError struct {
	Disk   string // the whole disk
	Reason string // "loop3p1 (259:0) is mounted at /mnt"
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("refusing to write to %s: %s (train without writes to only read it)", e.Disk, e.Reason)
}

// Is reports whether target is ErrInUse.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// HostFiles name the host files [CheckUnused] reads. The zero value is the
// running host.
type HostFiles struct {
	// Root prefixes /sys, as sysfs.Read's hostRoot ("" is /), for the write
	// check and for Run's device resolution and sysfs reads.
	Root string
	// MountInfo is the mount table (default /proc/self/mountinfo).
	MountInfo string
	// Swaps lists the active swap areas (default /proc/swaps).
	Swaps string
}

func (h HostFiles) withDefaults() HostFiles {
	if h.MountInfo == "" {
		h.MountInfo = "/proc/self/mountinfo"
	}
	if h.Swaps == "" {
		h.Swaps = "/proc/swaps"
	}
	return h
}

// CheckUnused returns nil when nothing on the host uses the whole disk
// named disk or any of its partitions, and otherwise an *InUseError
// (errors.Is ErrInUse) that says what uses it, in one line. It checks
//
//   - the mount table: a mount whose device number (major:minor, field 3
//     of mountinfo) or source device is the disk or one of its partitions;
//   - the active swap areas;
//   - holders/ of the disk and of each partition (device-mapper, md, bcache:
//     LVM volumes, RAID members, dm-crypt).
//
// A file that cannot be read is an error too: writes are refused unless
// the disk is known to be unused. Training also claims the disk and its
// partitions exclusively while it writes (see [Run]), which the kernel
// refuses for a device that is mounted or held anywhere, in any mount
// namespace.
func CheckUnused(h HostFiles, disk string) error {
	h = h.withDefaults()
	d, err := sysfs.Read(h.Root, disk)
	if err != nil {
		return fmt.Errorf("refusing to write to %s: %w", disk, err)
	}
	if d.Partition {
		return fmt.Errorf("refusing to write to %s: it is a partition of %s; name the whole disk", disk, d.Parent)
	}
	parts, err := partitionsOf(h.Root, disk)
	if err != nil {
		return fmt.Errorf("refusing to write to %s: %w", disk, err)
	}
	devs := append([]sysfs.Device{d}, parts...)
	what := func(x sysfs.Device) string {
		if x.Name == disk {
			return fmt.Sprintf("%s (%s)", x.Name, x.MajorMinor)
		}
		return fmt.Sprintf("its partition %s (%s)", x.Name, x.MajorMinor)
	}
	refuse := func(format string, args ...any) error {
		return &InUseError{Disk: disk, Reason: fmt.Sprintf(format, args...)}
	}
	mounts, err := readMountInfo(h.MountInfo)
	if err != nil {
		return fmt.Errorf("refusing to write to %s: cannot check the mount table: %w", disk, err)
	}
	for _, m := range mounts {
		for _, x := range devs {
			if m.majMin == x.MajorMinor || devName(m.source) == x.Name {
				return refuse("%s is mounted at %s", what(x), m.point)
			}
		}
	}
	swaps, err := readSwaps(h.Swaps)
	if err != nil {
		return fmt.Errorf("refusing to write to %s: cannot check the swap areas: %w", disk, err)
	}
	for _, s := range swaps {
		for _, x := range devs {
			if devName(s) == x.Name {
				return refuse("%s is an active swap area", what(x))
			}
		}
	}
	for _, x := range devs {
		if len(x.Holders) > 0 {
			return refuse("%s is held by %s: device-mapper, md or another driver builds on it", what(x), strings.Join(x.Holders, ", "))
		}
	}
	return nil
}

// partitionsOf reads the partitions of a whole disk.
func partitionsOf(root, disk string) ([]sysfs.Device, error) {
	if root == "" {
		root = "/"
	}
	dir := filepath.Join(root, "sys", "block", disk)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []sysfs.Device
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "partition")); err != nil {
			continue
		}
		p, err := sysfs.Read(root, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// devName returns the kernel name of a device path ("/dev/sda1",
// "/dev/disk/by-uuid/…" → "sda1"), or "" when path is not under /dev.
func devName(path string) string {
	if !strings.HasPrefix(path, "/dev/") {
		return ""
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	return filepath.Base(path)
}

type mount struct {
	majMin, point, source string
}

// readMountInfo parses /proc/PID/mountinfo (proc(5)): "ID PARENT MAJ:MIN
// ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS".
func readMountInfo(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := slices.Index(f, "-")
		if len(f) < 6 || sep < 6 {
			return nil, fmt.Errorf("%s:%d: not a mountinfo line", path, n)
		}
		m := mount{majMin: f[2], point: unescapeOctal(f[4])}
		if sep+2 < len(f) {
			m.source = unescapeOctal(f[sep+2])
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// readSwaps returns the swap areas of /proc/swaps (a header line, then
// "FILENAME TYPE SIZE USED PRIORITY"). A missing file (no swap support)
// means no swap.
func readSwaps(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 {
			continue
		}
		out = append(out, unescapeOctal(f[0]))
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escapes of spaces, tabs,
// newlines and backslashes in /proc paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// claimExclusive opens /dev/NAME of the disk and each of its partitions
// with O_EXCL, which on a block device claims it: the kernel refuses with
// EBUSY if it is mounted, an active swap area or held by another driver,
// in any mount namespace, and refuses mounts and other claims until the
// files are closed. The caller closes the returned files when done.
func claimExclusive(h HostFiles, disk string) ([]*os.File, error) {
	names := []string{disk}
	parts, err := partitionsOf(h.Root, disk)
	if err != nil {
		return nil, fmt.Errorf("refusing to write to %s: %w", disk, err)
	}
	for _, p := range parts {
		names = append(names, p.Name)
	}
	var held []*os.File
	for _, n := range names {
		f, err := os.OpenFile(filepath.Join("/dev", n), os.O_RDONLY|os.O_EXCL, 0)
		if err != nil {
			for _, h := range held {
				h.Close()
			}
			if errors.Is(err, syscall.EBUSY) {
				return nil, &InUseError{Disk: disk, Reason: fmt.Sprintf("the kernel reports /dev/%s busy: mounted, swap, or claimed exclusively by another program", n)}
			}
			return nil, fmt.Errorf("refusing to write to %s: cannot claim it exclusively: %w", disk, err)
		}
		held = append(held, f)
	}
	return held, nil
}
