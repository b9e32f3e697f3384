package explain

import (
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// These helpers drive one device controller (agent/window) for the tests
// of the windows it hands over.

const gib = uint64(1) << 21

// newTestController is a controller of an HDD-modelled device "sdz"
// running none, under a policy of the four elevators (apply: Apply mode).
func newTestController(t *testing.T, apply bool) *window.Controller {
	t.Helper()
	p := window.Policy{
		Apply:      apply,
		Candidates: []engine.Candidate{{Scheduler: "none"}, {Scheduler: "mq-deadline"}, {Scheduler: "bfq"}, {Scheduler: "kyber"}},
		Decide:     decide.DefaultConfig("none"),
		// spec.rollout.toleratedRegressionPercent's default.
		ToleratedRegressionPct: 5,
	}
	c, err := window.New("sdz", model.Default(model.HDD, 100*gib), window.Setting{Candidate: engine.Candidate{Scheduler: "none"}}, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// step feeds reqs to the controller as one window ending at now, under an
// open gate, and commits the action it asks for, as the agent does once
// the device has taken the write.
func step(c *window.Controller, reqs []trace.Request, now time.Time) (window.Report, error) {
	c.Add(reqs)
	rep, err := c.EndWindow(window.Input{Now: now, Gate: window.Gate{Granted: true}})
	if err == nil && rep.Action.Kind != window.ActionNone {
		c.Commit(rep.Action, now)
	}
	return rep, err
}
