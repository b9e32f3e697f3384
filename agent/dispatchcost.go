package agent

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/shadowtune/shadowtune/agent/schedcost"
)

// measureDispatch sets a.dispatch at the agent's start: the schedulers'
// CPU time per request beyond none's on this node, saved or measured, or
// the prior (schedcost.Start), with the notes that say why. A
// measurement the busy CPUs declined is tried again at the end of a
// window that found the CPUs idle (retryDispatch), not at every start.
func (a *Agent) measureDispatch(ctx context.Context) {
	ch := schedcost.Start(ctx, a.opt.HostRoot, a.opt.StateDir, schedcost.MeasureOnce)
	a.setDispatch(ch)
	a.notes = append(a.notes, ch.Notes...)
}

// tryDispatch measures with m (schedcost.Attempt, after saved, the state
// directory's record) and sets a.dispatch from the result. It returns the
// note to show, "" when measured and saved.
func (a *Agent) tryDispatch(ctx context.Context, saved schedcost.Costs, m schedcost.MeasureFunc) string {
	ch := schedcost.Attempt(ctx, a.opt.HostRoot, a.opt.StateDir, saved, m)
	a.setDispatch(ch)
	return strings.Join(ch.Notes, "; ")
}

// setDispatch makes ch's costs the ones charged, measured or the prior,
// and keeps its retry time and record.
func (a *Agent) setDispatch(ch schedcost.Charge) {
	a.dispatch, a.dispatchSaved, a.dispatchRetry = ch.Costs, ch.Saved, ch.RetryAt
	if a.opt.Metrics != nil {
		a.opt.Metrics.SetDispatchCosts(ch.Costs.PerRequestNs, ch.Measured)
	}
	if ch.Measured {
		a.opt.Log.Info("scheduler dispatch costs", "cpuNsPerRequestOverNone", ch.Costs.Summary(), "kernel", ch.Costs.Kernel,
			"cpus", ch.Costs.CPUs, "measured", ch.Costs.Time)
	}
}

// retryDispatch tries a declined measurement again at a window's end
// (now) when schedcost.RetryDue (idle: the CPUs' idle share over the
// window, < 0 when unknown). The devices' decisions are charged the
// result from this window on, and the note of the prior goes.
func (a *Agent) retryDispatch(ctx context.Context, now time.Time, idle float64) {
	if !schedcost.RetryDue(a.dispatchRetry, now, idle) {
		return
	}
	m := a.remeasure
	if m == nil {
		m = schedcost.MeasureAgain
	}
	note := a.tryDispatch(ctx, a.dispatchSaved, m)
	isPrior := func(n string) bool { return strings.HasPrefix(n, schedcost.PriorNote) }
	a.notes, a.st.Notes = slices.DeleteFunc(a.notes, isPrior), slices.DeleteFunc(a.st.Notes, isPrior)
	if note != "" {
		a.notes = append(a.notes, note)
		a.st.Notes = append(a.st.Notes, note)
	}
	a.mu.Lock()
	a.chargeDispatch(a.devs)
	a.mu.Unlock()
}

// chargeDispatch gives every device's decision the measured dispatch
// costs (engine.Options.DispatchCostNs).
func (a *Agent) chargeDispatch(devs []*device) {
	for _, d := range devs {
		d.ctrl.Policy.Engine.DispatchCostNs, d.ctrl.Policy.Engine.CPUs = a.dispatch.PerRequestNs, a.dispatch.CPUs
	}
}
