package window

import (
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/engine"
)

// TestAskedEffect: the effect of the action a window asks for (the
// verification a switch starts) is the controller's until the agent
// commits that action; another action, or the same one after the next
// window ended, commits with none.
func TestAskedEffect(t *testing.T) {
	kyber := Action{Kind: ActionApply, Setting: Setting{Candidate: engine.Candidate{Scheduler: "kyber"}}}
	bfq := Action{Kind: ActionApply, Setting: Setting{Candidate: engine.Candidate{Scheduler: "bfq"}}}
	now := time.Unix(1000, 0)

	c := newTestController(t, true)
	var rep Report
	c.ask(&rep, kyber, effect{verify: &verification{target: kyber.Setting, left: 2}})
	if !SameSetting(rep.Action.Setting, kyber.Setting) || rep.Action.Kind != ActionApply {
		t.Fatalf("the report's action %+v, want %+v", rep.Action, kyber)
	}
	if !c.StartsVerification(kyber) || c.StartsVerification(bfq) {
		t.Errorf("StartsVerification: asked %v, other %v; want true, false", c.StartsVerification(kyber), c.StartsVerification(bfq))
	}
	c.Commit(kyber, now)
	if c.verify == nil || c.verify.left != 2 || c.asked != nil {
		t.Errorf("after Commit: verify %+v, asked %+v; want the asked verification, nothing asked", c.verify, c.asked)
	}

	c = newTestController(t, true)
	c.ask(&rep, kyber, effect{verify: &verification{target: kyber.Setting, left: 2}})
	c.Commit(bfq, now)
	if c.verify != nil {
		t.Errorf("an action not asked for started the verification %+v", c.verify)
	}

	c = newTestController(t, true)
	c.ask(&rep, kyber, effect{verify: &verification{target: kyber.Setting, left: 2}})
	if _, err := c.EndWindow(Input{Now: now, Skip: "idle"}); err != nil {
		t.Fatal(err)
	}
	if c.StartsVerification(kyber) {
		t.Error("an action the next window ended before it was written still starts a verification")
	}
}
