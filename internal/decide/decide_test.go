package decide

import (
	"errors"
	"math"
	"strings"
	"testing"
)

const ms = int64(1e6)

// cands builds candidates from name/total-in-ms pairs.
func cands(kv ...any) []Candidate {
	var out []Candidate
	for i := 0; i < len(kv); i += 2 {
		var t int64
		switch v := kv[i+1].(type) {
		case int:
			t = int64(v) * ms
		case float64:
			t = int64(v * float64(ms))
		case int64:
			t = v
		}
		out = append(out, Candidate{Name: kv[i].(string), TotalNs: t})
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig("mq-deadline").Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig("x")
	if c.MarginPct != 5 || c.GuardChanges != 5 || c.QuietChecks != 7 || c.Default != "x" {
		t.Fatalf("defaults %+v", c)
	}
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{MarginPct: -1, GuardChanges: 5, QuietChecks: 7, Default: "a"}, []string{"margin"}},
		{Config{MarginPct: 50.5, GuardChanges: 5, QuietChecks: 7, Default: "a"}, []string{"margin"}},
		{Config{MarginPct: math.NaN(), GuardChanges: 5, QuietChecks: 7, Default: "a"}, []string{"margin"}},
		{Config{MarginPct: 5, GuardChanges: 0, QuietChecks: 7, Default: "a"}, []string{"change count"}},
		{Config{MarginPct: 5, GuardChanges: 5, QuietChecks: 0, Default: "a"}, []string{"quiet"}},
		{Config{MarginPct: 5, GuardChanges: 5, QuietChecks: 7}, []string{"default"}},
		{Config{}, []string{"change count", "quiet", "default"}},
		{Config{MarginPct: 5, GuardChanges: 5, QuietChecks: 7, Default: "a", MaxResponseRatio: 1}, []string{"response ratio"}},
		{Config{MarginPct: 5, GuardChanges: 5, QuietChecks: 7, Default: "a", MaxResponseRatio: math.NaN()}, []string{"response ratio"}},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("Validate(%+v) = nil", tc.cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %q, want mention of %q", tc.cfg, err, w)
			}
		}
		// Decide refuses it too and leaves the state alone.
		st := State{ConsecutiveChanges: 2}
		if _, got, err := Decide(Input{Current: "a", Candidates: cands("a", 1)}, tc.cfg, st); err == nil || got != st {
			t.Errorf("Decide with invalid config: err %v state %+v", err, got)
		}
	}
	for _, m := range []float64{0, 50} {
		if err := (Config{MarginPct: m, GuardChanges: 1, QuietChecks: 1, Default: "a"}).Validate(); err != nil {
			t.Errorf("margin %v rejected: %v", m, err)
		}
	}
}

func TestInputErrors(t *testing.T) {
	cfg := DefaultConfig("a")
	for _, tc := range []struct {
		name string
		in   Input
		want error
	}{
		{"current missing", Input{Current: "z", Candidates: cands("a", 10, "b", 9)}, ErrCurrentNotSimulated},
		{"default missing", Input{Current: "b", Candidates: cands("b", 10, "c", 9)}, ErrDefaultNotSimulated},
		{"empty name", Input{Current: "a", Candidates: cands("a", 10, "", 9)}, ErrBadInput},
		{"duplicate", Input{Current: "a", Candidates: cands("a", 10, "a", 9)}, ErrBadInput},
		{"negative total", Input{Current: "a", Candidates: cands("a", -10)}, ErrBadInput},
		{"negative pending", Input{Current: "a", Candidates: cands("a", 10), Pending: -1}, ErrBadInput},
		{"negative mean", Input{Current: "a", Candidates: cands("a", 10), MeanServiceNs: -1}, ErrBadInput},
		{"negative response ratio", Input{Current: "a", Candidates: cands("a", 10), ResponseRatio: -1}, ErrBadInput},
		{"NaN response ratio", Input{Current: "a", Candidates: cands("a", 10), ResponseRatio: math.NaN()}, ErrBadInput},
		{"negative counterfactual error", Input{Current: "a", Candidates: cands("a", 10), CounterfactualErrorPct: -1}, ErrBadInput},
		{"NaN counterfactual error", Input{Current: "a", Candidates: cands("a", 10), CounterfactualErrorPct: math.NaN()}, ErrBadInput},
		{"infinite counterfactual error", Input{Current: "a", Candidates: cands("a", 10), CounterfactualErrorPct: math.Inf(1)}, ErrBadInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{ConsecutiveChanges: 3}
			_, got, err := Decide(tc.in, cfg, st)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if got != st {
				t.Fatalf("state changed on error: %+v", got)
			}
		})
	}
}

func TestSingleCheck(t *testing.T) {
	def := DefaultConfig("a")
	zeroMargin := def
	zeroMargin.MarginPct = 0
	guard1 := def
	guard1.GuardChanges = 1
	reproduce := def
	reproduce.MaxResponseRatio = 2
	for _, tc := range []struct {
		name     string
		cfg      Config
		in       Input
		st       State
		reason   Reason
		doSwitch bool
		target   string
		best     string
		imp      float64 // ImprovementPct
		bestImp  float64 // BestImprovementPct
		next     State
	}{
		{name: "no candidates keeps state", cfg: def,
			in: Input{Current: "a"}, st: State{ConsecutiveChanges: 2},
			reason: ReasonNoCandidates, target: "a", next: State{ConsecutiveChanges: 2}},
		{name: "no candidates while pinned", cfg: def,
			in: Input{Current: "b"}, st: State{Pinned: true, QuietChecks: 3},
			reason: ReasonNoCandidates, target: "b", next: State{Pinned: true, QuietChecks: 3}},
		{name: "already best resets changes", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 80, "b", 100, "c", 90)}, st: State{ConsecutiveChanges: 3},
			reason: ReasonAlreadyBest, target: "a", best: "a"},
		{name: "tie with current: current wins", cfg: def,
			in:     Input{Current: "b", Candidates: cands("a", 100, "b", 100, "c", 120)},
			reason: ReasonAlreadyBest, target: "b", best: "b"},
		{name: "all zero totals", cfg: def,
			in:     Input{Current: "b", Candidates: cands("a", 0, "b", 0)},
			reason: ReasonAlreadyBest, target: "b", best: "b"},
		{name: "tie between others: name order", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "d", 50, "c", 50)},
			reason: ReasonBetter, doSwitch: true, target: "c", best: "c", imp: 50, bestImp: 50,
			next: State{ConsecutiveChanges: 1}},
		{name: "below margin", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 96)}, st: State{ConsecutiveChanges: 2},
			reason: ReasonBelowMargin, target: "a", best: "b", bestImp: 4},
		{name: "exactly at margin is not enough", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 95)},
			reason: ReasonBelowMargin, target: "a", best: "b", bestImp: 5},
		{name: "just past margin", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 94.9)},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 5.1, bestImp: 5.1,
			next: State{ConsecutiveChanges: 1}},
		{name: "switch cost eats the gain", cfg: def,
			// 90 + 10 × 1 ms = 100, not below 95.
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 90), Pending: 10, MeanServiceNs: ms},
			reason: ReasonBelowMargin, target: "a", best: "b", bestImp: 0},
		{name: "switch cost counted", cfg: def,
			// 80 + 4 × 1 ms = 84 < 95: 16 % predicted.
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 80), Pending: 4, MeanServiceNs: ms},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 16, bestImp: 16,
			next: State{ConsecutiveChanges: 1}},
		{name: "huge switch cost saturates", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 1), Pending: math.MaxInt, MeanServiceNs: math.MaxInt64},
			reason: ReasonBelowMargin, target: "a", best: "b", bestImp: 100 * (100*float64(ms) - 1*float64(ms) - math.MaxInt64) / (100 * float64(ms))},
		{name: "zero margin", cfg: zeroMargin,
			in:     Input{Current: "a", Candidates: cands("a", 100*ms, "b", 100*ms-1)},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 1e-6, bestImp: 1e-6,
			next: State{ConsecutiveChanges: 1}},
		{name: "zero margin tie", cfg: zeroMargin,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 100)},
			reason: ReasonAlreadyBest, target: "a", best: "a"},
		{name: "simulation off the measured response: no switch, changes reset", cfg: reproduce,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 50), ResponseRatio: 7.5}, st: State{ConsecutiveChanges: 2},
			reason: ReasonNotReproduced, target: "a", best: "b", bestImp: 50},
		{name: "simulation too fast by more than the bound", cfg: reproduce,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 50), ResponseRatio: 0.49},
			reason: ReasonNotReproduced, target: "a", best: "b", bestImp: 50},
		{name: "simulation within the bound: switch", cfg: reproduce,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 50), ResponseRatio: 2},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 50, bestImp: 50,
			next: State{ConsecutiveChanges: 1}},
		{name: "response not measured: switch", cfg: reproduce,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 50)},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 50, bestImp: 50,
			next: State{ConsecutiveChanges: 1}},
		{name: "bound off: the papers' rule", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 50), ResponseRatio: 100},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 50, bestImp: 50,
			next: State{ConsecutiveChanges: 1}},
		{name: "counterfactual error above the margin: no switch, changes reset", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 50), CounterfactualErrorPct: 5.1}, st: State{ConsecutiveChanges: 2},
			reason: ReasonCounterfactualError, target: "a", best: "b", bestImp: 50},
		{name: "counterfactual error at the margin: switch", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 50), CounterfactualErrorPct: 5},
			reason: ReasonBetter, doSwitch: true, target: "b", best: "b", imp: 50, bestImp: 50,
			next: State{ConsecutiveChanges: 1}},
		{name: "counterfactual error with no predicted change: below margin", cfg: def,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 96), CounterfactualErrorPct: 40},
			reason: ReasonBelowMargin, target: "a", best: "b", bestImp: 4},
		{name: "counterfactual error with a zero margin", cfg: zeroMargin,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 99), CounterfactualErrorPct: 0.5},
			reason: ReasonCounterfactualError, target: "a", best: "b", bestImp: 1},
		{name: "pinned: the default is enforced whatever the counterfactual error", cfg: def,
			in: Input{Current: "b", Candidates: cands("a", 100, "b", 98), CounterfactualErrorPct: 30}, st: State{Pinned: true, QuietChecks: 1},
			reason: ReasonPinned, doSwitch: true, target: "a", best: "b", imp: -100 * 2.0 / 98,
			next: State{Pinned: true, QuietChecks: 2}},
		{name: "below margin settles before the response check", cfg: reproduce,
			in:     Input{Current: "a", Candidates: cands("a", 100, "b", 96), ResponseRatio: 7.5},
			reason: ReasonBelowMargin, target: "a", best: "b", bestImp: 4},
		{name: "pinned: the default is enforced whatever the response", cfg: reproduce,
			in: Input{Current: "b", Candidates: cands("a", 100, "b", 98), ResponseRatio: 7.5}, st: State{Pinned: true, QuietChecks: 1},
			reason: ReasonPinned, doSwitch: true, target: "a", best: "b", imp: -100 * 2.0 / 98,
			next: State{Pinned: true, QuietChecks: 2}},
		{name: "better counts consecutive changes", cfg: def,
			in: Input{Current: "b", Candidates: cands("a", 50, "b", 100)}, st: State{ConsecutiveChanges: 3},
			reason: ReasonBetter, doSwitch: true, target: "a", best: "a", imp: 50, bestImp: 50,
			next: State{ConsecutiveChanges: 4}},
		{name: "guard trips on fifth change, default current", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 50)}, st: State{ConsecutiveChanges: 4},
			reason: ReasonThrashGuardTripped, target: "a", best: "b", bestImp: 50,
			next: State{Pinned: true}},
		{name: "guard trips on fifth change, moves to default", cfg: def,
			// Default a is worse than current b: a forced move, negative improvement.
			in: Input{Current: "b", Candidates: cands("a", 110, "b", 100, "c", 50)}, st: State{ConsecutiveChanges: 4},
			reason: ReasonThrashGuardTripped, doSwitch: true, target: "a", best: "c", imp: -10, bestImp: 50,
			next: State{Pinned: true}},
		{name: "guard trips when best is the default", cfg: def,
			in: Input{Current: "b", Candidates: cands("a", 50, "b", 100)}, st: State{ConsecutiveChanges: 4},
			reason: ReasonThrashGuardTripped, doSwitch: true, target: "a", best: "a", imp: 50, bestImp: 50,
			next: State{Pinned: true}},
		{name: "guard count 1 trips on first change", cfg: guard1,
			in:     Input{Current: "b", Candidates: cands("a", 100, "b", 100, "c", 10)},
			reason: ReasonThrashGuardTripped, doSwitch: true, target: "a", best: "c", imp: 0, bestImp: 90,
			next: State{Pinned: true}},
		{name: "pinned, change predicted, quiet reset", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 50)}, st: State{Pinned: true, QuietChecks: 5},
			reason: ReasonPinned, target: "a", best: "b", bestImp: 50,
			next: State{Pinned: true}},
		{name: "pinned, quiet check counted", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 97)}, st: State{Pinned: true, QuietChecks: 2},
			reason: ReasonPinned, target: "a", best: "b", bestImp: 3,
			next: State{Pinned: true, QuietChecks: 3}},
		{name: "pinned, seventh quiet check releases", cfg: def,
			in: Input{Current: "a", Candidates: cands("a", 100, "b", 97)}, st: State{Pinned: true, QuietChecks: 6},
			reason: ReasonGuardReleased, target: "a", best: "b", bestImp: 3},
		{name: "pinned but device not on default: enforced", cfg: def,
			in: Input{Current: "b", Candidates: cands("a", 100, "b", 90)}, st: State{Pinned: true, QuietChecks: 1},
			// From a, b is 10 % better: a predicted change, quiet resets.
			reason: ReasonPinned, doSwitch: true, target: "a", best: "b", imp: -100.0 / 9, bestImp: 0,
			next: State{Pinned: true}},
		{name: "pinned, off default, quiet", cfg: def,
			in: Input{Current: "b", Candidates: cands("a", 100, "b", 98)}, st: State{Pinned: true, QuietChecks: 1},
			reason: ReasonPinned, doSwitch: true, target: "a", best: "b", imp: -100 * 2.0 / 98, bestImp: 0,
			next: State{Pinned: true, QuietChecks: 2}},
		{name: "released while off default: moves to default", cfg: def,
			in: Input{Current: "b", Candidates: cands("a", 100, "b", 98)}, st: State{Pinned: true, QuietChecks: 6},
			reason: ReasonGuardReleased, doSwitch: true, target: "a", best: "b", imp: -100 * 2.0 / 98},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, next, err := Decide(tc.in, tc.cfg, tc.st)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != tc.reason || d.Switch != tc.doSwitch || d.Target != tc.target || d.Best != tc.best {
				t.Fatalf("got %s switch=%v target=%q best=%q, want %s switch=%v target=%q best=%q (%s)",
					d.Reason, d.Switch, d.Target, d.Best, tc.reason, tc.doSwitch, tc.target, tc.best, d.Message)
			}
			if math.Abs(d.ImprovementPct-tc.imp) > 1e-9 || math.Abs(d.BestImprovementPct-tc.bestImp) > 1e-9 {
				t.Fatalf("improvement %v best %v, want %v %v", d.ImprovementPct, d.BestImprovementPct, tc.imp, tc.bestImp)
			}
			if next != tc.next {
				t.Fatalf("state %+v, want %+v", next, tc.next)
			}
			if d.Switch == (d.Target == tc.in.Current) {
				t.Fatalf("Switch %v inconsistent with target %q / current %q", d.Switch, d.Target, tc.in.Current)
			}
			if d.Message == "" {
				t.Fatal("empty message")
			}
		})
	}
}

func TestCandidateOrderDoesNotMatter(t *testing.T) {
	cfg := DefaultConfig("a")
	a := cands("a", 100, "d", 50, "c", 50, "b", 60)
	b := cands("b", 60, "c", 50, "a", 100, "d", 50)
	d1, _, _ := Decide(Input{Current: "a", Candidates: a}, cfg, State{})
	d2, _, _ := Decide(Input{Current: "a", Candidates: b}, cfg, State{})
	if d1.Target != "c" || d1 != d2 {
		t.Fatalf("%+v vs %+v", d1, d2)
	}
}

// step is one check in a sequence: the totals of a and b and what happens.
type step struct {
	a, b     int // totals in ms
	reason   Reason
	doSwitch bool
	target   string
}

func runSequence(t *testing.T, cfg Config, current string, st State, steps []step) (string, State) {
	t.Helper()
	for i, s := range steps {
		d, next, err := Decide(Input{Current: current, Candidates: cands("a", s.a, "b", s.b)}, cfg, st)
		if err != nil {
			t.Fatalf("check %d: %v", i+1, err)
		}
		if d.Reason != s.reason || d.Switch != s.doSwitch || d.Target != s.target {
			t.Fatalf("check %d (current %s, state %+v): got %s switch=%v target=%s, want %s %v %s",
				i+1, current, st, d.Reason, d.Switch, d.Target, s.reason, s.doSwitch, s.target)
		}
		current, st = d.Target, next
	}
	return current, st
}

// TestThrashGuardSequence: five changes in a row pin the default; seven
// quiet checks release it; a predicted change in between restarts the count.
func TestThrashGuardSequence(t *testing.T) {
	cfg := DefaultConfig("a")
	aWins := func(r Reason, sw bool) step { return step{50, 100, r, sw, "a"} }
	bWins := func(r Reason, sw bool, target string) step { return step{100, 50, r, sw, target} }
	quiet := step{100, 99, ReasonPinned, false, "a"} // b 1 % better: no change predicted

	cur, st := runSequence(t, cfg, "a", State{}, []step{
		bWins(ReasonBetter, true, "b"), // change 1
		aWins(ReasonBetter, true),      // 2
		bWins(ReasonBetter, true, "b"), // 3
		aWins(ReasonBetter, true),      // 4
		// The fifth change in a row trips the guard; the default a is
		// already current, so nothing moves.
		bWins(ReasonThrashGuardTripped, false, "a"),
	})
	if cur != "a" || st != (State{Pinned: true}) {
		t.Fatalf("after trip: current %s state %+v", cur, st)
	}
	cur, st = runSequence(t, cfg, cur, st, []step{
		bWins(ReasonPinned, false, "a"), // change predicted: held
		quiet, quiet, quiet,             // 3 quiet
		bWins(ReasonPinned, false, "a"),          // predicted change: count restarts
		quiet, quiet, quiet, quiet, quiet, quiet, // 6 quiet
		{100, 99, ReasonGuardReleased, false, "a"}, // 7th quiet releases
	})
	if st != (State{}) {
		t.Fatalf("after release: state %+v", st)
	}
	// Switching works again, and the change count starts from zero.
	_, st = runSequence(t, cfg, cur, st, []step{
		bWins(ReasonBetter, true, "b"),
		aWins(ReasonBetter, true),
		{100, 100, ReasonAlreadyBest, false, "a"}, // no change: count resets
		bWins(ReasonBetter, true, "b"),
	})
	if st != (State{ConsecutiveChanges: 1}) {
		t.Fatalf("state %+v, want 1 consecutive change", st)
	}
}

// TestThrashGuardToNonCurrentDefault: the guard trips while the device is on
// another setting and moves it to the default; the pin then holds it there.
func TestThrashGuardToNonCurrentDefault(t *testing.T) {
	cfg := DefaultConfig("c")
	cfg.GuardChanges = 3
	cfg.QuietChecks = 2
	run := func(current string, st State, a, b, c int) (Decision, State) {
		d, next, err := Decide(Input{Current: current, Candidates: cands("a", a, "b", b, "c", c)}, cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		return d, next
	}
	d, st := run("a", State{}, 100, 50, 200) // → b
	d, st = run(d.Target, st, 50, 100, 200)  // → a
	if d.Target != "a" || st.ConsecutiveChanges != 2 {
		t.Fatalf("%+v %+v", d, st)
	}
	d, st = run(d.Target, st, 100, 50, 200) // third change → pin c
	if d.Reason != ReasonThrashGuardTripped || !d.Switch || d.Target != "c" || d.ImprovementPct != -100 || !st.Pinned {
		t.Fatalf("%+v %+v", d, st)
	}
	// From c (200), b (50) is far better: change predicted, held on c.
	d, st = run(d.Target, st, 100, 50, 200)
	if d.Reason != ReasonPinned || d.Switch || st.QuietChecks != 0 {
		t.Fatalf("%+v %+v", d, st)
	}
	// c becomes the best: quiet, then released.
	d, st = run(d.Target, st, 100, 100, 90)
	if d.Reason != ReasonPinned || st.QuietChecks != 1 {
		t.Fatalf("%+v %+v", d, st)
	}
	d, st = run(d.Target, st, 100, 100, 90)
	if d.Reason != ReasonGuardReleased || d.Switch || st != (State{}) {
		t.Fatalf("%+v %+v", d, st)
	}
}

// TestExactMargin: candidates exactly at the margin never switch, for many
// totals (a float rounding of 0.95·T_A must not let them through).
func TestExactMargin(t *testing.T) {
	for _, m := range []float64{1, 5, 10, 33} {
		cfg := DefaultConfig("a")
		cfg.MarginPct = m
		for ta := int64(1); ta < 2_000_000; ta = ta*7 + 3 {
			ta100 := ta * 100
			tb := ta100 / 100 * (100 - int64(m)) // exactly (1 − m)·T_A
			for _, tc := range []struct {
				tb   int64
				want Reason
			}{{tb, ReasonBelowMargin}, {tb - 1, ReasonBetter}} {
				d, _, err := Decide(Input{Current: "a", Candidates: []Candidate{{"a", ta100}, {"b", tc.tb}}}, cfg, State{})
				if err != nil {
					t.Fatal(err)
				}
				if d.Reason != tc.want {
					t.Fatalf("margin %v, T_A %d, T_B %d: %s, want %s", m, ta100, tc.tb, d.Reason, tc.want)
				}
			}
		}
	}
}
