package window

import (
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/window/windowtest"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestExplainKeepsUnreproducedPredictions: a window whose predicted switch
// is not made because the simulation of the current setting did not
// reproduce the measured response time (decide.ReasonNotReproduced) is
// kept, and its report says why no switch was made.
func TestExplainKeepsUnreproducedPredictions(t *testing.T) {
	c := newTestController(t, false)
	kept := 0 // the windows given to explain, which the agent writes out
	c.explain = func(time.Time, []trace.Request, *model.Model, engine.Report) { kept++ }
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	d := decide.Decision{Target: "none", Best: "mq-deadline", BestImprovementPct: 55.5, Reason: decide.ReasonNotReproduced,
		Message: `"mq-deadline" predicted 55.5% faster, but the simulated mean response time of "none" is 533.00× the measured one (trusted within 2×)`}
	er := engine.Report{Current: "none", Decision: d, ResponseRatio: 533}
	c.keepForExplain(now, windowtest.FIFOWindow(3, 100, 1, 1, 0, 1), c.learn.model, er)
	if kept != 1 {
		t.Fatalf("%d reports kept, want 1", kept)
	}
	var rep Report
	c.decideWindow(&rep, er, Input{Now: now, Gate: Gate{Granted: true}})
	if rep.Skipped != d.Message || rep.Reason != string(decide.ReasonNotReproduced) || rep.Action.Kind != ActionNone {
		t.Fatalf("skipped %q, reason %q, action %+v; want the decision's message, NotReproduced, none", rep.Skipped, rep.Reason, rep.Action)
	}
	// Nothing else is kept: a window that decided to stay.
	er.Decision = decide.Decision{Target: "none", Best: "none", Reason: decide.ReasonAlreadyBest}
	c.keepForExplain(now.Add(time.Second), windowtest.FIFOWindow(3, 100, 1, 1, 0, 1), c.learn.model, er)
	if kept != 1 {
		t.Fatalf("%d reports kept after an AlreadyBest window, want 1", kept)
	}
}
