package agent

// The agent's CacheTool over package dmcache (dmsetup, lvchange).

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/dmcache"
)

// DMCacheTool is CacheTool over dmcache.Tool, each call bounded by
// Timeout (10 s when zero).
type DMCacheTool struct {
	Tool    *dmcache.Tool
	Timeout time.Duration
}

// NewDMCacheTool returns a DMCacheTool when dmsetup is installed, else nil
// and the reason. With hostToolsRoot "" it runs dmsetup and lvm from
// PATH. Else hostToolsRoot is where the host's root file system is
// mounted (e.g. /host in the agent's container): the tool runs the host's
// own dmsetup and lvm chrooted into it (dmcache.Tool.Root), and dmsetup
// must be found there (dmcache.LookPathIn).
func NewDMCacheTool(hostToolsRoot string) (CacheTool, error) {
	if hostToolsRoot == "" {
		if _, err := exec.LookPath("dmsetup"); err != nil {
			return nil, fmt.Errorf("no dm-cache governance: %w", err)
		}
		return DMCacheTool{Tool: &dmcache.Tool{}}, nil
	}
	root, err := filepath.Abs(hostToolsRoot)
	if err != nil {
		return nil, fmt.Errorf("no dm-cache governance: host tools root: %w", err)
	}
	if _, err := dmcache.LookPathIn(root, "dmsetup"); err != nil {
		return nil, fmt.Errorf("no dm-cache governance: %w", err)
	}
	return DMCacheTool{Tool: &dmcache.Tool{Root: root}}, nil
}

func (d DMCacheTool) ctx() (context.Context, context.CancelFunc) {
	t := d.Timeout
	if t <= 0 {
		t = 10 * time.Second
	}
	return context.WithTimeout(context.Background(), t)
}

// get reads the cache; with heal, after resuming it if it was left
// suspended (an agent killed between the suspend and the resume of a
// switch). Only Mode heals: the actuator calls it for the caches it
// recorded (at Open, before a switch, at revert), never for another's
// device that may be suspended on purpose.
func (d DMCacheTool) get(name string, heal bool) (dmcache.Device, error) {
	ctx, cancel := d.ctx()
	defer cancel()
	if heal {
		if _, err := d.Tool.ResumeSuspended(ctx, name); err != nil && !errors.Is(err, dmcache.ErrNotFound) {
			return dmcache.Device{}, err
		}
	}
	dev, err := d.Tool.Get(ctx, name)
	if errors.Is(err, dmcache.ErrNotFound) {
		return dev, fmt.Errorf("%w: %w", actuate.ErrDeviceGone, err)
	}
	return dev, err
}

// Info returns the cache's table and status; a device-mapper device that
// is not one cache target is an error (dmcache.ErrNotCache).
func (d DMCacheTool) Info(name string) (CacheInfo, error) {
	dev, err := d.get(name, false)
	if err != nil {
		return CacheInfo{}, err
	}
	s := dev.Status
	return CacheInfo{Name: dev.Name, Origin: dev.Table.Origin, BlockSectors: dev.Table.BlockSectors, TotalBlocks: s.TotalBlocks, OriginSectors: dev.Table.Length,
		Mode: string(s.Mode), ReadHits: s.ReadHits, ReadMisses: s.ReadMisses, Promotions: s.Promotions, Dirty: s.Dirty}, nil
}

// Mode returns the cache's mode and dirty blocks, after resuming it if it
// was left suspended.
func (d DMCacheTool) Mode(name string) (string, uint64, error) {
	dev, err := d.get(name, true)
	if err != nil {
		return "", 0, err
	}
	return string(dev.Status.Mode), dev.Status.Dirty, nil
}

// SetMode switches the cache online (dmcache.Tool.SetMode).
func (d DMCacheTool) SetMode(name, mode string) error {
	ctx, cancel := d.ctx()
	defer cancel()
	return d.Tool.SetMode(ctx, name, dmcache.Mode(mode))
}

// The LVM side: DMCacheTool is also actuate.CacheVolumes over
// dmcache.Tool's provisioning (lvmcache(7)), each call bounded by
// lvmTimeout: an attach or a detach runs several lvm commands.

const lvmTimeout = 2 * time.Minute

func lvmCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), lvmTimeout)
}

// Volume reports vg/lv's cache; a VG or LV that does not exist wraps
// actuate.ErrDeviceGone.
func (d DMCacheTool) Volume(vg, lv string) (actuate.VolumeState, error) {
	ctx, cancel := lvmCtx()
	defer cancel()
	v, err := d.Tool.Volume(ctx, vg, lv)
	if errors.Is(err, dmcache.ErrNotFound) {
		return actuate.VolumeState{}, fmt.Errorf("%w: %w", actuate.ErrDeviceGone, err)
	}
	return actuate.VolumeState{Cached: v.Cached, Ours: v.Ours, Missing: v.Missing, Active: v.Active, Block: v.BlockSize}, err
}

// Attach attaches a writethrough cache of at most sizeBytes bytes on fast
// (actuate.FastZRAM: a new zram device; else a device path) to vg/lv,
// with LVM's chunk size (dmcache.Tool.AttachCache).
func (d DMCacheTool) Attach(vg, lv, fast string, sizeBytes int64) error {
	ctx, cancel := lvmCtx()
	defer cancel()
	f := dmcache.FastDevice{Path: fast}
	if fast == actuate.FastZRAM {
		f = dmcache.FastDevice{ZRAM: true}
	}
	return d.Tool.AttachCache(ctx, vg, lv, f, sizeBytes, 0)
}

// Detach removes the cache of vg/lv (dmcache.Tool.DetachCache).
func (d DMCacheTool) Detach(vg, lv string) error {
	ctx, cancel := lvmCtx()
	defer cancel()
	return d.Tool.DetachCache(ctx, vg, lv)
}

// Recover drops vg's caches on a missing device (dmcache.Tool.RecoverMissing)
// and activates the volumes it uncached; it returns them as "VG/LV".
func (d DMCacheTool) Recover(vg string) ([]string, error) {
	ctx, cancel := lvmCtx()
	defer cancel()
	lvs, err := d.Tool.RecoverMissing(ctx, vg)
	out := make([]string, 0, len(lvs))
	errs := []error{err}
	for _, lv := range lvs {
		out = append(out, vg+"/"+lv)
		errs = append(errs, d.Tool.Activate(ctx, vg, lv))
	}
	return out, errors.Join(errs...)
}

// Tidy removes what an interrupted attach left (dmcache.Tool.Tidy).
func (d DMCacheTool) Tidy(vg, lv string) ([]string, error) {
	ctx, cancel := lvmCtx()
	defer cancel()
	return d.Tool.Tidy(ctx, vg, lv)
}
