package agent

// The CPU budget of the evaluations (DESIGN §1).

import (
	"syscall"
	"time"
)

// cpuBudget is a token bucket of CPU time: it fills at pct % of the time
// that passes (a window's worth at each window end); an evaluation spends
// the process CPU time it took; a window is evaluated only while the
// bucket is not empty (DESIGN §1: evaluation at a small fraction of one
// core). At most two windows' worth accumulate.
type cpuBudget struct {
	pct              int
	per, tokens, cap time.Duration
}

func newCPUBudget(window time.Duration, pct int) *cpuBudget {
	per := window * time.Duration(pct) / 100
	return &cpuBudget{pct: pct, per: per, tokens: per, cap: 2 * per}
}

// refill adds the allowance of elapsed: a whole window's at a window's
// end, less at a window ended early (a reconfiguration).
func (b *cpuBudget) refill(elapsed time.Duration) {
	b.tokens = min(b.tokens+elapsed*time.Duration(b.pct)/100, b.cap)
}

// allow reports whether an evaluation may run now.
func (b *cpuBudget) allow() bool { return b.tokens > 0 }

func (b *cpuBudget) spend(cpu time.Duration) { b.tokens -= cpu }

// processCPU returns the CPU time (user + system) the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
