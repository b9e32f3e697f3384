package dmcache

// The dm-cache in front of a governed disk, found through sysfs: the
// disk's holders (HOSTROOT/sys/block/DEV/holders), climbed through
// device-mapper devices stacked on it alone.

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/shadowtune/shadowtune/agent/actuate"
)

// CacheInfo is what the agent reads of a dm-cache (`dmsetup table` and
// `dmsetup status`, Documentation/admin-guide/device-mapper/cache.rst).
type CacheInfo struct {
	// Name is the device-mapper name; Origin the origin's "MAJOR:MINOR".
	Name, Origin string
	// BlockSectors is the cache block size, TotalBlocks the capacity in
	// blocks (sectors of 512 B); OriginSectors the table's length, the
	// origin's size smq sizes its hotspots by (sectors).
	BlockSectors, TotalBlocks, OriginSectors uint64
	// Mode is writethrough, passthrough or writeback.
	Mode string
	// Cumulative counters since the table was loaded.
	ReadHits, ReadMisses, Promotions, Dirty uint64
}

// Caches reads and switches dm-caches: Governor, which the command
// passes to the agent, or a test's fake. Info's error for a
// device-mapper device that is not a cache is not an error of the agent:
// the device is not governed.
type Caches interface {
	actuate.CacheModes
	Info(name string) (CacheInfo, error)
}

// maxStack is how many device-mapper layers Find climbs above the
// governed disk to reach a cache: an LVM cached LV's origin is not the
// PV but its "_corig" sub-LV, a dm-linear device on the PV, whose holder
// is the cache (vg-lv, origin = the _corig's MAJOR:MINOR).
const maxStack = 3

// Find returns the dm-cache whose origin is the device dev (its
// holder under HOSTROOT/sys/block/DEV/holders), or whose origin is a
// device-mapper device stacked on dev alone (its only slave, up to
// maxStack layers: an LVM cached LV's _corig), its kernel name (dm-N)
// and true; false when there is none (a sysfs directory that cannot be
// read counts as none, a holder that is not a cache is climbed or
// passed over). dev is the disk's kernel name, majorMinor its
// "MAJOR:MINOR"; hostRoot "" is "/". Through a stacked origin the disk may carry other devices' requests
// too (other LVs of the PV): the agent traces and simulates the disk's
// whole stream.
func Find(hostRoot, dev, majorMinor string, caches Caches) (CacheInfo, string, bool) {
	root := hostRoot
	if root == "" {
		root = "/"
	}
	return findAbove(root, dev, majorMinor, caches, 0)
}

func findAbove(root, dev, majorMinor string, caches Caches, depth int) (CacheInfo, string, bool) {
	ents, err := os.ReadDir(filepath.Join(root, "sys", "block", dev, "holders"))
	if err != nil {
		return CacheInfo{}, "", false
	}
	var stacked []string // holders that are not caches, on dev alone
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "dm-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "sys", "block", e.Name(), "dm", "name"))
		if err != nil {
			continue
		}
		info, err := caches.Info(strings.TrimSpace(string(b)))
		if err == nil {
			if info.Origin == majorMinor {
				return info, e.Name(), true
			}
			continue // a cache whose origin is another device (dev is its cache or metadata device)
		}
		if depth < maxStack && onlySlave(root, e.Name(), dev) {
			stacked = append(stacked, e.Name())
		}
	}
	for _, h := range stacked {
		mm, err := os.ReadFile(filepath.Join(root, "sys", "block", h, "dev"))
		if err != nil {
			continue
		}
		if info, dm, ok := findAbove(root, h, strings.TrimSpace(string(mm)), caches, depth+1); ok {
			return info, dm, true
		}
	}
	return CacheInfo{}, "", false
}

// onlySlave reports whether the device-mapper device dm maps onto dev
// alone (HOSTROOT/sys/block/DM/slaves lists only dev).
func onlySlave(root, dm, dev string) bool {
	ents, err := os.ReadDir(filepath.Join(root, "sys", "block", dm, "slaves"))
	return err == nil && len(ents) == 1 && ents[0].Name() == dev
}
