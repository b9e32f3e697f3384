package window

// The device's read-ahead road (agent/readahead): each window's page-cache
// counts and read totals go to the device's Road, whose decision becomes
// the window's read-ahead target, gated by its risk (Gate.holdReadAhead).

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// raMove says what an action does to read-ahead, for the road.
type raMove uint8

const (
	// raNone: the action leaves read-ahead alone.
	raNone raMove = iota
	// raDecided: a change the road decided; its verification starts.
	raDecided
	// raReverted: the revert of a change that regressed; its direction
	// backs off.
	raReverted
	// raBounds: a move to the policy's bounds.
	raBounds
)

// raWindow is the road's window: its page-cache counts, the read() pages'
// scale when the window was sampled, and the service time of its
// read-ahead requests (a direct reader's requests are no page's cost).
func (c *Controller) raWindow(in Input) readahead.Window {
	return readahead.Window{Now: in.Now, PageCache: in.PageCache, ReadScale: in.ReadScale, BusyNs: c.win.aheadNs,
		AheadSectors: int64(c.win.aheadSectors), AheadRequests: c.win.aheadRequests, Latencies: c.win.ahead}
}

// stepReadAhead gives the window to the road (when the policy governs
// read-ahead) and keeps its step in c.ra.
func (c *Controller) stepReadAhead(in Input) {
	c.ra, c.raHorizon = readahead.Step{}, in.Gate.MinDwell
	if !c.Policy.ReadAhead || c.Current.ReadAheadKiB <= 0 {
		return
	}
	s := c.raSettings(in.Gate)
	s.Caps = in.Caps
	c.ra = c.road.Window(c.raWindow(in), s)
	c.showRAVerification()
}

// showRAVerification makes the road's last verification the device's
// last one (lastVerify) when it is new.
func (c *Controller) showRAVerification() {
	v := c.road.Last
	if v == nil || v == c.raShown {
		return
	}
	c.raShown = v
	c.lastVerify = &verificationResult{What: v.What(), Outcome: v.Outcome, BaselineNs: v.BaselineNs, MeasuredNs: v.MeasuredNs,
		Unit: "ns of device time per used page"}
}

// raSettings are the road's settings: the device's depths (with its
// previous default, when it changed under it), the policy's bounds,
// margin and tolerance, the model's costs, and the evidence's horizon,
// the gate's minDwell.
func (c *Controller) raSettings(g Gate) readahead.Settings {
	b := c.Policy.Engine.ReadAhead
	streams := c.raStreams
	return readahead.Settings{
		CurrentKiB: c.Current.ReadAheadKiB, OriginalKiB: c.originalRA, MinKiB: b.MinKiB, MaxKiB: b.MaxKiB,
		MarginPct: c.Policy.Decide.MarginPct, LowWastePct: c.Policy.ToleratedRegressionPct,
		Seeks:   c.learn.model.Class() == model.HDD && streams >= 2,
		Model:   c.learn.model,
		Horizon: g.MinDwell, VerifyWindows: c.Policy.VerifyWindows, Backoff: c.Policy.Backoff,
		PreviousKiB: c.previousRA, RestorePrevious: c.Policy.RestorePreviousDefaults,
	}
}

// readAheadTarget is the depth the window asks for, and the move it is:
// the road's decision, unless a scheduler change is being verified (its
// verification measures one change).
func (c *Controller) readAheadTarget() (int, raMove) {
	d := c.ra.Decision
	if !c.Policy.ReadAhead || c.verify != nil || d.KiB == 0 || d.KiB == c.Current.ReadAheadKiB {
		return c.Current.ReadAheadKiB, raNone
	}
	if d.Reason == readahead.ReasonBounds {
		return d.KiB, raBounds
	}
	return d.KiB, raDecided
}

// raRevert is the action that reverts the last read-ahead change, when
// the road's verification measured a regression (it passes every gate;
// Observe mode makes no action).
func (c *Controller) raRevert(rep *Report) bool {
	if !c.ra.Revert || !c.Policy.Apply {
		return false
	}
	prev := c.Current
	prev.ReadAheadKiB = c.ra.Decision.KiB
	rep.Action = Action{Kind: ActionRevert, Setting: prev, guard: c.Memo.Guard, Reason: c.ra.Message, ra: raReverted}
	rep.Target, rep.Reason = &prev, ReasonRegressionReverted
	return true
}

// raReason is the reason text of a read-ahead change.
func (c *Controller) raReason() string {
	ev := c.road.Evidence()
	why := string(c.ra.Decision.Reason)
	if c.ra.Decision.Reason == readahead.ReasonPreviousDefault {
		why = fmt.Sprintf("%s, %d KiB, before the default changed to %d KiB, which is predicted slower", why, c.previousRA, c.Current.ReadAheadKiB)
	}
	return fmt.Sprintf("read-ahead: %s (waste %.1f %% of %.0f pages resolved: random read-around %.0f, sequential %.0f)",
		why, ev.WastePct(), ev.Resolved(), ev.Random.Resolved(), ev.Sequential.Resolved())
}

// readAheadShare is the share of the window's read sectors the kernel
// issued as read-ahead, percent, and the processes that issued
// read-ahead among reqs (its newest requests): concurrent streams.
func (c *Controller) readAheadShare(reqs []trace.Request) (float64, int) {
	var share float64
	if c.win.readSectors > 0 {
		share = 100 * float64(c.win.aheadSectors) / float64(c.win.readSectors)
	}
	pids := map[uint32]struct{}{}
	for i := range reqs {
		if reqs[i].Op == trace.Read && reqs[i].Flags&trace.ReadAhead != 0 {
			pids[reqs[i].PID] = struct{}{}
		}
	}
	return share, len(pids)
}

// LogReadAhead logs to log, at verbosity 1, the last window's read-ahead
// evidence on disk and the costs (ms of device time) its decision
// compared; nothing when the policy does not govern read-ahead.
func (c *Controller) LogReadAhead(log logr.Logger, disk string) {
	st := c.ra
	if !c.Policy.ReadAhead || !log.V(1).Enabled() {
		return
	}
	mix, lat := c.road.Evidence(), c.road.Latencies()
	costs := make([]string, 0, len(st.Decision.Costs))
	for _, k := range st.Decision.Costs {
		costs = append(costs, fmt.Sprintf("%d:%.3gms", k.KiB, k.Ns/1e6))
	}
	log.V(1).Info("read-ahead", "disk", disk, "current", c.Current.ReadAheadKiB, "decision", st.Decision.KiB,
		"reason", st.Decision.Reason, "window", classText(st.Evidence), "mix", classText(mix), "costs", strings.Join(costs, " "),
		"device", st.Device.String(), "requestsAlone", fmt.Sprintf("%.0f of %.0f", lat.Requests(true), lat.Requests(true)+lat.Requests(false)),
		"rows", lat.String(), "windowRows", st.Latencies.String(),
		"verifying", st.Verifying, "lastVerification", verificationText(c.road.Last))
}

// verificationText is a read-ahead change's verification in a log line
// ("" when none ended yet), e.g. "32 -> 256 Reverted: 4293 vs 21051 ns
// per used page".
func verificationText(v *readahead.Verification) string {
	if v == nil {
		return ""
	}
	return fmt.Sprintf("%d -> %d %s: %.0f vs %.0f ns per used page", v.FromKiB, v.ToKiB, v.Outcome, v.BaselineNs, v.MeasuredNs)
}

// classText is the evidence's classes in a log line.
func classText(e readahead.Evidence) string {
	f := func(c readahead.Class) string {
		return fmt.Sprintf("%.0fw/%.0fp/d%.0f used %.0f wasted %.0f", c.Windows, c.Pages, c.Depth, c.Used, c.Wasted)
	}
	return "random " + f(e.Random) + "; sequential " + f(e.Sequential) + "; short " + f(e.Short)
}
