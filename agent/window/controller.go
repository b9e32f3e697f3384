// Package window holds one device's controller (Controller): a
// deterministic state machine fed one window at a time, with no I/O of
// its own, so that every rule is unit-tested. A window's requests arrive
// in chunks (Controller.Add); the window ends in one call
// (Controller.EndWindow), which learns what is left to learn, simulates,
// verifies the last change and decides under the gate it is given. The
// device (package agent) performs the action the controller asks for and,
// when the device did change, tells it so (Controller.Commit): nothing is
// decided and then undone.
//
// Units: times in ns, sectors of 512 bytes, read-ahead in KiB.
package window

import (
	"errors"
	"fmt"
	"time"

	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
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
	// window's (sampleMissed); it predicts nothing, and the next window
	// is traced whole.
	ReasonSampleMissed = "SampleMissedTheWork"
)

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

// Gate is what may hold back a change the controller decides: the
// policy's pause, the operator's grant, and spec.rollout.minDwell since
// the device's last change. It is an input to the decision; a regression
// revert passes it always.
type Gate struct {
	// Paused: the governing policy is paused (spec.paused).
	Paused bool
	// Granted: the change may be made now (the operator's grant; always
	// true for `shadowtune run`).
	Granted bool
	// MinDwell is the least time a setting is kept after a change
	// (spec.rollout.minDwell); 0 for none.
	MinDwell time.Duration
	// Yielded: another writer changed the device and the policy yields to
	// it (spec.otherWriters Yield).
	Yielded bool
}

// Hold says why the gate held back a decided change.
type Hold uint8

const (
	// HoldNone means nothing was held back.
	HoldNone Hold = iota
	// HoldPaused means the policy is paused.
	HoldPaused
	// HoldDwell means the last change is more recent than MinDwell.
	HoldDwell
	// HoldGrant means no grant allows the change.
	HoldGrant
	// HoldOtherWriter means another writer changed the device, and the agent
	// yields to it.
	HoldOtherWriter
)

// holdReadAhead returns why the gate holds back a move of read-ahead
// within the policy's bounds: only a paused policy or another writer the
// agent yields to. Such a move is low risk (DESIGN §6, gates by risk): it
// is made in the window that measured its evidence, not after minDwell,
// and needs no grant.
func (g Gate) holdReadAhead() Hold {
	switch {
	case g.Paused:
		return HoldPaused
	case g.Yielded:
		return HoldOtherWriter
	}
	return HoldNone
}

// Hold returns why the gate holds a change back at now, given the time of
// the device's last change (zero: never changed).
func (g Gate) Hold(lastChange, now time.Time) Hold {
	switch {
	case g.Paused:
		return HoldPaused
	case g.Yielded:
		return HoldOtherWriter
	case g.MinDwell > 0 && !lastChange.IsZero() && now.Sub(lastChange) < g.MinDwell:
		return HoldDwell
	case !g.Granted:
		return HoldGrant
	}
	return HoldNone
}

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
// moves to it only when the agent reports it done (Commit).
type Action struct {
	Kind    ActionKind
	Setting Setting
	Reason  string

	guard  decide.State  // the thrash guard once the action is done
	verify *verification // the verification an applied switch starts
	ra     raMove        // what it does to read-ahead, for the road
}

// Setting is a device setting: elevator with tunables, and read-ahead
// (0: leave read_ahead_kb alone).
type Setting struct {
	Candidate    engine.Candidate
	ReadAheadKiB int
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
	// Sampled: the window was traced for its last part only (agent/sampling.go).
	Sampled bool
	// ReadScale is the window's length over its traced part when it was
	// sampled (1 or 0 otherwise): the page-cache probe follows read()'s
	// pages only while a device is traced.
	ReadScale float64
	// Missed, when not empty, says the sampled window's traced part
	// missed the window's work (sampleMissed): the window is learned and
	// its read-ahead evidence taken, but nothing is simulated, and Missed
	// is the report's Skipped.
	Missed string
	// Caps are the blk-throttle caps of the device's readers in the
	// window (blkcaps), for the read-ahead road.
	Caps model.Throttle
}

// Memo is the part of a controller's state that the device keeps in its
// memo in the state directory (actuate.DeviceMemo), so that it holds
// across restarts, and carries to a new controller of the same disk.
type Memo struct {
	// LastChange is the agent's last write of the device's scheduler in
	// force (zero when the original is back): spec.rollout.minDwell holds
	// the next switch until then + minDwell.
	LastChange time.Time
	// Guard is the thrash guard's state (DADS §4.2).
	Guard decide.State
	// Backoff maps a candidate name to the time before which a switch to
	// it, which regressed, is not retried.
	Backoff map[string]time.Time
	// Corrections are the learned factors by which a candidate's measure
	// is multiplied in the decision (engine.Options.Corrections), from
	// verified switches (learnCorrection), by candidate name, within
	// [CorrectionMin, CorrectionMax].
	Corrections map[string]float64
	// Counterfactual is the device's counterfactual error over its
	// verified switches (agent/counterfactual).
	Counterfactual counterfactual.Record
}

// Controller is one device's controller: the per-device state carried
// between windows. It does no I/O; the device (package agent) feeds it
// requests (Add), ends each window (EndWindow), performs the Action the
// window's Report asks for and reports it done (Commit).
type Controller struct {
	name string
	// learn is the device's model and what it learns of the device.
	learn learning
	// Policy is the device's policy; the device adjusts it between
	// windows (the memory plan's MaxSimulated, the measured dispatch
	// costs, a dm-cache's model).
	Policy Policy
	// Memo is what the device's memo keeps.
	Memo Memo

	// win holds the current window's requests.
	win window

	// dmCache: a dm-cache is in front of the device; cacheActive: it is
	// on (cacheBefore). readNs and blockReadNs are the mean read costs at
	// the origin below and at the cache's block size, ns (readCostNs), of
	// the last window evaluated with a dm-cache in front.
	dmCache, cacheActive bool
	readNs, blockReadNs  float64
	netScratch           []int64 // readCostNs's net service times
	// cacheWarm is what the simulated cache held at the end of the last
	// evaluated window (engine.Options.CacheWarm), while the real one is
	// off; cacheBefore empties it when the cache is on or another one.
	cacheWarm engine.CacheWarm

	// Current is the setting the device has, as the controller knows it.
	Current Setting
	// originalSched is the device's scheduler before the agent.
	originalSched string

	verify *verification
	// cfHolding is the part of Memo.Counterfactual that holds this
	// window's switch back (engine.Options.CounterfactualErrorPct).
	cfHolding float64

	// proposed is the switch target the last evaluated window decided
	// ("": none; confirmSwitch).
	proposed string
	// settled counts the consecutive windows that left the device
	// settled (settledWindow): its windows may then be traced in part
	// (sampleNext).
	settled int
	// ahead is the device's part of the read-ahead road.
	ahead readAheadRoad
	// alike follows the candidates that simulate alike (alike.go);
	// narrow: the window simulates the current setting alone.
	alike  alike
	narrow bool
	// lastVerify is the outcome of the last verification (nil: none yet).
	lastVerify *verificationResult
	// memoDirty: a correction was learned since the memo was written.
	memoDirty bool
	// memoUnverified is the memo's Unverified as last written; changing
	// is true while a change that starts a verification is written.
	memoUnverified, changing bool
	// explain, when set, is given every window whose simulation decided
	// a scheduler switch, or predicted one it did not reproduce the window
	// well enough to make (decide.ReasonNotReproduced): the time, the
	// requests and the model simulated, and the report (agent.Options.ExplainDir).
	explain func(time.Time, []trace.Request, *model.Model, engine.Report)
}

type verification struct {
	previous Setting
	target   Setting
	bias     float64 // bias before the change
	left     int
	realNs   int64   // real measure over the verified windows
	prevNs   float64 // the previous setting's simulated measure × bias
	targetNs float64 // the target's simulated measure × bias
	// corrected is the target's learned correction over the previous
	// setting's when the switch was decided: the decision compared
	// corrected measures, so its predicted ratio is targetNs ÷ prevNs
	// × corrected.
	corrected float64
}

// errNoModel is returned when a controller is built without a model.
var errNoModel = errors.New("agent: device controller needs a disk model")

// New returns the controller of device name (a kernel name, "sda") with
// the disk model m, which it learns and may replace (calibrate,
// checkThrottle, fitServers), the device's setting now (current, also the
// original the agent restores) and policy p, whose knobs left zero take
// their defaults. The model counts as uncalibrated (see Learned). The only
// error is a nil m.
func New(name string, m *model.Model, current Setting, p Policy) (*Controller, error) {
	if m == nil {
		return nil, errNoModel
	}
	return &Controller{
		name: name, learn: newLearning(m), Policy: p.withKnobDefaults(),
		Current: current, Memo: Memo{Backoff: map[string]time.Time{}, Corrections: map[string]float64{}},
		ahead: readAheadRoad{originalKiB: current.ReadAheadKiB}, originalSched: current.Candidate.Scheduler,
	}, nil
}

// Add takes a chunk of the window's requests, in arrival order: it learns
// them at once when the window is online, and keeps the newest
// Policy.MaxSimulated of the window.
func (c *Controller) Add(chunk []trace.Request) {
	if len(chunk) == 0 {
		return
	}
	c.win.total += len(chunk)
	c.learn.add(chunk)
	c.win.retain(chunk, c.Policy.MaxSimulated)
}

// Skip counts n requests of the window that were dropped before they
// could be learned (the agent's device.keepPending bounds its memory).
func (c *Controller) Skip(n int) { c.win.unlearned += n }

// EndWindow ends the window at in.Now: it learns what the window has not
// learned yet (calibrating the model first, until that is done), then
// evaluates and decides under in.Gate, unless in.Skip. The next window
// starts empty. The error is the simulation's (engine.EvaluateRequests,
// wrapped once with the device's name); the report is filled as far as
// the window got.
func (c *Controller) EndWindow(in Input) (rep Report, err error) {
	defer c.nextWindow()
	defer func() {
		rep.Unlearned, rep.Sampled = c.win.unlearned, in.Sampled
		c.countSettled(&rep, err)
	}()
	if in.Skip != "" {
		c.learn.skip(c.win.simulated())
		rep = Report{Device: c.name, Start: in.Now, Requests: c.win.total, Skipped: in.Skip}
		c.stepReadAhead(in)
		c.decideReadAhead(&rep, in)
		return rep, nil
	}
	reqs := c.win.simulated()
	l := c.learn.end(reqs, c.Policy.MinRequests, c.verify != nil)
	l.requests = c.win.total
	return c.evaluate(reqs, l, in)
}

// nextWindow empties the window and starts the model's next one
// (learning.next).
func (c *Controller) nextWindow() {
	c.win.reset()
	c.learn.next()
}

// evaluate decides on a window whose requests were learned already (l,
// and l.requests of them in all): reqs are its newest requests, at most
// MaxSimulated, in arrival order. The read-ahead road takes every window;
// one of fewer than MinRequests requests decides read-ahead alone.
func (c *Controller) evaluate(reqs []trace.Request, l learned, in Input) (Report, error) {
	rep := Report{Device: c.name, Start: in.Now, Requests: l.requests}
	rep.RealServiceNs, rep.PredictedServiceNs, rep.ModelErrorPct = l.realNs, l.predNs, l.errPct
	rep.DeviceVariationPct = l.varPct
	c.ahead.measure(&c.win, reqs)
	c.stepReadAhead(in)
	if in.Missed != "" {
		// The read-ahead road's evidence is the page cache's over the
		// whole window (agent/sampling.go); the simulation's would be the
		// sample's alone.
		rep.Skipped, rep.Reason = in.Missed, ReasonSampleMissed
		c.decideReadAhead(&rep, in)
		return rep, nil
	}
	if l.requests < c.Policy.MinRequests {
		rep.Skipped = fmt.Sprintf("%d requests (fewer than %d)", l.requests, c.Policy.MinRequests)
		c.decideReadAhead(&rep, in)
		return rep, nil
	}
	// One snapshot for both passes, whose busy cells predict the mean of
	// the whole window rather than of its last moments (model.WindowModel).
	m := c.learn.model.WindowModel()
	c.narrow = c.verify == nil && c.alike.narrowed(in.Now)
	c.cfHolding = c.Memo.Counterfactual.Holding(in.Now, c.Policy.Backoff, c.Policy.Decide.MarginPct)
	er, simReqs, screened, err := c.simulate(reqs, m)
	if err != nil {
		return rep, err
	}
	if !c.narrow {
		c.alike.observe(er, c.Policy.Engine.Rank, in.Now, in.Gate.MinDwell)
	}
	c.keepForExplain(in.Now, simReqs, m, er)
	sliceReal := c.measured(simReqs)
	rep.Report, rep.SimulatedRealNs, rep.Screened = &er, sliceReal, screened
	if bs := c.Policy.Engine.Cache.SegmentSectors; bs > 0 && c.dmCache {
		// Only a device with a dm-cache is judged on these
		// (decide.CacheInput, on and off): the net service times are not
		// worked out again for every other device and window.
		c.readNs, c.blockReadNs = readCostNs(reqs, uint64(bs), m, &c.netScratch)
	}

	// Verification of the last change comes first: a regression reverts
	// whatever this window recommends, and passes the gate.
	if c.verifyWindow(&rep, er, sliceReal, in.Now) || c.raRevert(&rep) {
		return rep, nil
	}
	if c.verify == nil {
		c.learn.learnBias(sliceReal, c.simulatedTotal(er, c.Current.Candidate.Name()))
	}
	c.decideWindow(&rep, er, in)
	return rep, c.learn.fitServers(simReqs, er, c.verify != nil, c.Policy.Engine, c.Current.Candidate, c.name)
}

// keepForExplain gives the window to c.explain (when set) if its
// simulation decided a scheduler switch, or predicted one it did not
// reproduce the window well enough to make.
func (c *Controller) keepForExplain(now time.Time, reqs []trace.Request, m *model.Model, er engine.Report) {
	if c.explain != nil && (er.Decision.Switch || er.Decision.Reason == decide.ReasonNotReproduced) {
		c.explain(now, reqs, m, er)
	}
}

// Unverified reports whether the device holds a change that is not
// verified yet: being written, or under verification (a scheduler switch
// or the read-ahead road's change).
func (c *Controller) Unverified() bool {
	return c.changing || c.verify != nil || c.ahead.road.Verifying()
}

// verifyWindow counts the window towards the verification of the last
// change. When the verification ends in a regression it asks for the
// revert (rep.Action) and reports true. The verification is kept until
// the revert is done (Commit), so a revert that could not be written is
// asked for again the next window.
func (c *Controller) verifyWindow(rep *Report, er engine.Report, sliceReal int64, now time.Time) bool {
	v := c.verify
	if v == nil {
		return false
	}
	v.realNs += sliceReal
	v.prevNs += float64(c.simulatedTotal(er, v.previous.Candidate.Name())) * v.bias
	v.targetNs += float64(c.simulatedTotal(er, v.target.Candidate.Name())) * v.bias
	v.left--
	rep.Verifying = max(v.left, 0)
	if v.left > 0 {
		return false
	}
	counted := c.Memo.checkCounterfactual(v, now, c.Policy.Decide.MarginPct)
	correction := c.Memo.learnCorrection(v)
	c.memoDirty = c.memoDirty || counted || correction
	c.lastVerify = &verificationResult{What: fmt.Sprintf("%s -> %s", v.previous.Candidate.Name(), v.target.Candidate.Name()),
		BaselineNs: v.prevNs, PredictedNs: v.targetNs, MeasuredNs: float64(v.realNs), Unit: "ns", Outcome: "Verified"}
	limit := v.prevNs * (1 + c.Policy.ToleratedRegressionPct/100)
	if v.prevNs <= 0 || float64(v.realNs) <= limit {
		c.verify = nil // verified
		return false
	}
	c.lastVerify.Outcome = "Reverted"
	c.Memo.Backoff[v.target.Candidate.Name()] = now.Add(c.Policy.Backoff)
	rep.Action = Action{Kind: ActionRevert, Setting: v.previous, guard: er.Guard, Reason: fmt.Sprintf(
		"regression: real %.1f ms vs %.1f ms expected of %s (+%.1f %% > %.1f %%)",
		float64(v.realNs)/1e6, v.prevNs/1e6, v.previous.Candidate.Name(),
		100*(float64(v.realNs)/v.prevNs-1), c.Policy.ToleratedRegressionPct)}
	prev := v.previous
	rep.Target, rep.Reason = &prev, ReasonRegressionReverted
	return true
}

// decideWindow turns the window's decision into the recommendation
// (rep.Target) and, in Apply mode when the gate allows it, the action.
//
// A switch counts towards the thrash guard (DADS §4.2 counts changes)
// only when it is made (Commit): in Observe mode, or held back by the
// gate, the recommendation stays the best candidate instead of the
// pinned default after a few windows.
func (c *Controller) decideWindow(rep *Report, er engine.Report, in Input) {
	d := er.Decision
	if !d.Switch {
		c.Memo.Guard = er.Guard
		c.proposed = ""
	}
	target := c.Current
	rep.Reason = string(d.Reason)
	if d.Reason == decide.ReasonNotReproduced || d.Reason == decide.ReasonCounterfactualError {
		rep.Skipped = d.Message
	}
	// A read-ahead move is made alone, so that each verification measures
	// one change, and before a scheduler switch: its evidence is
	// measured, the switch's predicted. The switch waits for a later
	// window.
	kib, move := c.ahead.target(c.Policy.ReadAhead, c.verify != nil, c.Current.ReadAheadKiB)
	if move != raNone {
		d.Switch = false // the guard does not count it
		target.ReadAheadKiB = kib
	}
	if d.Switch {
		if until, ok := c.Memo.Backoff[d.Target]; ok && in.Now.Before(until) {
			rep.Skipped = fmt.Sprintf("%s regressed before; not retried until %s", d.Target, until.Format(time.RFC3339))
			rep.Reason = ReasonRegressionBackoff
		} else if c.confirmSwitch(d) {
			target.Candidate = candidateByName(er, d.Target)
		} else {
			rep.Skipped = fmt.Sprintf("switch to %s (predicted +%.1f %%) made if the next window decides it too", d.Target, d.BestImprovementPct)
			rep.Reason = ReasonAwaitingConfirmation
		}
	}
	rep.Target = &target
	if !c.Policy.Apply || SameSetting(target, c.Current) {
		return
	}
	if move != raNone {
		if rep.Held = c.raHold(move, in); rep.Held == HoldNone {
			rep.Action = Action{Kind: ActionApply, Setting: target, Reason: c.ahead.reason(c.Current.ReadAheadKiB), guard: c.Memo.Guard, ra: move}
		}
		return
	}
	if rep.Held = in.Gate.Hold(c.Memo.LastChange, in.Now); rep.Held != HoldNone {
		return
	}
	rep.Action = Action{Kind: ActionApply, Setting: target, Reason: d.Message, guard: er.Guard,
		verify: &verification{previous: c.Current, target: target, bias: c.learn.bias, left: c.Policy.VerifyWindows,
			corrected: c.Memo.correctionOf(target) / c.Memo.correctionOf(c.Current)}}
	rep.Verifying = c.Policy.VerifyWindows
}

// decideReadAhead decides a window whose scheduler evaluation was skipped
// (too few requests, or over the CPU budget): the read-ahead road's
// revert or move alone.
func (c *Controller) decideReadAhead(rep *Report, in Input) {
	if c.raRevert(rep) {
		return
	}
	kib, move := c.ahead.target(c.Policy.ReadAhead, c.verify != nil, c.Current.ReadAheadKiB)
	if move == raNone {
		return
	}
	target := c.Current
	target.ReadAheadKiB = kib
	rep.Target, rep.Reason = &target, string(c.ahead.step.Decision.Reason)
	if !c.Policy.Apply {
		return
	}
	if rep.Held = c.raHold(move, in); rep.Held == HoldNone {
		rep.Action = Action{Kind: ActionApply, Setting: target, Reason: c.ahead.reason(c.Current.ReadAheadKiB), guard: c.Memo.Guard, ra: move}
	}
}

// raHold is what holds back a move of read-ahead: a move the road decided
// on its evidence, within the policy's bounds, is low risk
// (Gate.holdReadAhead); a move to the policy's bounds is the policy's
// change, rolled out as any other (Gate.Hold: the grant, minDwell).
func (c *Controller) raHold(move raMove, in Input) Hold {
	if move == raBounds {
		return in.Gate.Hold(c.Memo.LastChange, in.Now)
	}
	return in.Gate.holdReadAhead()
}

// stepReadAhead gives the window to the read-ahead road, when the policy
// governs read-ahead and the device has a depth.
func (c *Controller) stepReadAhead(in Input) {
	governs := c.Policy.ReadAhead && c.Current.ReadAheadKiB > 0
	c.showVerification(c.ahead.stepWindow(&c.win, in, governs, c.raSettings(in.Gate.MinDwell)))
}

// raSettings are the read-ahead road's settings for the device as it is,
// with the evidence's horizon.
func (c *Controller) raSettings(horizon time.Duration) readahead.Settings {
	return c.ahead.settings(&c.Policy, c.Current.ReadAheadKiB, c.learn.model, horizon)
}

// raRevert asks for the revert of the last read-ahead change (rep.Action)
// when the road's verification measured a regression, and reports
// whether it did: it passes every gate, and Observe mode makes no action.
func (c *Controller) raRevert(rep *Report) bool {
	prev, why, ok := c.ahead.revert(c.Current)
	if !ok || !c.Policy.Apply {
		return false
	}
	rep.Action = Action{Kind: ActionRevert, Setting: prev, guard: c.Memo.Guard, Reason: why, ra: raReverted}
	rep.Target, rep.Reason = &prev, ReasonRegressionReverted
	return true
}

// showVerification makes v the device's last verification (lastVerify)
// unless it is nil.
func (c *Controller) showVerification(v *verificationResult) {
	if v != nil {
		c.lastVerify = v
	}
}

// confirmSwitch reports whether the switch d may be made now. A switch
// decided by its predicted gain (decide.ReasonBetter) is made only when
// the window before decided the same one: one window's prediction is not
// enough. The first loaded window runs on a model calibrated on that very
// window, and a single window's sample of a fast device's random reads
// scatters: on the 2-core test machine, under CI load, one window predicted
// mq-deadline +23.8 % over none on random reads where the next predicted
// +27.6 % for kyber, and verification measured mq-deadline 151.8 % slower.
// A thrash-guard switch to the default is made at once. c.proposed
// remembers the window's target, whether or not a gate then holds the
// switch back (Observe mode, no grant, minDwell): while consecutive
// windows decide the same switch, it stays confirmed.
func (c *Controller) confirmSwitch(d decide.Decision) bool {
	confirmed := d.Reason != decide.ReasonBetter || c.proposed == d.Target
	c.proposed = d.Target
	return confirmed
}

// Commit tells the controller that the device now has the setting of a
// (written at now): the action of the window just ended. A write of the
// scheduler starts minDwell, unless it put the original back: a dwell
// belongs to a setting in force.
func (c *Controller) Commit(a Action, now time.Time) {
	prev := c.Current
	c.Current, c.Memo.Guard = a.Setting, a.guard
	if a.Setting.Candidate.Name() != prev.Candidate.Name() {
		c.Memo.LastChange = now
		if a.Kind == ActionRevert && a.Setting.Candidate.Scheduler == c.originalSched && len(a.Setting.Candidate.Tunables) == 0 {
			c.Memo.LastChange = time.Time{}
		}
	}
	c.proposed = "" // decided against the setting it replaced
	switch {
	case a.ra == raReverted: // the scheduler's verification goes on
	case a.Kind == ActionRevert:
		c.verify = nil
	case a.verify != nil:
		c.verify = a.verify
	}
	c.showVerification(c.ahead.commit(a.ra, prev.ReadAheadKiB, now, c.raSettings(0)))
}

// Resync tells the controller that the device has setting s, which the
// agent did not write (another writer): the window goes on from it, and a
// verification in progress is dropped (it measured another setting).
func (c *Controller) Resync(s Setting) {
	// The setting the agent had chosen counts as decided: a window that
	// decides to take it back (Reclaim) needs no confirmation.
	c.proposed = c.Current.Candidate.Name()
	c.Current, c.verify = s, nil
	c.ahead.road.Forget()
}

// simulate evaluates the window over reqs (its newest requests, in arrival
// order), screening first (Policy.ScreenRequests) unless a change is being
// verified, with model m (a snapshot it only reads); it returns the
// evaluation, the requests it covers and whether it was the screening pass.
func (c *Controller) simulate(reqs []trace.Request, m *model.Model) (engine.Report, []trace.Request, bool, error) {
	if c.narrow {
		er, err := c.evaluateOver(reqs, m)
		return er, reqs, false, err
	}
	if n := c.Policy.ScreenRequests; n > 0 && len(reqs) > n && c.verify == nil {
		tail := reqs[len(reqs)-n:]
		er, err := c.evaluateOver(tail, m)
		if err != nil {
			return er, nil, false, err
		}
		if engine.ScreenAccepts(er, c.Policy.Decide.MarginPct) {
			return er, tail, true, nil
		}
	}
	er, err := c.evaluateOver(reqs, m)
	if err == nil && er.CacheContents != nil {
		c.cacheWarm = *er.CacheContents // the next window starts from it
	}
	return er, reqs, false, err
}

// evaluateOver simulates reqs under every candidate with model m (which
// it only reads) and decides, from the controller's current setting and
// thrash-guard state (which it does not change).
func (c *Controller) evaluateOver(reqs []trace.Request, m *model.Model) (engine.Report, error) {
	opt := c.Policy.Engine
	if opt.Parallel == 0 {
		// The agent stays in the background: one candidate at a time, so
		// an evaluation never takes more than one core (and allocates one
		// candidate's per-request state at a time).
		opt.Parallel = 1
	}
	opt.Model = m
	opt.CacheWarm = c.cacheWarm
	opt.Corrections = c.Memo.Corrections
	opt.CounterfactualErrorPct = c.cfHolding
	opt.Current = c.Current.Candidate
	opt.Decide = c.Policy.Decide
	opt.Guard = c.Memo.Guard
	cands := c.Policy.Candidates
	if c.narrow {
		cands = c.currentOnly()
	}
	if c.cacheActive {
		// The origin behind an active dm-cache sees misses and
		// promotions: no stream to judge a cache on (cacheAfter judges it
		// by its counters).
		cands = uncached(cands)
	}
	er, err := engine.EvaluateRequests(reqs, engine.LoopAuto, cands, opt)
	if err != nil {
		return engine.Report{}, fmt.Errorf("%s: evaluate: %w", c.name, err)
	}
	return er, nil
}

// measured is the measure the policy ranks by (engine.Options.Rank) as
// the device served reqs, ns: their total service time, or the summed
// response time of the requests an application waits for (engine.WaitsFor;
// of all of them when none qualifies), as sim.Result.WaitNs counts it.
func (c *Controller) measured(reqs []trace.Request) int64 {
	if c.Policy.Engine.Rank != engine.RankWait {
		return measuredService(reqs)
	}
	var all, sync int64
	anySync := false
	for i := range reqs {
		d := reqs[i].ResponseTime()
		if d == trace.Unknown {
			continue
		}
		all += d
		if waitsFor(&reqs[i]) {
			sync, anySync = sync+d, true
		}
	}
	if anySync {
		return sync
	}
	return all
}

var waitsFor = engine.WaitsFor

// measuredService is the measured service time of reqs, ns.
func measuredService(reqs []trace.Request) int64 {
	var n int64
	for i := range reqs {
		if reqs[i].HasService() {
			n += reqs[i].ServiceTime()
		}
	}
	return n
}

// SameSetting reports whether a and b are the same elevator with the same
// tunables and the same read-ahead (KiB).
func SameSetting(a, b Setting) bool {
	return a.Candidate.Name() == b.Candidate.Name() && a.ReadAheadKiB == b.ReadAheadKiB
}

// simulatedTotal is the candidate's predicted measure in r (the policy's
// rank, with its scheduler's dispatch factor, without learned
// corrections: engine.Report.Predicted), ns; 0 when r has no such
// candidate.
func (c *Controller) simulatedTotal(r engine.Report, name string) int64 {
	for _, o := range r.Outcomes {
		if o.Candidate.Name() == name {
			return int64(r.Predicted(c.Policy.Engine.Rank, o))
		}
	}
	return 0
}

// uncached returns the candidates without a cache.
func uncached(cands []engine.Candidate) []engine.Candidate {
	out := make([]engine.Candidate, 0, len(cands))
	for _, c := range cands {
		if !c.Cache {
			out = append(out, c)
		}
	}
	return out
}

func candidateByName(r engine.Report, name string) engine.Candidate {
	for _, o := range r.Outcomes {
		if o.Candidate.Name() == name {
			return o.Candidate
		}
	}
	return engine.Candidate{}
}
