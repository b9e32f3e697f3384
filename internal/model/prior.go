package model

import (
	"math"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Parametric defaults ("priors"): the service time a class of device is
// assumed to have before anything is measured. They answer lookups on an
// empty table (see [Model.Lookup]) and make [Default] usable as a model with
// no training and no measured times. They are deliberately generic —
// typical current devices, not any particular drive — and are replaced
// cell by cell as soon as real service times are learned.
const (
	// HDDOverheadNs is the per-command controller overhead of an HDD:
	// 0.1 ms (command decode and completion on current SATA/SAS drives;
	// Ruemmler & Wilkes, "An introduction to disk drive modeling", 1994,
	// report 0.3–1 ms for early-1990s drives).
	HDDOverheadNs = 100_000
	// HDDRPM is the spindle speed of the default HDD: 7200 rpm (desktop and
	// nearline SATA), one revolution = 8.33 ms.
	HDDRPM = 7200
	// HDDSeekMinNs is the track-to-track seek: 0.8 ms (datasheets of
	// 7200 rpm drives give 0.8–1 ms).
	HDDSeekMinNs = 800_000
	// HDDSeekFullNs is the full-stroke seek: 15 ms. With the √-shaped
	// curve below, a third-stroke seek (the average over random pairs of
	// positions) is 9.0 ms, the 8.5–9 ms "average read seek" of 7200 rpm
	// datasheets.
	HDDSeekFullNs = 15_000_000
	// HDDMediaBytesPerSec is the sustained media rate: 150 MB/s (a 7200 rpm
	// drive streams 100–250 MB/s from inner to outer zones).
	HDDMediaBytesPerSec = 150e6
	// HDDInterfaceBytesPerSec is the rate of a cache hit: 500 MB/s
	// (SATA 6 Gb/s, 600 MB/s after coding, less protocol overhead).
	HDDInterfaceBytesPerSec = 500e6

	// SSDLatencyNs is the fixed cost of a SATA SSD request: 100 µs (typical
	// 4 KiB QD1 random read latency of SATA flash, 80–120 µs).
	SSDLatencyNs = 100_000
	// SSDBytesPerSec is the SATA SSD transfer rate: 500 MB/s (the SATA
	// 6 Gb/s ceiling that such drives reach sequentially).
	SSDBytesPerSec = 500e6

	// NVMeLatencyNs is the fixed cost of an NVMe request: 20 µs (low-latency
	// NVMe flash; TLC consumer drives are slower, 50–90 µs at QD1, and are
	// learned online).
	NVMeLatencyNs = 20_000
	// NVMeBytesPerSec is the NVMe transfer rate: 2 GB/s (PCIe 3.0 ×4 class).
	NVMeBytesPerSec = 2e9
)

// Prior returns the parametric default service time in ns of a request of
// t's kind, length sectors, dispatched at distanceSectors from the previous
// request, on a device of the class and capacity (sectors). Models:
//
//   - HDD read-miss and write: overhead + positioning + length / media rate.
//     Positioning is 0 at distance 0 (streaming), otherwise the smaller of
//     (a) waiting for the gap to rotate past, distance / media rate, and
//     (b) seek + half a revolution, with seek = min + (full − min)·√(d/C)
//     (the square-root shape of short seeks, Ruemmler & Wilkes 1994).
//     Writes use the miss model: under sustained writes the drive's write
//     cache is full and writes run at media speed (DADS §3.1); short write
//     bursts are faster and are learned.
//   - HDD read-hit: overhead + length / interface rate.
//   - SSD (and the device behind a Throttled one's bucket): 100 µs +
//     length / 500 MB/s; NVMe: 20 µs + length / 2 GB/s; the
//     same for reads and writes, independent of distance.
func Prior(class Class, t Table, sectors, distanceSectors, capacitySectors uint64) int64 {
	bytes := float64(sectors) * trace.SectorSize
	var ns float64
	switch class {
	case SSD, Throttled:
		ns = SSDLatencyNs + bytes/SSDBytesPerSec*1e9
	case NVMe:
		ns = NVMeLatencyNs + bytes/NVMeBytesPerSec*1e9
	default: // HDD
		if t == ReadHit {
			ns = HDDOverheadNs + bytes/HDDInterfaceBytesPerSec*1e9
			break
		}
		ns = HDDOverheadNs + bytes/HDDMediaBytesPerSec*1e9
		if distanceSectors > 0 {
			capacity := float64(max(capacitySectors, 1))
			d := min(float64(distanceSectors), capacity)
			skip := d * trace.SectorSize / HDDMediaBytesPerSec * 1e9
			seek := HDDSeekMinNs + (HDDSeekFullNs-HDDSeekMinNs)*math.Sqrt(d/capacity) +
				0.5*60e9/HDDRPM
			ns += min(skip, seek)
		}
	}
	return int64(math.Round(ns))
}

// priorCell evaluates Prior at a cell's representative request: the row's
// largest length and the column's midpoint distance (1.5× the lower bound
// of a doubling column, the middle of a GiB column).
func (m *Model) priorCell(t Table, row, col int) int64 {
	lo, _ := m.lay.columnRange(col)
	var d uint64
	switch {
	case col == 0:
	case col < SmallColumns:
		d = lo + lo/2
		if col == 1 {
			d = 12
		}
	default:
		d = lo + m.lay.gibPerCol*gibSectors/2
	}
	return Prior(m.cfg.Class, t, RowSectors(row), d, m.cfg.CapacitySectors)
}
