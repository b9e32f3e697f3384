package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shadowtune/shadowtune/agent/schedcost"
)

// measureDispatch first mends a calibration that did not finish
// (schedcost.Recover), then sets a.dispatch at the agent's start: the schedulers'
// CPU time per request beyond none's on this node (agent/schedcost),
// loaded from the state directory when it was measured on this kernel
// release with as many CPUs, else measured (a few seconds on a private
// RAM-backed loop device, before any device is traced) and saved. When it
// cannot be measured the decision charges schedcost.Prior, and a note says
// so. A measurement the busy CPUs declined (schedcost.ErrContended) is
// recorded, and tried again after schedcost.Backoff at the end of a window
// that found the CPUs idle (retryDispatch), not at every start.
func (a *Agent) measureDispatch(ctx context.Context) {
	// A calibration killed at the last run left its loop device bound and
	// on another scheduler: put it back and free it now, whether or not
	// this start measures.
	if err := schedcost.Recover(a.opt.HostRoot, a.opt.StateDir); err != nil {
		a.notes = append(a.notes, "the calibration device of an earlier run is not put back: "+err.Error())
	}
	saved, err := schedcost.Load(a.opt.StateDir)
	if err != nil {
		a.notes = append(a.notes, "scheduler costs measured before are ignored: "+err.Error())
		saved = schedcost.Costs{}
	}
	use, measure, retryAt := schedcost.Plan(saved, schedcost.Kernel(), runtime.NumCPU(), time.Now())
	switch {
	case use:
		a.setDispatch(saved, true)
	case measure:
		if note := a.tryDispatch(ctx, saved, measureOnce); note != "" {
			a.notes = append(a.notes, note)
		}
	default:
		a.dispatchSaved, a.dispatchRetry = saved, retryAt
		a.setDispatch(schedcost.Prior(runtime.NumCPU()), false)
		a.notes = append(a.notes, fmt.Sprintf("%s: the CPUs were too busy in the last %d attempts; tried again after %s, at the end of a window that finds them idle",
			dispatchPriorNote, saved.Contended, retryAt.Format(time.RFC3339)))
	}
}

// dispatchPriorNote begins the note that the prior is charged.
const dispatchPriorNote = "scheduler dispatch costs not measured, BFQ's documented figures charged instead"

// measureFunc is schedcost.Measure as the agent calls it (measureOnce at
// the start, measureAgain later).
type measureFunc func(ctx context.Context, hostRoot, stateDir string) (schedcost.Costs, error)

// tryDispatch measures with m and sets a.dispatch from the result: the
// measurement, saved; or the prior, with the contended attempt recorded
// after saved (the state directory's record) and a retry time set. It
// returns the note to show, "" when measured and saved.
func (a *Agent) tryDispatch(ctx context.Context, saved schedcost.Costs, m measureFunc) string {
	c, err := m(ctx, a.opt.HostRoot, a.opt.StateDir)
	if err == nil {
		a.dispatchRetry = time.Time{}
		a.setDispatch(c, true)
		if err := schedcost.Save(a.opt.StateDir, c); err != nil {
			return "scheduler dispatch costs not saved (measured again at the next start): " + err.Error()
		}
		return ""
	}
	a.setDispatch(schedcost.Prior(runtime.NumCPU()), false)
	if !errors.Is(err, schedcost.ErrContended) {
		a.dispatchRetry = time.Time{} // no loop devices, not root: measured again at the next start
		return dispatchPriorNote + " (measured again at the next start): " + err.Error()
	}
	rec := schedcost.Contention(saved, schedcost.Kernel(), runtime.NumCPU(), time.Now())
	a.dispatchSaved, a.dispatchRetry = rec, rec.LastTry.Add(schedcost.Backoff(rec.Contended))
	note := fmt.Sprintf("%s (tried again after %s, at the end of a window that finds the CPUs idle): %s",
		dispatchPriorNote, a.dispatchRetry.Format(time.RFC3339), err)
	if err := schedcost.Save(a.opt.StateDir, rec); err != nil {
		note += "; the attempt not recorded: " + err.Error()
	}
	return note
}

// setDispatch makes c the costs charged, measured or the prior.
func (a *Agent) setDispatch(c schedcost.Costs, measured bool) {
	a.dispatch = c
	if a.opt.Metrics != nil {
		a.opt.Metrics.SetDispatchCosts(c.PerRequestNs, measured)
	}
	if measured {
		a.opt.Log.Info("scheduler dispatch costs", "cpuNsPerRequestOverNone", dispatchSummary(c), "kernel", c.Kernel, "cpus", c.CPUs,
			"measured", c.Time)
	}
}

// retryDispatchIdle is the share of the CPUs' time idle over a window for
// the window's end to try a declined measurement again.
const retryDispatchIdle = 0.75

// retryDispatch tries a declined measurement again at a window's end
// (now) once its retry time has passed and the CPUs were idle for at
// least retryDispatchIdle of the window (idle, from /proc/stat; < 0 when
// unknown). On success the devices' decisions are charged the measured
// costs from this window on, and the note of the prior goes.
func (a *Agent) retryDispatch(ctx context.Context, now time.Time, idle float64) {
	if a.dispatchRetry.IsZero() || now.Before(a.dispatchRetry) || idle < retryDispatchIdle {
		return
	}
	m := a.remeasure
	if m == nil {
		m = measureAgain
	}
	note := a.tryDispatch(ctx, a.dispatchSaved, m)
	isPrior := func(n string) bool { return strings.HasPrefix(n, dispatchPriorNote) }
	a.notes, a.st.Notes = slices.DeleteFunc(a.notes, isPrior), slices.DeleteFunc(a.st.Notes, isPrior)
	if note != "" {
		a.notes = append(a.notes, note)
		a.st.Notes = append(a.st.Notes, note)
	}
	a.mu.Lock()
	a.chargeDispatch(a.devs)
	a.mu.Unlock()
}

// dispatchSummary is c's costs as "mq-deadline=3012 kyber=2487 …" (ns).
func dispatchSummary(c schedcost.Costs) string {
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

// chargeDispatch gives every device's decision the measured dispatch
// costs (engine.Options.DispatchCostNs).
func (a *Agent) chargeDispatch(devs []*device) {
	for _, d := range devs {
		d.ctrl.Policy.Engine.DispatchCostNs, d.ctrl.Policy.Engine.CPUs = a.dispatch.PerRequestNs, a.dispatch.CPUs
	}
}

// measured memoizes schedcost.Measure by host root for the process: an
// agent started again in the same process (the cluster agent after a
// failure, or tests) does not measure again.
var measured struct {
	sync.Mutex
	byRoot map[string]measurement
}

type measurement struct {
	c   schedcost.Costs
	err error
}

// measureOnce is schedcost.Measure with default options, recording the
// loop device's scheduler under stateDir, once per host root and
// process; a cancelled measurement is not kept.
func measureOnce(ctx context.Context, hostRoot, stateDir string) (schedcost.Costs, error) {
	measured.Lock()
	defer measured.Unlock()
	if m, ok := measured.byRoot[hostRoot]; ok {
		return m.c, m.err
	}
	return measureLocked(ctx, hostRoot, stateDir)
}

// measureAgain is measureOnce measuring whatever it kept before.
func measureAgain(ctx context.Context, hostRoot, stateDir string) (schedcost.Costs, error) {
	measured.Lock()
	defer measured.Unlock()
	return measureLocked(ctx, hostRoot, stateDir)
}

func measureLocked(ctx context.Context, hostRoot, stateDir string) (schedcost.Costs, error) {
	c, err := schedcost.Measure(ctx, hostRoot, schedcost.Options{StateDir: stateDir})
	if ctx.Err() == nil {
		if measured.byRoot == nil {
			measured.byRoot = map[string]measurement{}
		}
		measured.byRoot[hostRoot] = measurement{c, err}
	}
	return c, err
}
