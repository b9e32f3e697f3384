package window

// Sampled windows (agent/sampling traces a settled device's windows
// for their last part only): whether a device's next window may be
// sampled. The count of settled windows is kept by the controller
// (settledAfter, controller.go).

// SettleWindows is how many settled windows in a row let a device's
// windows be sampled. A device whose model was loaded from the state
// directory starts settled (newDevice): it was learned before, and its
// first window may be sampled.
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
