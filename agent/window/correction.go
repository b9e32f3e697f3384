package window

// The device's memo (Memo): what its state directory keeps of the
// controller, and what it learns from verification (issue 14 item 5):
// each verified scheduler switch measures how far the model was off for
// the candidate it switched to, relative to its error on the setting it
// replaced; that ratio becomes the candidate's correction, by which the
// decision multiplies its predicted measure from then on
// (engine.Options.Corrections). A candidate that proved slower than
// predicted stops being predicted to win on the same kind of window.
// Corrections are kept in the memo, so they hold across restarts. Each
// verified switch also counts in the device's counterfactual error
// (checkCounterfactual).

import (
	"math"
	"time"

	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/internal/decide"
)

// Memo is the part of a controller's state that the device keeps in its
// memo in the state directory (actuate.DeviceMemo), so that it holds
// across restarts, and carries to a new controller of the same disk.
type Memo struct {
	// LastChange is the agent's last write of the device's scheduler in
	// force (zero when the original is back): spec.rollout.minDwell holds
	// the next switch until then + minDwell.
	LastChange time.Time
	// Guard is the thrash guard's state (DADS §4.2).
	Guard decide.State
	// Backoff maps a candidate name to the time before which a switch to
	// it, which regressed, is not retried.
	Backoff map[string]time.Time
	// Corrections are the learned factors by which a candidate's measure
	// is multiplied in the decision (engine.Options.Corrections), from
	// verified switches (learnCorrection), by candidate name, within
	// [CorrectionMin, CorrectionMax].
	Corrections map[string]float64
	// Counterfactual is the device's counterfactual error over its
	// verified switches (agent/counterfactual).
	Counterfactual counterfactual.Record
}

// Bounds and weight of a learned correction.
const (
	// CorrectionMin is the smallest correction factor.
	CorrectionMin = 0.25
	// CorrectionMax is the largest correction factor.
	CorrectionMax = 4.0
	// CorrectionWeight is the weight of a new verification against the
	// correction learned before (an exponential average of the ratios'
	// logarithms); the first verification of a candidate sets it.
	CorrectionWeight = 0.5
)

// verificationResult is the outcome of the last verification, for the
// status: BaselineNs is what the previous setting would have taken
// (simulated × the model's bias, or measured before a read-ahead change),
// PredictedNs what the new one was predicted to take (0: not predicted),
// MeasuredNs what it took, in Unit.
type verificationResult struct {
	What                                string
	BaselineNs, PredictedNs, MeasuredNs float64
	Unit, Outcome                       string
}

// learnCorrection updates the correction of v's target from the finished
// verification v: measured ÷ predicted (the target's simulated measure ×
// the bias the model had on the previous setting). It reports whether it
// learned one.
func (m *Memo) learnCorrection(v *verification) bool {
	if v.targetNs <= 0 || v.realNs <= 0 {
		return false
	}
	name := v.target.Candidate.Name()
	r := float64(v.realNs) / v.targetNs
	if old, ok := m.Corrections[name]; ok && old > 0 {
		r = math.Exp((1-CorrectionWeight)*math.Log(old) + CorrectionWeight*math.Log(r))
	}
	m.Corrections[name] = min(max(r, CorrectionMin), CorrectionMax)
	return true
}

// correctionOf is the learned correction of s's candidate (1: none).
func (m *Memo) correctionOf(s Setting) float64 {
	if f, ok := m.Corrections[s.Candidate.Name()]; ok && f > 0 {
		return f
	}
	return 1
}

// checkCounterfactual counts the finished verification v, at now, in the
// device's counterfactual error: the ratio the decision predicted
// (target over previous, corrected as the decision compared them)
// against the measured one (the real measure over the previous
// setting's simulated one × bias), with the policy's margin (marginPct).
// It reports whether it counted it.
func (m *Memo) checkCounterfactual(v *verification, now time.Time, marginPct float64) bool {
	corrected := v.corrected
	if corrected <= 0 {
		corrected = 1
	}
	if chk, ok := counterfactual.NewCheck(v.prevNs, v.targetNs*corrected, float64(v.realNs)); ok {
		m.Counterfactual.Add(chk, now, marginPct)
		return true
	}
	return false
}
