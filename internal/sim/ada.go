package sim

import (
	"errors"

	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// ADAResult is the REDCAP activation–deactivation decision for a window.
type ADAResult struct {
	// On reports whether ADA keeps the cache on after the window's reads.
	On bool `json:"on"`
	// Reads is the number of reads compared (the last Window of them count).
	Reads int `json:"reads"`
	// RedcapNsPerBlock and NormalNsPerBlock are the mean per-request time
	// per 4 KiB block over ADA's window with and without the cache, ns.
	RedcapNsPerBlock float64 `json:"redcapNsPerBlock"`
	NormalNsPerBlock float64 `json:"normalNsPerBlock"`
	// Switches counts on/off changes while the window was replayed.
	Switches int `json:"switches"`
}

// ErrADAInput is returned by EvalADA when the two runs cannot be compared.
var ErrADAInput = errors.New("sim: ADA needs two runs of the same window with per-request results, one with the cache and one without")

// EvalADA runs REDCAP's activation–deactivation algorithm (KDSim §4.1)
// over a window simulated twice under the same scheduler: on with the cache,
// off without it, both with Config.KeepPerRequest. The reads are fed in
// window order; the result is ADA's state after the last one.
//
// T is each read's response time in its run (queueing in the elevator plus
// I/O, or the cache's fill and copy time). B is the number of requested
// 4 KiB blocks on both sides: a prefetched block counts when it is served to
// a request (as a hit), not when it is fetched. This follows REDCAP 2007 §3
// ("the blocks served by the cache"). KDSim §4.1 counts the prefetched
// blocks of a miss in B_Redcap at once, which divides the cost of every miss
// by up to S/request-size whether or not the prefetch is ever used, and
// keeps the cache on even for random reads that it slows down; counting
// served blocks gives the behaviour both papers report (off for random and
// large-stride reads, on for small strides).
func EvalADA(w *Window, on, off Result, cfg redcap.ADAConfig) (ADAResult, error) {
	n := w.Len()
	if !on.Cache || off.Cache || len(on.ResponseNs) != n || len(off.ResponseNs) != n {
		return ADAResult{}, ErrADAInput
	}
	ada, err := redcap.NewADA(cfg)
	if err != nil {
		return ADAResult{}, err
	}
	reads := 0
	for i, q := range w.reqs {
		if q.Op != trace.Read || q.Sectors == 0 {
			continue
		}
		reads++
		b := redcap.Blocks(q.Sectors)
		ada.Add(on.ResponseNs[i], b, off.ResponseNs[i], b)
	}
	red, nor := ada.Ratios()
	return ADAResult{On: ada.On(), Reads: reads, RedcapNsPerBlock: red, NormalNsPerBlock: nor, Switches: ada.Switches()}, nil
}
