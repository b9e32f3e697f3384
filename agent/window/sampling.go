package window

// Sampled windows (agent/sampling traces a settled device's windows
// for their last part only): the controller's part is the count of
// settled windows, and whether its next window may be sampled.

import (
	"github.com/shadowtune/shadowtune/internal/decide"
)

// SettleWindows is how many settled windows in a row let a device's
// windows be sampled.
const SettleWindows = 2

// sampleInput is what decides whether a device's next window may be
// traced in part.
type sampleInput struct {
	// Enabled: the agent samples (Options.TraceSample, a tracer that can
	// pause, a window longer than twice the sample).
	Enabled bool
	// Settled counts the consecutive settled windows (settledWindow).
	Settled int
	// Calibrated: the model has been calibrated on the device.
	Calibrated bool
	// Verifying: a scheduler change is being verified.
	Verifying bool
	// Proposed: a switch awaits the next window's confirmation;
	// CapsPending: a token bucket's caps, or a throttled device running
	// above its caps, await the next window's confirmation
	// (learning.capsPending).
	Proposed, CapsPending bool
	// Cache: the policy governs a cache in front of the device.
	Cache bool
}

// sampleNext reports whether a device's next window may be traced in
// part.
func sampleNext(in sampleInput) bool {
	return in.Enabled && in.Calibrated && !in.Verifying && !in.Proposed && !in.CapsPending &&
		!in.Cache && in.Settled >= SettleWindows
}

// settledWindow reports whether a window left the device settled: it
// was evaluated without error, and decided no change, held back none and
// verifies none.
func settledWindow(rep *Report, err error) bool {
	return err == nil && rep.Report != nil && rep.Skipped == "" && !rep.Report.Decision.Switch &&
		rep.Action.Kind == ActionNone && rep.Held == HoldNone && rep.Verifying == 0
}

// A device whose model was loaded from the state directory starts
// settled (newDevice): it was learned before, and its first window may be
// sampled.

// settleStep is what a window does to the count of settled windows.
type settleStep int

const (
	// settleReset starts the count over: the window decided, held back
	// or verifies something, or failed.
	settleReset settleStep = iota
	// settleCount counts the window: it settled (settledWindow).
	settleCount
	// settleKeep leaves the count: a whole window too idle to evaluate
	// (fewer than the policy's minRequests) says nothing either way.
	settleKeep
	// settleRecheck makes the next window whole and lets the device be
	// sampled again after it if it settles: a sample skipped because it
	// was too small to evaluate decided nothing, but one second is not
	// enough to tell; a window, sampled or whole, whose model did not
	// reproduce its measured response time (decide.ReasonNotReproduced)
	// decided nothing either, and the model it failed may be replaced by
	// then (fitServers). A model that keeps failing keeps the windows
	// whole.
	settleRecheck
)

// nextSettle is the step of a window (rep, err; sampled or whole) of a
// device with nothing pending (no switch awaiting confirmation, no
// verification), under a policy
// that evaluates windows of at least minRequests requests. A device with
// something pending always starts over.
func nextSettle(rep *Report, err error, minRequests int, pending bool) settleStep {
	switch {
	case pending || err != nil:
		return settleReset
	case settledWindow(rep, err):
		return settleCount
	}
	// Skipped with nothing decided, held or verified: too idle to
	// evaluate, or not reproduced by the model.
	quiet := rep.Skipped != "" && rep.Action.Kind == ActionNone && rep.Held == HoldNone && rep.Verifying == 0 &&
		(rep.Report == nil || !rep.Report.Decision.Switch)
	idle := rep.Requests < minRequests
	switch {
	case quiet && (rep.Sampled && idle || rep.Reason == string(decide.ReasonNotReproduced) || rep.Reason == ReasonSampleMissed):
		return settleRecheck
	case quiet && idle:
		return settleKeep
	}
	return settleReset
}

// settledAfter is the count of settled windows, settled before, after a
// window whose step was step.
func settledAfter(settled int, step settleStep) int {
	switch step {
	case settleCount:
		return settled + 1
	case settleKeep:
		return settled
	case settleRecheck:
		return SettleWindows - 1
	}
	return 0
}
