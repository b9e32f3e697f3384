package app

import (
	"errors"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// The default --max-requests of the commands that hold a whole trace in
// memory, chosen so that their peak RSS stays under memoryBudgetBytes
// (docs/performance.md): model eval and model learn take about 250 bytes
// per request; simulate, about simulateBaseBytes per request (the
// requests, the replay plan, the learned model) plus simulateRunBytes per
// request for each candidate simulated at once.
const (
	defaultMaxSimulateRequests = 1_000_000
	defaultMaxModelRequests    = 1_500_000

	memoryBudgetBytes = 512 << 20
	simulateBaseBytes = 280
	simulateRunBytes  = 128
)

// simulateParallel returns the number of candidates to simulate at once
// for a trace of n requests: par when the user set it (> 0); otherwise
// GOMAXPROCS, but no more than fit in memoryBudgetBytes, and at least one.
// The result does not change the output (each candidate's simulation is
// deterministic and reported in candidate order), only the wall time.
func simulateParallel(par, n int) int {
	if par > 0 {
		return par
	}
	fit := (memoryBudgetBytes - simulateBaseBytes*n) / max(simulateRunBytes*n, 1)
	return max(1, min(runtime.GOMAXPROCS(0), fit))
}

// addMaxRequestsFlag adds --max-requests to fl, with default def.
func addMaxRequestsFlag(fl *pflag.FlagSet, p *int, def int) {
	fl.IntVar(p, "max-requests", def,
		"refuse a trace of more requests than this, which bounds memory (0: no limit; see docs/performance.md)")
}

// readTrace reads a whole trace of at most limit requests (0: no limit).
// Every error is an input error; a trace over the limit is refused with a
// one-line error that names the file, the limit and the ways out.
func readTrace(format, path string, limit int) ([]trace.Request, error) {
	if limit < 0 {
		return nil, badInputf("--max-requests: must be ≥ 0, got %d", limit)
	}
	reqs, err := trace.ReadFileLimit(format, path, limit)
	if errors.Is(err, trace.ErrTooManyRequests) {
		return nil, badInputf("%w (--max-requests, which bounds memory): raise it, or cut the trace with 'shadowtune trace convert --head N'", err)
	}
	if err != nil {
		return nil, badInput(err)
	}
	return reqs, nil
}
