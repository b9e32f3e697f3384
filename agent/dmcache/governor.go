package dmcache

// The agent's Caches over Tool (dmsetup, lvchange).

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shadowtune/shadowtune/agent/actuate"
)

// Governor is Caches (and actuate.CacheVolumes) over Tool for the agent:
// each dm-cache call bounded by Timeout (10 s when zero), each LVM call
// by lvmTimeout. A device-mapper device, VG or LV that does not exist is
// an error wrapping actuate.ErrDeviceGone (and ErrNotFound).
type Governor struct {
	Tool    *Tool
	Timeout time.Duration
}

// NewGovernor returns a Governor when dmsetup is installed, else nil and
// the reason. With hostToolsRoot "" it runs dmsetup and lvm from
// PATH. Else hostToolsRoot is where the host's root file system is
// mounted (e.g. /host in the agent's container): the tool runs the host's
// own dmsetup and lvm chrooted into it (Tool.Root), and dmsetup
// must be found there (LookPathIn). The error, "no dm-cache governance:
// ...", wraps exec.LookPath's or LookPathIn's (fs.ErrNotExist when the
// root has no dmsetup).
func NewGovernor(hostToolsRoot string) (Caches, error) {
	if hostToolsRoot == "" {
		if _, err := exec.LookPath("dmsetup"); err != nil {
			return nil, fmt.Errorf("no dm-cache governance: %w", err)
		}
		return Governor{Tool: &Tool{}}, nil
	}
	root, err := filepath.Abs(hostToolsRoot)
	if err != nil {
		return nil, fmt.Errorf("no dm-cache governance: host tools root: %w", err)
	}
	if _, err := LookPathIn(root, "dmsetup"); err != nil {
		return nil, fmt.Errorf("no dm-cache governance: %w", err)
	}
	return Governor{Tool: &Tool{Root: root}}, nil
}

func (d Governor) ctx() (context.Context, context.CancelFunc) {
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
func (d Governor) get(name string, heal bool) (Device, error) {
	ctx, cancel := d.ctx()
	defer cancel()
	if heal {
		if _, err := d.Tool.ResumeSuspended(ctx, name); err != nil && !errors.Is(err, ErrNotFound) {
			return Device{}, err
		}
	}
	dev, err := d.Tool.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return dev, fmt.Errorf("%w: %w", actuate.ErrDeviceGone, err)
	}
	return dev, err
}

// Info returns the cache's table and status; a device-mapper device that
// is not one cache target is an error (ErrNotCache).
func (d Governor) Info(name string) (CacheInfo, error) {
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
func (d Governor) Mode(name string) (string, uint64, error) {
	dev, err := d.get(name, true)
	if err != nil {
		return "", 0, err
	}
	return string(dev.Status.Mode), dev.Status.Dirty, nil
}

// SetMode switches the cache online (Tool.SetMode).
func (d Governor) SetMode(name, mode string) error {
	ctx, cancel := d.ctx()
	defer cancel()
	return d.Tool.SetMode(ctx, name, Mode(mode))
}

// The LVM side: Governor is also actuate.CacheVolumes over
// Tool's provisioning (lvmcache(7)), each call bounded by
// lvmTimeout: an attach or a detach runs several lvm commands.

const lvmTimeout = 2 * time.Minute

func lvmCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), lvmTimeout)
}

// Volume reports vg/lv's cache; a VG or LV that does not exist wraps
// actuate.ErrDeviceGone.
func (d Governor) Volume(vg, lv string) (actuate.VolumeState, error) {
	ctx, cancel := lvmCtx()
	defer cancel()
	v, err := d.Tool.Volume(ctx, vg, lv)
	if errors.Is(err, ErrNotFound) {
		return actuate.VolumeState{}, fmt.Errorf("%w: %w", actuate.ErrDeviceGone, err)
	}
	return actuate.VolumeState{Cached: v.Cached, Ours: v.Ours, Missing: v.Missing, Active: v.Active, Block: v.BlockSize}, err
}

// Attach attaches a writethrough cache of at most sizeBytes bytes on fast
// (actuate.FastZRAM: a new zram device; else a device path) to vg/lv,
// with LVM's chunk size (Tool.AttachCache).
func (d Governor) Attach(vg, lv, fast string, sizeBytes int64) error {
	ctx, cancel := lvmCtx()
	defer cancel()
	f := FastDevice{Path: fast}
	if fast == actuate.FastZRAM {
		f = FastDevice{ZRAM: true}
	}
	return d.Tool.AttachCache(ctx, vg, lv, f, sizeBytes, 0)
}

// Detach removes the cache of vg/lv (Tool.DetachCache).
func (d Governor) Detach(vg, lv string) error {
	ctx, cancel := lvmCtx()
	defer cancel()
	return d.Tool.DetachCache(ctx, vg, lv)
}

// Recover drops vg's caches on a missing device (Tool.RecoverMissing)
// and activates the volumes it uncached; it returns them as "VG/LV".
func (d Governor) Recover(vg string) ([]string, error) {
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

// Tidy removes what an interrupted attach left (Tool.Tidy).
func (d Governor) Tidy(vg, lv string) ([]string, error) {
	ctx, cancel := lvmCtx()
	defer cancel()
	return d.Tool.Tidy(ctx, vg, lv)
}
