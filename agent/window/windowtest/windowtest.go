// Package windowtest generates the request traces the tests of the
// device controller (agent/window) and of the agent feed it.
package windowtest

import (
	"math/rand/v2"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// gib is a GiB in sectors.
const gib = uint64(1) << 21

// FIFOWindow records n random 4 KiB reads from `procs` processes that each
// keep `depth` requests in flight, served first-come first-served by one
// disk whose service times come from the default HDD model, as a device
// running the `none` elevator would record them. scale multiplies every
// measured service time (a slower real device); start is the first
// arrival, ns. The requests are in arrival order.
func FIFOWindow(seed uint64, n, procs, depth int, start int64, scale float64) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := model.Default(model.HDD, 100*gib)
	d := m.NewDisk(0)
	reqs := make([]trace.Request, 0, n)
	devFree := start
	// Each process issues its next request when one of its own completes.
	next := make([]int64, procs*depth)
	for i := range next {
		next[i] = start + int64(i)*1000
	}
	for len(reqs) < n {
		// The slot whose next issue is earliest.
		k := 0
		for j := range next {
			if next[j] < next[k] {
				k = j
			}
		}
		arr := next[k]
		sector := rng.Uint64N(90*gib) &^ 7
		disp := max(arr, devFree)
		svc := int64(float64(d.Service(trace.Read, sector, 8)) * scale)
		comp := disp + svc
		devFree = comp
		reqs = append(reqs, trace.Request{
			Arrival: arr, Dispatch: disp, Complete: comp, Sector: sector, Sectors: 8,
			Op: trace.Read, Flags: trace.Sync, PID: uint32(100 + k/depth), Think: trace.Unknown,
		})
		next[k] = comp + 50_000
	}
	// Records are ordered by arrival.
	SortByArrival(reqs)
	return reqs
}

// SortByArrival sorts r by arrival time, keeping the order of equal
// arrivals (an insertion sort: r is nearly sorted).
func SortByArrival(r []trace.Request) {
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && r[j].Arrival < r[j-1].Arrival; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}
