package window

// The device's read-ahead road (agent/readahead): each window's page-cache
// counts and read totals go to the device's Road, whose decision becomes
// the window's read-ahead target, gated by its risk (Gate.holdReadAhead).
// readAheadRoad holds the device's part of it; the controller asks it for
// the window's target, a revert, and tells it what was written (commit).

import (
	"fmt"
	"strings"
	"time"

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

// readAheadRoad is a device's part of the read-ahead road: its Road
// (evidence, verification, back-off), the road's step for the window, the
// window's read-ahead share and streams, the device's read_ahead_kb before
// the agent and before its default changed under it, the evidence's
// horizon, and the road's verification last shown.
type readAheadRoad struct {
	road readahead.Road
	// step is the road's step for the window (zero when the policy does
	// not govern read-ahead).
	step readahead.Step
	// share is the window's share of read sectors issued as read-ahead,
	// percent; streams the processes that issued read-ahead in it.
	share   float64
	streams int
	// originalKiB is the device's read_ahead_kb before the agent;
	// previousKiB its read_ahead_kb before its default changed under it
	// (agent/sentinel), 0 when it did not.
	originalKiB, previousKiB int
	// horizon is the evidence's horizon of the last window (its gate's
	// minDwell), for the verification a change starts; shown the road's
	// verification last returned by shownVerification.
	horizon time.Duration
	shown   *readahead.Verification
}

// measure takes the window's read-ahead share (w's totals) and the
// processes that issued read-ahead among reqs (its newest requests):
// concurrent streams.
func (r *readAheadRoad) measure(w *window, reqs []trace.Request) {
	r.share = 0
	if w.readSectors > 0 {
		r.share = 100 * float64(w.aheadSectors) / float64(w.readSectors)
	}
	pids := map[uint32]struct{}{}
	for i := range reqs {
		if reqs[i].Op == trace.Read && reqs[i].Flags&trace.ReadAhead != 0 {
			pids[reqs[i].PID] = struct{}{}
		}
	}
	r.streams = len(pids)
}

// stepWindow gives the window ending with in to the road when governs
// (the policy governs read-ahead and the device has a depth), with the
// road's settings s (settings), and keeps its step. Its page-cache counts,
// the read() pages' scale when the window was sampled, and the service
// time of w's read-ahead requests (a direct reader's requests are no
// page's cost) are the road's window. It returns the road's verification
// when a new one ended (nil otherwise).
func (r *readAheadRoad) stepWindow(w *window, in Input, governs bool, s readahead.Settings) *verificationResult {
	r.step, r.horizon = readahead.Step{}, in.Gate.MinDwell
	if !governs {
		return nil
	}
	s.Caps = in.Caps
	r.step = r.road.Window(readahead.Window{Now: in.Now, PageCache: in.PageCache, ReadScale: in.ReadScale, BusyNs: w.aheadNs,
		AheadSectors: int64(w.aheadSectors), AheadRequests: w.aheadRequests, Latencies: w.ahead}, s)
	return r.shownVerification()
}

// shownVerification is the road's last verification as the device's
// last one (lastVerify) when it is new since the last call; nil
// otherwise.
func (r *readAheadRoad) shownVerification() *verificationResult {
	v := r.road.Last
	if v == nil || v == r.shown {
		return nil
	}
	r.shown = v
	return &verificationResult{What: v.What(), Outcome: v.Outcome, BaselineNs: v.BaselineNs, MeasuredNs: v.MeasuredNs,
		Unit: "ns of device time per used page"}
}

// settings are the road's settings: the device's depths (currentKiB, the
// original, and the previous default when it changed under it), policy
// p's bounds, margin and tolerance, model m's costs, and the evidence's
// horizon.
func (r *readAheadRoad) settings(p *Policy, currentKiB int, m *model.Model, horizon time.Duration) readahead.Settings {
	b := p.Engine.ReadAhead
	return readahead.Settings{
		CurrentKiB: currentKiB, OriginalKiB: r.originalKiB, MinKiB: b.MinKiB, MaxKiB: b.MaxKiB,
		MarginPct: p.Decide.MarginPct, LowWastePct: p.ToleratedRegressionPct,
		Seeks:   m.Class() == model.HDD && r.streams >= 2,
		Model:   m,
		Horizon: horizon, VerifyWindows: p.VerifyWindows, Backoff: p.Backoff,
		PreviousKiB: r.previousKiB, RestorePrevious: p.RestorePreviousDefaults,
	}
}

// target is the depth the window asks for, and the move it is: the road's
// decision, unless the policy does not govern read-ahead (governs false)
// or a scheduler change is being verified (its verification measures one
// change); currentKiB when it asks for none.
func (r *readAheadRoad) target(governs, verifying bool, currentKiB int) (int, raMove) {
	d := r.step.Decision
	if !governs || verifying || d.KiB == 0 || d.KiB == currentKiB {
		return currentKiB, raNone
	}
	if d.Reason == readahead.ReasonBounds {
		return d.KiB, raBounds
	}
	return d.KiB, raDecided
}

// revert is the setting that reverts the last read-ahead change (current
// with the depth before it) and why, when the road's verification
// measured a regression; ok is false otherwise.
func (r *readAheadRoad) revert(current Setting) (prev Setting, why string, ok bool) {
	if !r.step.Revert {
		return current, "", false
	}
	prev = current
	prev.ReadAheadKiB = r.step.Decision.KiB
	return prev, r.step.Message, true
}

// reason is the reason text of a read-ahead change from currentKiB.
func (r *readAheadRoad) reason(currentKiB int) string {
	ev := r.road.Evidence()
	why := string(r.step.Decision.Reason)
	if r.step.Decision.Reason == readahead.ReasonPreviousDefault {
		why = fmt.Sprintf("%s, %d KiB, before the default changed to %d KiB, which is predicted slower", why, r.previousKiB, currentKiB)
	}
	return fmt.Sprintf("read-ahead: %s (waste %.1f %% of %.0f pages resolved: random read-around %.0f, sequential %.0f)",
		why, ev.WastePct(), ev.Resolved(), ev.Random.Resolved(), ev.Sequential.Resolved())
}

// commit tells the road that the device's read-ahead moved from fromKiB
// to s.CurrentKiB at now by an action whose move was move (s: the road's
// settings after it, without horizon). It returns the road's verification
// when a new one ended (nil otherwise).
func (r *readAheadRoad) commit(move raMove, fromKiB int, now time.Time, s readahead.Settings) *verificationResult {
	switch move {
	case raReverted:
		r.road.Reverted(now, s)
	case raDecided:
		s.Horizon = r.horizon
		r.road.Commit(fromKiB, s.CurrentKiB, now, s)
	case raBounds:
		r.road.Forget()
	}
	return r.shownVerification()
}

// log logs to log, at verbosity 1, the last window's read-ahead evidence
// on disk (at currentKiB) and the costs (ms of device time) its decision
// compared.
func (r *readAheadRoad) log(log logr.Logger, disk string, currentKiB int) {
	st := r.step
	if !log.V(1).Enabled() {
		return
	}
	mix, lat := r.road.Evidence(), r.road.Latencies()
	costs := make([]string, 0, len(st.Decision.Costs))
	for _, k := range st.Decision.Costs {
		costs = append(costs, fmt.Sprintf("%d:%.3gms", k.KiB, k.Ns/1e6))
	}
	log.V(1).Info("read-ahead", "disk", disk, "current", currentKiB, "decision", st.Decision.KiB,
		"reason", st.Decision.Reason, "window", classText(st.Evidence), "mix", classText(mix), "costs", strings.Join(costs, " "),
		"device", st.Device.String(), "requestsAlone", fmt.Sprintf("%.0f of %.0f", lat.Requests(true), lat.Requests(true)+lat.Requests(false)),
		"rows", lat.String(), "windowRows", st.Latencies.String(),
		"verifying", st.Verifying, "lastVerification", verificationText(r.road.Last))
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
