package tracer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// Where sysfs lists block devices by name and by number (variables for
// tests).
var (
	sysBlock    = "/sys/class/block"
	sysDevBlock = "/sys/dev/block"
)

// ResolveDevice resolves a disk given as a device path ("/dev/loop3", or a
// symlink to one such as /dev/disk/by-id/…), a kernel name ("loop3") or
// "major:minor" to its dev_t (major<<20 | minor) and kernel name, through
// sysfs (/sys/class/block/NAME/dev). A partition is refused: the block
// layer issues requests to, and the tracers record, whole disks.
func ResolveDevice(name string) (dev uint32, disk string, err error) {
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
		p, err := filepath.EvalSymlinks(filepath.Join(sysDevBlock, name))
		if err != nil {
			return 0, "", fmt.Errorf("device %s: no such block device", name)
		}
		kname = filepath.Base(p)
	}
	dir := filepath.Join(sysBlock, kname)
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
	dev, err = parseMajMin(strings.TrimSpace(string(b)))
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

// parseMajMin parses "major:minor".
func parseMajMin(s string) (uint32, error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("%q is not major:minor", s)
	}
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil || ma >= 1<<12 || mi >= 1<<minorBits {
		return 0, fmt.Errorf("%q is not major:minor", s)
	}
	return Mkdev(uint32(ma), uint32(mi)), nil
}
