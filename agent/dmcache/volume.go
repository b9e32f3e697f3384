package dmcache

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Volume is what the agent needs to know of an LVM logical volume before
// it attaches or detaches a cache (lvmcache(7)).
type Volume struct {
	// Cached: the LV has a cache (segment type cache).
	Cached bool
	// Ours: its cache volume carries Tag (AttachCache put it there).
	Ours bool
	// Missing: its cache volume lies on a PV that is missing (a RAM disk
	// after a power-off).
	Missing bool
	// Active: the LV has a device-mapper device.
	Active bool
	// BlockSize is the LV's logical block size, bytes; 0 when inactive.
	BlockSize int64
}

// Volume reports vg/lv's cache. A VG or LV that does not exist is
// ErrNotFound.
func (t *Tool) Volume(ctx context.Context, vg, lv string) (Volume, error) {
	who := vg + "/" + lv
	out, err := t.lvm(ctx, who, "vgs", "--noheadings", "-o", "vg_name")
	if err != nil {
		return Volume{}, err
	}
	if !slices.Contains(strings.Fields(out), vg) {
		return Volume{}, fmt.Errorf("dmcache: %s: volume group: %w", who, ErrNotFound)
	}
	lvs, err := t.lvReport(ctx, vg)
	if err != nil {
		return Volume{}, err
	}
	row, ok := lvs[lv]
	if !ok {
		return Volume{}, fmt.Errorf("dmcache: %s: logical volume: %w", who, ErrNotFound)
	}
	v := Volume{Cached: row.SegType == "cache", Active: row.Major >= 0}
	if cv, ok := lvs[row.Pool]; ok && v.Cached {
		v.Ours = slices.Contains(cv.Tags, Tag)
		v.Missing = slices.Contains(cv.Devices, "[unknown]")
	}
	if v.Active {
		if v.BlockSize, err = t.blockSize(fmt.Sprintf("dev/block/%d:%d", row.Major, row.Minor)); err != nil {
			return Volume{}, err
		}
	}
	return v, nil
}

// Tidy removes what an AttachCache interrupted before its end (the agent
// killed, the host down) left in vg for vg/lv: the cache volume
// LV+CacheSuffix when it carries Tag and caches nothing, then every PV of
// vg that carries Tag, is present and holds no extent (vgreduce,
// pvremove, and for a zram device AttachCache created, reset and
// hot_remove). It returns what it removed.
func (t *Tool) Tidy(ctx context.Context, vg, lv string) (removed []string, err error) {
	who := vg + "/" + lv
	lvs, err := t.lvReport(ctx, vg)
	if err != nil {
		return nil, err
	}
	if cv, ok := lvs[lv+CacheSuffix]; ok && slices.Contains(cv.Tags, Tag) && cv.SegType != "cache" {
		if _, err := t.lvm(ctx, who, "lvremove", "-q", "-y", vg+"/"+cv.Name); err != nil {
			return removed, err
		}
		removed = append(removed, vg+"/"+cv.Name)
	}
	pvs, err := t.pvReport(ctx, vg)
	if err != nil {
		return removed, err
	}
	for _, p := range pvs {
		if p.Missing || p.Allocated != 0 || !slices.Contains(p.Tags, Tag) {
			continue
		}
		if _, err := t.lvm(ctx, who, "vgreduce", "-q", vg, p.Name); err != nil {
			return removed, err
		}
		if _, err := t.lvm(ctx, who, "pvremove", "-q", p.Name); err != nil {
			return removed, err
		}
		removed = append(removed, p.Name)
		if id, isZRAM := zramID(p.Name); isZRAM && slices.Contains(p.Tags, ZRAMTag) {
			if err := t.zramRemove(id); err != nil {
				return removed, fmt.Errorf("dmcache: %s: %w", who, err)
			}
		}
	}
	return removed, nil
}

// Activate activates vg/lv (lvchange -ay): RecoverMissing leaves the LVs
// it uncached inactive.
func (t *Tool) Activate(ctx context.Context, vg, lv string) error {
	_, err := t.lvm(ctx, vg+"/"+lv, "lvchange", "-q", "-ay", vg+"/"+lv)
	return err
}
