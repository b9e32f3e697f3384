package readahead

import (
	"fmt"
	"math"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Device predicts the service time of reads on a device.
type Device interface {
	// ReadNs is the predicted service time, ns, of one read request of
	// sectors 512-byte sectors, at a random place (random) or right after
	// the previous request (a sequential reader's next request).
	ReadNs(sectors uint32, random bool) float64
	// MaxRequestSectors is the largest request the block layer issues
	// (queue/max_sectors_kb × 2): a longer window is split into requests
	// of at most this many sectors (bio_split_rw, block/blk-merge.c).
	MaxRequestSectors() uint32
}

// ModelDevice is a Device whose times come from a learned disk model.
// Build it with NewModelDevice.
type ModelDevice struct {
	m *model.Model
	// near and far are the service time's fixed part (ns) and its time
	// per sector (ns) right after the previous request (a sequential
	// reader's next window) and anywhere else (a random one's); the same
	// on flash.
	near, far   line
	maxSectors  uint32
	throttle    model.Throttle
	spanSectors uint64
}

// line is t(s) = fixed + perSector·s, ns for s sectors.
type line struct{ fixed, perSector float64 }

func (l line) at(sectors float64) float64 { return l.fixed + l.perSector*sectors }

// String is the device's lines, e.g. "sequential 62 µs + 0.41 µs/KiB,
// random 80 µs + 0.66 µs/KiB".
func (d ModelDevice) String() string {
	f := func(l line) string { return fmt.Sprintf("%.0f µs + %.2f µs/KiB", l.fixed/1e3, 2*l.perSector/1e3) }
	return "sequential " + f(d.near) + ", random " + f(d.far)
}

// NewModelDevice builds the costs of a device from its model m:
// spanSectors is its size, maxSectorsKiB its queue/max_sectors_kb (0:
// 1280, blk-mq's BLK_DEF_MAX_SECTORS_CAP, include/linux/blkdev.h). The
// service time of a read is a line, fitted by least squares to the
// model's learned read-miss cells, each weighted by its samples, at its
// sizes' midpoint: a window's depth is its size, and its cost must grow
// with it, where the table's cold cells (which return their column's
// mean, KDSim §3.3) would cost every unlearned size alike. The cells of
// requests up to 128 KiB (the papers' rows) are fitted when two sizes or
// more were learned there: a larger request is split and served with
// others in flight (two 1280 KiB halves of one 2560 KiB read-around
// measured 2.3 ms each on a loop device, one 1024 KiB request 0.57 ms), and
// its time measures that sharing rather than the request. A rotational
// device's line is fitted apart at distance 0 (a sequential reader's next
// window) and elsewhere (a random one's: a seek); a flash device's
// positioning costs nothing, and one line serves both. With fewer than
// two sizes learned, the line is the class's prior (model.Prior).
func NewModelDevice(m *model.Model, spanSectors uint64, maxSectorsKiB int) ModelDevice {
	if maxSectorsKiB <= 0 {
		maxSectorsKiB = 1280
	}
	d := ModelDevice{m: m, maxSectors: uint32(maxSectorsKiB * 2), throttle: m.Throttle(), spanSectors: spanSectors}
	if m.Class() == model.HDD {
		d.near = d.fit(func(col int) bool { return col == 0 }, false)
		d.far = d.fit(func(col int) bool { return col > 0 }, true)
		return d
	}
	d.near = d.fit(func(int) bool { return true }, false)
	d.far = d.near
	return d
}

// fit is the line through the learned read-miss cells of the columns
// cols selects (the papers' rows, else all rows), or the prior's (far:
// at a random place).
func (d ModelDevice) fit(cols func(int) bool, far bool) line {
	for _, rows := range []int{model.LinearRows, model.NumRows} {
		if l, ok := d.fitRows(rows, cols); ok {
			return l
		}
	}
	return d.priorLine(far)
}

// fitRows fits the line to the cells of the first rows rows in the
// columns cols selects; false when fewer than two rows were learned or
// the line does not rise with the size.
func (d ModelDevice) fitRows(rows int, cols func(int) bool) (line, bool) {
	var sw, sx, sy, sxx, sxy float64
	learned := 0
	for row := range rows {
		seen := false
		lo, hi := float64(model.RowSectors(row-1)), float64(model.RowSectors(row))
		x := (lo + hi) / 2
		if row < model.LinearRows {
			x = hi
		}
		for col := range d.m.Columns() {
			n := float64(d.m.Samples(model.ReadMiss, row, col))
			if n == 0 || !cols(col) {
				continue
			}
			y := float64(d.m.Lookup(model.ReadMiss, row, col))
			sw, sx, sy, sxx, sxy = sw+n, sx+n*x, sy+n*y, sxx+n*x*x, sxy+n*x*y
			seen = true
		}
		if seen {
			learned++
		}
	}
	den := sw*sxx - sx*sx
	if learned < 2 || den <= 0 {
		return line{}, false
	}
	b := (sw*sxy - sx*sy) / den
	a := (sy - b*sx) / sw
	switch {
	case b <= 0:
		return line{}, false
	case a < 0: // through the origin
		return line{perSector: sxy / sxx}, true
	}
	return line{fixed: a, perSector: b}, true
}

// priorLine is the class's prior (model.Prior) as a line: its times of
// a 4 KiB and a 1 MiB read.
func (d ModelDevice) priorLine(far bool) line {
	cfg := d.m.Config()
	class := cfg.Class
	if class == model.Throttled {
		class = model.SSD // the device behind the bucket
	}
	var dist uint64
	if far {
		dist = d.spanSectors / 3
	}
	t1 := float64(model.Prior(class, model.ReadMiss, 8, dist, cfg.CapacitySectors))
	t2 := float64(model.Prior(class, model.ReadMiss, 2048, dist, cfg.CapacitySectors))
	b := max((t2-t1)/2040, 0)
	return line{fixed: max(t1-8*b, 0), perSector: b}
}

// ReadNs implements Device: the fitted line, and for a throttled device
// at least the time its caps allow a request of that size (a token
// bucket passes IOPS requests and BytesPerSec bytes a second).
func (d ModelDevice) ReadNs(sectors uint32, random bool) float64 {
	l := d.near
	if random {
		l = d.far
	}
	ns := l.at(float64(sectors))
	if th := d.throttle; th.Enabled() {
		if th.IOPS > 0 {
			ns = max(ns, 1e9/th.IOPS)
		}
		if th.BytesPerSec > 0 {
			ns = max(ns, float64(sectors)*trace.SectorSize*1e9/th.BytesPerSec)
		}
	}
	return ns
}

// MaxRequestSectors implements Device.
func (d ModelDevice) MaxRequestSectors() uint32 { return d.maxSectors }

// windowNs is the predicted service time, ns, of reading a window of
// pages pages: its requests of at most the device's largest size, the
// first at a random place for a random reader, the rest in order.
func windowNs(dev Device, pages float64, random bool) float64 {
	sectors := uint64(math.Ceil(pages)) * 8
	maxReq := uint64(max(dev.MaxRequestSectors(), 8))
	full, rest := sectors/maxReq, sectors%maxReq
	var ns float64
	first := random
	if full > 0 {
		ns += dev.ReadNs(uint32(maxReq), first)
		if full > 1 {
			ns += float64(full-1) * dev.ReadNs(uint32(maxReq), false)
		}
		first = false
	}
	if rest > 0 {
		ns += dev.ReadNs(uint32(rest), first)
	}
	return ns
}

// classNs is the predicted service time, ns, of class c's reading at a
// depth of p pages: the windows its reader needs for the pages it used,
// each of p pages. A class that used u pages of each window needs
// c.Windows × min(a, u) ÷ min(p, u) windows at depth p (a its mean
// window). One whose windows were shorter than its files' depth (the
// depth each file was opened at, else cur) was bounded by something else
// than the depth: a small file, whose first window the kernel sizes from
// the read (get_init_ra_size, mm/readahead.c), and no window is read past
// a file's end. It reads windows of at most a pages at any depth.
// lowWastePct is the waste up to which the class uses all it is given.
func classNs(dev Device, c Class, p, cur float64, random bool, lowWastePct float64) float64 {
	a := c.depthPages()
	if c.Windows <= 0 || a <= 0 {
		return 0
	}
	u, size, f := c.usedPerWindow(lowWastePct), p, c.fileDepthPages(cur)
	switch {
	case a < f-1: // bounded by its files, not by the depth
		u, size = math.Min(u, a), math.Min(p, a)
	case a > f+1: // reads larger than the depth (ractl_max_pages, mm/readahead.c)
		size = math.Max(p, a)
	}
	windows := c.Windows * math.Min(a, u) / math.Min(size, u)
	return windows * windowNs(dev, size, random)
}

// Cost is the predicted service time, ns, of the evidence's read-ahead
// at a depth of kib KiB, its windows having been read at curKiB. seeks
// says sequential windows seek too (several streams share a rotational
// device, EuroSys 2007 §3).
func Cost(dev Device, e Evidence, kib, curKiB int, seeks bool, lowWastePct float64) float64 {
	p, cur := float64(kib)/4, float64(curKiB)/4
	return classNs(dev, e.Random, p, cur, true, lowWastePct) + classNs(dev, e.Sequential, p, cur, seeks, lowWastePct)
}
