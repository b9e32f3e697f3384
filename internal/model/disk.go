package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// PredictMode says how a Disk turns a cell into a prediction.
type PredictMode uint8

// Prediction modes.
const (
	// PredictMean returns the cell mean (KDSim §3.1.1); deterministic.
	PredictMean PredictMode = iota
	// PredictSample returns one of the cell's stored service times drawn
	// with the Disk's seeded PCG generator; cold cells return the
	// fallback mean. It reproduces the spread of service times, which
	// lowers the demerit figure (RMS distance between the CDFs), at the
	// cost of per-request noise. Same seed and inputs → same outputs.
	PredictSample
)

// String returns "mean" or "sample".
func (p PredictMode) String() string {
	switch p {
	case PredictMean:
		return "mean"
	case PredictSample:
		return "sample"
	}
	return fmt.Sprintf("PredictMode(%d)", uint8(p))
}

// ParsePredictMode parses "mean" or "sample" ("" means mean).
func ParsePredictMode(s string) (PredictMode, error) {
	switch s {
	case "", "mean":
		return PredictMean, nil
	case "sample":
		return PredictSample, nil
	}
	return 0, fmt.Errorf("unknown predict mode %q (want mean or sample)", s)
}

// Disk is one stateful instance of a modelled device: the model, the
// end sector of the previously dispatched request (for the inter-request
// distance) and, for HDDs, the state of the drive's cache. Use one Disk per
// simulation run and one for the real device. A Disk is not safe for
// concurrent use; several Disks may share a Model (see the package doc).
type Disk struct {
	m       *Model
	pos     uint64 // end sector of the previously dispatched request
	cache   diskCache
	mode    PredictMode
	pcg     rand.PCG
	lastHit bool
}

// NewDisk returns a Disk over m with an empty disk cache and the head at
// sector 0 (the first request's distance is its start sector). seed seeds
// the PCG generator of PredictSample. The cache uses m's CacheConfig as of
// this call (HDD only).
func (m *Model) NewDisk(seed int64) *Disk {
	d := &Disk{m: m}
	if m.cfg.Class == HDD {
		d.cache = newDiskCache(m.cfg.Cache, m.cfg.CapacitySectors)
	}
	d.pcg.Seed(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15)
	return d
}

// Model returns the Disk's model.
func (d *Disk) Model() *Model { return d.m }

// SetPredictMode selects mean (default) or sample predictions.
func (d *Disk) SetPredictMode(p PredictMode) { d.mode = p }

// Position returns the end sector of the previously dispatched request.
func (d *Disk) Position() uint64 { return d.pos }

// LastHit reports whether the last request served by Service was a read
// the disk-cache model found in the drive's cache (for Observe: whether
// the measured time classified it as a hit).
func (d *Disk) LastHit() bool { return d.lastHit }

// distance returns the inter-request distance in sectors of a request
// starting at sector: |sector − end of the previous request| (DESIGN §2).
func (d *Disk) distance(sector uint64) uint64 {
	if sector >= d.pos {
		return sector - d.pos
	}
	return d.pos - sector
}

// Service returns the predicted service time in ns of a request dispatched
// next to the device: op, start sector and length in sectors. The distance
// is |sector − end of the previously dispatched request|; for an HDD read
// the disk-cache model decides hit or miss (and reads ahead on a miss).
// The Disk's position becomes the end of this request. Flushes use the
// write table's row 0, column 0 and leave the position unchanged;
// discards are costed as writes. Service is O(1) in the table size (the
// cache scan is O(segments)) and does not allocate.
func (d *Disk) Service(op trace.Op, sector uint64, sectors uint32) int64 {
	m := d.m
	if op == trace.Flush {
		d.lastHit = false
		return d.predict(Write, 0, 0)
	}
	end := sector + uint64(sectors)
	col := m.lay.column(d.distance(sector))
	hit := false
	if op == trace.Read && m.cfg.Class == HDD {
		hit = d.cache.read(sector, end)
	}
	d.pos, d.lastHit = end, hit
	return d.predict(m.tableFor(op, hit), RowOf(sectors), col)
}

func (d *Disk) predict(t Table, row, col int) int64 {
	if d.mode == PredictSample {
		return d.m.sample(t, row, col, d.pcg.Uint64())
	}
	return d.m.Lookup(t, row, col)
}

// Observe learns from a real completed request: op, start sector, length
// in sectors and its measured service time in ns. It updates the request's
// cell (an HDD read goes to read-hit or read-miss as the model's
// HitClassifier classifies serviceNs, DADS §3.1), then the position and,
// for HDD reads, the disk-cache state, synchronised to the measured
// outcome (a measured hit marks the range cached, a measured miss reads
// ahead). Requests must be observed in dispatch order (on a device with
// k > 1 servers completions come out of order: sort them by dispatch
// time first), since the distance is measured from the previous one.
func (d *Disk) Observe(op trace.Op, sector uint64, sectors uint32, serviceNs int64) {
	if op == trace.Flush {
		d.m.Learn(op, 0, 0, serviceNs)
		d.lastHit = false
		return
	}
	end := sector + uint64(sectors)
	t := d.m.Learn(op, sectors, d.distance(sector), serviceNs)
	hit := t == ReadHit
	if op == trace.Read && d.m.cfg.Class == HDD {
		d.cache.observe(sector, end, hit)
	}
	d.pos, d.lastHit = end, hit
}

// PredictObserve is online learning as the agent does it: it returns the
// service time in ns the model predicts for a request dispatched next
// (as Service would, the disk-cache model deciding hit or miss without
// changing state), then learns the measured serviceNs exactly as Observe
// does (cell update, position, disk cache synchronised to the measured
// outcome). Requests must come in dispatch order. It does not allocate.
func (d *Disk) PredictObserve(op trace.Op, sector uint64, sectors uint32, serviceNs int64) int64 {
	var p int64
	if op == trace.Flush {
		p = d.predict(Write, 0, 0)
	} else {
		m := d.m
		hit := op == trace.Read && m.cfg.Class == HDD && d.cache.holding(sector, sector+uint64(sectors)) >= 0
		p = d.predict(m.tableFor(op, hit), RowOf(sectors), m.lay.column(d.distance(sector)))
	}
	d.Observe(op, sector, sectors, serviceNs)
	return p
}
