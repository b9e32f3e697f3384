package window

import (
	"time"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// Policy is what the controller needs of a StorageTuning spec, and the
// agent's own knobs, which the API does not carry.
type Policy struct {
	// Apply: change the device; otherwise only observe and recommend.
	Apply bool
	// Candidates are the settings simulated every window (the current one
	// is always added).
	Candidates []engine.Candidate
	// Decide configures the switching rule and thrash guard.
	Decide decide.Config
	// Engine carries the REDCAP, ADA and read-ahead options.
	Engine engine.Options
	// ReadAhead: also recommend (and in Apply mode set) read_ahead_kb.
	ReadAhead bool
	// ToleratedRegressionPct is the allowed real slowdown, percent, of a
	// change against the previous setting (spec.rollout).
	ToleratedRegressionPct float64
	// RestorePreviousDefaults: a read_ahead_kb default that changed under
	// the device is put back when predicted slower (spec.sentinel; Apply
	// mode only).
	RestorePreviousDefaults bool

	// The agent's own knobs; zero takes the default.

	// VerifyWindows is how many windows after a change are compared with
	// the prediction (default 2).
	VerifyWindows int
	// Backoff is how long a switch that regressed is not retried
	// (default RegressionBackoff).
	Backoff time.Duration
	// MinRequests is the fewest completed requests a window needs to be
	// evaluated (default 100): a nearly idle window says nothing.
	MinRequests int
	// MaxSimulated bounds the requests simulated per window (default
	// 65536): a busier window is simulated over its most recent
	// MaxSimulated requests, a contiguous slice that keeps the arrival
	// process and dependencies intact, while every request still teaches
	// the model. It keeps evaluation within the CPU budget at 100k+ IOPS.
	MaxSimulated int
	// ScreenRequests is the length of the screening pass (default 16384;
	// negative: none). A window of more simulated requests is evaluated
	// first over its newest ScreenRequests only; when that finds the
	// setting settled (engine.ScreenAccepts) it is the window's
	// evaluation, else the window is evaluated over its newest
	// MaxSimulated. Windows that verify a change are always evaluated
	// whole. A busy device whose setting is settled then costs about
	// ScreenRequests/MaxSimulated of a full evaluation per window.
	ScreenRequests int
}

// MaxResponseRatio bounds how far the simulated mean response time of the
// setting in effect may be from the measured one, either way, for the
// window's predictions to be acted on (decide.ReasonNotReproduced).
//
// The model is checked request by request on service time (the model
// error), but a decision compares queueing, which magnifies a wrong
// device parallelism or a biased service time many times over. On the
// decision benchmark (docs/runs/2026-12-03-history.md, "Predictions the
// simulation could not reproduce"), every window that decided a scheduler
// switch on a loop device had simulated `none` at 7.5 to 8,301 times its
// measured mean response time (a model of one server for a device that
// had up to 128 requests in flight), and there the queue that only the
// simulation had let mq-deadline and bfq merge their way to predicted
// gains of 5.9 to 91.5 %; verification had measured such a switch
// 152.6 % slower. Within 2×, a prediction rests on a simulation that resembles
// the device as it ran.
const MaxResponseRatio = 2

// RegressionBackoff is how long, by default, a switch whose verification
// measured a regression is not retried (Policy.Backoff); while it lasts
// the node reports Degraded (NodeStorageState lastRevertTime).
const RegressionBackoff = 30 * time.Minute

// withKnobDefaults fills the agent's own knobs left zero.
func (p *Policy) withKnobDefaults() Policy {
	q := *p
	if q.VerifyWindows <= 0 {
		q.VerifyWindows = 2
	}
	if q.Backoff <= 0 {
		q.Backoff = RegressionBackoff
	}
	if q.MinRequests <= 0 {
		q.MinRequests = 100
	}
	if q.MaxSimulated <= 0 {
		q.MaxSimulated = 65536
	}
	if q.ScreenRequests == 0 {
		q.ScreenRequests = 16384
	}
	return q
}
