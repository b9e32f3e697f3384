// Package readahead chooses a device's read-ahead depth (read_ahead_kb) by
// competitive prefetching (Li, Shen and Papathanasiou, EuroSys 2007): the
// depth is the amount of data the device can transfer sequentially in the
// time of one average I/O switch,
//
//	S_p = C_switch × R_tr                                  (§4.1, eq. 8)
//
// With that depth the disk time a workload of sequential streams consumes
// is less than twice that of the optimal offline prefetching policy (2-
// competitive), and no online policy does better than 2 (§4.2). DESIGN §6.
//
// C_switch and R_tr come from the learned disk model through [Predictor],
// so the same table that the simulator uses decides the depth; the paper
// measured them with a profiling run instead (§5). The paper's slow start
// (§4.3) is not modelled: Linux's on-demand read-ahead already ramps a new
// stream's window up from a few pages, and read_ahead_kb is only its cap.
//
// Units: sectors are 512 bytes; times are nanoseconds; depths are KiB
// (1024 bytes), always a multiple of 4 KiB.
package readahead

import (
	"fmt"
	"math"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Predictor predicts the service time in ns of one request on the modelled
// device: an op of sectors 512-byte sectors at an inter-request distance of
// distanceSectors from the end of the previous request; hit selects the
// HDD read-hit table. internal/model.Model satisfies it.
type Predictor interface {
	Predict(op trace.Op, sectors uint32, distanceSectors uint64, hit bool) int64
}

// Default bounds in KiB.
const (
	// DefaultMinKiB is the default lower bound: 16 KiB, small enough not
	// to hurt random reads on flash (cf. Azure/AKS issue 5743, 64 MiB
	// read-ahead on NVMe).
	DefaultMinKiB = 16
	// DefaultMaxKiB is the default upper bound: 4 MiB.
	DefaultMaxKiB = 4096
)

// Bounds clamps the depth, in KiB. A zero field takes its default. Min is
// rounded up and Max down to a multiple of 4 KiB.
type Bounds struct {
	MinKiB int
	MaxKiB int
}

// normalize fills defaults and rounds to 4 KiB; it reports an error for
// bounds that cannot be used.
func (b Bounds) normalize() (Bounds, error) {
	if b.MinKiB == 0 {
		b.MinKiB = DefaultMinKiB
	}
	if b.MaxKiB == 0 {
		b.MaxKiB = DefaultMaxKiB
	}
	if b.MinKiB < 0 || b.MaxKiB < 0 {
		return b, fmt.Errorf("readahead: bounds must be positive, got [%d, %d] KiB", b.MinKiB, b.MaxKiB)
	}
	b.MinKiB = (b.MinKiB + 3) / 4 * 4
	b.MaxKiB = b.MaxKiB / 4 * 4
	if b.MaxKiB < b.MinKiB {
		return b, fmt.Errorf("readahead: max %d KiB below min %d KiB (after rounding to 4 KiB)", b.MaxKiB, b.MinKiB)
	}
	return b, nil
}

// Validate reports whether the bounds are usable: both non-negative and,
// after defaults and rounding to 4 KiB, min ≤ max.
func (b Bounds) Validate() error {
	_, err := b.normalize()
	return err
}

// Detail explains a depth.
type Detail struct {
	// SwitchNs is C_switch, the expected cost in ns of one I/O switch (seek
	// plus rotation) at the given concurrency: the mean, over the seek
	// distance distribution of eq. 5, of the extra time a small read at that
	// distance takes over the same read at distance 0.
	SwitchNs int64
	// TransferBytesPerSec is R_tr, the sequential transfer rate in bytes/s
	// from distance-0 read-miss predictions of large requests.
	TransferBytesPerSec float64
	// RawKiB is C_switch × R_tr in KiB before rounding and clamping.
	RawKiB float64
	// Concurrency is n of eq. 5 as used (≥ 2).
	Concurrency float64
	// SpanSectors is C of eq. 5: the span over which requests are spread.
	SpanSectors uint64
	// MeanSeekSectors is the expected seek distance E[D] = C/(n+1).
	MeanSeekSectors float64
	// Clamped is "min" or "max" when a bound decided the depth, else "".
	Clamped string
	// Note explains a fallback to the minimum (no predictor, no span, bad
	// bounds, unusable predictions), else "".
	Note string
}

// Request sizes probed, in sectors.
var (
	// smallSizes estimate C_switch: 4–32 KiB reads, where transfer time is
	// small next to positioning time.
	smallSizes = []uint32{8, 16, 32, 64}
	// largeSizes estimate R_tr: 128 KiB–1 MiB sequential reads, where the
	// per-request overhead is small next to the transfer.
	largeSizes = []uint32{256, 512, 1024, 2048}
)

// Number of linear distance bins above the log-spaced ones.
const (
	logTopSectors = 1 << 21 // 1 GiB: log-spaced bins below, linear above
	linearBins    = 256
)

// Depth returns the competitive read-ahead depth in KiB for the device that
// p models, clamped to b, with an explanation.
//
// spanSectors is C of eq. 5 (§4.1): the size of the contiguous region where
// the workload's data lies — the device capacity in 512-byte sectors, or
// better the extent the recorded window actually touched.
//
// concurrency is the number of concurrent requests (streams) the I/O
// scheduler can choose among. Following eq. 5, when the scheduler picks the
// nearest of n requests at uniformly random locations in the span, the seek
// distance D has Pr[D ≥ x] = (1 − x/C)^n, so E[D] = C/(n+1): more
// concurrency, shorter seeks, smaller depth. The paper's reference depth
// (393–646 KB for its 2007 disks and RAID0, §5) is the average switch
// "between two independently random disk locations (or when there are two
// concurrent processes)", i.e. n = 2, E[D] = C/3; concurrency below 2 (or
// not a finite number) is taken as 2.
//
// C_switch is E[t(s, D) − t(s, 0)] for small reads s, with t the predicted
// read-miss service time; the difference removes transfer and per-command
// overhead and leaves positioning — seek and rotation, which the learned
// table holds implicitly (its cells average real service times). On flash
// it is close to 0, so the depth falls to the minimum. R_tr is the
// aggregate rate of large sequential (distance 0) reads: Σ bytes / Σ t over
// sizes whose predicted time still grows with size (a table that clamps
// large sizes to its last row would otherwise look infinitely fast).
//
// The raw depth is rounded to the nearest multiple of 4 KiB and clamped to
// b. Invalid bounds, a nil predictor, a zero span or unusable predictions
// give the minimum bound (DefaultMinKiB if the bounds are invalid) with
// detail.Note saying why; use [Bounds.Validate] to reject bounds early.
func Depth(p Predictor, spanSectors uint64, concurrency float64, b Bounds) (kib int, detail Detail) {
	nb, err := b.normalize()
	if err != nil {
		return DefaultMinKiB, Detail{Note: err.Error()}
	}
	b = nb
	n := concurrency
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 2 {
		n = 2
	}
	d := Detail{Concurrency: n, SpanSectors: spanSectors}
	switch {
	case p == nil:
		d.Note = "no disk model"
		return b.MinKiB, d
	case spanSectors == 0:
		d.Note = "span (capacity) unknown"
		return b.MinKiB, d
	}
	d.MeanSeekSectors = float64(spanSectors) / (n + 1)

	rate := transferRate(p)
	if !(rate > 0) || math.IsInf(rate, 0) {
		d.Note = "no usable sequential-read predictions"
		return b.MinKiB, d
	}
	d.TransferBytesPerSec = rate
	sw := switchCost(p, spanSectors, n)
	d.SwitchNs = int64(math.Round(sw))

	d.RawKiB = sw * 1e-9 * rate / 1024
	if d.RawKiB > float64(b.MaxKiB) { // also keeps the conversion below in range
		d.Clamped = "max"
		return b.MaxKiB, d
	}
	kib = int(math.Round(d.RawKiB/4)) * 4 // ≤ MaxKiB, a multiple of 4
	if kib < b.MinKiB {
		kib = b.MinKiB
		d.Clamped = "min"
	}
	return kib, d
}

// transferRate returns R_tr in bytes/s, or 0 when no prediction is usable.
func transferRate(p Predictor) float64 {
	var bytes, ns float64
	var last int64
	for _, s := range largeSizes {
		t := p.Predict(trace.Read, s, 0, false)
		if t <= 0 || t <= last {
			break
		}
		last = t
		bytes += float64(s) * trace.SectorSize
		ns += float64(t)
	}
	if ns == 0 {
		return 0
	}
	return bytes / ns * 1e9
}

// switchCost returns C_switch in ns: the expectation over the seek distance
// distribution Pr[D ≥ x] = (1 − x/C)^n of the extra predicted time of small
// reads at distance D over distance 0. The distance axis is cut into bins,
// doubling from 4 KiB to 1 GiB (as the model's columns) and then linear up
// to C in at most linearBins steps; each bin's probability mass multiplies
// the cost at its midpoint.
func switchCost(p Predictor, span uint64, n float64) float64 {
	base := make([]float64, len(smallSizes))
	for i, s := range smallSizes {
		base[i] = float64(p.Predict(trace.Read, s, 0, false))
	}
	cdf := func(x uint64) float64 { // Pr[D < x]
		if x >= span {
			return 1
		}
		return 1 - math.Pow(1-float64(x)/float64(span), n)
	}
	cost := func(dist uint64) float64 {
		var sum float64
		for i, s := range smallSizes {
			sum += max(0, float64(p.Predict(trace.Read, s, dist, false))-base[i])
		}
		return sum / float64(len(smallSizes))
	}
	var total float64
	bin := func(lo, hi uint64) {
		if hi > span {
			hi = span
		}
		if hi <= lo {
			return
		}
		if w := cdf(hi) - cdf(lo); w > 0 {
			total += w * cost(lo+(hi-lo)/2)
		}
	}
	// [0, 8) sectors, then doubling bins [8·2^(k−1), 8·2^k) up to 1 GiB.
	bin(0, SectorsPerBlock)
	for lo := uint64(SectorsPerBlock); lo < logTopSectors && lo < span; lo *= 2 {
		bin(lo, 2*lo)
	}
	if span > logTopSectors {
		step := max(uint64(logTopSectors), (span-logTopSectors+linearBins-1)/linearBins)
		for lo := uint64(logTopSectors); lo < span; lo += step {
			bin(lo, lo+step)
		}
	}
	return total
}

// SectorsPerBlock is the number of 512-byte sectors in a 4 KiB block.
const SectorsPerBlock = 8
