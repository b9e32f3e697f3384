package host

// The CPU budget of the evaluations (DESIGN §1).

import (
	"syscall"
	"time"
)

// CPUBudget is a token bucket of CPU time: it fills at pct % of the time
// that passes (a window's worth at each window end); an evaluation spends
// the process CPU time it took; a window is evaluated only while the
// bucket is not empty (DESIGN §1: evaluation at a small fraction of one
// core). At most two windows' worth accumulate.
type CPUBudget struct {
	pct              int
	per, tokens, cap time.Duration
}

// NewCPUBudget returns a full bucket of pct % of window (ns, as a
// time.Duration), holding at most twice that.
func NewCPUBudget(window time.Duration, pct int) *CPUBudget {
	per := window * time.Duration(pct) / 100
	return &CPUBudget{pct: pct, per: per, tokens: per, cap: 2 * per}
}

// Refill adds the allowance of elapsed (ns): a whole window's at a
// window's end, less at a window ended early (a reconfiguration).
func (b *CPUBudget) Refill(elapsed time.Duration) {
	b.tokens = min(b.tokens+elapsed*time.Duration(b.pct)/100, b.cap)
}

// Allow reports whether an evaluation may run now.
func (b *CPUBudget) Allow() bool { return b.tokens > 0 }

// Spend takes cpu (ns of process CPU time) from the bucket; it may go
// below empty, and then the refills pay the debt first.
func (b *CPUBudget) Spend(cpu time.Duration) { b.tokens -= cpu }

// ProcessCPU returns the CPU time (user + system, ns) the process used so
// far, from getrusage(2); 0 when that fails (no error is returned).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
