// Package decide is shadowtune's switching rule, a pure function of the
// simulated totals of one window and the guard state carried from the
// previous check (DADS, JPDC 2014 §4.2; DESIGN §6 "Scheduler choice").
//
// Rule: switch from the current setting A to candidate B when
//
//	T_B + T_change < (1 − margin) · T_A
//
// where T is the total simulated service time of the window under that
// setting (both sides from the same simulator, never the real disk; DADS
// §4.1), T_change = pending requests × mean I/O time estimates the cost of
// the switch itself, and margin (default 5 %) absorbs model error.
//
// Thrash guard: when switches happen in GuardChanges (default 5)
// consecutive checks, the configured default setting is pinned; switching
// is re-enabled once QuietChecks (default 7) consecutive checks predicted
// no change.
//
// [Decide] evaluates a short ordered chain of checks, each of which either
// settles the decision with a [Reason] or passes to the next, in the style
// of cert-manager's certificate policy chain.
//
// Units: times are nanoseconds; percentages are 0–100.
package decide

import (
	"errors"
	"fmt"
	"math"
)

// Defaults (DADS §4.2).
const (
	// DefaultMarginPct is the required predicted improvement, in percent of
	// the current setting's total, after the switch cost.
	DefaultMarginPct = 5.0
	// DefaultGuardChanges is the number of changes in consecutive checks
	// that trips the thrash guard.
	DefaultGuardChanges = 5
	// DefaultQuietChecks is the number of consecutive checks predicting no
	// change that releases the guard.
	DefaultQuietChecks = 7
	// MaxMarginPct is the largest accepted margin.
	MaxMarginPct = 50.0
)

// Config holds the rule's parameters.
type Config struct {
	// MarginPct is the margin in percent, 0 ≤ MarginPct ≤ 50 (DADS: 5).
	MarginPct float64
	// GuardChanges is the number of consecutive checks with a change after
	// which the default is pinned, ≥ 1 (DADS: 5).
	GuardChanges int
	// QuietChecks is the number of consecutive checks predicting no change
	// after which a pin is released, ≥ 1 (DADS: 7).
	QuietChecks int
	// Default is the name of the setting pinned by the thrash guard: the
	// administrator's choice, not the kernel's default (DADS §4.2). It must
	// be one of the candidates of every check.
	Default string
	// MaxResponseRatio, when > 1, is how far the current setting's
	// simulated mean response time may be from the window's measured one
	// (Input.ResponseRatio, either way: within [1/r, r]) for a predicted
	// gain to be acted on; 0 disables the check (the papers' rule, and
	// traces without completion times).
	MaxResponseRatio float64
}

// DefaultConfig returns the DADS parameters with the given default setting.
func DefaultConfig(defaultSetting string) Config {
	return Config{
		MarginPct:    DefaultMarginPct,
		GuardChanges: DefaultGuardChanges,
		QuietChecks:  DefaultQuietChecks,
		Default:      defaultSetting,
	}
}

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	var errs []error
	if math.IsNaN(c.MarginPct) || c.MarginPct < 0 || c.MarginPct > MaxMarginPct {
		errs = append(errs, fmt.Errorf("margin must be between 0 and %g %%, got %v", MaxMarginPct, c.MarginPct))
	}
	if c.GuardChanges < 1 {
		errs = append(errs, fmt.Errorf("thrash-guard change count must be ≥ 1, got %d", c.GuardChanges))
	}
	if c.QuietChecks < 1 {
		errs = append(errs, fmt.Errorf("thrash-guard quiet check count must be ≥ 1, got %d", c.QuietChecks))
	}
	if c.Default == "" {
		errs = append(errs, errors.New("default setting must be named"))
	}
	if math.IsNaN(c.MaxResponseRatio) || c.MaxResponseRatio != 0 && c.MaxResponseRatio <= 1 {
		errs = append(errs, fmt.Errorf("response ratio bound must be 0 (off) or > 1, got %v", c.MaxResponseRatio))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("decide: invalid config: %w", err)
	}
	return nil
}

// Candidate is one simulated setting.
type Candidate struct {
	// Name identifies the setting (e.g. "mq-deadline/ra=128"); unique.
	Name string
	// TotalNs is the total simulated service time of the window, ns (≥ 0).
	TotalNs int64
}

// Input is what one check sees.
type Input struct {
	// Current is the setting in effect on the device; it must be among
	// Candidates (DADS simulates the current scheduler too: VD_RD).
	Current string
	// Candidates are the simulated settings, including Current and the
	// configured Default.
	Candidates []Candidate
	// Pending is the number of requests queued on the real device at the
	// time of the check (≥ 0).
	Pending int
	// MeanServiceNs is the mean I/O time per request, ns (≥ 0); with
	// Pending it gives T_change = Pending × MeanServiceNs (DADS §4.2).
	MeanServiceNs int64
	// ResponseRatio is the current setting's simulated mean response time
	// ÷ the mean response time measured on the device for the same
	// requests (arrival to completion); 0 when not measured. The
	// simulation of the setting in effect is the one prediction that can
	// be checked against the window as it ran: when it is off by more
	// than Config.MaxResponseRatio, the model does not reproduce the
	// device's queueing, and its predictions for other settings are not
	// trusted (ReasonNotReproduced).
	ResponseRatio float64
	// CounterfactualErrorPct is the device's counterfactual error that
	// holds now, percentage points: the mean absolute error of the
	// predicted time ratio of its verified changes against the measured
	// one (agent/counterfactual), while it exceeds the margin and its
	// hold lasts; 0 when none holds. While it exceeds Config.MarginPct
	// a predicted gain is not acted on (ReasonCounterfactualError): the
	// margin does not absorb an error larger than itself.
	CounterfactualErrorPct float64
}

// State is the thrash guard's memory, carried from one check to the next.
// The zero value is the initial state.
type State struct {
	// ConsecutiveChanges counts switches decided in consecutive checks; a
	// check that does not switch resets it. Zero while pinned.
	ConsecutiveChanges int
	// QuietChecks counts consecutive checks, while pinned, whose rule
	// predicted no change from the default.
	QuietChecks int
	// Pinned: the thrash guard holds the default setting.
	Pinned bool
}

// Reason says which check settled a decision. The values are CamelCase so
// they can be used as Kubernetes condition reasons.
type Reason string

// Reasons, in the order the chain tries them.
const (
	// ReasonNoCandidates: nothing was simulated; nothing changes and the
	// guard state is kept as it was.
	ReasonNoCandidates Reason = "NoCandidates"
	// ReasonPinned: the thrash guard holds the default. Switch is true
	// only when the device is not on the default (the pin is enforced).
	ReasonPinned Reason = "Pinned"
	// ReasonGuardReleased: this check was the QuietChecks-th in a row,
	// while pinned, to predict no change; switching is re-enabled from the
	// next check.
	ReasonGuardReleased Reason = "ThrashGuardReleased"
	// ReasonAlreadyBest: the current setting has the lowest total.
	ReasonAlreadyBest Reason = "AlreadyBest"
	// ReasonNotReproduced: a change is predicted, but the simulation of
	// the current setting did not reproduce the window's measured mean
	// response time within Config.MaxResponseRatio; no switch, and the
	// guard counts no change.
	ReasonNotReproduced Reason = "NotReproduced"
	// ReasonCounterfactualError: a change is predicted, but the device's
	// verified changes showed its predictions off by more than the
	// margin (Input.CounterfactualErrorPct); no switch, and the guard
	// counts no change.
	ReasonCounterfactualError Reason = "CounterfactualErrorAboveMargin"
	// ReasonBelowMargin: a candidate is faster but not by the margin once
	// the switch cost is added.
	ReasonBelowMargin Reason = "BelowMargin"
	// ReasonThrashGuardTripped: a change was predicted in the
	// GuardChanges-th consecutive check; the default is pinned instead.
	ReasonThrashGuardTripped Reason = "ThrashGuardTripped"
	// ReasonBetter: the best candidate beats the current setting by more
	// than the margin after the switch cost; switch to it.
	ReasonBetter Reason = "Better"
)

// Decision is the outcome of one check.
type Decision struct {
	// Switch: apply Target (which then differs from Input.Current).
	Switch bool
	// Target is the setting the device should have after this check: the
	// new setting when switching, else the current one.
	Target string
	// Reason is the check that settled the decision.
	Reason Reason
	// Message is a one-line human-readable explanation.
	Message string
	// ImprovementPct is the predicted improvement of Target over the
	// current setting including the switch cost,
	// 100·(T_A − T_target − T_change)/T_A; 0 when not switching, and
	// possibly negative when the thrash guard forces the default.
	ImprovementPct float64
	// Best is the candidate with the lowest total (ties: the current
	// setting, then the smallest name).
	Best string
	// BestImprovementPct is the same quantity for Best, whether or not it
	// was chosen (0 when Best is the current setting).
	BestImprovementPct float64
	// CurrentNs, BestNs and SwitchCostNs are T_A, T_Best and T_change, ns.
	CurrentNs, BestNs, SwitchCostNs int64
}

// Input errors.
var (
	// ErrCurrentNotSimulated: Input.Current is not among the candidates.
	// Every check must simulate the current setting, so that both sides of
	// the comparison come from the same model (DADS §4.1).
	ErrCurrentNotSimulated = errors.New("decide: current setting not among the candidates")
	// ErrDefaultNotSimulated: Config.Default is not among the candidates,
	// so the guard could not judge it.
	ErrDefaultNotSimulated = errors.New("decide: default setting not among the candidates")
	// ErrBadInput: a malformed input (empty or duplicate name, negative
	// time or count).
	ErrBadInput = errors.New("decide: bad input")
)

// eval is the working data of one check, shared by the chain's links.
type eval struct {
	in     Input
	cfg    Config
	st     State
	cur    int64 // T_A
	def    int64 // T_default
	best   Candidate
	cost   int64 // T_change
	byName map[string]int64
}

// link is one check of the chain: it settles the decision (ok) or passes.
type link func(e *eval) (d Decision, next State, ok bool)

// chain is the order in which checks run; the last link always settles.
var chain = []link{noCandidates, pinned, alreadyBest, belowMargin, notReproduced, counterfactualError, thrashGuard, better}

// Decide runs one check. It returns an error, and the unchanged state, for
// an invalid config or malformed input; otherwise the decision and the
// guard state to pass to the next check.
//
// Precise behaviour:
//   - No candidates: no switch, ReasonNoCandidates, state unchanged.
//   - Current (or Default) not among the candidates: ErrCurrentNotSimulated
//     (ErrDefaultNotSimulated).
//   - Best is the lowest total; on equal totals the current setting wins,
//     then the smaller name, so the result is deterministic and a tie never
//     looks like a reason to move.
//   - Not pinned: AlreadyBest and BelowMargin do not switch and reset
//     ConsecutiveChanges. Otherwise a change is predicted. If the current
//     setting's simulated mean response time is off the measured one by more
//     than MaxResponseRatio (either way), NotReproduced: no switch, and
//     ConsecutiveChanges is reset as for no change; likewise
//     CounterfactualError when Input.CounterfactualErrorPct exceeds the
//     margin. Else, if it would be the
//     GuardChanges-th change in consecutive checks, the guard trips instead:
//     Target = Default (a switch only if the device is not on it already),
//     Pinned = true. Else the switch to Best is made (ReasonBetter) and
//     ConsecutiveChanges grows by one.
//   - Pinned: the rule is still evaluated, as if the device were on the
//     default. A predicted change resets QuietChecks; no predicted change
//     increments it, and at QuietChecks the pin is released (state back to
//     zero, ReasonGuardReleased). Either way Target = Default, switching
//     only if the device is not on it.
func Decide(in Input, cfg Config, st State) (Decision, State, error) {
	if err := cfg.Validate(); err != nil {
		return Decision{}, st, err
	}
	e := &eval{in: in, cfg: cfg, st: st}
	if err := e.prepare(); err != nil {
		return Decision{}, st, err
	}
	for _, l := range chain {
		if d, next, ok := l(e); ok {
			d.Best = e.best.Name
			d.BestImprovementPct = e.improvement(e.best.Name, e.best.TotalNs)
			d.CurrentNs, d.BestNs, d.SwitchCostNs = e.cur, e.best.TotalNs, e.cost
			return d, next, nil
		}
	}
	panic("decide: chain did not settle") // unreachable: better always settles
}

// prepare validates the input and fills the derived fields.
func (e *eval) prepare() error {
	in := e.in
	if in.Pending < 0 || in.MeanServiceNs < 0 {
		return fmt.Errorf("%w: pending %d and mean service time %d ns must be ≥ 0", ErrBadInput, in.Pending, in.MeanServiceNs)
	}
	if math.IsNaN(in.ResponseRatio) || math.IsInf(in.ResponseRatio, 0) || in.ResponseRatio < 0 {
		return fmt.Errorf("%w: response ratio %v must be a finite number ≥ 0", ErrBadInput, in.ResponseRatio)
	}
	if !(in.CounterfactualErrorPct >= 0) || math.IsInf(in.CounterfactualErrorPct, 0) {
		return fmt.Errorf("%w: counterfactual error %v must be a finite number ≥ 0", ErrBadInput, in.CounterfactualErrorPct)
	}
	if len(in.Candidates) == 0 {
		return nil
	}
	e.byName = make(map[string]int64, len(in.Candidates))
	for i, c := range in.Candidates {
		switch _, dup := e.byName[c.Name]; {
		case c.Name == "":
			return fmt.Errorf("%w: candidate %d has no name", ErrBadInput, i)
		case dup:
			return fmt.Errorf("%w: candidate %q appears twice", ErrBadInput, c.Name)
		case c.TotalNs < 0:
			return fmt.Errorf("%w: candidate %q has negative total %d ns", ErrBadInput, c.Name, c.TotalNs)
		}
		e.byName[c.Name] = c.TotalNs
	}
	var ok bool
	if e.cur, ok = e.byName[in.Current]; !ok {
		return fmt.Errorf("%w: %q", ErrCurrentNotSimulated, in.Current)
	}
	if e.def, ok = e.byName[e.cfg.Default]; !ok {
		return fmt.Errorf("%w: %q", ErrDefaultNotSimulated, e.cfg.Default)
	}
	// Start from the current setting so that it wins ties; a non-current
	// candidate only replaces it with a strictly lower total, so the
	// current setting can never tie with a later best.
	e.best = Candidate{Name: in.Current, TotalNs: e.cur}
	for _, c := range in.Candidates {
		if c.TotalNs < e.best.TotalNs || c.TotalNs == e.best.TotalNs && e.best.Name != in.Current && c.Name < e.best.Name {
			e.best = c
		}
	}
	e.cost = satMul(int64(in.Pending), in.MeanServiceNs)
	return nil
}

// satMul returns a·b for a, b ≥ 0, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// improvement returns 100·(T_A − T − T_change)/T_A for moving from the
// current setting to the one named, or 0 for the current setting itself or
// when T_A is 0.
func (e *eval) improvement(name string, total int64) float64 {
	if name == e.in.Current || e.cur == 0 {
		return 0
	}
	return 100 * (float64(e.cur) - float64(total) - float64(e.cost)) / float64(e.cur)
}

// wouldSwitch reports whether the rule T_B + T_change < (1 − m)·T_A holds
// from a setting with total from to the best candidate (never from a
// setting to itself; the caller ensures best ≠ from).
//
// It is evaluated as 100·(T_B + T_change) < (100 − margin)·T_A, which is
// exact in float64 for whole-percent margins and totals below 2^53/100 ns
// (about 25 hours), so a candidate exactly at the margin never switches.
func (e *eval) wouldSwitch(from int64) bool {
	lhs := 100 * (float64(e.best.TotalNs) + float64(e.cost))
	return lhs < (100-e.cfg.MarginPct)*float64(from)
}

// predictsChange reports whether the rule, applied from the named setting,
// predicts a change.
func (e *eval) predictsChange(from string, fromTotal int64) bool {
	// Best on ties prefers the current setting; from another setting a tie
	// with best is not an improvement either, and wouldSwitch is false
	// whenever best's total is not below from's.
	return e.best.Name != from && e.wouldSwitch(fromTotal)
}

// noCandidates settles when nothing was simulated: no switch, and the guard
// state is kept, since no prediction was made.
func noCandidates(e *eval) (Decision, State, bool) {
	if len(e.in.Candidates) != 0 {
		return Decision{}, State{}, false
	}
	return Decision{
		Target:  e.in.Current,
		Reason:  ReasonNoCandidates,
		Message: "no candidate was simulated",
	}, e.st, true
}

// pinned handles a check while the thrash guard holds the default.
func pinned(e *eval) (Decision, State, bool) {
	if !e.st.Pinned {
		return Decision{}, State{}, false
	}
	def := e.cfg.Default
	d := Decision{Target: def, Switch: e.in.Current != def}
	if d.Switch {
		d.ImprovementPct = e.improvement(def, e.def)
	}
	if e.predictsChange(def, e.def) {
		d.Reason = ReasonPinned
		d.Message = fmt.Sprintf("thrash guard holds %q; %q predicted %.1f%% faster, quiet checks reset to 0 of %d",
			def, e.best.Name, pct(e.best.TotalNs+e.cost, e.def), e.cfg.QuietChecks)
		return d, State{Pinned: true}, true
	}
	quiet := e.st.QuietChecks + 1
	if quiet >= e.cfg.QuietChecks {
		d.Reason = ReasonGuardReleased
		d.Message = fmt.Sprintf("%d consecutive checks predicted no change from %q; switching re-enabled", quiet, def)
		return d, State{}, true
	}
	d.Reason = ReasonPinned
	d.Message = fmt.Sprintf("thrash guard holds %q; %d of %d quiet checks", def, quiet, e.cfg.QuietChecks)
	return d, State{Pinned: true, QuietChecks: quiet}, true
}

// pct returns by how many percent t is below ref.
func pct(t, ref int64) float64 {
	if ref == 0 {
		return 0
	}
	return 100 * (float64(ref) - float64(t)) / float64(ref)
}

// alreadyBest settles when the current setting has the lowest total.
func alreadyBest(e *eval) (Decision, State, bool) {
	if e.best.Name != e.in.Current {
		return Decision{}, State{}, false
	}
	return Decision{
		Target:  e.in.Current,
		Reason:  ReasonAlreadyBest,
		Message: fmt.Sprintf("%q has the lowest simulated total", e.in.Current),
	}, State{}, true
}

// belowMargin settles when the best candidate is not better by the margin.
func belowMargin(e *eval) (Decision, State, bool) {
	if e.wouldSwitch(e.cur) {
		return Decision{}, State{}, false
	}
	return Decision{
		Target: e.in.Current,
		Reason: ReasonBelowMargin,
		Message: fmt.Sprintf("%q predicted %.2f%% faster than %q including switch cost, margin %g%%",
			e.best.Name, e.improvement(e.best.Name, e.best.TotalNs), e.in.Current, e.cfg.MarginPct),
	}, State{}, true
}

// notReproduced settles when a change is predicted from a simulation whose
// current setting is off the measured mean response time by more than
// Config.MaxResponseRatio either way.
func notReproduced(e *eval) (Decision, State, bool) {
	r, limit := e.in.ResponseRatio, e.cfg.MaxResponseRatio
	if limit == 0 || r <= 0 || r <= limit && r >= 1/limit {
		return Decision{}, State{}, false
	}
	return Decision{
		Target: e.in.Current,
		Reason: ReasonNotReproduced,
		Message: fmt.Sprintf("%q predicted %.1f%% faster, but the simulated mean response time of %q is %.2f× the measured one (trusted within %g×)",
			e.best.Name, e.improvement(e.best.Name, e.best.TotalNs), e.in.Current, r, limit),
	}, State{}, true
}

// counterfactualError settles when a change is predicted on a device
// whose verified changes showed its predictions off by more than the
// margin.
func counterfactualError(e *eval) (Decision, State, bool) {
	if ce := e.in.CounterfactualErrorPct; ce <= e.cfg.MarginPct {
		return Decision{}, State{}, false
	}
	return Decision{
		Target: e.in.Current,
		Reason: ReasonCounterfactualError,
		Message: fmt.Sprintf("%q predicted %.1f%% faster, but this device's verified changes were predicted %.1f points off on average (trusted within the %g%% margin)",
			e.best.Name, e.improvement(e.best.Name, e.best.TotalNs), e.in.CounterfactualErrorPct, e.cfg.MarginPct),
	}, State{}, true
}

// thrashGuard trips when this would be the GuardChanges-th change in
// consecutive checks.
func thrashGuard(e *eval) (Decision, State, bool) {
	if e.st.ConsecutiveChanges+1 < e.cfg.GuardChanges {
		return Decision{}, State{}, false
	}
	def := e.cfg.Default
	d := Decision{
		Target: def,
		Switch: e.in.Current != def,
		Reason: ReasonThrashGuardTripped,
		Message: fmt.Sprintf("change predicted in %d consecutive checks; pinning default %q",
			e.st.ConsecutiveChanges+1, def),
	}
	if d.Switch {
		d.ImprovementPct = e.improvement(def, e.def)
	}
	return d, State{Pinned: true}, true
}

// better switches to the best candidate.
func better(e *eval) (Decision, State, bool) {
	imp := e.improvement(e.best.Name, e.best.TotalNs)
	return Decision{
		Switch:         true,
		Target:         e.best.Name,
		Reason:         ReasonBetter,
		ImprovementPct: imp,
		Message: fmt.Sprintf("%q predicted %.2f%% faster than %q including switch cost, margin %g%%",
			e.best.Name, imp, e.in.Current, e.cfg.MarginPct),
	}, State{ConsecutiveChanges: e.st.ConsecutiveChanges + 1}, true
}
