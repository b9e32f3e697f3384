package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stat is a device's "stat" file (Documentation/block/stat.rst,
// block/genhd.c part_stat_show). Sectors are 512 bytes; times are
// milliseconds. Fields a kernel does not print (discard before 4.18, flush
// before 5.5) are 0.
type Stat struct {
	ReadIOs, ReadMerges, ReadSectors, ReadTicksMs             uint64
	WriteIOs, WriteMerges, WriteSectors, WriteTicksMs         uint64
	InFlight, IOTicksMs, TimeInQueueMs                        uint64
	DiscardIOs, DiscardMerges, DiscardSectors, DiscardTicksMs uint64
	FlushIOs, FlushTicksMs                                    uint64
}

// ReadStat reads hostRoot/sys/block/NAME/stat, or a partition's stat when
// name is a partition.
func ReadStat(hostRoot, name string) (Stat, error) {
	if !validName(name) {
		return Stat{}, fmt.Errorf("sysfs: device name %q: %w", name, ErrNotFound)
	}
	dir := blockDir(hostRoot)
	file := filepath.Join(dir, name, "stat")
	if _, err := os.Stat(file); err != nil {
		d, rerr := Read(hostRoot, name)
		if rerr != nil {
			return Stat{}, rerr
		}
		if d.Partition {
			file = filepath.Join(dir, d.Parent, name, "stat")
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return Stat{}, fmt.Errorf("sysfs: %w", err)
	}
	st, err := ParseStat(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("sysfs: %s: %w", file, err)
	}
	return st, nil
}

// ParseStat parses the content of a "stat" file: 11, 15 or 17 decimal
// fields.
func ParseStat(s string) (Stat, error) {
	f := strings.Fields(s)
	if len(f) < 11 {
		return Stat{}, fmt.Errorf("%d fields, want at least 11", len(f))
	}
	var v [17]uint64
	for i := 0; i < len(f) && i < len(v); i++ {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("field %d %q: %w", i+1, f[i], err)
		}
		v[i] = n
	}
	return Stat{
		ReadIOs: v[0], ReadMerges: v[1], ReadSectors: v[2], ReadTicksMs: v[3],
		WriteIOs: v[4], WriteMerges: v[5], WriteSectors: v[6], WriteTicksMs: v[7],
		InFlight: v[8], IOTicksMs: v[9], TimeInQueueMs: v[10],
		DiscardIOs: v[11], DiscardMerges: v[12], DiscardSectors: v[13], DiscardTicksMs: v[14],
		FlushIOs: v[15], FlushTicksMs: v[16],
	}, nil
}
