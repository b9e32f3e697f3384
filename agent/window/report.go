package window

// What a window ends with (Input) and gives (Report), and the action it
// asks of the device (Action).

import (
	"time"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
)

// Recommendation reasons that are not decide's: the window's verification
// reverted the last change, or the decided switch regressed before and is
// in its back-off.
const (
	ReasonRegressionReverted = "RegressionReverted"
	ReasonRegressionBackoff  = "RegressionBackoff"
	// ReasonAwaitingConfirmation: the window decided a switch by its
	// predicted gain that the window before did not decide; it is made
	// when the next window decides it again (confirmSwitch).
	ReasonAwaitingConfirmation = "AwaitingConfirmation"
	// ReasonSampleMissed: the window was traced for its last part only,
	// and that part held far fewer requests than its share of the
	// window's (sampling.Missed); it predicts nothing, and the next window
	// is traced whole.
	ReasonSampleMissed = "SampleMissedTheWork"
)

// ActionKind says what the controller asks the agent to do to the device.
type ActionKind uint8

const (
	// ActionNone leaves the device alone.
	ActionNone ActionKind = iota
	// ActionApply sets Action.Setting.
	ActionApply
	// ActionRevert puts back the setting in effect before the last change
	// (Action.Setting), because verification found a real regression.
	ActionRevert
)

// Action is the controller's request to the agent. The controller's state
// moves to it only when the agent reports it done (Controller.Commit).
type Action struct {
	Kind    ActionKind
	Setting Setting
	Reason  string
}

// Setting is a device setting: elevator with tunables, and read-ahead
// (0: leave read_ahead_kb alone).
type Setting struct {
	Candidate    engine.Candidate
	ReadAheadKiB int
}

// SameSetting reports whether a and b are the same elevator with the same
// tunables and the same read-ahead (KiB).
func SameSetting(a, b Setting) bool {
	return a.Candidate.Name() == b.Candidate.Name() && a.ReadAheadKiB == b.ReadAheadKiB
}

// Report is the outcome of one window on one device.
type Report struct {
	Device   string
	Start    time.Time
	Requests int
	// RealServiceNs is the measured total service time of the window's
	// requests; PredictedServiceNs what the model predicted for them (each
	// request predicted, then learned, in dispatch order).
	RealServiceNs      int64
	PredictedServiceNs int64
	// ModelErrorPct is the median over the window's groups of 1000
	// requests (or the whole window when smaller) of
	// |Σpredicted − Σmeasured| / Σmeasured × 100 (KDSim §6).
	ModelErrorPct float64
	// DeviceVariationPct is the device's own variation over the same
	// groups: the median of |Σmeasured − mean| ÷ mean × 100, mean being
	// the window's mean group total; -1 for fewer than two groups. Where
	// it exceeds a model error limit, no model of a device of fixed speed
	// meets that limit in the window.
	DeviceVariationPct float64
	// Report is the simulation of every candidate; nil when the window was
	// skipped (Skipped says why). It covers the window's newest
	// Report.Requests requests (Policy.MaxSimulated at most), whose
	// measured total service time is SimulatedRealNs; Screened says it
	// is a screening pass over the newest Policy.ScreenRequests.
	Report          *engine.Report
	SimulatedRealNs int64
	Screened        bool
	Skipped         string
	// Unlearned counts the window's requests that arrived while the
	// agent's loop was busy and were dropped unlearned to bound its memory
	// (device.keepPending); Requests does not include them.
	Unlearned int
	// Action is what the agent should do now.
	Action Action
	// Held says why the gate held back the change the window decided
	// (HoldNone when it did not).
	Held Hold
	// Verifying is the number of windows left to verify the last change.
	Verifying int
	// Target is the setting the controller recommends after this window,
	// in Observe mode too (the current setting when it recommends no
	// change); nil when the window was not evaluated. Reason is the rule
	// that settled it: decide's reason, ReasonRegressionReverted or
	// ReasonRegressionBackoff.
	Target *Setting
	Reason string
	// Sampled: the window was traced for its last part only
	// (Input.Sampled).
	Sampled bool
}

// Input is what ends a window besides its requests.
type Input struct {
	Now  time.Time
	Gate Gate
	// Skip, when not empty, ends the window without evaluating it (say,
	// over the CPU budget) and is the report's Skipped; its requests
	// teach the model all the same, without calibration.
	Skip string
	// PageCache is what the page-cache probe counted of the device's
	// files in the window (Measured false: no probe).
	PageCache readahead.PageCache
	// Sampled: the window was traced for its last part only (agent/sampling).
	Sampled bool
	// ReadScale is the window's length over its traced part when it was
	// sampled (1 or 0 otherwise): the page-cache probe follows read()'s
	// pages only while a device is traced.
	ReadScale float64
	// Missed, when not empty, says the sampled window's traced part
	// missed the window's work (sampling.Missed): the window is learned and
	// its read-ahead evidence taken, but nothing is simulated, and Missed
	// is the report's Skipped.
	Missed string
	// Caps are the blk-throttle caps of the device's readers in the
	// window (blkcaps), for the read-ahead road.
	Caps model.Throttle
}
