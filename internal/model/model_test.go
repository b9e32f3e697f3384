package model

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

const gib = uint64(1) << 21 // 1 GiB in sectors

func TestRowOf(t *testing.T) {
	for _, tc := range []struct {
		sectors uint32
		row     int
	}{
		{0, 0}, {1, 0}, {7, 0}, {8, 0}, // ≤ 4 KiB
		{9, 1}, {16, 1}, {17, 2},
		{255, 31}, {256, 31}, // 128 KiB: the papers' last row
		{257, 32}, {320, 32}, // (128, 160] KiB
		{321, 33}, {384, 33}, // (160, 192] KiB
		{448, 34}, {512, 35}, // 256 KiB
		{513, 36}, {640, 36}, // (256, 320] KiB
		{1024, 39},                 // 512 KiB
		{2560, 44},                 // 1280 KiB = (1024, 1280]
		{8192, 51},                 // 4 MiB = (3584, 4096] KiB
		{65536, 63},                // 32 MiB, the last row's bound
		{65537, 63}, {1 << 31, 63}, // larger: clamped
		{math.MaxUint32, 63},
	} {
		if got := RowOf(tc.sectors); got != tc.row {
			t.Errorf("RowOf(%d) = %d, want %d", tc.sectors, got, tc.row)
		}
	}
	// Every row is reachable and RowSectors is its inclusive upper bound.
	for r := 0; r < NumRows; r++ {
		hi := RowSectors(r)
		if got := RowOf(uint32(hi)); got != r {
			t.Errorf("RowOf(RowSectors(%d)=%d) = %d", r, hi, got)
		}
		if r+1 < NumRows {
			if got := RowOf(uint32(hi + 1)); got != r+1 {
				t.Errorf("RowOf(RowSectors(%d)+1=%d) = %d, want %d", r, hi+1, got, r+1)
			}
		}
		if r > LinearRows {
			lo := RowSectors(r - 1)
			if spread := float64(hi-lo) / float64(lo); spread > 0.25+1e-9 {
				t.Errorf("row %d spans (%d, %d] sectors: %.0f %% > 25 %%", r, lo, hi, 100*spread)
			}
		}
	}
}

func TestColumnOf(t *testing.T) {
	m := Default(HDD, 9*gib+12345) // 9 GiB + a bit: 10 GiB rounded up, GiB columns [1,2)…[9,10)
	if got, want := m.Columns(), SmallColumns+9; got != want {
		t.Fatalf("Columns = %d, want %d", got, want)
	}
	for _, tc := range []struct {
		d   uint64
		col int
	}{
		{0, 0},
		{1, 1}, {7, 1}, // below 4 KiB: joins column 1
		{8, 1}, {15, 1}, // [4, 8) KiB
		{16, 2}, {31, 2}, // [8, 16) KiB
		{gib / 2, 18},   // 512 MiB: [512 MiB, 1 GiB)
		{gib - 1, 18},   // 1 GiB − 1 sector
		{gib, 19},       // 1 GiB: the first GiB column
		{2*gib - 1, 19}, // [1, 2) GiB
		{2 * gib, 20},   // [2, 3) GiB
		{9*gib + 5, 27}, // [9, 10) GiB, the last
		{100 * gib, 27}, // past the capacity: the last column
		{math.MaxUint64, 27},
	} {
		if got := m.ColumnOf(tc.d); got != tc.col {
			t.Errorf("ColumnOf(%d) = %d, want %d", tc.d, got, tc.col)
		}
	}
	// Boundaries 4 KiB·2^n: column n+1 starts exactly there (n = 0…17),
	// and one sector less is column n (n ≥ 1).
	for n := 0; n <= 17; n++ {
		b := uint64(8) << n // 4 KiB·2^n in sectors
		if got := m.ColumnOf(b); got != n+1 {
			t.Errorf("ColumnOf(4 KiB·2^%d = %d sectors) = %d, want %d", n, b, got, n+1)
		}
		if n >= 1 {
			if got := m.ColumnOf(b - 1); got != n {
				t.Errorf("ColumnOf(4 KiB·2^%d − 1 sector) = %d, want %d", n, got, n)
			}
		}
	}
	// ColumnRange is consistent with ColumnOf.
	for c := 0; c < m.Columns(); c++ {
		lo, hi := m.ColumnRange(c)
		if got := m.ColumnOf(lo); got != c {
			t.Errorf("ColumnOf(lo of column %d = %d) = %d", c, lo, got)
		}
		if got := m.ColumnOf(hi - 1); got != c {
			t.Errorf("ColumnOf(hi−1 of column %d = %d) = %d", c, hi-1, got)
		}
	}
}

func TestColumnsForCapacity(t *testing.T) {
	for _, tc := range []struct {
		capacity uint64
		cols     int
		perCol   uint64
	}{
		{1, SmallColumns + 1, 1},
		{gib - 1, SmallColumns + 1, 1},        // < 1 GiB: one GiB column anyway
		{2 * gib, SmallColumns + 1, 1},        // [1,2)
		{2*gib + 1, SmallColumns + 2, 1},      // [1,2), [2,3)
		{257 * gib, SmallColumns + 256, 1},    // exactly at the cap
		{258 * gib, SmallColumns + 129, 2},    // 257 columns → 2 GiB each
		{20e12 / 512, SmallColumns + 256, 73}, // 20 TB: 18,626 GiB columns → 256 of 73 GiB
	} {
		m := Default(HDD, tc.capacity)
		if m.Columns() != tc.cols || m.GiBPerColumn() != tc.perCol {
			t.Errorf("capacity %d sectors: %d columns of %d GiB, want %d of %d", tc.capacity, m.Columns(), m.GiBPerColumn(), tc.cols, tc.perCol)
		}
		if m.Columns() > SmallColumns+MaxGiBColumns {
			t.Errorf("capacity %d: %d columns exceed the cap", tc.capacity, m.Columns())
		}
	}
	if m := Default(HDD, MaxCapacitySectors); m.Columns() != SmallColumns+MaxGiBColumns {
		t.Errorf("largest capacity: %d columns", m.Columns())
	}
	// Wide columns: a distance maps to column 19 + (GiB−1)/per.
	m := Default(HDD, 20e12/512)
	if got := m.ColumnOf(73 * gib); got != SmallColumns {
		t.Errorf("73 GiB in 73-GiB columns: column %d, want %d", got, SmallColumns)
	}
	if got := m.ColumnOf(74 * gib); got != SmallColumns+1 {
		t.Errorf("74 GiB in 73-GiB columns: column %d, want %d", got, SmallColumns+1)
	}
}

func TestRingBuffer(t *testing.T) {
	var c cell
	for v := int64(1); v <= 10; v++ {
		c.add(v)
	}
	if c.n != 10 || c.mean() != 6 { // mean(1…10) = 5.5, rounded half up
		t.Fatalf("after 10: n %d mean %d, want 10 and 6", c.n, c.mean())
	}
	if c.logical(0) != 1 || c.logical(9) != 10 {
		t.Fatalf("logical order: %d … %d", c.logical(0), c.logical(9))
	}
	for v := int64(11); v <= 100; v++ {
		c.add(v)
	}
	// Keeps the last 64: 37…100, mean 68.5 → 69.
	if c.n != RingSize || c.mean() != 69 || c.sum != (37+100)*64/2 {
		t.Fatalf("after 100: n %d mean %d sum %d", c.n, c.mean(), c.sum)
	}
	for i := 0; i < RingSize; i++ {
		if got := c.logical(i); got != int64(37+i) {
			t.Fatalf("logical(%d) = %d, want %d", i, got, 37+i)
		}
	}
	// Through the model: a cell's lookup is the mean of its last 64 samples.
	m := Default(SSD, gib)
	for v := int64(1); v <= 200; v++ {
		m.Learn(trace.Write, 8, 0, v*1000)
	}
	if got, want := m.Predict(trace.Write, 8, 0, false), int64((137+200)*1000/2); got != want {
		t.Fatalf("Predict = %d, want mean of the last 64 = %d", got, want)
	}
	if m.Samples(Write, 0, 0) != RingSize {
		t.Fatalf("Samples = %d", m.Samples(Write, 0, 0))
	}
}

func TestColdCellFallback(t *testing.T) {
	m := Default(HDD, 8*gib)
	// Empty tables: the class default.
	if got, want := m.Lookup(ReadMiss, 0, 5), m.priorCell(ReadMiss, 0, 5); got != want || got <= 0 {
		t.Fatalf("empty table: %d, want prior %d", got, want)
	}
	m.learnCell(ReadMiss, 2, 5, 1000)
	m.learnCell(ReadMiss, 3, 5, 3000)
	for _, tc := range []struct {
		name     string
		row, col int
		want     int64
	}{
		{"warm cell", 2, 5, 1000},
		{"cold cell, column has data: column mean", 0, 5, 2000},
		{"cold column: nearest column with data", 0, 7, 2000},
		{"cold column to the left", 10, 1, 2000},
	} {
		if got := m.Lookup(ReadMiss, tc.row, tc.col); got != tc.want {
			t.Errorf("%s: Lookup(%d, %d) = %d, want %d", tc.name, tc.row, tc.col, got, tc.want)
		}
	}
	m.learnCell(ReadMiss, 0, 9, 5000)
	for _, tc := range []struct {
		col  int
		want int64
	}{
		{6, 2000}, // nearer to 5
		{7, 5000}, // equidistant from 5 and 9: the larger distance
		{8, 5000}, // nearer to 9
		{m.Columns() - 1, 5000},
	} {
		if got := m.Lookup(ReadMiss, 0, tc.col); got != tc.want {
			t.Errorf("after column 9 got data: Lookup(0, %d) = %d, want %d", tc.col, got, tc.want)
		}
	}
	// Column mean is over cells, not samples, and follows updates.
	for i := 0; i < 10; i++ {
		m.learnCell(ReadMiss, 2, 5, 1000)
	}
	m.learnCell(ReadMiss, 3, 5, 3000)
	if got := m.Lookup(ReadMiss, 0, 5); got != 2000 {
		t.Errorf("column mean weights cells equally: %d, want 2000", got)
	}
	// Empty write table falls back to read-miss; empty read-hit to its prior.
	if got := m.Lookup(Write, 0, 5); got != 2000 {
		t.Errorf("empty write table: %d, want read-miss's 2000", got)
	}
	if got, want := m.Lookup(ReadHit, 0, 5), m.priorCell(ReadHit, 0, 5); got != want {
		t.Errorf("empty read-hit table: %d, want prior %d", got, want)
	}
	// Empty read-miss falls back to write.
	m2 := Default(SSD, gib)
	m2.Learn(trace.Write, 8, 100, 77_000)
	if got := m2.Predict(trace.Read, 64, 1<<20, false); got != 77_000 {
		t.Errorf("empty read-miss table: %d, want write's 77000", got)
	}
}

func TestPrior(t *testing.T) {
	capSec := uint64(2e12 / 512) // 2 TB
	rnd := Prior(HDD, ReadMiss, 8, capSec/3, capSec)
	if rnd < 12e6 || rnd > 15e6 { // 0.1 + 9.0 seek + 4.17 rotation + 0.03 transfer
		t.Errorf("HDD random 4 KiB read: %d ns, want ≈ 13.3 ms", rnd)
	}
	if seq := Prior(HDD, ReadMiss, 256, 0, capSec); seq != 100_000+int64(math.Round(131072/150e6*1e9)) {
		t.Errorf("HDD sequential 128 KiB read: %d ns", seq)
	}
	prev := int64(0)
	for d := uint64(1); d < capSec; d *= 4 {
		v := Prior(HDD, Write, 8, d, capSec)
		if v < prev {
			t.Errorf("HDD prior not monotonic in distance at %d: %d < %d", d, v, prev)
		}
		prev = v
	}
	if v := Prior(HDD, ReadHit, 8, 1000, capSec); v != 100_000+8192 {
		t.Errorf("HDD hit 4 KiB: %d", v)
	}
	if v := Prior(SSD, ReadMiss, 8, 12345, capSec); v != 100_000+8192 {
		t.Errorf("SSD 4 KiB: %d", v)
	}
	if v := Prior(NVMe, Write, 256, 0, capSec); v != 20_000+65536 {
		t.Errorf("NVMe 128 KiB: %d", v)
	}
}

func TestClassNames(t *testing.T) {
	for _, c := range []Class{HDD, SSD, NVMe} {
		got, err := ParseClass(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := ParseClass("tape"); err == nil || !strings.Contains(err.Error(), "tape") {
		t.Errorf("ParseClass(tape): %v", err)
	}
	if _, err := New(Config{CapacitySectors: 1, Servers: 1, Hit: DefaultHitClassifier()}); err == nil || !strings.Contains(err.Error(), `"class"`) {
		t.Errorf("New without class: %v", err)
	}
	if _, err := New(DefaultConfig(HDD, MaxCapacitySectors+1)); err == nil || !strings.Contains(err.Error(), `"capacitySectors"`) {
		t.Errorf("New with a huge capacity: %v", err)
	}
}

func TestLearnTables(t *testing.T) {
	m := Default(HDD, 4*gib)
	h := m.Config().Hit
	if got := m.Learn(trace.Read, 8, 0, 300_000); got != ReadHit {
		t.Errorf("fast HDD read → %v, want read-hit", got)
	}
	if got := m.Learn(trace.Read, 8, 0, 9_000_000); got != ReadMiss {
		t.Errorf("slow HDD read → %v, want read-miss", got)
	}
	// The per-sector allowance: a 4 MiB read in 1.5 ms over a 6 Gb/s link is a hit.
	if !h.IsHit(8192, 1_500_000+8192*1000) || h.IsHit(8, 1_100_000) {
		t.Errorf("hit classifier %+v", h)
	}
	if got := m.Learn(trace.Write, 8, 0, 300_000); got != Write {
		t.Errorf("write → %v", got)
	}
	s := Default(NVMe, 4*gib)
	if got := s.Learn(trace.Read, 8, 0, 10_000); got != ReadMiss {
		t.Errorf("NVMe read → %v, want read-miss (SSDs have no read-hit table)", got)
	}
	if got := s.Predict(trace.Read, 8, 0, true); got != 10_000 {
		t.Errorf("NVMe Predict with hit=true: %d, want the read-miss cell 10000", got)
	}
}

func TestClone(t *testing.T) {
	m := Default(HDD, 4*gib)
	m.Learn(trace.Read, 8, 1<<20, 8_000_000)
	c := m.Clone()
	m.Learn(trace.Read, 8, 1<<20, 10_000_000)
	if got := c.Predict(trace.Read, 8, 1<<20, false); got != 8_000_000 {
		t.Errorf("clone changed with the original: %d", got)
	}
	if got := m.Predict(trace.Read, 8, 1<<20, false); got != 9_000_000 {
		t.Errorf("original: %d", got)
	}
}

func TestPredictObserveMatchesServiceThenObserve(t *testing.T) {
	// PredictObserve must predict what a fresh Service would and leave the
	// model, position and cache exactly as Observe alone does.
	reqs := loadDiskSim(t, "atlas10k")
	a := Default(HDD, 1<<26)
	b := a.Clone()
	da, db := a.NewDisk(0), b.NewDisk(0)
	for i, q := range reqs[:3000] {
		want := db.peek(q.Op, q.Sector, q.Sectors)
		got := da.PredictObserve(q.Op, q.Sector, q.Sectors, q.ServiceTime())
		db.Observe(q.Op, q.Sector, q.Sectors, q.ServiceTime())
		if got != want {
			t.Fatalf("request %d: PredictObserve = %d, want %d", i, got, want)
		}
		if da.Position() != db.Position() || da.LastHit() != db.LastHit() {
			t.Fatalf("request %d: state diverged", i)
		}
	}
	var wa, wb bytes.Buffer
	if err := a.Save(&wa); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(&wb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wa.Bytes(), wb.Bytes()) {
		t.Fatal("models differ after PredictObserve vs Observe")
	}
}

// peek predicts like Service on a copy of the disk-cache state.
func (d *Disk) peek(op trace.Op, sector uint64, sectors uint32) int64 {
	saved := d.cache
	saved.segs = append([]segment(nil), d.cache.segs...)
	pos, hit := d.pos, d.lastHit
	p := d.Service(op, sector, sectors)
	d.cache, d.pos, d.lastHit = saved, pos, hit
	return p
}
