// Package sysfs discovers the host's block devices from /sys/block and
// reads the attributes shadowtune tunes or needs: the blk-mq scheduler and
// its tunables, read-ahead, the queue limits, identity (model, serial,
// WWN) and the kind of device (partition, loop, device-mapper, zram).
//
// Every path is read below a host-root prefix, so the agent can run in a
// container with the host's / mounted at e.g. /host, and the tests can run
// on a fake tree (testdata/sys/block). Nothing here writes; changes go
// through package agent/actuate.
//
// Kernel sources for the formats: block/genhd.c (dev, size, stat,
// diskseq), block/partitions/core.c (partition, start), block/blk-sysfs.c
// (queue/*), block/elevator.c (queue/scheduler, queue/iosched/*),
// drivers/block/loop.c (loop/*), drivers/md/dm-sysfs.c (dm/*),
// drivers/scsi/scsi_sysfs.c (device/model, device/wwid, device/vpd_pg80),
// drivers/nvme/host/sysfs.c (wwid, device/model, device/serial),
// drivers/block/virtio_blk.c (serial). Documentation/ABI/stable/sysfs-block
// describes them.
//
// Units: sizes in bytes, except where a field name says KiB (1024 bytes);
// block sizes in bytes; the kernel's own "size" file counts 512-byte
// sectors whatever the logical block size.
package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/model"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Device is one block device (a whole disk or a partition) as the kernel
// describes it under /sys/block/NAME (a partition: /sys/block/DISK/NAME).
//
// A field whose file does not exist on this device or kernel keeps its
// zero value (zram, for example, has no queue/scheduler nor nr_requests).
type Device struct {
	// Name is the kernel's name: "sda", "nvme0n1", "sda1", "dm-0".
	Name string
	// MajorMinor is the content of the "dev" file, "MAJOR:MINOR".
	MajorMinor   string
	Major, Minor uint32
	// Dev is the kernel-internal dev_t, Major<<20 | Minor (MKDEV in
	// include/linux/kdev_t.h), the encoding of the dev field of the block
	// tracepoints (block_rq_issue, block_rq_complete, ...). It is not the
	// user-space dev_t of stat(2).
	Dev uint32
	// DiskSeq is the "diskseq" file (Linux ≥ 5.15): a number the kernel
	// never reuses for another disk, so it tells a re-attached loop device
	// or a replaced disk from the one seen before. 0 when absent.
	DiskSeq uint64

	// Model is device/model with the padding removed (SCSI, NVMe).
	Model string
	// Serial is the first of device/serial (NVMe), serial (virtio-blk) and
	// the unit serial number of device/vpd_pg80 (SCSI, SATA), trimmed.
	Serial string
	// WWN is the world-wide identifier as the kernel prints it: "wwid"
	// (NVMe, e.g. "eui.002538b1...") or device/wwid (SCSI, e.g.
	// "naa.5000c500...").
	WWN string

	// SizeBytes is "size" × 512.
	SizeBytes uint64
	// Rotational is queue/rotational (a whole disk's queue; a partition
	// reports its parent's).
	Rotational bool
	// LogicalBlockSize and PhysicalBlockSize are queue/logical_block_size
	// and queue/physical_block_size, in bytes.
	LogicalBlockSize, PhysicalBlockSize uint32
	// MaxSectorsKB is queue/max_sectors_kb: the largest request the block
	// layer builds, in KiB.
	MaxSectorsKB int
	// NrRequests is queue/nr_requests: the scheduler's (or with "none" the
	// hardware tag set's) queue depth. 0 when absent (bio-based devices).
	NrRequests int
	// WbtLatUsec is queue/wbt_lat_usec: writeback throttling's latency
	// target, µs; 0 when throttling is off or the file is absent (a
	// kernel without CONFIG_BLK_WBT, a bio-based device).
	WbtLatUsec int64
	// Tags is the device's tag depth, the requests it accepts at once: the
	// sum of mq/*/nr_tags over its hardware queues (128 for a loop device,
	// 32 for a SATA disk with NCQ). 0 when absent (bio-based devices).
	Tags int
	// Schedulers lists the elevators queue/scheduler offers, in the
	// kernel's order; Scheduler is the current one (the bracketed name, or
	// the only name of a bare "none"). Both empty when the device has no
	// queue/scheduler file (bio-based: zram, most dm and md on Linux 6.x).
	Schedulers []string
	Scheduler  string
	// ReadAheadKiB is queue/read_ahead_kb, in KiB.
	ReadAheadKiB int
	// Tunables holds the files of queue/iosched/ by name, their content
	// trimmed of surrounding white space (raw kernel text, in the kernel's
	// units). Nil when the scheduler is "none" (there is no iosched/).
	Tunables map[string]string
	// Holders are the devices built on this one (holders/, e.g. "dm-0"
	// on an LVM physical volume); Slaves those this one is built on
	// (slaves/, for dm and md).
	Holders, Slaves []string

	// Partition is set for partitions. A partition has no queue of its
	// own: its queue fields (Rotational, block sizes, MaxSectorsKB,
	// NrRequests, WbtLatUsec, Tags, Schedulers, Scheduler, ReadAheadKiB, Tunables) are its
	// Parent's, and it cannot be tuned on its own.
	Partition bool
	// Parent is the whole disk of a partition, "" for a whole disk.
	Parent string
	// Loop, DM and Zram mark loop, device-mapper and zram devices.
	Loop, DM, Zram bool
	// BackingFile is loop/backing_file of an attached loop device.
	BackingFile string
	// DMName is dm/name of a device-mapper device ("vg0-root").
	DMName string
}

// Class returns the device's model class: HDD when rotational, NVMe when
// the name starts with "nvme", SSD otherwise. Note that virtual devices
// (loop, virtio without a hint) often report rotational=1.
func (d *Device) Class() model.Class {
	switch {
	case d.Rotational:
		return model.HDD
	case strings.HasPrefix(d.Name, "nvme"):
		return model.NVMe
	}
	return model.SSD
}

// Tunable reports whether the device's blk-mq scheduler can be changed: a
// whole disk whose queue/scheduler offers more than one elevator.
func (d *Device) Tunable() bool {
	return !d.Partition && len(d.Schedulers) > 1
}

// Virtual reports whether the device is a loop, zram, device-mapper, md
// RAID, RAM disk (brd) or optical (sr) device: these are never selected
// unless an include pattern names them (see Select).
func (d *Device) Virtual() bool {
	if d.Loop || d.DM || d.Zram {
		return true
	}
	for _, p := range []string{"md", "ram", "sr"} {
		if rest, ok := strings.CutPrefix(d.Name, p); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			return true
		}
	}
	return false
}

// Dir returns the sysfs path /sys/elem… below hostRoot ("" means "/"):
// Dir("/host", "class", "block") is /host/sys/class/block.
func Dir(hostRoot string, elem ...string) string {
	if hostRoot == "" {
		hostRoot = "/"
	}
	return filepath.Join(append([]string{hostRoot, "sys"}, elem...)...)
}

// blockDir returns the directory /sys/block below hostRoot ("" means "/").
func blockDir(hostRoot string) string { return Dir(hostRoot, "block") }

// ErrNotFound is returned (wrapped) by Read when no whole disk nor
// partition of that name exists.
var ErrNotFound = errors.New("no such block device")

// Discover returns every whole disk in hostRoot/sys/block, each followed
// by its partitions, sorted by name (partitions by name within their
// disk). A device that disappears while being read (hot unplug, loop
// detach) is left out silently. If a device's files cannot be read or
// parsed, the others are still returned, together with an error that
// joins one error per failing device, each naming the file.
func Discover(hostRoot string) ([]Device, error) {
	dir := blockDir(hostRoot)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sysfs: list block devices: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var devs []Device
	var errs []error
	for _, name := range names {
		d, err := readDisk(dir, name)
		if err != nil {
			if gone(filepath.Join(dir, name)) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		devs = append(devs, d)
		parts, err := partitions(dir, d)
		if err != nil && !gone(filepath.Join(dir, name)) {
			errs = append(errs, err)
		}
		devs = append(devs, parts...)
	}
	return devs, errors.Join(errs...)
}

// Read returns the device NAME: a whole disk (hostRoot/sys/block/NAME) or
// a partition (hostRoot/sys/block/DISK/NAME). An unknown name returns an
// error wrapping ErrNotFound.
func Read(hostRoot, name string) (Device, error) {
	if !validName(name) {
		return Device{}, fmt.Errorf("sysfs: device name %q: %w", name, ErrNotFound)
	}
	dir := blockDir(hostRoot)
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return readDisk(dir, name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Device{}, fmt.Errorf("sysfs: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Device{}, fmt.Errorf("sysfs: list block devices: %w", err)
	}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), name, "partition")); err != nil {
			continue
		}
		disk, err := readDisk(dir, e.Name())
		if err != nil {
			return Device{}, err
		}
		return readPartition(dir, disk, name)
	}
	return Device{}, fmt.Errorf("sysfs: %s: %w", filepath.Join(dir, name), ErrNotFound)
}

// validName rejects names that would leave /sys/block.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// gone reports whether the device directory no longer exists.
func gone(devDir string) bool {
	_, err := os.Stat(devDir)
	return errors.Is(err, fs.ErrNotExist)
}

// reader reads attribute files of one device directory, remembering the
// first error. Optional files that do not exist read as "".
type reader struct {
	dir string
	err error
}

func (r *reader) file(rel string) string { return filepath.Join(r.dir, rel) }

// opt returns the trimmed content of rel, "" if it does not exist.
func (r *reader) opt(rel string) string {
	if r.err != nil {
		return ""
	}
	b, err := os.ReadFile(r.file(rel))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.err = fmt.Errorf("sysfs: %w", err)
		}
		return ""
	}
	return strings.TrimSpace(string(b))
}

// req is opt but a missing file is an error.
func (r *reader) req(rel string) string {
	if r.err != nil {
		return ""
	}
	b, err := os.ReadFile(r.file(rel))
	if err != nil {
		r.err = fmt.Errorf("sysfs: %w", err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// uint parses a decimal attribute; "" (absent) is 0.
func (r *reader) uint(rel, s string, bits int) uint64 {
	if s == "" || r.err != nil {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		r.err = fmt.Errorf("sysfs: %s: %q is not an unsigned integer: %w", r.file(rel), s, err)
	}
	return v
}

func (r *reader) optUint(rel string, bits int) uint64 { return r.uint(rel, r.opt(rel), bits) }

// names lists the entries of a directory (holders/, slaves/), nil if absent.
func (r *reader) names(rel string) []string {
	if r.err != nil {
		return nil
	}
	ents, err := os.ReadDir(r.file(rel))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.err = fmt.Errorf("sysfs: %w", err)
		}
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// identity fills the fields common to disks and partitions: dev, size.
func (r *reader) identity(d *Device) {
	d.MajorMinor = r.req("dev")
	if r.err == nil {
		maj, min, dev, err := ParseMajorMinor(d.MajorMinor)
		if err != nil {
			r.err = fmt.Errorf("sysfs: %s: %w", r.file("dev"), err)
		}
		d.Major, d.Minor, d.Dev = maj, min, dev
	}
	sz := r.req("size")
	d.SizeBytes = r.uint("size", sz, 64) * 512
	d.Holders = r.names("holders")
}

func readDisk(dir, name string) (Device, error) {
	r := &reader{dir: filepath.Join(dir, name)}
	d := Device{Name: name}
	r.identity(&d)
	d.DiskSeq = r.optUint("diskseq", 64)
	d.Slaves = r.names("slaves")

	d.Rotational = r.optUint("queue/rotational", 8) == 1
	d.LogicalBlockSize = uint32(r.optUint("queue/logical_block_size", 32))
	d.PhysicalBlockSize = uint32(r.optUint("queue/physical_block_size", 32))
	d.MaxSectorsKB = int(r.optUint("queue/max_sectors_kb", 31))
	d.NrRequests = int(r.optUint("queue/nr_requests", 31))
	d.WbtLatUsec = int64(r.optUint("queue/wbt_lat_usec", 62))
	for _, q := range r.names("mq") {
		d.Tags += int(r.optUint(filepath.Join("mq", q, "nr_tags"), 31))
	}
	d.ReadAheadKiB = int(r.optUint("queue/read_ahead_kb", 31))
	if s := r.opt("queue/scheduler"); s != "" {
		list, cur, err := ParseScheduler(s)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("sysfs: %s: %w", r.file("queue/scheduler"), err)
		}
		d.Schedulers, d.Scheduler = list, cur
	}
	if d.Scheduler != "" && d.Scheduler != "none" {
		d.Tunables = r.tunables()
	}

	d.Model = r.opt("device/model")
	d.Serial = r.opt("device/serial")
	if d.Serial == "" {
		d.Serial = r.opt("serial")
	}
	if d.Serial == "" {
		d.Serial = r.vpdSerial()
	}
	d.WWN = r.opt("wwid")
	if d.WWN == "" {
		d.WWN = r.opt("device/wwid")
	}

	d.Loop = strings.HasPrefix(name, "loop")
	d.BackingFile = r.opt("loop/backing_file")
	d.Zram = strings.HasPrefix(name, "zram")
	d.DM = strings.HasPrefix(name, "dm-")
	if d.DM {
		d.DMName = r.opt("dm/name")
	}
	if r.err != nil {
		return Device{}, r.err
	}
	return d, nil
}

// tunables reads every regular file of queue/iosched/.
func (r *reader) tunables() map[string]string {
	if r.err != nil {
		return nil
	}
	ents, err := os.ReadDir(r.file("queue/iosched"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.err = fmt.Errorf("sysfs: %w", err)
		}
		return nil
	}
	t := make(map[string]string, len(ents))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(r.file("queue/iosched/" + e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				continue // a switch raced with us, or a write-only file
			}
			r.err = fmt.Errorf("sysfs: %w", err)
			return nil
		}
		t[e.Name()] = strings.TrimSpace(string(b))
	}
	return t
}

// vpdSerial returns the unit serial number of SCSI VPD page 0x80
// (device/vpd_pg80: 4-byte header, byte 3 the length, then ASCII).
func (r *reader) vpdSerial() string {
	if r.err != nil {
		return ""
	}
	b, err := os.ReadFile(r.file("device/vpd_pg80"))
	if err != nil || len(b) < 4 || b[1] != 0x80 {
		return "" // absent, unreadable (0400 root) or not page 0x80: no serial
	}
	n := int(b[3])
	if 4+n > len(b) {
		n = len(b) - 4
	}
	return strings.TrimSpace(strings.TrimRight(string(b[4:4+n]), "\x00"))
}

// partitions returns the partitions of disk: the subdirectories of its
// directory that hold a "partition" file.
func partitions(dir string, disk Device) ([]Device, error) {
	ents, err := os.ReadDir(filepath.Join(dir, disk.Name))
	if err != nil {
		return nil, fmt.Errorf("sysfs: %w", err)
	}
	var out []Device
	var errs []error
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, disk.Name, e.Name(), "partition")); err != nil {
			continue
		}
		p, err := readPartition(dir, disk, e.Name())
		if err != nil {
			if !gone(filepath.Join(dir, disk.Name, e.Name())) {
				errs = append(errs, err)
			}
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// readPartition reads partition name of disk; the queue fields are the
// disk's.
func readPartition(dir string, disk Device, name string) (Device, error) {
	r := &reader{dir: filepath.Join(dir, disk.Name, name)}
	p := Device{
		Name:              name,
		Partition:         true,
		Parent:            disk.Name,
		DiskSeq:           disk.DiskSeq,
		Model:             disk.Model,
		Serial:            disk.Serial,
		WWN:               disk.WWN,
		Rotational:        disk.Rotational,
		LogicalBlockSize:  disk.LogicalBlockSize,
		PhysicalBlockSize: disk.PhysicalBlockSize,
		MaxSectorsKB:      disk.MaxSectorsKB,
		NrRequests:        disk.NrRequests,
		WbtLatUsec:        disk.WbtLatUsec,
		Tags:              disk.Tags,
		Schedulers:        slices.Clone(disk.Schedulers),
		Scheduler:         disk.Scheduler,
		ReadAheadKiB:      disk.ReadAheadKiB,
		Tunables:          maps.Clone(disk.Tunables),
		Loop:              disk.Loop,
		DM:                disk.DM,
		Zram:              disk.Zram,
		BackingFile:       disk.BackingFile,
	}
	r.identity(&p)
	if r.err != nil {
		return Device{}, r.err
	}
	return p, nil
}

// ParseMajorMinor parses the "dev" file's "MAJOR:MINOR" and returns the
// kernel-internal dev_t, major<<20 | minor. The kernel's limits are 12
// bits of major and 20 of minor.
func ParseMajorMinor(s string) (major, minor, dev uint32, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, 0, 0, fmt.Errorf("%q: want MAJOR:MINOR", s)
	}
	ma, err := strconv.ParseUint(a, 10, 12)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%q: bad major: %w", s, err)
	}
	mi, err := strconv.ParseUint(b, 10, 20)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%q: bad minor: %w", s, err)
	}
	return uint32(ma), uint32(mi), uint32(ma)<<20 | uint32(mi), nil
}

// ParseScheduler parses queue/scheduler as block/elevator.c prints it
// ("none [mq-deadline] kyber bfq "): the names offered and the bracketed
// current one. A bare "none" (what older kernels print for a queue that
// cannot have an elevator) returns ["none"], "none".
func ParseScheduler(s string) (list []string, current string, err error) {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") && len(f) > 2 {
			if current != "" {
				return nil, "", fmt.Errorf("scheduler list %q has two current entries", s)
			}
			f = f[1 : len(f)-1]
			current = f
		} else if strings.ContainsAny(f, "[]") {
			return nil, "", fmt.Errorf("scheduler list %q: malformed entry %q", s, f)
		}
		list = append(list, f)
	}
	if current == "" && len(list) == 1 {
		current = list[0]
	}
	if current == "" {
		return nil, "", fmt.Errorf("scheduler list %q has no current [entry]", s)
	}
	return list, current, nil
}

// Select returns, in input order, the whole disks an operator's selection
// picks:
//
//   - Partitions are never selected: they share their disk's queue, and
//     the scheduler and read-ahead are per disk. Name the disk instead.
//   - Devices of size 0 (a detached loop device, an empty card reader or
//     optical drive) are never selected.
//   - A device matching any exclude pattern is not selected (exclude wins).
//   - rotational, when not nil, keeps only devices whose queue/rotational
//     equals *rotational; minSizeBytes keeps only devices at least that
//     large.
//   - With no include pattern every real disk is selected, but not the
//     virtual ones (loop, zram, device-mapper, md, RAM and optical
//     devices; see Device.Virtual). With include patterns, a device is
//     selected only if it matches one, and then whatever its kind: a loop
//     device is selected only when an include pattern matches it, e.g.
//     "loop3" or "loop*" (or "*").
//
// Patterns are path.Match globs on the kernel name ("sd*", "nvme?n1"). A
// malformed pattern matches nothing; check patterns first with
// ValidatePatterns.
//
// Selection does not check that the device can be tuned: a selected
// device-mapper device has read-ahead but no scheduler (Device.Tunable).
func Select(devs []Device, include, exclude []string, rotational *bool, minSizeBytes uint64) []Device {
	sel := v1alpha1.DeviceSelector{Include: include, Exclude: exclude, Rotational: rotational}
	if minSizeBytes > 0 {
		sel.MinSizeBytes = resource.NewQuantity(int64(min(minSizeBytes, math.MaxInt64)), resource.BinarySI)
	}
	return SelectFor(devs, &sel)
}

// SelectFor is Select with a StorageTuning's device selector. The policy
// rules (exclude wins, include globs, rotational, minimum size) are the
// API's own, v1alpha1.DeviceSelector.Matches; SelectFor adds only what
// depends on the kind of device: partitions and devices of size 0 are
// never selected, and with no include pattern virtual devices are left
// out.
func SelectFor(devs []Device, sel *v1alpha1.DeviceSelector) []Device {
	var out []Device
	for _, d := range devs {
		if d.Partition || d.SizeBytes == 0 || (len(sel.Include) == 0 && d.Virtual()) {
			continue
		}
		info := v1alpha1.DeviceInfo{Name: d.Name, Rotational: d.Rotational, SizeBytes: int64(min(d.SizeBytes, math.MaxInt64))}
		if sel.Matches(info) {
			out = append(out, d)
		}
	}
	return out
}

// ValidatePatterns returns an error naming the first malformed glob.
func ValidatePatterns(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("device pattern %q: %w", p, err)
		}
	}
	return nil
}

// PartitionDevs returns the kernel-internal dev_t (Device.Dev) of each
// partition of the whole disk `disk` (the subdirectories of
// /sys/block/DISK that have a "partition" file), for matching a file
// system's s_dev to the disk it is on. A disk without partitions gives
// none; an unreadable directory gives an error.
func PartitionDevs(hostRoot, disk string) ([]uint32, error) {
	if !validName(disk) {
		return nil, fmt.Errorf("sysfs: device name %q: %w", disk, ErrNotFound)
	}
	dir := filepath.Join(blockDir(hostRoot), disk)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sysfs: %w", err)
	}
	var out []uint32
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "partition")); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "dev"))
		if err != nil {
			continue // removed meanwhile
		}
		var major, minor uint32
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &major, &minor); err != nil {
			return nil, fmt.Errorf("sysfs: %s/dev: %q: %w", filepath.Join(dir, e.Name()), b, err)
		}
		out = append(out, major<<20|minor)
	}
	return out, nil
}

// Disks returns, for every entry of hostRoot/sys/block, its identity:
// "MAJOR:MINOR/DISKSEQ" (its dev and diskseq files; DISKSEQ empty before
// Linux 5.15), so that a disk that appears, or another one under a name
// (a loop device detached and attached again), shows as a new key. An
// entry that vanishes while it is read is left out. The error is the
// listing's.
func Disks(hostRoot string) (map[string]string, error) {
	dir := blockDir(hostRoot)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sysfs: list block devices: %w", err)
	}
	out := make(map[string]string, len(ents))
	for _, e := range ents {
		dev, err := os.ReadFile(filepath.Join(dir, e.Name(), "dev"))
		if err != nil {
			continue
		}
		seq, _ := os.ReadFile(filepath.Join(dir, e.Name(), "diskseq"))
		out[e.Name()] = strings.TrimSpace(string(dev)) + "/" + strings.TrimSpace(string(seq))
	}
	return out, nil
}
