package app

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// The default --max-requests of the commands that hold a whole trace in
// memory, chosen so that their peak RSS stays under 512 MiB
// (docs/performance.md): simulate takes about 480 bytes per request (the
// requests, the replay plan and a simulation state per candidate run at
// once), model eval and model learn about 220.
const (
	defaultMaxSimulateRequests = 1_000_000
	defaultMaxModelRequests    = 2_000_000
)

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
