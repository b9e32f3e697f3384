// Package pagecache follows the page-cache probe's counters
// (tracer.PageCacheProbe, bpf/pagecache.c) per governed device: the
// evidence for read-ahead (agent/readahead). A file system's pages count
// towards the disk it is on when it is on the disk itself or on one of
// its partitions (a file system on a device-mapper or md device over the
// disk is not attributed to it).
//
// Counts are pages of 4 KiB and read-ahead windows, as the probe counts
// them; device numbers are the kernel's s_dev encoding (major<<20|minor).
package pagecache

import (
	"fmt"
	"slices"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

// Device is a device of the agent as the watch sees it.
type Device struct {
	Name      string // the kernel's name of the disk (sda)
	Dev       uint32 // the disk's s_dev
	ReadAhead bool   // its policy governs read-ahead
	Gone      bool   // it is no longer there
}

// Watch follows the probe's cumulative counters and hands each device its
// window's share.
type Watch struct {
	p *tracer.PageCacheProbe
	// devs maps a governed device's name to the s_dev values of the disk
	// and its partitions.
	devs      map[string][]uint32
	prev, cur map[uint32]tracer.PageCacheStats
}

// New is a watch of probe p, which its caller keeps open while the watch
// is used and closes.
func New(p *tracer.PageCacheProbe) *Watch {
	return &Watch{p: p}
}

// Track makes the probe count the file systems of tracked(hostRoot, devs,
// paused), those of the devices whose tracing is paused (paused: their
// s_dev) lightly: their faults, their read-ahead windows and the pages
// page faults read around, not the pages read() brings in. The probe
// counts a device tracked again from zero, and so does the window's share
// of it. Errors: the probe's, wrapped.
func (w *Watch) Track(hostRoot string, devs []Device, paused []uint32) error {
	byName, all, light := tracked(hostRoot, devs, paused)
	w.zeroNew(byName)
	if err := w.p.Track(all, light); err != nil {
		return fmt.Errorf("page-cache probe: %w", err)
	}
	return nil
}

// zeroNew makes byName the tracked devices, each newly tracked one's
// counts starting from zero: the probe counts a device tracked from zero,
// so a device's first window after it is tracked, the agent's first
// window included, is measured from then on.
func (w *Watch) zeroNew(byName map[string][]uint32) {
	if w.cur == nil {
		w.cur = map[uint32]tracer.PageCacheStats{}
	}
	for name, ids := range byName {
		if _, was := w.devs[name]; was {
			continue
		}
		for _, id := range ids {
			w.cur[id] = tracer.PageCacheStats{}
		}
	}
	w.devs = byName
}

// tracked maps each device that is there and whose policy governs
// read-ahead (the counts' only use) to the s_dev values of the disk and
// its partitions (read from sysfs under hostRoot), lists them all, and
// lists apart those of the paused devices (paused: their s_dev); a device
// whose partitions cannot be listed counts for the disk alone. The
// probe's programs run on every page-cache event of the node, but only a
// tracked device's events touch its maps, so the readers of a device
// whose read-ahead is not governed pay almost nothing for it.
func tracked(hostRoot string, devs []Device, paused []uint32) (byName map[string][]uint32, all, light []uint32) {
	byName = map[string][]uint32{}
	for _, d := range devs {
		if d.Gone || !d.ReadAhead {
			continue
		}
		ids := []uint32{d.Dev}
		if parts, err := sysfs.PartitionDevs(hostRoot, d.Name); err == nil {
			ids = append(ids, parts...)
		}
		byName[d.Name] = ids
		all = append(all, ids...)
		if slices.Contains(paused, d.Dev) {
			light = append(light, ids...)
		}
	}
	return byName, all, light
}

// Read takes the counters at the end of a window; the window of a device
// is then cur − prev. Errors: the probe's, wrapped.
func (w *Watch) Read() error {
	s, err := w.p.Stats()
	if err != nil {
		return fmt.Errorf("page-cache probe: %w", err)
	}
	w.advance(s)
	return nil
}

// advance ends a window at the probe's counts s.
func (w *Watch) advance(s map[uint32]tracer.PageCacheStats) {
	w.prev, w.cur = w.cur, s
}

// Window is device name's counts since the previous Read, or since it
// was tracked (Measured false for a device not tracked).
func (w *Watch) Window(name string) readahead.PageCache {
	ids, ok := w.devs[name]
	if !ok || w.prev == nil {
		return readahead.PageCache{}
	}
	return countsSince(ids, w.cur, w.prev)
}

// countsSince sums, over the s_dev values ids (a disk and its
// partitions), each one's counts in cur less those in base (zero when
// absent); an id absent from cur adds nothing.
func countsSince(ids []uint32, cur, base map[uint32]tracer.PageCacheStats) readahead.PageCache {
	out := readahead.PageCache{Measured: true}
	for _, id := range ids {
		c, ok := cur[id]
		if !ok {
			continue
		}
		d := c.Sub(base[id])
		out.Used += d.UsedPages
		out.Wasted += d.WastedPages
		out.ReadUsed += d.ReadUsedPages
		out.ReadWasted += d.ReadWastedPages
		out.Mapped += d.MappedPages
		out.Windows += d.Windows
		out.Pages += d.ReadAheadPages
		out.AroundWindows += d.AroundWindows
		out.AroundPages += d.AroundPages
		out.Depth += d.DepthPages
		out.AroundDepth += d.AroundDepthPages
		out.FullWindows += d.FullWindows
		out.FullPages += d.FullPages
		out.FullDepth += d.FullDepthPages
		out.FaultAsync += d.FaultAsyncReadAhead
	}
	return out
}
