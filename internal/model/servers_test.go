package model

import (
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// kServerWindow simulates a device of k FIFO servers with exponential
// service times (mean 1 ms) behind a host that dispatches every request
// on arrival (the device queues internally, as NCQ/NVMe queues do). The
// arrival rate steps through light and overload phases, so the in-flight
// count ranges from 1 to well above k.
func kServerWindow(k, n int, seed uint64) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 7))
	const meanSvc = 1e6 // ns
	loads := []float64{0.2, 0.5, 0.8, 1.0, 1.3, 2.0, 0.3}
	free := make([]int64, k)
	var t float64
	reqs := make([]trace.Request, 0, n)
	for i := 0; i < n; i++ {
		lambda := float64(k) * loads[(i/400)%len(loads)] / meanSvc
		t += rng.ExpFloat64() / lambda
		arr := int64(t)
		j := 0
		for s := range free {
			if free[s] < free[j] {
				j = s
			}
		}
		start := max(arr, free[j])
		done := start + int64(rng.ExpFloat64()*meanSvc) + 1
		free[j] = done
		reqs = append(reqs, trace.Request{
			Arrival: arr, Dispatch: arr, Complete: done,
			Sector: uint64(i) * 8, Sectors: 8, Op: trace.Read,
		})
	}
	return reqs
}

func TestEstimateServers(t *testing.T) {
	for _, k := range []int{1, 2, 4, 8} {
		for seed := uint64(1); seed <= 3; seed++ {
			if got := EstimateServers(kServerWindow(k, 20000, seed)); got != k {
				t.Errorf("k = %d, seed %d: EstimateServers = %d", k, seed, got)
			}
		}
	}
}

func TestEstimateServersEdges(t *testing.T) {
	if got := EstimateServers(nil); got != 1 {
		t.Errorf("empty window: %d", got)
	}
	if got := EstimateServers(kServerWindow(4, 30, 1)); got != 1 {
		t.Errorf("30 requests: %d, want 1 (too few)", got)
	}
	// No service times at all.
	reqs := kServerWindow(4, 1000, 1)
	for i := range reqs {
		reqs[i].Dispatch, reqs[i].Complete = trace.Unknown, trace.Unknown
	}
	if got := EstimateServers(reqs); got != 1 {
		t.Errorf("no service times: %d", got)
	}
	// A closed loop with one request outstanding (the DiskSim traces).
	if got := EstimateServers(loadDiskSim(t, "atlas10k")); got != 1 {
		t.Errorf("DiskSim trace: %d, want 1", got)
	}
	// Always 16 in flight, serial device: k cannot be told apart from the
	// depth; the self-consistent answer is the depth.
	var sat []trace.Request
	var now int64
	for i := 0; i < 2000; i++ {
		now += 1000
		sat = append(sat, trace.Request{Dispatch: now - 16000, Complete: now, Arrival: now - 16000})
	}
	if got := EstimateServers(sat[16:]); got != 16 {
		t.Errorf("window always at depth 16: %d, want 16", got)
	}
}
