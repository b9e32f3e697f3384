package readahead

import (
	"math"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// hdd is a synthetic disk: every request costs overheadNs plus its transfer
// at rate bytes/s; a request at a non-zero distance also pays a seek of
// seekMinNs + seekSpanNs·(d/capacity)^seekExp and a rotation of rotNs.
type hdd struct {
	rate       float64 // bytes/s
	overheadNs float64
	seekMinNs  float64
	seekSpanNs float64
	seekExp    float64 // 1 = linear in distance, 0.5 = square root
	rotNs      float64
	capacity   uint64 // sectors
}

func (h hdd) Predict(op trace.Op, sectors uint32, dist uint64, hit bool) int64 {
	t := h.overheadNs + float64(sectors)*trace.SectorSize/h.rate*1e9
	if dist > 0 {
		t += h.rotNs + h.seekMinNs
		if h.seekSpanNs != 0 {
			t += h.seekSpanNs * math.Pow(float64(dist)/float64(h.capacity), h.seekExp)
		}
	}
	return int64(math.Round(t))
}

// flat is a device whose switch cost is a constant switchNs at any distance.
func flat(rate, switchNs float64) hdd { return hdd{rate: rate, seekMinNs: switchNs} }

const (
	tb   = uint64(1e12 / 512) // 1 TB in sectors
	gb36 = uint64(36.4e9 / 512)
)

func TestDepthTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Predictor
		span    uint64
		conc    float64
		b       Bounds
		want    int
		clamped string
	}{
		// 8 ms × 100 MB/s = 800 000 B = 781.25 KiB → 780 KiB.
		{"8ms at 100MB/s", flat(100e6, 8e6), tb, 2, Bounds{}, 780, ""},
		// The paper's devices (§5; its KB are 1000 B): IBM 37.3 MB/s,
		// 7.53 ms seek + 3.00 ms rotation → 393 KB = 383.6 KiB.
		{"IBM 36GB (paper 393 KB)", flat(37.3e6, 10.53e6), gb36, 2, Bounds{}, 384, ""},
		// Seagate 55.8 MB/s and RAID0 80.9 MB/s at 7.98 ms → 446 and 646 KB.
		{"Seagate (paper 446 KB)", flat(55.8e6, 7.98e6), tb, 2, Bounds{}, 436, ""},
		{"RAID0 (paper 646 KB)", flat(80.9e6, 7.98e6), tb, 2, Bounds{}, 632, ""},
		// Flash: reads cost the same wherever they are → the minimum.
		{"SSD no switch cost", flat(2e9, 0), tb, 2, Bounds{}, 16, "min"},
		{"SSD 2us switch", flat(2e9, 2e3), tb, 2, Bounds{}, 16, "min"},
		{"SSD custom min", flat(2e9, 0), tb, 2, Bounds{MinKiB: 10, MaxKiB: 64}, 12, "min"},
		// A fast array with a slow switch hits the maximum.
		{"1GB/s 10ms", flat(1e9, 10e6), tb, 2, Bounds{}, 4096, "max"},
		{"1GB/s 10ms custom max", flat(1e9, 10e6), tb, 2, Bounds{MaxKiB: 1023}, 1020, "max"},
		// Concurrency ≤ 2 is the paper's reference case.
		{"concurrency 1 = 2", flat(100e6, 8e6), tb, 1, Bounds{}, 780, ""},
		{"concurrency NaN = 2", flat(100e6, 8e6), tb, math.NaN(), Bounds{}, 780, ""},
		// A constant switch cost does not depend on concurrency.
		{"flat switch at concurrency 16", flat(100e6, 8e6), tb, 16, Bounds{}, 780, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, d := Depth(tc.p, tc.span, tc.conc, tc.b)
			if got != tc.want || d.Clamped != tc.clamped {
				t.Fatalf("Depth = %d KiB clamped %q, want %d %q (detail %+v)", got, d.Clamped, tc.want, tc.clamped, d)
			}
			if got%4 != 0 {
				t.Fatalf("depth %d not a multiple of 4 KiB", got)
			}
			if d.Note != "" {
				t.Fatalf("unexpected note %q", d.Note)
			}
		})
	}
}

func TestDetail(t *testing.T) {
	kib, d := Depth(flat(100e6, 8e6), tb, 2, Bounds{})
	if kib != 780 || d.SwitchNs != 8e6 || math.Abs(d.TransferBytesPerSec-100e6) > 1 {
		t.Fatalf("kib %d detail %+v", kib, d)
	}
	if math.Abs(d.RawKiB-781.25) > 0.01 || d.Concurrency != 2 || d.SpanSectors != tb {
		t.Fatalf("detail %+v", d)
	}
	if math.Abs(d.MeanSeekSectors-float64(tb)/3) > 1 {
		t.Fatalf("E[D] = %v, want C/3", d.MeanSeekSectors)
	}
}

// With a seek time linear in distance, t = a + b·D/C, the expected switch
// is a + b·E[D]/C = a + b/(n+1) (eq. 5).
func TestSwitchCostFollowsEq5(t *testing.T) {
	h := hdd{rate: 100e6, seekMinNs: 4e6, seekSpanNs: 12e6, seekExp: 1, capacity: tb}
	for _, n := range []float64{2, 3, 5, 11, 63} {
		_, d := Depth(h, tb, n, Bounds{})
		want := 4e6 + 12e6/(n+1)
		if rel := math.Abs(float64(d.SwitchNs)-want) / want; rel > 0.01 {
			t.Errorf("n=%v: C_switch %d ns, want %.0f (%.2f%% off)", n, d.SwitchNs, want, 100*rel)
		}
	}
}

func TestHigherConcurrencyShallowerDepth(t *testing.T) {
	// 7200 rpm: 4.17 ms half revolution; seek 1 + 14·sqrt(d/C) ms; 150 MB/s.
	h := hdd{rate: 150e6, overheadNs: 100e3, seekMinNs: 1e6, seekSpanNs: 14e6, seekExp: 0.5, rotNs: 4.17e6, capacity: 4 * tb}
	prev := math.Inf(1)
	prevKiB := math.MaxInt
	for _, n := range []float64{2, 4, 8, 16, 32, 64} {
		kib, d := Depth(h, 4*tb, n, Bounds{})
		if !(d.RawKiB < prev) || kib > prevKiB {
			t.Fatalf("n=%v: raw %.1f KiB (%d) not below previous %.1f (%d)", n, d.RawKiB, kib, prev, prevKiB)
		}
		t.Logf("n=%-3v C_switch %5.2f ms  R_tr %.0f MB/s  depth %4d KiB", n, float64(d.SwitchNs)/1e6, d.TransferBytesPerSec/1e6, kib)
		prev, prevKiB = d.RawKiB, kib
	}
	// A smaller span (the data occupies a tenth of the disk) also shortens
	// seeks.
	whole, _ := Depth(h, 4*tb, 2, Bounds{})
	part, _ := Depth(h, 4*tb/10, 2, Bounds{})
	if part >= whole {
		t.Fatalf("smaller span %d KiB not below whole disk %d KiB", part, whole)
	}
}

func TestTransferRate(t *testing.T) {
	// Per-request overhead lowers the aggregate rate: 1920 KiB in
	// 4 × 0.1 ms + 1920 KiB / 100 MB/s.
	h := hdd{rate: 100e6, overheadNs: 100e3, seekMinNs: 8e6}
	_, d := Depth(h, tb, 2, Bounds{})
	bytes := float64(1920 * 1024)
	want := bytes / (4*100e-6 + bytes/100e6)
	if math.Abs(d.TransferBytesPerSec-want)/want > 1e-6 {
		t.Fatalf("R_tr %v, want %v", d.TransferBytesPerSec, want)
	}
	// A table that clamps sizes above 128 KiB to its last row: only the
	// 128 KiB prediction is used.
	c := clampRows{flat(100e6, 8e6)}
	_, d = Depth(c, tb, 2, Bounds{})
	if math.Abs(d.TransferBytesPerSec-100e6) > 1e3 {
		t.Fatalf("R_tr with clamped rows %v, want 100e6", d.TransferBytesPerSec)
	}
}

type clampRows struct{ hdd }

func (c clampRows) Predict(op trace.Op, sectors uint32, dist uint64, hit bool) int64 {
	return c.hdd.Predict(op, min(sectors, 256), dist, hit)
}

// noisy returns faster random than sequential reads (a badly trained
// table): the negative difference counts as no switch cost.
type noisy struct{}

func (noisy) Predict(op trace.Op, sectors uint32, dist uint64, hit bool) int64 {
	t := int64(sectors) * 5000
	if dist > 0 {
		t -= 1000
	}
	return t
}

type zero struct{}

func (zero) Predict(trace.Op, uint32, uint64, bool) int64 { return 0 }

func TestFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Predictor
		span uint64
		b    Bounds
		want int
		note string
	}{
		{"nil predictor", nil, tb, Bounds{}, 16, "no disk model"},
		{"nil predictor custom min", nil, tb, Bounds{MinKiB: 32}, 32, "no disk model"},
		{"zero span", flat(100e6, 8e6), 0, Bounds{}, 16, "span"},
		{"all-zero predictions", zero{}, tb, Bounds{}, 16, "sequential"},
		{"max below min", flat(100e6, 8e6), tb, Bounds{MinKiB: 64, MaxKiB: 32}, 16, "below min"},
		{"negative bound", flat(100e6, 8e6), tb, Bounds{MinKiB: -4}, 16, "positive"},
		{"noisy table", noisy{}, tb, Bounds{}, 16, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, d := Depth(tc.p, tc.span, 2, tc.b)
			if got != tc.want {
				t.Fatalf("Depth = %d, want %d (%+v)", got, tc.want, d)
			}
			if tc.note == "" && d.Note != "" || !strings.Contains(d.Note, tc.note) {
				t.Fatalf("note %q, want %q", d.Note, tc.note)
			}
		})
	}
}

func TestBoundsValidate(t *testing.T) {
	for _, tc := range []struct {
		b  Bounds
		ok bool
	}{
		{Bounds{}, true},
		{Bounds{MinKiB: 4, MaxKiB: 4}, true},
		{Bounds{MinKiB: 5, MaxKiB: 7}, false}, // 8 > 4 after rounding
		{Bounds{MinKiB: 128, MaxKiB: 64}, false},
		{Bounds{MaxKiB: -1}, false},
	} {
		if err := tc.b.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.b, err, tc.ok)
		}
	}
}
