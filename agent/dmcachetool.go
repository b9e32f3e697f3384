package agent

// The agent's CacheTool over package dmcache (dmsetup, lvchange).

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
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
// and the reason.
func NewDMCacheTool() (CacheTool, error) {
	if _, err := exec.LookPath("dmsetup"); err != nil {
		return nil, fmt.Errorf("no dm-cache governance: %w", err)
	}
	return DMCacheTool{Tool: &dmcache.Tool{}}, nil
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
	return CacheInfo{Name: dev.Name, Origin: dev.Table.Origin, BlockSectors: dev.Table.BlockSectors, TotalBlocks: s.TotalBlocks,
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
