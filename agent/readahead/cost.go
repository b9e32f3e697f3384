package readahead

import (
	"fmt"
	"math"
	"strings"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Device predicts the service time of a reader's window on a device.
type Device interface {
	// ReadNs is the predicted service time, ns, of reading sectors
	// 512-byte sectors at a random place (random) or right after the
	// previous request (a sequential reader's next window): what a
	// reader waits for a window. A window longer than max_sectors_kb is
	// split into requests issued together (bio_split_rw,
	// block/blk-merge.c), which pay the fixed part of a request's time
	// side by side and share the transfer.
	ReadNs(sectors uint32, random bool) float64
}

// Latencies are the service times (dispatch to completion) of a device's
// read-ahead requests (REQ_RAHEAD), summed by request size (the disk
// model's rows, model.RowOf) and by whether each followed the previous
// request (near) or not (far): what readers waited for their windows;
// and how many of them were dispatched to an idle device (alone: no
// earlier request still in flight). Every field is a sum, so that they
// decay with the evidence (Road).
type Latencies struct {
	n, ns [2][model.NumRows]float64
	alone float64
}

// Add counts one request of sectors served in ns, far or near, alone or
// behind others in flight.
func (l *Latencies) Add(sectors uint32, far, alone bool, ns int64) {
	i, r := farIndex(far), model.RowOf(sectors)
	l.n[i][r]++
	l.ns[i][r] += float64(ns)
	if alone {
		l.alone++
	}
}

// Requests is the number of requests counted, dispatched alone or behind
// others (decayed, in a Road's history).
func (l Latencies) Requests(alone bool) float64 {
	var n float64
	for _, side := range l.n {
		for _, x := range side {
			n += x
		}
	}
	if alone {
		return l.alone
	}
	return n - l.alone
}

// MeanNs is the mean service time, ns, of the requests counted in the
// row of sectors (model.RowOf) on the far or near side, and their
// number; 0, 0 when none was.
func (l Latencies) MeanNs(sectors uint32, far bool) (ns, n float64) {
	i, r := farIndex(far), model.RowOf(sectors)
	if l.n[i][r] == 0 {
		return 0, 0
	}
	return l.ns[i][r] / l.n[i][r], l.n[i][r]
}

// String is the rows counted, near then far, each as "KiB:requests@µs"
// (its upper size, its decayed count, its mean), e.g. "near 4:120@85
// 128:64@410; far 4:3@90".
func (l Latencies) String() string {
	var b strings.Builder
	for i, side := range []string{"near", "far"} {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(side)
		for r := range model.NumRows {
			if n := l.n[i][r]; n >= 0.5 {
				fmt.Fprintf(&b, " %d:%.0f@%.0f", model.RowSectors(r)/2, n, l.ns[i][r]/n/1e3)
			}
		}
	}
	return b.String()
}

func farIndex(far bool) int {
	if far {
		return 1
	}
	return 0
}

// plus is l + f·o.
func (l Latencies) plus(o Latencies, f float64) Latencies {
	for i := range l.n {
		for r := range l.n[i] {
			l.n[i][r] += f * o.n[i][r]
			l.ns[i][r] += f * o.ns[i][r]
		}
	}
	l.alone += f * o.alone
	return l
}

// line is t(s) = fixed + perSector·s, ns for s sectors.
type line struct{ fixed, perSector float64 }

func (l line) at(sectors float64) float64 { return l.fixed + l.perSector*sectors }

func (l line) String() string {
	return fmt.Sprintf("%.0f µs + %.2f µs/KiB", l.fixed/1e3, 2*l.perSector/1e3)
}

// LineDevice is a Device whose service time is a line in the request's
// size, fitted to measured Latencies. Build it with NewLineDevice.
type LineDevice struct {
	// near and far are the lines right after the previous request and
	// elsewhere (the same on flash).
	near, far line
	throttle  model.Throttle
}

// NewLineDevice fits a device's lines to its read-ahead requests'
// latencies lat by least squares, each size at its rows' midpoint and
// mean, weighted by its requests, among the sizes up to 128 KiB (the
// papers' rows) with MinRequests requests or more. Every such request is
// fitted, those dispatched behind others as well as those dispatched to
// an idle device. A larger request is not fitted: it is split
// (bio_split_rw, block/blk-merge.c) into parts dispatched together, and
// its time measures that sharing as much as its size. A fit that does
// not rise with the size or whose fixed time is negative is not taken.
// On a rotational device (m's class HDD) the near and far lines are
// fitted apart (a seek); elsewhere both together. A line with fewer than
// two sizes to fit is the class's prior (model.Prior). m gives the
// class, the capacity and a throttled device's caps; caps are the
// readers' own (blk-throttle's, agent/blkcaps), the tighter of each
// applying.
func NewLineDevice(lat Latencies, m *model.Model, caps model.Throttle) LineDevice {
	d := LineDevice{throttle: tighterCaps(m.Throttle(), caps)}
	if m.Class() == model.HDD {
		d.near = fitLine(lat, []int{0}, m, false)
		d.far = fitLine(lat, []int{1}, m, true)
		return d
	}
	d.near = fitLine(lat, []int{0, 1}, m, false)
	d.far = d.near
	return d
}

// tighterCaps is the tighter of a and b's caps of each kind (0: none).
func tighterCaps(a, b model.Throttle) model.Throttle {
	pick := func(x, y float64) float64 {
		if x == 0 || (y > 0 && y < x) {
			return y
		}
		return x
	}
	return model.Throttle{IOPS: pick(a.IOPS, b.IOPS), BytesPerSec: pick(a.BytesPerSec, b.BytesPerSec)}
}

// fitLine fits the line to the latencies of sides (0 near, 1 far), or
// returns the prior's.
func fitLine(lat Latencies, sides []int, m *model.Model, far bool) line {
	if l, ok := fitRows(lat, sides, th.fitRows); ok {
		return l
	}
	return priorLine(m, far)
}

// fitRows fits the line to the sizes of the first rows rows; false when
// fewer than two sizes qualify, or the line does not rise with the size
// or has a negative fixed time.
func fitRows(lat Latencies, sides []int, rows int) (line, bool) {
	var sw, sx, sy, sxx, sxy float64
	fitted := 0
	for row := range rows {
		var n, ns float64
		for _, i := range sides {
			n, ns = n+lat.n[i][row], ns+lat.ns[i][row]
		}
		if n < th.requests {
			continue
		}
		fitted++
		x := float64(model.RowSectors(row))
		if row >= model.LinearRows {
			x = (float64(model.RowSectors(row-1)) + x) / 2
		}
		y := ns / n
		sw, sx, sy, sxx, sxy = sw+n, sx+n*x, sy+n*y, sxx+n*x*x, sxy+n*x*y
	}
	den := sw*sxx - sx*sx
	if fitted < 2 || den <= 0 {
		return line{}, false
	}
	b := (sw*sxy - sx*sy) / den
	a := (sy - b*sx) / sw
	if b <= 0 || a < 0 {
		// A line that does not rise, or that crosses zero time at a
		// positive size, is not a device's: every request pays a fixed
		// time before its transfer (command, interrupt, completion).
		// Such rows measure the sharing of requests in flight more than
		// their sizes.
		return line{}, false
	}
	return line{fixed: a, perSector: b}, true
}

// priorLine is the class's prior (model.Prior) as a line: its times of
// a 4 KiB and a 1 MiB read, at a random place when far.
func priorLine(m *model.Model, far bool) line {
	cfg := m.Config()
	class := cfg.Class
	if class == model.Throttled {
		class = model.SSD // the device behind the bucket
	}
	var dist uint64
	if far {
		dist = cfg.CapacitySectors / 3 // the mean distance of two uniform places (EuroSys 2007 eq. 5, n = 2)
	}
	t1 := float64(model.Prior(class, model.ReadMiss, 8, dist, cfg.CapacitySectors))
	t2 := float64(model.Prior(class, model.ReadMiss, 2048, dist, cfg.CapacitySectors))
	b := max((t2-t1)/2040, 0)
	return line{fixed: max(t1-8*b, 0), perSector: b}
}

// ReadNs implements Device: the line, and for a throttled device at
// least the time its caps allow a read of that size (a token bucket
// passes IOPS requests and BytesPerSec bytes a second).
func (d LineDevice) ReadNs(sectors uint32, random bool) float64 {
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

// String is the device's lines and caps, e.g. "sequential 62 µs + 0.41
// µs/KiB, random 80 µs + 0.66 µs/KiB, caps 3000 IOPS, 200.0 MB/s".
func (d LineDevice) String() string {
	return "sequential " + d.near.String() + ", random " + d.far.String() + ", caps " + d.throttle.String()
}

// windowNs is the predicted service time, ns, of reading a window of
// pages pages, at a random place for a random reader.
func windowNs(dev Device, pages float64, random bool) float64 {
	return dev.ReadNs(uint32(math.Ceil(pages))*8, random)
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
	windows := c.Windows // each window of a class that used none of them is still read
	if u > 0 {
		windows *= math.Min(a, u) / math.Min(size, u)
	}
	return windows * windowNs(dev, size, random)
}

// Cost is the predicted service time, ns, of the evidence's read-ahead
// at a depth of kib KiB, its windows having been read at curKiB. seeks
// says sequential windows seek too (several streams share a rotational
// device, EuroSys 2007 §3).
func Cost(dev Device, e Evidence, kib, curKiB int, seeks bool, lowWastePct float64) float64 {
	p, cur := float64(kib)/4, float64(curKiB)/4
	return classNs(dev, e.Random, p, cur, true, lowWastePct) + classNs(dev, e.Sequential, p, cur, seeks, lowWastePct) +
		classNs(dev, e.Short, p, cur, true, lowWastePct)
}
