package schedcost

// The charged costs of a running agent: measured or the prior at its
// start, and measured again at a window's end after a declined attempt.

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/metrics"
)

// Charger holds the costs a running agent charges its devices' decisions
// and the state of a declined measurement's retry. Its zero value with
// the exported fields set is ready; it is used by one goroutine.
type Charger struct {
	// HostRoot prefixes /sys and StateDir holds the record of the
	// measurements (Save, Contention).
	HostRoot, StateDir string
	// Metrics, when non-nil, receives the costs charged.
	Metrics *metrics.Metrics
	// Log receives the costs when they are measured.
	Log logr.Logger
	// Remeasure measures at a window's end; nil is MeasureAgain.
	Remeasure MeasureFunc

	costs Costs
	// retry is when a declined measurement is tried again (zero: not),
	// and saved the state directory's record of the declined attempts.
	retry time.Time
	saved Costs
}

// Costs are the costs charged now: measured, or Prior when they could
// not be measured (zero before Start or Try).
func (c *Charger) Costs() Costs { return c.costs }

// RetryAt is when a declined measurement is tried again; zero when none
// is due.
func (c *Charger) RetryAt() time.Time { return c.retry }

// Start sets the costs at the agent's start: saved or measured with
// MeasureOnce, or the prior (Start). It returns the status notes that say
// why they were not measured. A measurement the busy CPUs declined is
// tried again at the end of a window that found the CPUs idle (Retry),
// not at every start.
func (c *Charger) Start(ctx context.Context) []string {
	ch := Start(ctx, c.HostRoot, c.StateDir, MeasureOnce)
	c.set(ch)
	return ch.Notes
}

// Try measures with m (Attempt, after saved, the state directory's
// record) and sets the costs from the result. It returns the note to
// show, "" when measured and saved.
func (c *Charger) Try(ctx context.Context, saved Costs, m MeasureFunc) string {
	ch := Attempt(ctx, c.HostRoot, c.StateDir, saved, m)
	c.set(ch)
	return strings.Join(ch.Notes, "; ")
}

// Retry tries a declined measurement again at a window's end (now) when
// RetryDue (idle: the CPUs' idle share over the window, < 0 when
// unknown). It reports whether it tried, and the note to show ("" when
// measured and saved).
func (c *Charger) Retry(ctx context.Context, now time.Time, idle float64) (note string, tried bool) {
	if !RetryDue(c.retry, now, idle) {
		return "", false
	}
	m := c.Remeasure
	if m == nil {
		m = MeasureAgain
	}
	return c.Try(ctx, c.saved, m), true
}

// set makes ch's costs the ones charged, measured or the prior, and
// keeps its retry time and record.
func (c *Charger) set(ch Charge) {
	c.costs, c.saved, c.retry = ch.Costs, ch.Saved, ch.RetryAt
	if c.Metrics != nil {
		c.Metrics.SetDispatchCosts(ch.Costs.PerRequestNs, ch.Measured)
	}
	if ch.Measured {
		c.Log.Info("scheduler dispatch costs", "cpuNsPerRequestOverNone", ch.Costs.Summary(), "kernel", ch.Costs.Kernel,
			"cpus", ch.Costs.CPUs, "measured", ch.Costs.Time)
	}
}
