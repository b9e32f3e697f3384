package tracer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// minorBits is the width of the minor number in the kernel's internal
// dev_t (MINORBITS), which the block tracepoints report.
const minorBits = 20

// Mkdev returns the kernel's internal dev_t, major<<20 | minor.
func Mkdev(major, minor uint32) uint32 {
	return major<<minorBits | minor&(1<<minorBits-1)
}

// DevString formats a dev_t as "major:minor".
func DevString(dev uint32) string {
	return fmt.Sprintf("%d:%d", dev>>minorBits, dev&(1<<minorBits-1))
}

// ResolveDevice resolves name through this host's sysfs: it is
// ResolveDeviceIn("", name).
func ResolveDevice(name string) (dev uint32, disk string, err error) {
	return ResolveDeviceIn("", name)
}

// ResolveDeviceIn resolves a disk given as a device path ("/dev/loop3",
// or a symlink to one such as /dev/disk/by-id/…), a kernel name ("loop3")
// or "major:minor" to its dev_t (major<<20 | minor) and kernel name,
// through the sysfs below hostRoot ("" means "/"):
// hostRoot/sys/class/block/NAME/dev, and hostRoot/sys/dev/block/MAJ:MIN
// for numbers. A device path is resolved as given, not below hostRoot. A
// partition is refused: the block layer issues requests to, and the
// tracers record, whole disks. Errors name the device; they say "no such
// block device", "not a block device" or "is a partition".
func ResolveDeviceIn(hostRoot, name string) (dev uint32, disk string, err error) {
	if name == "" {
		return 0, "", fmt.Errorf("empty device name")
	}
	kname := name
	switch {
	case strings.Contains(name, "/"):
		p, err := filepath.EvalSymlinks(name)
		if err != nil {
			return 0, "", fmt.Errorf("device %s: %w", name, err)
		}
		kname = filepath.Base(p)
	case strings.Contains(name, ":"):
		p, err := filepath.EvalSymlinks(sysfs.Dir(hostRoot, "dev", "block", name))
		if err != nil {
			return 0, "", fmt.Errorf("device %s: no such block device", name)
		}
		kname = filepath.Base(p)
	}
	dir := sysfs.Dir(hostRoot, "class", "block", kname)
	b, err := os.ReadFile(filepath.Join(dir, "dev"))
	if err != nil {
		return 0, "", fmt.Errorf("device %s: not a block device (%s: %v)", name, dir, errNotExist(err))
	}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		parent := "its disk"
		if p, err := filepath.EvalSymlinks(dir); err == nil {
			parent = filepath.Base(filepath.Dir(p))
		}
		return 0, "", fmt.Errorf("device %s is a partition: trace %s (requests are recorded per disk, with disk sectors)", name, parent)
	}
	_, _, dev, err = sysfs.ParseMajorMinor(string(b))
	if err != nil {
		return 0, "", fmt.Errorf("device %s: %s/dev: %w", name, dir, err)
	}
	return dev, kname, nil
}

func errNotExist(err error) string {
	if os.IsNotExist(err) {
		return "no such device"
	}
	return err.Error()
}

// KernelDev converts a dev_t as user space sees it (stat's st_dev, glibc's
// encoding: major in bits 8–19 and 32–43, minor in bits 0–7 and 20–31)
// into the kernel's internal encoding, major<<20 | minor, which the
// filemap and readahead tracepoints report as s_dev.
func KernelDev(unixDev uint64) uint32 {
	major := uint32((unixDev>>8)&0xfff | (unixDev>>32)&^0xfff)
	minor := uint32(unixDev&0xff | (unixDev>>12)&^0xff)
	return Mkdev(major, minor)
}

// UnixDev converts a kernel-internal dev_t (major<<20 | minor) into user
// space's encoding (KernelDev's inverse).
func UnixDev(kdev uint32) uint64 {
	major, minor := uint64(kdev>>minorBits), uint64(kdev&(1<<minorBits-1))
	return major&0xfff<<8 | (major&^0xfff)<<32 | minor&0xff | (minor&^0xff)<<12
}
