package schedcost

// The agent's use of a measurement: what it charges at its start and
// after an attempt, and when it measures again. The agent holds the
// result (a Charge) and shows its notes in its status.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// PriorNote begins every note that says the prior is charged.
const PriorNote = "scheduler dispatch costs not measured, BFQ's documented figures charged instead"

// RetryIdle is the share of the CPUs' time idle over a window for the
// window's end to try a declined measurement again (RetryDue).
const RetryIdle = 0.75

// MeasureFunc is Measure as the agent calls it: MeasureOnce at its start,
// MeasureAgain at a window's end, or a test's stand-in.
type MeasureFunc func(ctx context.Context, hostRoot, stateDir string) (Costs, error)

// Charge is what the agent charges after Start or Attempt.
type Charge struct {
	// Costs are charged: a measurement, or Prior when Measured is false.
	Costs    Costs
	Measured bool
	// RetryAt is when a declined measurement is tried again (zero: not
	// before the next start), and Saved the state directory's record the
	// next attempt follows (Contention).
	RetryAt time.Time
	Saved   Costs
	// Notes say, for the status, what was not measured, saved or mended
	// ("" notes are not kept; none when measured and saved).
	Notes []string
}

// Start mends a calibration that did not finish (Recover), then plans the
// agent's start (Plan): the costs saved in stateDir when they were
// measured on this kernel release with as many CPUs; else a measurement
// with measure (a few seconds on a private RAM-backed loop device), saved
// (Attempt); else, while the back-off of contended attempts lasts, Prior
// until RetryAt. Errors are not returned: each becomes a note, and the
// prior is charged when nothing was measured.
func Start(ctx context.Context, hostRoot, stateDir string, measure MeasureFunc) Charge {
	var notes []string
	if err := Recover(hostRoot, stateDir); err != nil {
		notes = append(notes, "the calibration device of an earlier run is not put back: "+err.Error())
	}
	saved, err := Load(stateDir)
	if err != nil {
		notes = append(notes, "scheduler costs measured before are ignored: "+err.Error())
		saved = Costs{}
	}
	use, measureNow, retryAt := Plan(saved, Kernel(), runtime.NumCPU(), time.Now())
	var ch Charge
	switch {
	case use:
		ch = Charge{Costs: saved, Measured: true}
	case measureNow:
		ch = Attempt(ctx, hostRoot, stateDir, saved, measure)
	default:
		ch = Charge{Costs: Prior(runtime.NumCPU()), Saved: saved, RetryAt: retryAt}
		ch.Notes = []string{fmt.Sprintf("%s: the CPUs were too busy in the last %d attempts; tried again after %s, at the end of a window that finds them idle",
			PriorNote, saved.Contended, retryAt.Format(time.RFC3339))}
	}
	ch.Notes = append(notes, ch.Notes...)
	return ch
}

// Attempt measures with m and returns what to charge: the measurement,
// saved in stateDir; or Prior. An attempt the busy CPUs declined
// (ErrContended) is recorded in stateDir after saved (Contention) and
// tried again after Backoff, at RetryAt; any other failure (no loop
// devices, not root) is tried again at the next start only. Its one note
// says what failed; none when measured and saved.
func Attempt(ctx context.Context, hostRoot, stateDir string, saved Costs, m MeasureFunc) Charge {
	c, err := m(ctx, hostRoot, stateDir)
	if err == nil {
		ch := Charge{Costs: c, Measured: true}
		if err := Save(stateDir, c); err != nil {
			ch.Notes = []string{"scheduler dispatch costs not saved (measured again at the next start): " + err.Error()}
		}
		return ch
	}
	ch := Charge{Costs: Prior(runtime.NumCPU())}
	if !errors.Is(err, ErrContended) {
		ch.Notes = []string{PriorNote + " (measured again at the next start): " + err.Error()}
		return ch
	}
	ch.Saved = Contention(saved, Kernel(), runtime.NumCPU(), time.Now())
	ch.RetryAt = ch.Saved.LastTry.Add(Backoff(ch.Saved.Contended))
	note := fmt.Sprintf("%s (tried again after %s, at the end of a window that finds the CPUs idle): %s",
		PriorNote, ch.RetryAt.Format(time.RFC3339), err)
	if err := Save(stateDir, ch.Saved); err != nil {
		note += "; the attempt not recorded: " + err.Error()
	}
	ch.Notes = []string{note}
	return ch
}

// RetryDue reports whether a window's end at now tries a declined
// measurement again: its retry time retryAt is set and has passed, and
// the CPUs were idle for at least RetryIdle of the window (idle in [0, 1];
// < 0 when unknown, which is not idle).
func RetryDue(retryAt, now time.Time, idle float64) bool {
	return !retryAt.IsZero() && !now.Before(retryAt) && idle >= RetryIdle
}

// Summary is c's costs as "mq-deadline=3012 kyber=2487 …" (ns per
// request), or "none measured".
func (c Costs) Summary() string {
	s := ""
	for _, name := range []string{"mq-deadline", "kyber", "bfq"} {
		if ns, ok := c.PerRequestNs[name]; ok {
			s += fmt.Sprintf(" %s=%.0f", name, ns)
		}
	}
	if s == "" {
		return "none measured"
	}
	return s[1:]
}

// measured memoizes Measure by host root for the process: an agent
// started again in the same process (the cluster agent after a failure,
// or tests) does not measure again.
var measured struct {
	sync.Mutex
	byRoot map[string]measurement
}

type measurement struct {
	c   Costs
	err error
}

// MeasureOnce is Measure with default options, recording the loop
// device's scheduler under stateDir, once per host root and process: a
// later call returns the first one's costs and error (unwrapped). A
// cancelled measurement is not kept.
func MeasureOnce(ctx context.Context, hostRoot, stateDir string) (Costs, error) {
	measured.Lock()
	defer measured.Unlock()
	if m, ok := measured.byRoot[hostRoot]; ok {
		return m.c, m.err
	}
	return measureLocked(ctx, hostRoot, stateDir)
}

// MeasureAgain is MeasureOnce measuring whatever it kept before, and
// keeping the new result.
func MeasureAgain(ctx context.Context, hostRoot, stateDir string) (Costs, error) {
	measured.Lock()
	defer measured.Unlock()
	return measureLocked(ctx, hostRoot, stateDir)
}

func measureLocked(ctx context.Context, hostRoot, stateDir string) (Costs, error) {
	c, err := Measure(ctx, hostRoot, Options{StateDir: stateDir})
	if ctx.Err() == nil {
		if measured.byRoot == nil {
			measured.byRoot = map[string]measurement{}
		}
		measured.byRoot[hostRoot] = measurement{c, err}
	}
	return c, err
}
