package window

// Deciding a window, under the gate, and committing what the device
// wrote: the verification of the last change comes first, then the
// read-ahead road's move, then a scheduler switch, confirmed by the next
// window and held back by the gate (Gate). The device tells the
// controller what it wrote (Commit) or what another writer did (Resync).

import (
	"fmt"
	"time"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// verification is a scheduler switch being verified: the settings before
// and after it, the model's bias before it, the windows left, and the
// measures summed over the windows verified so far.
type verification struct {
	previous Setting
	target   Setting
	bias     float64 // bias before the change
	left     int
	realNs   int64   // real measure over the verified windows
	prevNs   float64 // the previous setting's simulated measure × bias
	targetNs float64 // the target's simulated measure × bias
	// corrected is the target's learned correction over the previous
	// setting's when the switch was decided: the decision compared
	// corrected measures, so its predicted ratio is targetNs ÷ prevNs
	// × corrected.
	corrected float64
}

// conclude verifies the last change on the window's evaluation er (of
// requests whose measured measure was sliceReal, ns) and, unless that
// asks for a revert (of a scheduler switch, or of the read-ahead road's
// change), learns the model's bias and decides the window (decideWindow).
// It reports whether it asked for a revert.
func (c *Controller) conclude(rep *Report, er engine.Report, sliceReal int64, in Input) bool {
	// Verification of the last change comes first: a regression reverts
	// whatever this window recommends, and passes the gate.
	if c.verifyWindow(rep, er, sliceReal, in.Now) || c.raRevert(rep) {
		return true
	}
	if c.verify == nil {
		c.learn.learnBias(sliceReal, simulatedTotal(er, c.Policy.Engine.Rank, c.Current.Candidate.Name()))
	}
	c.decideWindow(rep, er, in)
	return false
}

// Unverified reports whether the device holds a change that is not
// verified yet: being written, or under verification (a scheduler switch
// or the read-ahead road's change).
func (c *Controller) Unverified() bool {
	return c.changing || c.verify != nil || c.ahead.road.Verifying()
}

// verifyWindow counts the window towards the verification of the last
// change. When the verification ends in a regression it asks for the
// revert (rep.Action) and reports true. The verification is kept until
// the revert is done (Commit), so a revert that could not be written is
// asked for again the next window.
func (c *Controller) verifyWindow(rep *Report, er engine.Report, sliceReal int64, now time.Time) bool {
	v := c.verify
	if v == nil {
		return false
	}
	v.realNs += sliceReal
	v.prevNs += float64(simulatedTotal(er, c.Policy.Engine.Rank, v.previous.Candidate.Name())) * v.bias
	v.targetNs += float64(simulatedTotal(er, c.Policy.Engine.Rank, v.target.Candidate.Name())) * v.bias
	v.left--
	rep.Verifying = max(v.left, 0)
	if v.left > 0 {
		return false
	}
	counted := c.Memo.checkCounterfactual(v, now, c.Policy.Decide.MarginPct)
	correction := c.Memo.learnCorrection(v)
	c.memoDirty = c.memoDirty || counted || correction
	c.lastVerify = &verificationResult{What: fmt.Sprintf("%s -> %s", v.previous.Candidate.Name(), v.target.Candidate.Name()),
		BaselineNs: v.prevNs, PredictedNs: v.targetNs, MeasuredNs: float64(v.realNs), Unit: "ns", Outcome: "Verified"}
	limit := v.prevNs * (1 + c.Policy.ToleratedRegressionPct/100)
	if v.prevNs <= 0 || float64(v.realNs) <= limit {
		c.verify = nil // verified
		return false
	}
	c.lastVerify.Outcome = "Reverted"
	c.Memo.Backoff[v.target.Candidate.Name()] = now.Add(c.Policy.Backoff)
	c.ask(rep, Action{Kind: ActionRevert, Setting: v.previous, Reason: fmt.Sprintf(
		"regression: real %.1f ms vs %.1f ms expected of %s (+%.1f %% > %.1f %%)",
		float64(v.realNs)/1e6, v.prevNs/1e6, v.previous.Candidate.Name(),
		100*(float64(v.realNs)/v.prevNs-1), c.Policy.ToleratedRegressionPct)}, effect{guard: er.Guard})
	prev := v.previous
	rep.Target, rep.Reason = &prev, ReasonRegressionReverted
	return true
}

// decideWindow turns the window's decision into the recommendation
// (rep.Target) and, in Apply mode when the gate allows it, the action.
//
// A switch counts towards the thrash guard (DADS §4.2 counts changes)
// only when it is made (Commit): in Observe mode, or held back by the
// gate, the recommendation stays the best candidate instead of the
// pinned default after a few windows.
func (c *Controller) decideWindow(rep *Report, er engine.Report, in Input) {
	d := er.Decision
	if !d.Switch {
		c.Memo.Guard = er.Guard
		c.proposed = ""
	}
	target := c.Current
	rep.Reason = string(d.Reason)
	if d.Reason == decide.ReasonNotReproduced || d.Reason == decide.ReasonCounterfactualError {
		rep.Skipped = d.Message
	}
	// A read-ahead move is made alone, so that each verification measures
	// one change, and before a scheduler switch: its evidence is
	// measured, the switch's predicted. The switch waits for a later
	// window.
	kib, move := c.ahead.target(c.Policy.ReadAhead, c.verify != nil, c.Current.ReadAheadKiB)
	if move != raNone {
		d.Switch = false // the guard does not count it
		target.ReadAheadKiB = kib
	}
	if d.Switch {
		if until, ok := c.Memo.Backoff[d.Target]; ok && in.Now.Before(until) {
			rep.Skipped = fmt.Sprintf("%s regressed before; not retried until %s", d.Target, until.Format(time.RFC3339))
			rep.Reason = ReasonRegressionBackoff
		} else if c.confirmSwitch(d) {
			target.Candidate = candidateByName(er, d.Target)
		} else {
			rep.Skipped = fmt.Sprintf("switch to %s (predicted +%.1f %%) made if the next window decides it too", d.Target, d.BestImprovementPct)
			rep.Reason = ReasonAwaitingConfirmation
		}
	}
	rep.Target = &target
	if !c.Policy.Apply || SameSetting(target, c.Current) {
		return
	}
	if move != raNone {
		if rep.Held = c.raHold(move, in); rep.Held == HoldNone {
			c.ask(rep, Action{Kind: ActionApply, Setting: target, Reason: c.ahead.reason(c.Current.ReadAheadKiB)},
				effect{guard: c.Memo.Guard, ra: move})
		}
		return
	}
	if rep.Held = in.Gate.Hold(c.Memo.LastChange, in.Now); rep.Held != HoldNone {
		return
	}
	c.ask(rep, Action{Kind: ActionApply, Setting: target, Reason: d.Message}, effect{guard: er.Guard,
		verify: &verification{previous: c.Current, target: target, bias: c.learn.bias, left: c.Policy.VerifyWindows,
			corrected: c.Memo.correctionOf(target) / c.Memo.correctionOf(c.Current)}})
	rep.Verifying = c.Policy.VerifyWindows
}

// confirmSwitch reports whether the switch d may be made now. A switch
// decided by its predicted gain (decide.ReasonBetter) is made only when
// the window before decided the same one: one window's prediction is not
// enough. The first loaded window runs on a model calibrated on that very
// window, and a single window's sample of a fast device's random reads
// scatters: on the 2-core test machine, under CI load, one window predicted
// mq-deadline +23.8 % over none on random reads where the next predicted
// +27.6 % for kyber, and verification measured mq-deadline 151.8 % slower.
// A thrash-guard switch to the default is made at once. c.proposed
// remembers the window's target, whether or not a gate then holds the
// switch back (Observe mode, no grant, minDwell): while consecutive
// windows decide the same switch, it stays confirmed.
func (c *Controller) confirmSwitch(d decide.Decision) bool {
	confirmed := d.Reason != decide.ReasonBetter || c.proposed == d.Target
	c.proposed = d.Target
	return confirmed
}

// decideReadAhead decides a window whose scheduler evaluation was skipped
// (too few requests, or over the CPU budget): the read-ahead road's
// revert or move alone.
func (c *Controller) decideReadAhead(rep *Report, in Input) {
	if c.raRevert(rep) {
		return
	}
	kib, move := c.ahead.target(c.Policy.ReadAhead, c.verify != nil, c.Current.ReadAheadKiB)
	if move == raNone {
		return
	}
	target := c.Current
	target.ReadAheadKiB = kib
	rep.Target, rep.Reason = &target, string(c.ahead.step.Decision.Reason)
	if !c.Policy.Apply {
		return
	}
	if rep.Held = c.raHold(move, in); rep.Held == HoldNone {
		c.ask(rep, Action{Kind: ActionApply, Setting: target, Reason: c.ahead.reason(c.Current.ReadAheadKiB)},
			effect{guard: c.Memo.Guard, ra: move})
	}
}

// raHold is what holds back a move of read-ahead: a move the road decided
// on its evidence, within the policy's bounds, is low risk
// (Gate.holdReadAhead); a move to the policy's bounds is the policy's
// change, rolled out as any other (Gate.Hold: the grant, minDwell).
func (c *Controller) raHold(move raMove, in Input) Hold {
	if move == raBounds {
		return in.Gate.Hold(c.Memo.LastChange, in.Now)
	}
	return in.Gate.holdReadAhead()
}

// raRevert asks for the revert of the last read-ahead change (rep.Action)
// when the road's verification measured a regression, and reports
// whether it did: it passes every gate, and Observe mode makes no action.
func (c *Controller) raRevert(rep *Report) bool {
	prev, why, ok := c.ahead.revert(c.Current)
	if !ok || !c.Policy.Apply {
		return false
	}
	c.ask(rep, Action{Kind: ActionRevert, Setting: prev, Reason: why}, effect{guard: c.Memo.Guard, ra: raReverted})
	rep.Target, rep.Reason = &prev, ReasonRegressionReverted
	return true
}

// Commit tells the controller that the device now has the setting of a
// (written at now): the action of the window just ended. A write of the
// scheduler starts minDwell, unless it put the original back: a dwell
// belongs to a setting in force.
func (c *Controller) Commit(a Action, now time.Time) {
	e := c.effectOf(a)
	c.asked = nil
	prev := c.Current
	c.Current, c.Memo.Guard = a.Setting, e.guard
	if a.Setting.Candidate.Name() != prev.Candidate.Name() {
		c.Memo.LastChange = now
		if a.Kind == ActionRevert && a.Setting.Candidate.Scheduler == c.originalSched && len(a.Setting.Candidate.Tunables) == 0 {
			c.Memo.LastChange = time.Time{}
		}
	}
	c.proposed = "" // decided against the setting it replaced
	switch {
	case e.ra == raReverted: // the scheduler's verification goes on
	case a.Kind == ActionRevert:
		c.verify = nil
	case e.verify != nil:
		c.verify = e.verify
	}
	c.showVerification(c.ahead.commit(e.ra, prev.ReadAheadKiB, now, c.raSettings(0)))
}

// effect is what an action the controller asked for does to the
// controller once the agent has written it (Commit): the thrash guard
// after it, the verification an applied switch starts, and what it does
// to read-ahead, for the road.
type effect struct {
	guard  decide.State
	verify *verification
	ra     raMove
}

// asked is the window's action and its effect, kept until the agent
// commits it or the next window ends.
type asked struct {
	action Action
	effect effect
}

// ask makes a the window's action (rep.Action) and keeps its effect for
// Commit.
func (c *Controller) ask(rep *Report, a Action, e effect) {
	rep.Action = a
	c.asked = &asked{action: a, effect: e}
}

// effectOf is the effect of a, the action the last window asked for; the
// zero effect for any other action.
func (c *Controller) effectOf(a Action) effect {
	if c.asked == nil || c.asked.action.Kind != a.Kind || !SameSetting(c.asked.action.Setting, a.Setting) {
		return effect{}
	}
	return c.asked.effect
}

// StartsVerification reports whether a, the action the last window asked
// for, starts a verification once written: a scheduler switch, or a
// change the read-ahead road decided.
func (c *Controller) StartsVerification(a Action) bool {
	e := c.effectOf(a)
	return e.verify != nil || e.ra == raDecided
}

// Resync tells the controller that the device has setting s, which the
// agent did not write (another writer): the window goes on from it, and a
// verification in progress is dropped (it measured another setting).
func (c *Controller) Resync(s Setting) {
	// The setting the agent had chosen counts as decided: a window that
	// decides to take it back (Reclaim) needs no confirmation.
	c.proposed = c.Current.Candidate.Name()
	c.Current, c.verify = s, nil
	c.ahead.road.Forget()
}

// simulatedTotal is the candidate's predicted measure in r (by rank, the
// policy's, with its scheduler's dispatch factor, without learned
// corrections: engine.Report.Predicted), ns; 0 when r has no such
// candidate.
func simulatedTotal(r engine.Report, rank engine.Rank, name string) int64 {
	for _, o := range r.Outcomes {
		if o.Candidate.Name() == name {
			return int64(r.Predicted(rank, o))
		}
	}
	return 0
}

// candidateByName is the candidate of r named name (zero: none).
func candidateByName(r engine.Report, name string) engine.Candidate {
	for _, o := range r.Outcomes {
		if o.Candidate.Name() == name {
			return o.Candidate
		}
	}
	return engine.Candidate{}
}

// Gate is what may hold back a change the controller decides: the
// policy's pause, the operator's grant, and spec.rollout.minDwell since
// the device's last change. It is an input to the decision; a regression
// revert passes it always.
type Gate struct {
	// Paused: the governing policy is paused (spec.paused).
	Paused bool
	// Granted: the change may be made now (the operator's grant; always
	// true for `shadowtune run`).
	Granted bool
	// MinDwell is the least time a setting is kept after a change
	// (spec.rollout.minDwell); 0 for none.
	MinDwell time.Duration
	// Yielded: another writer changed the device and the policy yields to
	// it (spec.otherWriters Yield).
	Yielded bool
}

// Hold says why the gate held back a decided change.
type Hold uint8

const (
	// HoldNone means nothing was held back.
	HoldNone Hold = iota
	// HoldPaused means the policy is paused.
	HoldPaused
	// HoldDwell means the last change is more recent than MinDwell.
	HoldDwell
	// HoldGrant means no grant allows the change.
	HoldGrant
	// HoldOtherWriter means another writer changed the device, and the agent
	// yields to it.
	HoldOtherWriter
)

// holdReadAhead returns why the gate holds back a move of read-ahead
// within the policy's bounds: only a paused policy or another writer the
// agent yields to. Such a move is low risk (DESIGN §6, gates by risk): it
// is made in the window that measured its evidence, not after minDwell,
// and needs no grant.
func (g Gate) holdReadAhead() Hold {
	switch {
	case g.Paused:
		return HoldPaused
	case g.Yielded:
		return HoldOtherWriter
	}
	return HoldNone
}

// Hold returns why the gate holds a change back at now, given the time of
// the device's last change (zero: never changed).
func (g Gate) Hold(lastChange, now time.Time) Hold {
	switch {
	case g.Paused:
		return HoldPaused
	case g.Yielded:
		return HoldOtherWriter
	case g.MinDwell > 0 && !lastChange.IsZero() && now.Sub(lastChange) < g.MinDwell:
		return HoldDwell
	case !g.Granted:
		return HoldGrant
	}
	return HoldNone
}
