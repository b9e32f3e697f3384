package model

import (
	"math"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// HitClassifier tells a cache-hit read from a miss by its measured service
// time (DADS §3.1: "a miss is a read operation that takes more than
// 1000 µs"). We add a transfer allowance proportional to the request
// length: a read of n sectors is a hit iff
//
//	service < ThresholdNs + n·NsPerSector.
//
// Why: a hit still crosses the host interface, so its time grows with size.
// On the DiskSim drives (SCSI buses of 2.5–10 MB/s) a 64-sector hit takes
// 6–11 ms, longer than many misses, and even a 4 MiB hit over 6 Gb/s SATA
// takes 8 ms; a size-blind threshold misfiles those.
type HitClassifier struct {
	// ThresholdNs is the size-independent part of the threshold, ns.
	ThresholdNs int64 `json:"thresholdNs"`
	// NsPerSector is the allowance per 512-byte sector, ns (0 = DADS's
	// fixed threshold).
	NsPerSector int64 `json:"nsPerSector"`
}

// DefaultHitThresholdNs is DADS's hit/miss threshold, 1000 µs, in ns.
const DefaultHitThresholdNs = 1_000_000

// DefaultHitBytesPerSec is the host-interface rate behind the default
// per-sector allowance: 300 MB/s, i.e. SATA 3 Gb/s after 8b/10b coding
// (the lower of the common SATA generations, so the allowance errs
// toward "hit" only for transfers a hit could really take).
const DefaultHitBytesPerSec = 300e6

// DefaultHitClassifier returns 1000 µs + n·512 B / 300 MB/s (1707 ns/sector).
func DefaultHitClassifier() HitClassifier {
	return HitClassifier{
		ThresholdNs: DefaultHitThresholdNs,
		NsPerSector: int64(math.Round(trace.SectorSize * 1e9 / DefaultHitBytesPerSec)),
	}
}

// IsHit reports whether a read of the given length (sectors) that took
// serviceNs was served from the drive's cache.
func (h HitClassifier) IsHit(sectors uint32, serviceNs int64) bool {
	return serviceNs < h.ThresholdNs+int64(sectors)*h.NsPerSector
}

// DeriveHitClassifier derives a hit classifier from the measured service
// times of the reads in reqs (requests without service times and writes
// are skipped; the order of reqs is taken as the dispatch order). ok is
// false, and the classifier is the default, when the distribution is not
// clearly bimodal. Method:
//
//  1. Transfer allowance. Reads at distance 0 right after a read
//     (sequential) are mostly hits on an HDD with a read-ahead cache, and
//     their time is overhead + length × interface time. For every length
//     with ≥ 5 such reads take the lower quartile of their times and fit a
//     count-weighted least-squares line time = a + b·sectors over ≥ 2
//     lengths spanning ≥ 2×; NsPerSector = b (0 if the fit is impossible
//     or b < 0). If those reads are misses instead, b is the media
//     transfer time per sector, which is equally right to subtract.
//  2. Residuals r = time − b·sectors of all reads, on a log scale (hit and
//     miss times differ by an order of magnitude; their spreads are
//     multiplicative).
//  3. Otsu's threshold on a 128-bin histogram of log r: the split that
//     maximises the between-class variance.
//  4. "Clearly bimodal" = each class holds ≥ 2 % of the reads and ≥ 20
//     reads; Ashman's D = √2·|μ1−μ2|/√(σ1²+σ2²) ≥ 2 on log r (D > 2 is
//     the usual criterion for a clean separation of two normal modes);
//     and there is a real valley: on a 64-bin histogram of log r smoothed
//     over 5 bins, the lowest bin between the two classes' peaks is at
//     most half the lower peak. (Otsu splits any distribution, and the
//     two halves of a unimodal one have D ≈ 3.5, so D alone is not
//     enough; the valley test rejects uniform and log-normal windows,
//     whose ratio is ≈ 1.) Then ThresholdNs = 10^t. On the DiskSim traces
//     D is 6–10 and the valley ratio ≤ 0.002.
//
// At least 100 reads are needed.
func DeriveHitClassifier(reqs []trace.Request) (h HitClassifier, ok bool) {
	def := DefaultHitClassifier()
	reads, bySize := measuredReads(reqs)
	if len(reads) < 100 {
		return def, false
	}
	b := transferAllowance(bySize)
	xs, lo, hi := logResiduals(reads, b)
	if hi-lo < 0.1 {
		return def, false
	}
	t, ok := otsuThreshold(xs, lo, hi)
	if !ok || !separated(xs, t) {
		return def, false
	}
	if valleyRatio(xs, lo, hi, t) > 0.5 {
		return def, false
	}
	return HitClassifier{
		ThresholdNs: int64(math.Round(math.Pow(10, t))),
		NsPerSector: int64(math.Round(b)),
	}, true
}

// timedRead is a read's length (sectors) and measured service time (ns).
type timedRead struct {
	sectors uint32
	svc     int64
}

// measuredReads returns the reads of reqs that carry a service time, in
// order, and the service times (ns) of the sequential ones (a read that
// starts where the previous request, a read, ended) by length in sectors.
func measuredReads(reqs []trace.Request) ([]timedRead, map[uint32][]int64) {
	var reads []timedRead
	bySize := map[uint32][]int64{}
	var prev *trace.Request
	for i := range reqs {
		q := &reqs[i]
		if !q.HasService() {
			prev = q
			continue
		}
		if q.Op == trace.Read {
			reads = append(reads, timedRead{q.Sectors, q.ServiceTime()})
			if prev != nil && prev.Op == trace.Read && prev.End() == q.Sector {
				bySize[q.Sectors] = append(bySize[q.Sectors], q.ServiceTime())
			}
		}
		prev = q
	}
	return reads, bySize
}

// transferAllowance is step 1 of DeriveHitClassifier: the slope b (ns per
// sector) of a count-weighted least-squares line through the lower
// quartiles of the sequential reads' times (ns) by length (sectors),
// over the lengths with ≥ 5 reads; 0 when fewer than 2 lengths qualify,
// they span less than 2×, or the slope is not positive. It sorts the
// slices of bySize in place.
func transferAllowance(bySize map[uint32][]int64) float64 {
	var sw, sx, sy float64
	type pt struct{ x, y, w float64 }
	var pts []pt
	minX, maxX := math.Inf(1), 0.0
	sizes := make([]uint32, 0, len(bySize))
	for n := range bySize {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes) // fixed summation order: bit-for-bit determinism
	for _, n := range sizes {
		ts := bySize[n]
		if len(ts) < 5 {
			continue
		}
		slices.Sort(ts)
		p := pt{float64(n), float64(ts[len(ts)/4]), float64(len(ts))}
		pts = append(pts, p)
		sw += p.w
		sx += p.w * p.x
		sy += p.w * p.y
		minX, maxX = min(minX, p.x), max(maxX, p.x)
	}
	if len(pts) < 2 || maxX < 2*minX {
		return 0
	}
	mx, my := sx/sw, sy/sw
	var sxy, sxx float64
	for _, p := range pts {
		sxy += p.w * (p.x - mx) * (p.y - my)
		sxx += p.w * (p.x - mx) * (p.x - mx)
	}
	if sxx > 0 && sxy > 0 {
		return sxy / sxx
	}
	return 0
}

// logResiduals is step 2 of DeriveHitClassifier: log10 of each read's
// time less b ns per sector (floored at 1 µs, so log10 of ns ≥ 3), and
// the smallest and largest of them.
func logResiduals(reads []timedRead, b float64) (xs []float64, lo, hi float64) {
	xs = make([]float64, len(reads))
	lo, hi = math.Inf(1), math.Inf(-1)
	for i, r := range reads {
		v := float64(r.svc) - b*float64(r.sectors)
		xs[i] = math.Log10(max(v, 1000)) // floor at 1 µs
		lo, hi = min(lo, xs[i]), max(hi, xs[i])
	}
	return xs, lo, hi
}

// otsuThreshold is step 3 of DeriveHitClassifier: Otsu's threshold on a
// 128-bin histogram of xs ∈ [lo, hi], the bin edge that maximises the
// between-class variance. ok is false when no edge splits xs in two.
func otsuThreshold(xs []float64, lo, hi float64) (t float64, ok bool) {
	const bins = 128
	w := (hi - lo) / bins
	var hist [bins]float64
	for _, x := range xs {
		hist[min(int((x-lo)/w), bins-1)]++
	}
	n := float64(len(xs))
	var total float64
	for i, c := range hist {
		total += c * (lo + (float64(i)+0.5)*w)
	}
	bestV, bestT := -1.0, 0.0
	var c0, s0 float64
	for i := 0; i < bins-1; i++ {
		c0 += hist[i]
		s0 += hist[i] * (lo + (float64(i)+0.5)*w)
		if c0 == 0 || c0 == n {
			continue
		}
		m0, m1 := s0/c0, (total-s0)/(n-c0)
		if v := c0 * (n - c0) * (m1 - m0) * (m1 - m0); v > bestV {
			bestV, bestT = v, lo+float64(i+1)*w
		}
	}
	return bestT, bestV >= 0
}

// separated is the class part of step 4 of DeriveHitClassifier: the
// classes of xs below and at or above t each hold ≥ 20 values and ≥ 2 %
// of them, and their Ashman's D is ≥ 2.
func separated(xs []float64, t float64) bool {
	n := float64(len(xs))
	var na, nb, sa, sb float64
	for _, x := range xs {
		if x < t {
			na, sa = na+1, sa+x
		} else {
			nb, sb = nb+1, sb+x
		}
	}
	if na < 20 || nb < 20 || na < 0.02*n || nb < 0.02*n {
		return false
	}
	ma, mb := sa/na, sb/nb
	var va, vb float64
	for _, x := range xs {
		if x < t {
			va += (x - ma) * (x - ma)
		} else {
			vb += (x - mb) * (x - mb)
		}
	}
	va, vb = va/na, vb/nb
	return va+vb != 0 && math.Sqrt2*math.Abs(mb-ma)/math.Sqrt(va+vb) >= 2
}

// valleyRatio returns the depth of the valley around t in xs ∈ [lo, hi]:
// the smallest bin of a 64-bin, 5-bin-smoothed histogram between the
// highest bin below t and the highest bin at or above t, divided by the
// lower of those two peaks (0 = empty valley, 1 = no valley).
func valleyRatio(xs []float64, lo, hi, t float64) float64 {
	const bins, half = 64, 2
	w := (hi - lo) / bins
	var h, sm [bins]float64
	for _, x := range xs {
		h[min(int((x-lo)/w), bins-1)]++
	}
	for i := range sm {
		a, b := max(i-half, 0), min(i+half, bins-1)
		for j := a; j <= b; j++ {
			sm[i] += h[j]
		}
		sm[i] /= float64(b - a + 1)
	}
	tb := min(max(int((t-lo)/w), 1), bins-1)
	p1, p2 := 0, tb
	for i := 0; i < tb; i++ {
		if sm[i] > sm[p1] {
			p1 = i
		}
	}
	for i := tb; i < bins; i++ {
		if sm[i] > sm[p2] {
			p2 = i
		}
	}
	v := sm[p1]
	for i := p1; i <= p2; i++ {
		v = min(v, sm[i])
	}
	peak := min(sm[p1], sm[p2])
	if peak == 0 {
		return 1
	}
	return v / peak
}
