package model

import (
	"cmp"
	"math"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// EstimateServers learns k, the number of requests a device serves in
// parallel (DESIGN §3 "Device parallelism"), from a recorded window with
// dispatch and completion times; requests without both are skipped.
//
// Method (in-flight count versus throughput). Sweep the dispatch (+1) and
// completion (−1) events in time order and, for every in-flight level
// n ≥ 1, add up the time T(n) the device spent with exactly n requests
// outstanding and the completions C(n) that happened at that level; the
// throughput at level n is X(n) = C(n)/T(n). A device of k servers, each
// taking S per request, completes X(n) = min(n, k)/S: throughput grows
// linearly with the level up to k, then stays flat. Over the
// well-sampled levels (C(n) ≥ max(20, 1 % of all completions)), for every
// candidate k from 1 to the highest such level, fit X(n) = r·min(n, k) by
// least squares weighted by 1/Var(X(n)) ≈ T(n)²/C(n) (Poisson counts),
// with r in closed form, and return the k with the smallest residual
// (the smaller k on a tie). k cannot be learned above the concurrency the
// window reached. A serial device (or one always run at queue depth 1,
// like the DiskSim traces) gives 1. A window that only ever ran at one
// depth d fits every k ≥ d equally and gives d — the self-consistent
// choice for a model whose cells store the service times measured at
// that depth. Rotational devices reach higher throughput at depth through
// command reordering (NCQ) rather than parallel service; DESIGN §3 keeps
// k = 1 for them unless measured otherwise, which is the caller's choice.
// Fewer than 50 usable requests give 1. Throughput is counted in requests,
// so a window whose request sizes change with the depth biases the result.
func EstimateServers(reqs []trace.Request) int {
	ev := inFlightEvents(reqs)
	if len(ev) < 100 {
		return 1
	}
	var busy []float64 // T(n), ns
	var done []float64 // C(n)
	n := 0
	for i, e := range ev {
		if i > 0 && n > 0 {
			for len(busy) <= n {
				busy, done = append(busy, 0), append(done, 0)
			}
			busy[n] += float64(e.t - ev[i-1].t)
		}
		if e.delta < 0 {
			for len(busy) <= n {
				busy, done = append(busy, 0), append(done, 0)
			}
			done[n]++
		}
		n += int(e.delta)
		if n < 0 { // inconsistent times; ignore the level bookkeeping
			n = 0
		}
	}
	total := 0.0
	for _, c := range done {
		total += c
	}
	minC := math.Max(20, total/100)
	type level struct{ n, x, w float64 }
	var lv []level
	for l := 1; l < len(done); l++ {
		if done[l] < minC || busy[l] <= 0 {
			continue
		}
		x := done[l] / busy[l]
		// Var(X) ≈ C/T²: weight each level by T²/C.
		lv = append(lv, level{float64(l), x, busy[l] * busy[l] / done[l]})
	}
	if len(lv) == 0 {
		return 1
	}
	if len(lv) == 1 { // one depth only: every k ≤ it fits; see above
		return int(lv[0].n)
	}
	// Fit X(n) = r·min(n, k) for each k by weighted least squares (r in
	// closed form) and keep the k with the smallest residual.
	bestK, bestErr := 1, math.Inf(1)
	for k := 1; k <= int(lv[len(lv)-1].n); k++ {
		var sxm, smm float64
		for _, l := range lv {
			m := math.Min(l.n, float64(k))
			sxm += l.w * l.x * m
			smm += l.w * m * m
		}
		r := sxm / smm
		var e float64
		for _, l := range lv {
			d := l.x - r*math.Min(l.n, float64(k))
			e += l.w * d * d
		}
		if e < bestErr*(1-1e-9) {
			bestK, bestErr = k, e
		}
	}
	return bestK
}

// inFlightEvent is a dispatch (+1) or a completion (−1) at the device.
type inFlightEvent struct {
	t     int64 // ns
	delta int8
}

// inFlightEvents returns the dispatches and completions of the requests of
// reqs with a measured, non-zero service time, in time order, completions
// before dispatches at the same time.
func inFlightEvents(reqs []trace.Request) []inFlightEvent {
	ev := make([]inFlightEvent, 0, 2*len(reqs))
	for i := range reqs {
		q := &reqs[i]
		if !q.HasService() || q.Complete == q.Dispatch {
			continue
		}
		ev = append(ev, inFlightEvent{q.Dispatch, +1}, inFlightEvent{q.Complete, -1})
	}
	slices.SortFunc(ev, func(a, b inFlightEvent) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta)
	})
	return ev
}

// MaxInFlight returns the most requests of reqs that were outstanding at
// the device at once (dispatched and not completed), counting only
// requests with a measured, non-zero service time; 0 when there is none.
// It is a lower bound of the device's tag depth: what the recording shows
// the device accepted.
func MaxInFlight(reqs []trace.Request) int {
	n, most := 0, 0
	for _, e := range inFlightEvents(reqs) {
		n += int(e.delta)
		most = max(most, n)
	}
	return most
}
