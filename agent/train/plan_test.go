package train

import (
	"reflect"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// walk checks a plan as the device and the model see it: every request is
// aligned, inside the device and of an allowed operation; it returns the
// requests per model cell (op, RowOf(length), ColumnOf(distance from the
// previous request's end)), continuing from position pos.
func walk(t *testing.T, reqs []trace.Request, capacity, align uint64, writes bool, pos uint64, counts map[Cell]int) uint64 {
	t.Helper()
	geo := model.Default(model.SSD, capacity)
	for i, q := range reqs {
		if q.Op != trace.Read && (q.Op != trace.Write || !writes) {
			t.Fatalf("request %d: op %v (writes allowed: %v)", i, q.Op, writes)
		}
		if q.Sector%align != 0 || uint64(q.Sectors)%align != 0 || q.Sectors == 0 {
			t.Fatalf("request %d: %d+%d not aligned to %d sectors", i, q.Sector, q.Sectors, align)
		}
		if q.End() > capacity {
			t.Fatalf("request %d: %d+%d ends past the device end %d", i, q.Sector, q.Sectors, capacity)
		}
		if i > 0 && q.Arrival <= reqs[i-1].Arrival {
			t.Fatalf("request %d: arrival %d not after %d", i, q.Arrival, reqs[i-1].Arrival)
		}
		d := q.Sector - pos
		if q.Sector < pos {
			d = pos - q.Sector
		}
		counts[Cell{Op: q.Op, Row: model.RowOf(q.Sectors), Col: geo.ColumnOf(d)}]++
		pos = q.End()
	}
	return pos
}

type planCase struct {
	name     string
	capacity uint64 // sectors
	lbs      uint32
	maxReq   uint64
	writes   bool
}

var planCases = []planCase{
	{"loop 256 MiB, 512 B blocks, 512 KiB requests", 256 << 11, 512, 512 << 10, false},
	{"256 MiB, 4 KiB blocks, 1280 KiB requests, writes", 256 << 11, 4096, 1280 << 10, true},
	{"10 GiB + 3 MiB", 10<<21 + 3<<11, 4096, 1 << 20, false},
	{"8 TB (30 GiB per far column)", 8e12 / 512, 4096, 1 << 20, true},
	{"tiny 1 MiB", 1 << 11, 512, 128 << 10, false},
}

// TestPlanCoversEveryCell: every (row, column) pair up to the device size
// is planned, a plan of k passes gives every planned cell requests (as the
// model itself classifies them), the counts stay close to uniform, and
// nothing leaves the device or is misaligned.
func TestPlanCoversEveryCell(t *testing.T) {
	for _, c := range planCases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPlanner(PlanOptions{CapacitySectors: c.capacity, LogicalBlockSize: c.lbs, MaxRequestBytes: c.maxReq, Writes: c.writes, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			align := uint64(c.lbs) / 512
			cells := p.Cells()
			set := map[Cell]bool{}
			for _, cl := range cells {
				set[cl] = true
			}
			geo := model.Default(model.SSD, c.capacity)
			sizes := p.Sizes()
			sMin := sizes[0]
			ops := []trace.Op{trace.Read}
			if c.writes {
				ops = append(ops, trace.Write)
			}
			for _, op := range ops {
				for _, s := range sizes {
					row := model.RowOf(uint32(s))
					for col := 0; col < geo.Columns(); col++ {
						lo, hi := geo.ColumnRange(col)
						// A column with an aligned distance that a request of
						// size s can take forward from just after the
						// smallest request at sector 0 is "up to the device
						// size" and must be planned.
						room := c.capacity - s - sMin
						first := (lo + align - 1) / align * align
						must := first <= room && first < hi
						if must && !set[Cell{op, row, col}] {
							t.Errorf("cell %v row %d (%d sectors) column %d [%d,%d) is reachable but not planned", op, row, s, col, lo, hi)
						}
						if lo > c.capacity && set[Cell{op, row, col}] {
							t.Errorf("cell %v row %d column %d starts at %d sectors, past the device (%d), but is planned", op, row, col, lo, c.capacity)
						}
					}
				}
			}
			const passes = 3
			counts := map[Cell]int{}
			pos := uint64(0)
			for range passes { // in rounds, as the trainer issues them
				pos = walk(t, p.Next(len(cells)), c.capacity, align, c.writes, pos, counts)
			}
			if pos != p.Position() {
				t.Errorf("planner position %d, walked to %d", p.Position(), pos)
			}
			lo, hi := 1<<30, 0
			for _, cl := range cells {
				n := counts[cl]
				if n != p.Count(cl) {
					t.Errorf("cell %+v: the model sees %d requests, the planner counted %d", cl, n, p.Count(cl))
				}
				lo, hi = min(lo, n), max(hi, n)
			}
			for cl, n := range counts {
				if !set[cl] {
					t.Errorf("%d requests in cell %+v, which is not planned", n, cl)
				}
			}
			total, steers := p.Planned()
			t.Logf("%d sizes × %d columns: %d cells; %d requests (%d re-positioning); per cell min %d max %d",
				len(sizes), geo.Columns(), len(cells), total, steers, lo, hi)
			if lo < passes-1 {
				t.Errorf("after %d passes' worth of requests a cell has only %d", passes, lo)
			}
			if hi > passes+4 {
				t.Errorf("after %d passes a cell has %d requests: not uniform", passes, hi)
			}
			if float64(steers) > 0.1*float64(total) {
				t.Errorf("%d of %d requests were re-positioning", steers, total)
			}
		})
	}
}

func TestPlanReadsOnlyWithoutWrites(t *testing.T) {
	p, err := NewPlanner(PlanOptions{CapacitySectors: 1 << 21, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Cells() {
		if c.Op != trace.Read {
			t.Fatalf("cell %+v planned without writes", c)
		}
	}
	for i, q := range p.Next(20000) {
		if q.Op != trace.Read {
			t.Fatalf("request %d is %v without writes", i, q.Op)
		}
	}
	w, err := NewPlanner(PlanOptions{CapacitySectors: 1 << 21, Writes: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[trace.Op]int{}
	for _, q := range w.Next(20000) {
		ops[q.Op]++
	}
	if ops[trace.Read] < 8000 || ops[trace.Write] < 8000 || len(ops) != 2 {
		t.Errorf("with writes: %v, want about half reads, half writes", ops)
	}
}

func TestPlanSizes(t *testing.T) {
	kib := func(p *Planner) []uint64 {
		var out []uint64
		for _, s := range p.Sizes() {
			out = append(out, s/2)
		}
		return out
	}
	cases := []struct {
		name string
		opt  PlanOptions
		want []uint64
	}{
		{"max_sectors_kb 1280", PlanOptions{CapacitySectors: 1 << 30, MaxRequestBytes: 1280 << 10},
			[]uint64{4, 8, 16, 32, 64, 128, 256, 512, 1024, 1280}},
		{"power of two max", PlanOptions{CapacitySectors: 1 << 30, MaxRequestBytes: 512 << 10},
			[]uint64{4, 8, 16, 32, 64, 128, 256, 512}},
		{"default max", PlanOptions{CapacitySectors: 1 << 30},
			[]uint64{4, 8, 16, 32, 64, 128, 256, 512, 1024}},
		{"half the device", PlanOptions{CapacitySectors: 256, MaxRequestBytes: 1 << 20},
			[]uint64{4, 8, 16, 32, 64}},
		{"explicit, same row dropped, unaligned dropped", PlanOptions{CapacitySectors: 1 << 30, LogicalBlockSize: 4096, MaxRequestBytes: 4 << 20,
			SizesKiB: []int{6, 4, 1024, 1000, 8192, 200}}, []uint64{4, 200, 1000}},
	}
	for _, c := range cases {
		p, err := NewPlanner(c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := kib(p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: sizes %v KiB, want %v", c.name, got, c.want)
		}
	}
}

func TestPlanRejects(t *testing.T) {
	for _, opt := range []PlanOptions{
		{},
		{CapacitySectors: 1 << 20, LogicalBlockSize: 1000},
		{CapacitySectors: 1 << 20, SizesKiB: []int{2}, LogicalBlockSize: 4096},
		{CapacitySectors: 8},
	} {
		if _, err := NewPlanner(opt); err == nil {
			t.Errorf("NewPlanner(%+v) succeeded", opt)
		}
	}
}

func TestPlanDeterministic(t *testing.T) {
	plan := func(seed uint64) []trace.Request {
		p, err := NewPlanner(PlanOptions{CapacitySectors: 3 << 21, Writes: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return append(p.Next(500), p.Next(500)...)
	}
	a, b, c := plan(1), plan(1), plan(2)
	if !slices.Equal(a, b) {
		t.Error("same seed, different plans")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same plan")
	}
}
