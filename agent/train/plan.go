package train

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// DefaultSizesKiB are the request sizes trained by default, in KiB: the
// papers' range, one size per doubling (4–128 KiB, rows 0, 1, 3, 7, 15
// and 31 of the model), then the doublings of the log-spaced rows above
// 128 KiB (DESIGN §3) — each capped at the device's largest request, which
// is added as a size of its own (max_sectors_kb is often 1280 KiB, which
// is not a power of two). The model's other rows are answered from their
// column's trained cells (cold-cell rule). One size per doubling keeps the
// number of cells, and so the training time, small: every cell has to be
// visited once per pass.
var DefaultSizesKiB = []int{4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}

// DefaultMaxRequestBytes bounds the requests of a plan whose
// PlanOptions.MaxRequestBytes is 0.
const DefaultMaxRequestBytes = 1 << 20

// PlanOptions configure a [Planner].
type PlanOptions struct {
	// CapacitySectors is the device size in 512-byte sectors (required).
	CapacitySectors uint64
	// LogicalBlockSize is the device's logical block size in bytes (0 means
	// 512). Every offset and length is a multiple of it (O_DIRECT needs
	// that), so every inter-request distance is too.
	LogicalBlockSize uint32
	// MaxRequestBytes is the largest request the block layer sends to the
	// device unsplit (max_sectors_kb, and max_segments pages); 0 means
	// DefaultMaxRequestBytes. Larger sizes are left out: the block layer
	// would split them and the pieces would land in other cells.
	MaxRequestBytes uint64
	// SizesKiB are the request sizes to plan (nil: DefaultSizesKiB up to
	// MaxRequestBytes, plus MaxRequestBytes). Sizes that are not a multiple
	// of the logical block size, exceed MaxRequestBytes or half the
	// device, or fall in the same model row as an earlier size are dropped.
	SizesKiB []int
	// Writes adds writes: every cell is planned once as a read and once as
	// a write. Without it the plan reads only.
	Writes bool
	// Seed seeds the planner's generator (same seed, same plan).
	Seed uint64
}

// Cell is one planned cell of the model: an operation (trace.Read or
// trace.Write), a size row and a distance column.
type Cell struct {
	Op  trace.Op
	Row int
	Col int
}

// Planner plans training requests spread uniformly over the model's cells
// (DESIGN §3, "Offline training"): sizes × inter-request distance columns
// × read/write. The cells are visited in passes; each pass visits every
// cell once, in a random order, so any prefix of a plan is uniform (the
// counts of the cells differ by at most one, plus the few re-positioning
// requests described below) and a plan can be issued in rounds and cut
// anywhere.
//
// A request for cell (op, row, col) gets a start sector at a distance d
// from the end of the previous request, d uniform over the aligned
// distances of the column that keep the request inside the device, ahead
// or behind (at random when both fit). A far column is only reachable from
// near an end of the device: when no cell left in the pass can be reached
// from the current position, the planner issues one request at the first
// or last sector (the one that makes a waiting cell reachable), choosing
// among the sizes the one whose cell (given where the request lands) has
// the fewest requests so far. That request counts for its own cell.
//
// A Planner is not safe for concurrent use.
type Planner struct {
	capacity uint64 // sectors
	align    uint64 // logical block size, sectors
	geo      *model.Model
	sizes    []uint64 // per planned row, ascending, sectors
	rows     []int    // model row of sizes[i]
	rowSize  map[int]uint64
	ops      []trace.Op
	cells    []Cell
	index    map[Cell]int
	counts   []int
	pass     []int // cells still to visit in this pass
	where    []int // index of a cell in pass, −1 when not in it
	pos      uint64
	issued   int64
	steers   int64
	rng      *rand.Rand
}

// NewPlanner returns a planner for a device, with its head at sector 0.
func NewPlanner(opt PlanOptions) (*Planner, error) {
	if opt.CapacitySectors == 0 || opt.CapacitySectors > model.MaxCapacitySectors {
		return nil, fmt.Errorf("train: plan: capacity must be in 1…%d sectors, got %d", uint64(model.MaxCapacitySectors), opt.CapacitySectors)
	}
	lbs := uint64(opt.LogicalBlockSize)
	if lbs == 0 {
		lbs = trace.SectorSize
	}
	if lbs%trace.SectorSize != 0 || lbs&(lbs-1) != 0 {
		return nil, fmt.Errorf("train: plan: logical block size %d is not a power-of-two multiple of 512", lbs)
	}
	align := lbs / trace.SectorSize
	capacity := opt.CapacitySectors / align * align
	maxReq := opt.MaxRequestBytes
	if maxReq == 0 {
		maxReq = DefaultMaxRequestBytes
	}
	maxSectors := min(maxReq/trace.SectorSize, uint64(1)<<32-1)
	sizesKiB := opt.SizesKiB
	if sizesKiB == nil {
		for _, k := range DefaultSizesKiB {
			if uint64(k)*2 <= maxSectors {
				sizesKiB = append(sizesKiB, k)
			}
		}
		sizesKiB = append(sizesKiB, int(maxSectors/8*4)) // the largest request, in whole 4 KiB
	}
	p := &Planner{
		capacity: capacity,
		align:    align,
		geo:      model.Default(model.SSD, capacity),
		rowSize:  map[int]uint64{},
		index:    map[Cell]int{},
		rng:      rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x5eed_7a11)),
	}
	var sizes []uint64
	for _, k := range sizesKiB {
		if k <= 0 {
			continue
		}
		s := uint64(k) * 2
		if s%align != 0 || s > maxSectors || s > capacity/2 {
			continue
		}
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	for _, s := range sizes {
		r := model.RowOf(uint32(s))
		if _, dup := p.rowSize[r]; dup {
			continue
		}
		p.rowSize[r] = s
		p.sizes = append(p.sizes, s)
		p.rows = append(p.rows, r)
	}
	if len(p.sizes) == 0 {
		return nil, errors.New("train: plan: no request size fits the device (sizes must be multiples of the logical block size, at most the largest request and half the device)")
	}
	p.ops = []trace.Op{trace.Read}
	if opt.Writes {
		p.ops = append(p.ops, trace.Write)
	}
	sMin := p.sizes[0]
	for _, op := range p.ops {
		for i, r := range p.rows {
			for col := 0; col < p.geo.Columns(); col++ {
				s := p.sizes[i]
				// Reachable from the last position (request at the end of
				// the device) or, going forward, from just after the
				// smallest request at sector 0.
				if !p.reachable(col, s, capacity) && !p.reachable(col, s, sMin) {
					continue
				}
				c := Cell{Op: op, Row: r, Col: col}
				p.index[c] = len(p.cells)
				p.cells = append(p.cells, c)
			}
		}
	}
	p.counts = make([]int, len(p.cells))
	p.where = make([]int, len(p.cells))
	for i := range p.where {
		p.where[i] = -1
	}
	return p, nil
}

// Cells returns the planned cells: every (op, row, column) whose column
// holds a distance a request of the row's size can be dispatched at
// inside the device.
func (p *Planner) Cells() []Cell { return slices.Clone(p.cells) }

// Sizes returns the planned request sizes in sectors, one per planned row.
func (p *Planner) Sizes() []uint64 { return slices.Clone(p.sizes) }

// Columns returns the number of distance columns of the device's model.
func (p *Planner) Columns() int { return p.geo.Columns() }

// Count returns the number of requests planned so far for a cell.
func (p *Planner) Count(c Cell) int {
	if i, ok := p.index[c]; ok {
		return p.counts[i]
	}
	return 0
}

// Planned returns the number of requests planned so far, and how many of
// them were re-positioning requests (see Planner).
func (p *Planner) Planned() (requests, repositions int64) { return p.issued, p.steers }

// Position returns the end sector of the last planned request.
func (p *Planner) Position() uint64 { return p.pos }

// Next plans n more requests. Arrival is 1 µs apart, counting on from the
// previous call (fio replays them back to back with replay_no_stall).
func (p *Planner) Next(n int) []trace.Request {
	out := make([]trace.Request, 0, n)
	for range n {
		out = append(out, p.next())
	}
	return out
}

func (p *Planner) next() trace.Request {
	if len(p.pass) == 0 {
		p.newPass()
	}
	for _, ci := range p.pass {
		c := p.cells[ci]
		if p.reachable(c.Col, p.rowSize[c.Row], p.pos) {
			return p.emit(c, ci)
		}
	}
	return p.steer(p.cells[p.pass[0]])
}

func (p *Planner) newPass() {
	p.pass = p.pass[:0]
	for i := range p.cells {
		p.pass = append(p.pass, i)
	}
	p.rng.Shuffle(len(p.pass), func(a, b int) { p.pass[a], p.pass[b] = p.pass[b], p.pass[a] })
	for k, ci := range p.pass {
		p.where[ci] = k
	}
}

// distances returns the aligned distances of column col at which a
// request of s sectors fits in the device from position pos, going
// forward (start = pos + d) and backward (start = pos − d, d ≥ 1).
func (p *Planner) distances(col int, s, pos uint64) (fwd, bwd [2]uint64, okF, okB bool) {
	lo, hi := p.geo.ColumnRange(col)
	top := hi - 1
	last := p.capacity - s // last start sector
	if pos <= last {
		fwd, okF = p.clip(lo, min(top, last-pos))
	}
	if pos > 0 {
		least := uint64(1)
		if pos > last {
			least = pos - last
		}
		bwd, okB = p.clip(max(lo, least), min(top, pos))
	}
	return fwd, bwd, okF, okB
}

// clip returns the aligned distances in [lo, hi].
func (p *Planner) clip(lo, hi uint64) ([2]uint64, bool) {
	if lo > hi {
		return [2]uint64{}, false
	}
	a := (lo + p.align - 1) / p.align * p.align
	b := hi / p.align * p.align
	if a < lo || a > b { // a < lo: overflow
		return [2]uint64{}, false
	}
	return [2]uint64{a, b}, true
}

func (p *Planner) reachable(col int, s, pos uint64) bool {
	_, _, f, b := p.distances(col, s, pos)
	return f || b
}

// emit plans the request of cell c (reachable from the current position).
func (p *Planner) emit(c Cell, ci int) trace.Request {
	s := p.rowSize[c.Row]
	fwd, bwd, okF, okB := p.distances(c.Col, s, p.pos)
	forward := okF && (!okB || p.rng.IntN(2) == 0)
	var start uint64
	if forward {
		start = p.pos + p.pick(fwd)
	} else {
		start = p.pos - p.pick(bwd)
	}
	return p.issue(c.Op, start, s, ci)
}

// pick draws an aligned distance uniformly from r.
func (p *Planner) pick(r [2]uint64) uint64 {
	steps := (r[1] - r[0]) / p.align
	if steps == 0 {
		return r[0]
	}
	return r[0] + p.rng.Uint64N(steps+1)*p.align
}

// steer plans a request at an end of the device from which cell want
// becomes reachable (see Planner).
func (p *Planner) steer(want Cell) trace.Request {
	need := p.rowSize[want.Row]
	bestCount, bestStart, bestSize, bestOp, bestCell := -1, uint64(0), uint64(0), trace.Read, -1
	for _, s := range p.sizes {
		for _, start := range []uint64{p.capacity - s, 0} {
			end := start + s
			if !p.reachable(want.Col, need, end) {
				continue
			}
			d := start - p.pos
			if start < p.pos {
				d = p.pos - start
			}
			for _, op := range p.ops {
				ci, ok := p.index[Cell{Op: op, Row: model.RowOf(uint32(s)), Col: p.geo.ColumnOf(d)}]
				n := 1 << 30
				if ok {
					n = p.counts[ci]
				} else {
					ci = -1
				}
				if bestCount < 0 || n < bestCount {
					bestCount, bestStart, bestSize, bestOp, bestCell = n, start, s, op, ci
				}
			}
		}
	}
	p.steers++
	if bestCount < 0 { // unreachable by construction of the cells; keep going
		return p.issue(want.Op, 0, p.sizes[0], -1)
	}
	return p.issue(bestOp, bestStart, bestSize, bestCell)
}

// issue records a planned request and returns it; ci is its cell (−1 if
// not a planned cell).
func (p *Planner) issue(op trace.Op, start, s uint64, ci int) trace.Request {
	if ci >= 0 {
		p.counts[ci]++
		if k := p.where[ci]; k >= 0 {
			last := len(p.pass) - 1
			moved := p.pass[last]
			p.pass[k] = moved
			p.where[moved] = k
			p.pass = p.pass[:last]
			p.where[ci] = -1
		}
	}
	q := trace.Request{
		Arrival: p.issued * 1000, Dispatch: trace.Unknown, Complete: trace.Unknown, Think: trace.Unknown,
		Sector: start, Sectors: uint32(s), Op: op,
	}
	if op == trace.Read {
		q.Flags = trace.Sync
	}
	p.issued++
	p.pos = start + s
	return q
}
