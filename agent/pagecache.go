package agent

// The page-cache probe's counters, per governed device: the evidence for
// read-ahead (decide.ReadAhead). A file system's pages count towards the
// disk it is on when it is on the disk itself or on one of its partitions
// (a file system on a device-mapper or md device over the disk is not
// attributed to it).

import (
	"fmt"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

// pageCacheWatch follows the probe's cumulative counters and hands each
// device its window's share.
type pageCacheWatch struct {
	p *tracer.PageCacheProbe
	// devs maps a governed device's name to the s_dev values of the disk
	// and its partitions.
	devs      map[string][]uint32
	prev, cur map[uint32]tracer.PageCacheStats
}

// track makes the probe count the file systems on the given devices (and
// their partitions); a device whose partitions cannot be listed counts
// for the disk alone.
func (w *pageCacheWatch) track(hostRoot string, devs []*device) error {
	w.devs = map[string][]uint32{}
	var all []uint32
	for _, d := range devs {
		if d.status.Gone != "" {
			continue
		}
		ids := []uint32{d.sys.Dev}
		if parts, err := sysfs.PartitionDevs(hostRoot, d.sys.Name); err == nil {
			ids = append(ids, parts...)
		}
		w.devs[d.sys.Name] = ids
		all = append(all, ids...)
	}
	if err := w.p.Track(all); err != nil {
		return fmt.Errorf("page-cache probe: %w", err)
	}
	return nil
}

// read takes the counters at the end of a window; the window of a device
// is then cur − prev.
func (w *pageCacheWatch) read() error {
	s, err := w.p.Stats()
	if err != nil {
		return fmt.Errorf("page-cache probe: %w", err)
	}
	if w.cur != nil {
		w.prev = w.cur
	}
	w.cur = s
	return nil
}

// window is device name's counts since the previous read (Measured false
// before two reads or for a device not tracked).
func (w *pageCacheWatch) window(name string) PageCacheWindow {
	ids, ok := w.devs[name]
	if !ok || w.prev == nil {
		return PageCacheWindow{}
	}
	out := PageCacheWindow{Measured: true}
	for _, id := range ids {
		cur, ok := w.cur[id]
		if !ok {
			continue
		}
		d := cur.Sub(w.prev[id])
		out.UsedPages += d.UsedPages
		out.WastedPages += d.WastedPages
	}
	return out
}
