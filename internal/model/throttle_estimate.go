package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Parameters of [EstimateThrottle].
const (
	// throttleWindow is the number of consecutive completions per window.
	throttleWindow = 64
	// throttleMinWindows is the fewest backlogged windows that can show a
	// cap.
	throttleMinWindows = 8
	// throttleBand is the relative half-width within which a window's
	// rate counts as at a cap.
	throttleBand = 0.10
	// throttleExplained is the share of backlogged windows the caps must
	// explain.
	throttleExplained = 0.7
	// throttleDepthSpan is how much the mean in-flight count of the
	// windows at a cap must differ (max/min) to tell a cap from a device
	// saturated at one depth.
	throttleDepthSpan = 2.0
)

// ThrottleEvidence is what [EstimateThrottle] found.
type ThrottleEvidence struct {
	// Backlogged is the number of windows of 64 completions during which
	// the device always had another request outstanding; Explained how
	// many of them completed at the rate the caps predict (within 10 %).
	Backlogged, Explained int
	// MinInFlight and MaxInFlight are the lowest and highest mean
	// in-flight count among the explained windows.
	MinInFlight, MaxInFlight float64
}

// String summarises the evidence in one line.
func (e ThrottleEvidence) String() string {
	return fmt.Sprintf("%d of %d backlogged windows of %d completions at the caps, at %.1f–%.1f requests in flight",
		e.Explained, e.Backlogged, throttleWindow, e.MinInFlight, e.MaxInFlight)
}

// throttleWin is one backlogged window.
type throttleWin struct {
	iops, bps, size, inFlight float64 // requests/s, bytes/s, bytes per request, mean in flight
}

// EstimateThrottle looks for a token bucket in front of a device in a
// recorded window with dispatch and completion times (requests without
// both are skipped), and returns its caps; ok is false when the window
// does not show one.
//
// Method. The completions, in time order, are cut into windows of 64. A
// window is backlogged when every completion in it (and the one before
// it) left another request outstanding, so the device never idled. A
// token bucket completes backlogged requests at min(IOPS, bytes/s ÷ mean
// request size) whatever the queue depth, once the depth hides the
// device's own service time; a device of k servers completes them at a
// rate that grows with the depth up to k. The IOPS cap is the highest
// request rate that at least 10 % of the backlogged windows share (within
// 10 %); the bandwidth cap likewise in bytes/s, among the windows below
// the IOPS cap (a few windows above the caps are the bucket's burst).
// The caps are accepted when they predict the rate of at least 70 % of
// the backlogged windows within 10 %, and
// those windows' mean in-flight counts differ by at least 2×: a device
// saturated at a single depth fits any cap and is left to
// [EstimateServers]. A cap that never binds on the window's request sizes
// is dropped; when all windows had one request size, which cap binds
// cannot be told, and the IOPS cap is kept for requests up to 64 KiB, the
// bandwidth cap for larger ones. The burst is left at its default.
//
// A device that saturates at its own limits over a range of depths (an
// SSD past its parallelism) also passes; its limits then act as caps in
// the simulator, which is what it does at those depths.
func EstimateThrottle(reqs []trace.Request) (t Throttle, ev ThrottleEvidence, ok bool) {
	return NewThrottleWindows(reqs).Estimate()
}

// ThrottleWindows are the backlogged windows of a recorded window, cut
// once for both [ThrottleWindows.Estimate] and [ThrottleWindows.Exceeds]
// (the agent asks both of each window of a throttled device).
type ThrottleWindows struct{ wins []throttleWin }

// NewThrottleWindows cuts the measured completions of reqs into windows
// of 64 and keeps the backlogged ones (see [EstimateThrottle]).
func NewThrottleWindows(reqs []trace.Request) ThrottleWindows {
	return ThrottleWindows{backloggedWindows(reqs)}
}

// Estimate is [EstimateThrottle] on the windows.
func (w ThrottleWindows) Estimate() (t Throttle, ev ThrottleEvidence, ok bool) {
	wins := w.wins
	ev.Backlogged = len(wins)
	if len(wins) < throttleMinWindows {
		return Throttle{}, ev, false
	}
	minCount := max(3, len(wins)/10)
	t.IOPS = highestCluster(wins, minCount, func(w throttleWin) float64 { return w.iops })
	t.BytesPerSec = bandwidthCluster(wins, t.IOPS, minCount)
	var sizes []float64
	ev.MinInFlight = math.Inf(1)
	for _, w := range wins {
		if want := t.predictIOPS(w.size); math.Abs(w.iops-want) <= throttleBand*want {
			ev.Explained++
			sizes = append(sizes, w.size)
			ev.MinInFlight = math.Min(ev.MinInFlight, w.inFlight)
			ev.MaxInFlight = math.Max(ev.MaxInFlight, w.inFlight)
		}
	}
	if ev.Explained == 0 {
		ev.MinInFlight = 0
	}
	if float64(ev.Explained) < throttleExplained*float64(len(wins)) ||
		ev.MaxInFlight < throttleDepthSpan*ev.MinInFlight {
		return Throttle{}, ev, false
	}
	return t.bindingCaps(slices.Min(sizes), slices.Max(sizes)), ev, true
}

// ExceedsThrottle reports whether the window reqs refutes the caps t: at
// least half of its backlogged windows of 64 completions, and at least 8,
// completed more than 20 % faster than t allows for their request size (a
// bucket's burst lasts a few windows at most). A volume whose caps were
// raised, or a device that was never capped, shows it this way.
func ExceedsThrottle(reqs []trace.Request, t Throttle) bool {
	return NewThrottleWindows(reqs).Exceeds(t)
}

// Exceeds is [ExceedsThrottle] on the windows.
func (w ThrottleWindows) Exceeds(t Throttle) bool {
	wins := w.wins
	over := 0
	for _, w := range wins {
		if w.iops > 1.2*t.predictIOPS(w.size) {
			over++
		}
	}
	return over >= throttleMinWindows && 2*over >= len(wins)
}

// predictIOPS is the request rate the caps allow for requests of size
// bytes.
func (t Throttle) predictIOPS(size float64) float64 {
	r := math.Inf(1)
	if t.IOPS > 0 {
		r = t.IOPS
	}
	if t.BytesPerSec > 0 && size > 0 {
		r = math.Min(r, t.BytesPerSec/size)
	}
	return r
}

// bindingCaps drops the caps that never bind on requests of smin…smax
// bytes (see EstimateThrottle).
func (t Throttle) bindingCaps(smin, smax float64) Throttle {
	if smax < 1.5*smin { // one size: which cap binds cannot be told
		if smin <= 64<<10 {
			t.BytesPerSec = 0
		} else {
			t.IOPS = 0
		}
		return t
	}
	if t.IOPS >= (1-throttleBand)*t.BytesPerSec/smin {
		t.IOPS = 0 // even the smallest requests were bandwidth-bound
	}
	if t.BytesPerSec >= (1-throttleBand)*t.IOPS*smax && t.IOPS > 0 {
		t.BytesPerSec = 0 // even the largest requests were IOPS-bound
	}
	return t
}

// bandwidthCluster is the bandwidth cap's highestCluster. It is sought
// among the windows that ran below the IOPS cap iops, the only ones the
// bandwidth cap can hold, with minCount taken as a tenth of them (at
// least 3): a recording of mostly small requests (4 KiB reads at several
// depths, then a few phases of 64 and 256 KiB) has too few windows of
// large requests to make a tenth of all windows, and dropped its
// bandwidth cap. Where fewer than 3 windows ran below the IOPS cap (one
// request size), all windows are used with allMin, as for the IOPS cap.
func bandwidthCluster(wins []throttleWin, iops float64, allMin int) float64 {
	bps := func(w throttleWin) float64 { return w.bps }
	var below []throttleWin
	for _, w := range wins {
		if w.iops < (1-throttleBand)*iops {
			below = append(below, w)
		}
	}
	if len(below) < 3 {
		return highestCluster(wins, allMin, bps)
	}
	return highestCluster(below, max(3, len(below)/10), bps)
}

// highestCluster returns the median of the highest group of at least
// minCount windows whose value of f lies within ±throttleBand of it.
func highestCluster(wins []throttleWin, minCount int, f func(throttleWin) float64) float64 {
	v := make([]float64, len(wins))
	for i, w := range wins {
		v[i] = f(w)
	}
	slices.Sort(v)
	lo := len(v) - 1
	for hi := len(v) - 1; hi >= 0; hi-- {
		// Windows v[lo..hi] within a band around their median.
		for lo > 0 && v[lo-1] >= v[hi]*(1-throttleBand)/(1+throttleBand) {
			lo--
		}
		if lo > hi {
			lo = hi
		}
		if hi-lo+1 >= minCount {
			return v[(lo+hi)/2]
		}
	}
	return 0
}

// backloggedWindows cuts the measured completions of reqs, in time order,
// into windows of throttleWindow and returns those during which the device
// never idled.
//
// The dispatch times and the completions are sorted apart (the dispatches
// mostly arrive in order) and merged, a dispatch before a completion at
// the same nanosecond: a tie is no idle moment. That costs less than one
// sort of both as tagged events, on the agent's path for every window.
func backloggedWindows(reqs []trace.Request) []throttleWin {
	type completion struct{ t, bytes int64 }
	disp := make([]int64, 0, len(reqs))
	comp := make([]completion, 0, len(reqs))
	for i := range reqs {
		q := &reqs[i]
		if q.HasService() && q.Complete > q.Dispatch {
			disp = append(disp, q.Dispatch)
			comp = append(comp, completion{q.Complete, int64(q.Sectors) * 512})
		}
	}
	slices.Sort(disp)
	slices.SortFunc(comp, func(a, b completion) int { return cmp.Compare(a.t, b.t) })
	var wins []throttleWin
	var (
		n, done, inFlight int
		start             int64 = -1 // the completion before the window, ns; -1: none
		bytes             int64
	)
	next := 0 // the next dispatch in disp
	for _, e := range comp {
		for next < len(disp) && disp[next] <= e.t {
			n++
			next++
		}
		n-- // its own dispatch, strictly earlier, was counted: n ≥ 0
		switch {
		case n == 0: // the device idles: no window spans this
			start = -1
		case start < 0:
			start, done, bytes, inFlight = e.t, 0, 0, 0
		default:
			done++
			bytes += e.bytes
			inFlight += n + 1
			if done < throttleWindow {
				continue
			}
			if e.t > start {
				s := float64(e.t-start) / 1e9
				wins = append(wins, throttleWin{
					iops: float64(done) / s, bps: float64(bytes) / s,
					size: float64(bytes) / float64(done), inFlight: float64(inFlight) / float64(done),
				})
			}
			start, done, bytes, inFlight = e.t, 0, 0, 0
		}
	}
	return wins
}
