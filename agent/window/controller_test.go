package window

import (
	"math"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/window/windowtest"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

const gib = uint64(1) << 21

func testPolicy(apply bool) Policy {
	cands := []engine.Candidate{{Scheduler: "none"}, {Scheduler: "mq-deadline"}, {Scheduler: "bfq"}, {Scheduler: "kyber"}}
	return Policy{
		Apply:      apply,
		Candidates: cands,
		Decide:     decide.DefaultConfig("none"),
		// spec.rollout.toleratedRegressionPercent's default.
		ToleratedRegressionPct: 5,
	}
}

// step feeds reqs to the controller as one window ending at now, under an
// open gate, and commits the action it asks for, as the agent does once
// the device has taken the write.
func step(c *Controller, reqs []trace.Request, now time.Time) (Report, error) {
	c.Add(reqs)
	rep, err := c.EndWindow(Input{Now: now, Gate: Gate{Granted: true}})
	if err == nil && rep.Action.Kind != ActionNone {
		c.Commit(rep.Action, now)
	}
	return rep, err
}

// stepConfirmed runs reqs as a window, which must decide a switch by its
// gain and hold it for confirmation (confirmSwitch), then the same
// requests again, shifted to follow them, as the next window (a second
// later), which confirms the switch: the second window's report.
func stepConfirmed(t *testing.T, c *Controller, reqs []trace.Request, now time.Time) (Report, error) {
	t.Helper()
	rep, err := step(c, reqs, now)
	if err != nil {
		return rep, err
	}
	if rep.Reason != ReasonAwaitingConfirmation || rep.Action.Kind != ActionNone {
		t.Fatalf("first window: reason %q, action %+v; want a switch held for confirmation", rep.Reason, rep.Action)
	}
	next := shifted(reqs, reqs[0].Arrival+reqs[len(reqs)-1].Complete+1e6)
	return step(c, next, now.Add(time.Second))
}

func newTestController(t *testing.T, apply bool) *Controller {
	t.Helper()
	c, err := New("sdz", model.Default(model.HDD, 100*gib), Setting{Candidate: engine.Candidate{Scheduler: "none"}}, testPolicy(apply))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestObserveModeNeverActs(t *testing.T) {
	c := newTestController(t, false)
	now := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		rep, err := step(c, windowtest.FIFOWindow(uint64(i), 2000, 4, 4, int64(i)*10e9, 1), now)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Action.Kind != ActionNone {
			t.Fatalf("window %d: observe mode asked for %v", i, rep.Action)
		}
		if rep.Report == nil || len(rep.Report.Outcomes) != 4 {
			t.Fatalf("window %d: report %+v", i, rep.Report)
		}
		if !rep.Report.Decision.Switch {
			t.Fatalf("window %d: a deep random queue on an HDD under none should predict a switch: %s", i, rep.Report.Decision.Message)
		}
	}
}

func TestApplySwitchesAndKeepsAVerifiedChange(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	rep, err := stepConfirmed(t, c, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1), now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind != ActionApply || rep.Action.Setting.Candidate.Scheduler == "none" {
		t.Fatalf("action %+v, want a switch away from none", rep.Action)
	}
	target := rep.Action.Setting.Candidate.Name()
	if rep.Verifying != 2 {
		t.Fatalf("verifying %d windows, want 2", rep.Verifying)
	}
	// Reality follows the model: the next windows are as fast as predicted
	// (a sorted queue), so no revert. Their real times come from the
	// simulated target itself: record them as the model predicts.
	for i := 2; i < 4; i++ {
		w := windowtest.FIFOWindow(uint64(i), 2000, 4, 4, int64(i)*10e9, 0.6)
		rep, err = step(c, w, now.Add(time.Duration(i)*5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Action.Kind == ActionRevert {
			t.Fatalf("window %d: reverted a change that did not regress: %s", i, rep.Action.Reason)
		}
	}
	if c.Current.Candidate.Name() != target || c.verify != nil {
		t.Fatalf("current %s, verify %+v", c.Current.Candidate.Name(), c.verify)
	}
}

func TestRegressionRevertsAndBacksOff(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	rep, err := stepConfirmed(t, c, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1), now)
	if err != nil || rep.Action.Kind != ActionApply {
		t.Fatalf("first window: %v %+v", err, rep.Action)
	}
	target := rep.Action.Setting.Candidate.Name()
	// The real device got much slower after the change.
	var last Report
	for i := 2; i < 4; i++ {
		last, err = step(c, windowtest.FIFOWindow(uint64(i), 2000, 4, 4, int64(i)*10e9, 3), now.Add(time.Duration(i)*5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
	}
	if last.Action.Kind != ActionRevert || last.Action.Setting.Candidate.Scheduler != "none" {
		t.Fatalf("action %+v, want a revert to none", last.Action)
	}
	if c.Current.Candidate.Scheduler != "none" {
		t.Fatalf("current %s after revert", c.Current.Candidate.Name())
	}
	// The same switch is not retried during the back-off.
	rep, err = step(c, windowtest.FIFOWindow(9, 2000, 4, 4, 90e9, 1), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind == ActionApply && rep.Action.Setting.Candidate.Name() == target {
		t.Fatalf("retried %s during the back-off", target)
	}
}

func TestIdleWindowIsSkipped(t *testing.T) {
	c := newTestController(t, true)
	rep, err := step(c, windowtest.FIFOWindow(1, 20, 1, 1, 0, 1), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped == "" || rep.Report != nil || rep.Action.Kind != ActionNone {
		t.Fatalf("idle window: %+v", rep)
	}
}

func TestModelErrorIsMeasured(t *testing.T) {
	c := newTestController(t, false)
	// The first window teaches the model; the second, from the same
	// device, must be predicted within a few per cent.
	if _, err := step(c, windowtest.FIFOWindow(1, 3000, 4, 4, 0, 1), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	rep, err := step(c, windowtest.FIFOWindow(2, 3000, 4, 4, 20e9, 1), time.Unix(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelErrorPct > 5 {
		t.Fatalf("model error %.2f %% on a device that follows the model", rep.ModelErrorPct)
	}
	// A device twice as slow as learned shows as a large error.
	rep, err = step(c, windowtest.FIFOWindow(3, 1000, 4, 4, 40e9, 2), time.Unix(20, 0))
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelErrorPct < 30 {
		t.Fatalf("model error %.2f %% on a device twice as slow as learned", rep.ModelErrorPct)
	}
}

func TestRotationalFlagCorrectedByMeasurement(t *testing.T) {
	// A device that sysfs calls rotational but whose random reads take
	// ~80 µs (a virtio or cloud volume) is re-modelled as an SSD, after
	// which the model follows it.
	c := newTestController(t, false)
	if _, err := step(c, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 0.01), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if c.learn.model.Class() != model.SSD || c.learn.note == "" {
		t.Fatalf("class %s, note %q: want ssd", c.learn.model.Class(), c.learn.note)
	}
	rep, err := step(c, windowtest.FIFOWindow(2, 2000, 4, 4, 20e9, 0.01), time.Unix(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelErrorPct > 10 {
		t.Fatalf("model error %.1f %% after recalibration", rep.ModelErrorPct)
	}
	// A real HDD stays an HDD.
	h := newTestController(t, false)
	if _, err := step(h, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if h.learn.model.Class() != model.HDD {
		t.Fatalf("a seek-bound device was re-modelled as %s", h.learn.model.Class())
	}
}

func TestBusyWindowIsSimulatedOverItsNewestSlice(t *testing.T) {
	c := newTestController(t, true)
	c.Policy.MaxSimulated = 500
	rep, err := step(c, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 2000 || rep.Report == nil || rep.Report.Requests != 500 {
		t.Fatalf("window of %d requests simulated over %v, want the newest 500", rep.Requests, rep.Report)
	}
	// Verification compares like with like: a device that really is as
	// fast as predicted is not reverted even though only a slice is
	// simulated.
	for i := 2; i < 4; i++ {
		rep, err = step(c, windowtest.FIFOWindow(uint64(i), 2000, 4, 4, int64(i)*10e9, 0.6), time.Unix(int64(i)*5, 0))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Action.Kind == ActionRevert {
			t.Fatalf("window %d: reverted: %s", i, rep.Action.Reason)
		}
	}
}

// TestSettledWindowIsScreened: a busy window is first evaluated over its
// newest Policy.ScreenRequests; that pass stands only when the setting is
// settled, and a window near a switch is evaluated over the whole slice.
func TestSettledWindowIsScreened(t *testing.T) {
	win := windowtest.FIFOWindow(1, 3000, 4, 4, 0, 1)
	screening := func(t *testing.T, current string, screen int) Report {
		t.Helper()
		p := testPolicy(false)
		p.MaxSimulated, p.ScreenRequests = 2000, screen
		c, err := New("sdz", model.Default(model.HDD, 100*gib), Setting{Candidate: engine.Candidate{Scheduler: current}}, p)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := step(c, win, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Report == nil {
			t.Fatalf("window not evaluated: %s", rep.Skipped)
		}
		return rep
	}
	// none leaves a seek-bound load unsorted: a switch is near, so the
	// screening pass does not stand.
	rep := screening(t, "none", 500)
	if rep.Screened || rep.Report.Requests != 2000 || !rep.Report.Decision.Switch {
		t.Fatalf("on none: screened %v over %d requests, switch %v; want the whole 2000 and a switch",
			rep.Screened, rep.Report.Requests, rep.Report.Decision.Switch)
	}
	best := rep.Report.Decision.Target
	var real int64
	for _, r := range win[len(win)-500:] {
		real += r.ServiceTime()
	}
	// On the best setting the load is settled: the pass over the newest
	// 500 is the window's evaluation, and its measured side is theirs.
	rep = screening(t, best, 500)
	if !rep.Screened || rep.Report.Requests != 500 || rep.SimulatedRealNs != real || rep.Report.Decision.Switch {
		t.Fatalf("on %s: screened %v over %d requests (measured %d ns, want %d), switch %v; want the newest 500 and no switch",
			best, rep.Screened, rep.Report.Requests, rep.SimulatedRealNs, real, rep.Report.Decision.Switch)
	}
	// Without screening the same window is simulated whole.
	if rep = screening(t, best, -1); rep.Screened || rep.Report.Requests != 2000 {
		t.Fatalf("screening off: screened %v over %d requests, want the whole 2000", rep.Screened, rep.Report.Requests)
	}
}

// TestFirstWindowSetsBias: the model's real ÷ simulated ratio is set by the
// first window that measures it, then averaged, so that a model whose
// simulated wait is far from the real one (a deep queue on a fast device:
// 7 s measured against 141 s simulated in `make quickstart`) does not
// scale the first verification's baseline by that error.
func TestFirstWindowSetsBias(t *testing.T) {
	c := newTestController(t, false)
	c.learn.learnBias(7_000, 0) // nothing simulated: no measurement
	if c.learn.biasKnown || c.learn.bias != 1 {
		t.Fatalf("bias %.3f known %v before any measurement", c.learn.bias, c.learn.biasKnown)
	}
	c.learn.learnBias(7_000, 140_000)
	if !c.learn.biasKnown || math.Abs(c.learn.bias-0.05) > 1e-9 {
		t.Fatalf("bias %.4f after the first window, want 0.05", c.learn.bias)
	}
	c.learn.learnBias(10_000, 100_000)
	if want := 0.7*0.05 + 0.3*0.1; math.Abs(c.learn.bias-want) > 1e-9 {
		t.Fatalf("bias %.4f after the second window, want %.4f", c.learn.bias, want)
	}
}

// TestConfirmSwitch: a switch by its gain is made when the window before
// decided the same one; a thrash-guard switch at once; a window that
// decides no switch or another target starts over.
func TestConfirmSwitch(t *testing.T) {
	better := func(to string) decide.Decision {
		return decide.Decision{Switch: true, Target: to, Reason: decide.ReasonBetter}
	}
	stay := decide.Decision{Reason: decide.ReasonBelowMargin}
	pin := decide.Decision{Switch: true, Target: "mq-deadline", Reason: decide.ReasonPinned}
	for _, tc := range []struct {
		name string
		seq  []decide.Decision
		want []bool // confirmSwitch of each switch decision; a no-switch window resets (as decideWindow does)
	}{
		{"two windows agree", []decide.Decision{better("bfq"), better("bfq")}, []bool{false, true}},
		{"stays confirmed while the windows agree", []decide.Decision{better("bfq"), better("bfq"), better("bfq")}, []bool{false, true, true}},
		{"another target starts over", []decide.Decision{better("bfq"), better("kyber"), better("kyber")}, []bool{false, false, true}},
		{"a window without a switch starts over", []decide.Decision{better("bfq"), stay, better("bfq")}, []bool{false, false, false}},
		{"the thrash guard's pin at once", []decide.Decision{pin}, []bool{true}},
	} {
		c := &Controller{}
		for i, d := range tc.seq {
			got := false
			if d.Switch {
				got = c.confirmSwitch(d)
			} else {
				c.proposed = ""
			}
			if got != tc.want[i] {
				t.Errorf("%s: window %d (%s → %q): confirmed %v, want %v", tc.name, i, d.Reason, d.Target, got, tc.want[i])
			}
		}
	}
}

// TestCorrectionAfterRefutedSwitch: a switch that measured slower than
// predicted leaves a correction > 1 for its target, large enough that the
// same window no longer predicts a gain for it.
// switchMeasured makes the controller switch on window w at now
// (stepConfirmed), then runs the two windows that verify the switch,
// their real times scale times the model's: the switch's target and the
// time of the window that ended its verification.
func switchMeasured(t *testing.T, c *Controller, w []trace.Request, now time.Time, scale float64) (string, time.Time) {
	t.Helper()
	rep, err := stepConfirmed(t, c, w, now)
	if err != nil || rep.Action.Kind != ActionApply {
		t.Fatalf("first window: %v %+v", err, rep.Action)
	}
	var at time.Time
	for i := 2; i < 4; i++ {
		at = now.Add(time.Duration(i) * 5 * time.Second)
		if _, err := step(c, windowtest.FIFOWindow(uint64(i), 2000, 4, 4, int64(i)*10e9, scale), at); err != nil {
			t.Fatal(err)
		}
	}
	return rep.Action.Setting.Candidate.Name(), at
}

func TestCorrectionAfterRefutedSwitch(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	w := windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1)
	target, _ := switchMeasured(t, c, w, now, 3)
	f := c.Memo.Corrections[target]
	if f <= 1 {
		t.Fatalf("correction of %s = %.2f after a refuted switch, want > 1 (all: %v)", target, f, c.Memo.Corrections)
	}
	// Past its back-off, the same window no longer predicts a gain for it.
	c.Memo.Backoff = map[string]time.Time{}
	rep, err := step(c, w, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind == ActionApply && rep.Action.Setting.Candidate.Name() == target {
		t.Fatalf("switched to %s again despite its correction %.2f: %s", target, f, rep.Action.Reason)
	}
}

// TestCandidatesAlikeSimulatedLess: after a full evaluation in which every
// candidate simulated alike, the next windows simulate the current
// setting alone, for a span that doubles with each such evaluation, up to
// minDwell; a full evaluation that tells them apart ends it.
func TestCandidatesAlikeSimulatedLess(t *testing.T) {
	var a alike
	now := time.Unix(1000, 0)
	same := engine.Report{Current: "none", Outcomes: []engine.Outcome{
		{Candidate: engine.Candidate{Scheduler: "none"}}, {Candidate: engine.Candidate{Scheduler: "kyber"}}}}
	a.observe(same, engine.RankWait, now, 10*time.Minute) // no window length yet
	if a.narrowed(now.Add(5 * time.Second)) {
		t.Fatal("narrowed before a window's length is known")
	}
	var spans []time.Duration
	for i := 1; i <= 9; i++ {
		now = now.Add(5 * time.Second)
		a.observe(same, engine.RankWait, now, time.Minute)
		spans = append(spans, a.until.Sub(now))
		if !a.narrowed(now.Add(5*time.Second)) || a.narrowed(now.Add(spans[i-1]+time.Second)) {
			t.Fatalf("evaluation %d: not narrowed for the next window, or beyond its span %v", i, spans[i-1])
		}
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute}
	for i, w := range want {
		if spans[i] != w {
			t.Errorf("span %d = %v, want %v (all %v)", i, spans[i], w, spans)
		}
	}
	apart := same
	apart.Outcomes = []engine.Outcome{same.Outcomes[0], {Candidate: engine.Candidate{Scheduler: "kyber"}, Result: sim.Result{WaitNs: 5}}}
	now = now.Add(5 * time.Second)
	a.observe(apart, engine.RankWait, now, time.Minute)
	if a.narrowed(now.Add(time.Second)) || a.run != 0 {
		t.Errorf("candidates told apart: still narrowed (run %d)", a.run)
	}
}

// TestPredictedForTheCounterfactual: the counters' measure of each
// candidate is its simulated measure with its learned correction; in a
// window that simulated the current setting alone, every other candidate
// of the policy counts as the current setting's measure, with its own
// correction.
func TestPredictedForTheCounterfactual(t *testing.T) {
	c := newTestController(t, false)
	c.Memo.Corrections = map[string]float64{"kyber": 1.5}
	full := engine.Report{Current: "none", Outcomes: []engine.Outcome{
		{Candidate: engine.Candidate{Scheduler: "none"}, Result: sim.Result{WaitNs: 100, TotalServiceNs: 100}},
		{Candidate: engine.Candidate{Scheduler: "kyber"}, Result: sim.Result{WaitNs: 200, TotalServiceNs: 200}}}}
	c.Policy.Engine.Rank = engine.RankWait
	got := c.Predicted(full)
	if got["none"] != 100 || got["kyber"] != 300 {
		t.Errorf("full window: %v, want none 100 and kyber 200 × 1.5", got)
	}
	if _, ok := got["mq-deadline"]; ok {
		t.Errorf("full window: a candidate not simulated was predicted: %v", got)
	}
	c.narrow = true
	alone := engine.Report{Current: "none", Outcomes: full.Outcomes[:1]}
	got = c.Predicted(alone)
	if len(got) != len(c.Policy.Candidates) {
		t.Fatalf("narrowed window: %v, want every one of the policy's %d candidates", got, len(c.Policy.Candidates))
	}
	if got["kyber"] != 150 || got["none"] != 100 {
		t.Errorf("narrowed window: %v, want kyber as none's 100 × its 1.5, none 100", got)
	}
}

// TestCounterfactualErrorHoldsSwitches: a switch measured three times
// slower than predicted counts one check far beyond the margin; while its
// hold lasts (the back-off after the check), a window that predicts a gain
// does not switch, and says why; past it, the switch is made again.
func TestCounterfactualErrorHoldsSwitches(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	w := windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1)
	_, checked := switchMeasured(t, c, w, now, 3)
	r := c.Memo.Counterfactual
	if r.Checks != 1 || !r.At.Equal(checked) {
		t.Fatalf("record %+v, want one check at %v", r, checked)
	}
	if r.Last.Predicted >= 1 || r.Last.Measured <= 1+c.Policy.Decide.MarginPct/100 || r.ErrorPct() <= c.Policy.Decide.MarginPct || r.WrongSigns != 1 {
		t.Fatalf("record %+v (error %.1f pts): want a gain predicted, a slowdown measured, one wrong sign", r, r.ErrorPct())
	}
	if !c.memoDirty {
		t.Fatal("the check was not marked for the memo")
	}
	st := counterfactualStatus(r, c.Policy.Backoff, c.Policy.Decide.MarginPct)
	if st == nil || st.Checks != 1 || st.HoldUntil == nil || !st.HoldUntil.Time.Equal(checked.Add(RegressionBackoff)) {
		t.Fatalf("status %+v, want one check held until %v", st, checked.Add(RegressionBackoff))
	}
	// Neither the regressed candidate's back-off nor its correction is
	// what holds the switch here.
	c.Memo.Backoff, c.Memo.Corrections = map[string]time.Time{}, map[string]float64{}
	rep, err := step(c, w, checked.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind == ActionApply || rep.Reason != string(decide.ReasonCounterfactualError) || rep.Skipped == "" {
		t.Fatalf("within the hold: action %+v, reason %q, skipped %q; want no switch, %s", rep.Action, rep.Reason, rep.Skipped, decide.ReasonCounterfactualError)
	}
	c.Memo.Backoff, c.Memo.Corrections = map[string]time.Time{}, map[string]float64{}
	late := checked.Add(RegressionBackoff)
	if _, err := step(c, w, late); err != nil {
		t.Fatal(err)
	}
	rep, err = step(c, shifted(w, w[0].Arrival+w[len(w)-1].Complete+1e6), late.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind != ActionApply {
		t.Fatalf("past the hold: action %+v, reason %q (%s); want the switch made", rep.Action, rep.Reason, rep.Skipped)
	}
}

// TestCounterfactualCheckOfAKeptSwitch: a switch measured faster, by less
// than predicted, counts a check with its sign right and its error in
// points; the error holds switches back for the back-off after the check.
func TestCounterfactualCheckOfAKeptSwitch(t *testing.T) {
	c := newTestController(t, true)
	now := time.Unix(1000, 0)
	switchMeasured(t, c, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1), now, 0.6)
	r := c.Memo.Counterfactual
	t.Logf("record %+v, error %.2f pts", r, r.ErrorPct())
	if r.Checks != 1 || r.WrongSigns != 0 || r.Last.Measured >= 1 || r.Last.Predicted >= r.Last.Measured {
		t.Fatalf("record %+v, want one check, faster as predicted, by less", r)
	}
	if want := 100 * (r.Last.Measured - r.Last.Predicted); math.Abs(r.ErrorPct()-want) > 1e-9 {
		t.Fatalf("error %.3f pts, want %.3f", r.ErrorPct(), want)
	}
	m := c.Policy.Decide.MarginPct
	if h := r.Holding(r.At, c.Policy.Backoff, m); (r.ErrorPct() > m) != (h == r.ErrorPct()) {
		t.Fatalf("error %.1f pts, holding %.1f at the check", r.ErrorPct(), h)
	}
	if h := r.Holding(r.At.Add(c.Policy.Backoff), c.Policy.Backoff, m); h != 0 {
		t.Fatalf("holding %.1f after the back-off", h)
	}
}
