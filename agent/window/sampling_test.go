package window

import (
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
)

func TestSampleNext(t *testing.T) {
	settled := sampleInput{Enabled: true, Settled: SettleWindows, Calibrated: true}
	with := func(f func(*sampleInput)) sampleInput {
		in := settled
		f(&in)
		return in
	}
	for _, tc := range []struct {
		name string
		in   sampleInput
		want bool
	}{
		{"settled", settled, true},
		{"settled longer", with(func(in *sampleInput) { in.Settled = 40 }), true},
		{"sampling off", with(func(in *sampleInput) { in.Enabled = false }), false},
		{"one settled window", with(func(in *sampleInput) { in.Settled = SettleWindows - 1 }), false},
		{"not calibrated", with(func(in *sampleInput) { in.Calibrated = false }), false},
		{"verifying a change", with(func(in *sampleInput) { in.Verifying = true }), false},
		{"a switch awaits confirmation", with(func(in *sampleInput) { in.Proposed = true }), false},
		{"caps await confirmation", with(func(in *sampleInput) { in.CapsPending = true }), false},
		{"a governed cache", with(func(in *sampleInput) { in.Cache = true }), false},
	} {
		if got := sampleNext(tc.in); got != tc.want {
			t.Errorf("%s: sampleNext(%+v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestSettledWindow(t *testing.T) {
	evaluated := func(f func(*Report)) *Report {
		rep := &Report{Report: &engine.Report{}}
		if f != nil {
			f(rep)
		}
		return rep
	}
	for _, tc := range []struct {
		name string
		rep  *Report
		err  error
		want bool
	}{
		{"kept the setting", evaluated(nil), nil, true},
		{"not evaluated", &Report{}, nil, false},
		{"skipped", evaluated(func(r *Report) { r.Skipped = "12 requests (fewer than 100)" }), nil, false},
		{"an error", evaluated(nil), errNoModel, false},
		{"decided a switch", evaluated(func(r *Report) { r.Report.Decision.Switch = true }), nil, false},
		{"asks for a change", evaluated(func(r *Report) { r.Action.Kind = ActionApply }), nil, false},
		{"held a change back", evaluated(func(r *Report) { r.Held = HoldGrant }), nil, false},
		{"verifying", evaluated(func(r *Report) { r.Verifying = 1 }), nil, false},
	} {
		if got := settledWindow(tc.rep, tc.err); got != tc.want {
			t.Errorf("%s: settledWindow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSampledWindowsOfASettledDevice: windows that keep the setting
// settle the device after SettleWindows; a sample whose read-ahead is
// wasted on random readers cuts at once, as a whole window would, and the
// next window is traced whole.
func TestSampledWindowsOfASettledDevice(t *testing.T) {
	now := time.Unix(1000, 0)
	c := raController(t, 2560)
	c.Policy.Candidates = []engine.Candidate{{Scheduler: "none"}}
	c.Policy.Decide = decide.DefaultConfig("none")
	seq := raWindow(0, 400, 256, 200_000, true)
	sampled := func() bool { return sampleNext(c.sampleInput(true, false)) }
	for i := range SettleWindows {
		if sampled() {
			t.Fatalf("window %d: sampled before %d settled windows", i, SettleWindows)
		}
		rep := raStep(c, seq, seqCounts(2560, 4000), now.Add(time.Duration(i)*5*time.Second))
		if rep.Action.Kind != ActionNone || rep.Report == nil {
			t.Fatalf("window %d: %+v, want an evaluated window that keeps the setting", i, rep)
		}
	}
	if !sampled() || sampleNext(c.sampleInput(true, true)) {
		t.Fatalf("after %d settled windows: sampled %v (with a cache %v), want true (false)", SettleWindows, sampled(), sampleNext(c.sampleInput(true, true)))
	}
	thrash := raWindow(0, 400, 5120, 2_000_000, false)
	now = now.Add(time.Minute)
	c.Add(thrash)
	rep, err := c.EndWindow(Input{Now: now, Gate: Gate{Granted: true}, PageCache: thrashCounts(2560, 400), Sampled: true, ReadScale: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action.Kind != ActionApply || rep.Action.Setting.ReadAheadKiB >= 2560 || !rep.Sampled {
		t.Fatalf("a sample of random readers wasting their read-around: action %+v (sampled %v), want a cut at once", rep.Action, rep.Sampled)
	}
	c.Commit(rep.Action, now)
	if sampled() {
		t.Fatal("the window after a cut is sampled")
	}
}

func TestNextSettle(t *testing.T) {
	rep := func(f func(*Report)) *Report {
		r := &Report{Report: &engine.Report{}, Requests: 5000}
		f(r)
		return r
	}
	idle := func(sampled bool) *Report {
		return &Report{Requests: 12, Skipped: "12 requests (fewer than 100)", Sampled: sampled}
	}
	notReproduced := func(sampled bool) *Report {
		return rep(func(r *Report) {
			r.Sampled, r.Reason, r.Skipped = sampled, string(decide.ReasonNotReproduced), "the simulated mean response time is 30× the measured one"
		})
	}
	for _, tc := range []struct {
		name    string
		rep     *Report
		err     error
		pending bool
		want    settleStep
	}{
		{"settled, whole", rep(func(*Report) {}), nil, false, settleCount},
		{"settled, sampled", rep(func(r *Report) { r.Sampled = true }), nil, false, settleCount},
		{"settled but a switch awaits confirmation", rep(func(*Report) {}), nil, true, settleReset},
		{"an error", rep(func(*Report) {}), errNoModel, false, settleReset},
		{"whole and idle", idle(false), nil, false, settleKeep},
		{"whole and idle, pending", idle(false), nil, true, settleReset},
		{"a sample too small", idle(true), nil, false, settleRecheck},
		{"a sample not reproduced", notReproduced(true), nil, false, settleRecheck},
		{"a whole window not reproduced", notReproduced(false), nil, false, settleRecheck},
		{"a sample that missed the work", rep(func(r *Report) {
			r.Sampled, r.Reason, r.Skipped, r.Report = true, ReasonSampleMissed, "the traced last 1/10 of the window held 10 requests", nil
		}), nil, false, settleRecheck},
		{"a whole window not reproduced, pending", notReproduced(false), nil, true, settleReset},
		{"a sample decided a switch", rep(func(r *Report) { r.Sampled, r.Report.Decision.Switch = true, true }), nil, false, settleReset},
		{"a sample asks for a change", rep(func(r *Report) { r.Sampled, r.Action.Kind = true, ActionApply }), nil, false, settleReset},
		{"a sample skipped by a regression back-off", rep(func(r *Report) {
			r.Sampled, r.Report.Decision.Switch, r.Skipped, r.Reason = true, true, "bfq regressed before", ReasonRegressionBackoff
		}), nil, false, settleReset},
		{"a sample held back", rep(func(r *Report) { r.Sampled, r.Skipped, r.Held = true, "x", HoldGrant }), nil, false, settleReset},
	} {
		if got := nextSettle(tc.rep, tc.err, 100, tc.pending); got != tc.want {
			t.Errorf("%s: nextSettle = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSettledAfter: a settled window counts, an idle one keeps the count,
// a recheck leaves the count one short of SettleWindows, and anything
// else starts it over.
func TestSettledAfter(t *testing.T) {
	for _, tc := range []struct {
		settled int
		step    settleStep
		want    int
	}{
		{0, settleCount, 1},
		{3, settleCount, 4},
		{3, settleKeep, 3},
		{5, settleRecheck, SettleWindows - 1},
		{0, settleRecheck, SettleWindows - 1},
		{5, settleReset, 0},
	} {
		if got := settledAfter(tc.settled, tc.step); got != tc.want {
			t.Errorf("settledAfter(%d, %d) = %d, want %d", tc.settled, tc.step, got, tc.want)
		}
	}
}
