// Package controllertest drives one device controller (agent/window) for
// the tests of the packages that use it. agent/window's own tests have
// theirs: they cannot import this package, which imports agent/window.
package controllertest

import (
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// GiB is one GiB in sectors of 512 bytes.
const GiB = uint64(1) << 21

// New is a controller of an HDD-modelled 100 GiB device "sdz" running
// none, under a policy of the four elevators (apply: Apply mode) with
// spec.rollout.toleratedRegressionPercent's default of 5 %.
func New(t testing.TB, apply bool) *window.Controller {
	t.Helper()
	p := window.Policy{
		Apply:                  apply,
		Candidates:             []engine.Candidate{{Scheduler: "none"}, {Scheduler: "mq-deadline"}, {Scheduler: "bfq"}, {Scheduler: "kyber"}},
		Decide:                 decide.DefaultConfig("none"),
		ToleratedRegressionPct: 5,
	}
	c, err := window.New("sdz", model.Default(model.HDD, 100*GiB), window.Setting{Candidate: engine.Candidate{Scheduler: "none"}}, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Step feeds reqs to c as one window ending at now, under an open gate,
// and commits the action it asks for, as the agent does once the device
// has taken the write. EndWindow's error is returned as is.
func Step(c *window.Controller, reqs []trace.Request, now time.Time) (window.Report, error) {
	c.Add(reqs)
	rep, err := c.EndWindow(window.Input{Now: now, Gate: window.Gate{Granted: true}})
	if err == nil && rep.Action.Kind != window.ActionNone {
		c.Commit(rep.Action, now)
	}
	return rep, err
}
