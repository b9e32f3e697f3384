package agent

import (
	"testing"

	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
)

// The tests of the device controller itself are in agent/window; these
// helpers drive one for the agent's tests that need a controller alone.

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
