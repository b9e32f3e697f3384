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

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

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
	// asked is the last window's action and its effect until the agent
	// commits it (nil: none, or the next window ended first).
	asked *asked
	// settled counts the consecutive windows that left the device
	// settled (settledWindow): its windows may then be traced in part
	// (sampleNext).
	settled int
	// ahead is the device's part of the read-ahead road.
	ahead readAheadRoad
	// alike follows the candidates that simulate alike (simulate.go);
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
	c.asked = nil // an action the agent did not write is not done
	defer c.nextWindow()
	defer func() {
		rep.Unlearned, rep.Sampled = c.win.unlearned, in.Sampled
		c.settled = settledAfter(c.settled, nextSettle(&rep, err, c.Policy.MinRequests, c.verify != nil || c.proposed != ""))
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
		// whole window (agent/sampling); the simulation's would be the
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

	if c.conclude(&rep, er, sliceReal, in) {
		return rep, nil
	}
	return rep, c.learn.fitServers(simReqs, er, c.verify != nil, c.Policy.Engine, c.Current.Candidate, c.name)
}

// stepReadAhead gives the window to the read-ahead road, when the policy
// governs read-ahead and the device has a depth.
func (c *Controller) stepReadAhead(in Input) {
	governs := c.Policy.ReadAhead && c.Current.ReadAheadKiB > 0
	c.showVerification(c.ahead.stepWindow(&c.win, in, governs, c.raSettings(in.Gate.MinDwell)))
}

// keepForExplain gives the window to c.explain (when set) if its
// simulation decided a scheduler switch, or predicted one it did not
// reproduce the window well enough to make.
func (c *Controller) keepForExplain(now time.Time, reqs []trace.Request, m *model.Model, er engine.Report) {
	if c.explain != nil && (er.Decision.Switch || er.Decision.Reason == decide.ReasonNotReproduced) {
		c.explain(now, reqs, m, er)
	}
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
		cands = currentOnly(c.Current.Candidate, c.Policy.Candidates, c.Policy.Decide.Default)
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

// settledWindow reports whether a window left the device settled: it
// was evaluated without error, and decided no change, held back none and
// verifies none.
func settledWindow(rep *Report, err error) bool {
	return err == nil && rep.Report != nil && rep.Skipped == "" && !rep.Report.Decision.Switch &&
		rep.Action.Kind == ActionNone && rep.Held == HoldNone && rep.Verifying == 0
}

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

// raSettings are the read-ahead road's settings for the device as it is,
// with the evidence's horizon.
func (c *Controller) raSettings(horizon time.Duration) readahead.Settings {
	return c.ahead.settings(&c.Policy, c.Current.ReadAheadKiB, c.learn.model, horizon)
}

// showVerification makes v the device's last verification (lastVerify)
// unless it is nil.
func (c *Controller) showVerification(v *verificationResult) {
	if v != nil {
		c.lastVerify = v
	}
}
