// Package agent is shadowtune's node agent: for every selected block
// device it collects a window of traced requests, learns the device's disk
// model online, simulates the window under every allowed candidate,
// decides, and in Apply mode changes the device's settings, verifies the
// change against the next windows and reverts a real regression (DESIGN
// §4, §6, §7; DADS §4.1–4.2).
//
// This file holds the per-device controller: a deterministic state machine
// fed one window at a time, with no I/O of its own, so that every rule is
// unit-tested. agent.go connects it to the tracer, sysfs, the actuator and
// the metrics.
//
// Units: times in ns, sectors of 512 bytes, read-ahead in KiB.
package agent

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Policy is what the controller needs of a StorageTuning spec.
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
	// VerifyWindows is how many windows after a change are compared with
	// the prediction (default 2); ToleratedRegressionPct the allowed real
	// slowdown against the previous setting (default 5 %).
	VerifyWindows          int
	ToleratedRegressionPct float64
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
)

func (p *Policy) withDefaults() Policy {
	q := *p
	if q.VerifyWindows <= 0 {
		q.VerifyWindows = 2
	}
	if q.ToleratedRegressionPct <= 0 {
		q.ToleratedRegressionPct = 5
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

// Action is the controller's request to the agent.
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

// WindowReport is the outcome of one window on one device.
type WindowReport struct {
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
	// Report is the simulation of every candidate; nil when the window was
	// skipped (Skipped says why). It covers the window's newest
	// Report.Requests requests (Policy.MaxSimulated at most), whose
	// measured total service time is SimulatedRealNs; Screened says it
	// is a screening pass over the newest Policy.ScreenRequests.
	Report          *engine.Report
	SimulatedRealNs int64
	Screened        bool
	Skipped         string
	// Action is what the agent should do now.
	Action Action
	// Verifying is the number of windows left to verify the last change.
	Verifying int
	// Target is the setting the controller recommends after this window,
	// in Observe mode too (the current setting when it recommends no
	// change); nil when the window was not evaluated. Reason is the rule
	// that settled it: decide's reason, ReasonRegressionReverted or
	// ReasonRegressionBackoff.
	Target *Setting
	Reason string
}

// deviceController is the per-device state carried between windows.
type deviceController struct {
	name   string
	model  *model.Model
	disk   *model.Disk // online-learning state: position, disk cache
	policy Policy

	current Setting
	guard   decide.State

	// bias is the model's recent real ÷ simulated ratio for the current
	// setting (an exponential average); verification compares the real
	// time after a change with the previous setting's simulated time
	// scaled by this bias, so model error does not count as regression.
	bias float64

	verify  *verification
	backoff map[string]time.Time // candidate name → no retry before

	// calibrated is set once a window with enough measured requests has
	// checked the device class and learned k (see calibrate).
	calibrated bool
	// note records what calibration found, for the status.
	note string
	// raAdvice is the previous window's read-ahead advice (KiB): a new
	// depth is applied only when two consecutive windows agree.
	raAdvice int
}

type verification struct {
	previous Setting
	target   Setting
	bias     float64 // bias before the change
	left     int
	realNs   int64 // real total over the verified windows
	prevNs   float64
}

// errNoModel is returned when a controller is built without a model.
var errNoModel = errors.New("agent: device controller needs a disk model")

func newDeviceController(name string, m *model.Model, current Setting, p Policy) (*deviceController, error) {
	if m == nil {
		return nil, errNoModel
	}
	return &deviceController{
		name: name, model: m, disk: m.NewDisk(0), policy: p.withDefaults(),
		current: current, bias: 1, backoff: map[string]time.Time{},
	}, nil
}

// learn predicts then learns every measured request of the window in
// dispatch order and returns the real and predicted totals and the model
// error. The agent learns a window online instead, as its requests arrive
// (collect.go: windowLearner, the same computation).
func (c *deviceController) learn(reqs []trace.Request) (realNs, predNs int64, errPct float64) {
	var l windowLearner
	l.observe(c.disk, reqs)
	r := l.result()
	return r.realNs, r.predNs, r.errPct
}

func pctErr(pred, real int64) float64 {
	if real <= 0 {
		return 0
	}
	return 100 * math.Abs(float64(pred-real)) / float64(real)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// calibrate checks the device class against the first window with enough
// measured reads, and learns k for non-rotational devices (DESIGN §3).
//
// queue/rotational is often wrong: virtio disks, many cloud volumes and
// loop devices over them report 1. A device classed HDD whose random reads
// (inter-request distance over 64 KiB) almost all (≥ 90 %) complete under
// the HDD hit threshold is not seek-bound: its read-miss table would never
// learn, and the HDD default would predict seeks it does not have. Such a
// device is re-modelled as an SSD. The elevator still sees the kernel's
// rotational flag (Policy.Engine.Rotational), since bfq and the kernel use
// it.
func (c *deviceController) calibrate(reqs []trace.Request) {
	var random, fast, measured int
	var last uint64
	thr := c.model.Config().Hit
	for i := range reqs {
		q := &reqs[i]
		if !q.HasService() {
			continue
		}
		measured++
		if q.Op != trace.Read {
			continue
		}
		d := q.Sector - last
		if q.Sector < last {
			d = last - q.Sector
		}
		last = q.End()
		if d <= 128 {
			continue
		}
		random++
		if thr.IsHit(q.Sectors, q.ServiceTime()) {
			fast++
		}
	}
	if measured < c.policy.MinRequests {
		return
	}
	c.calibrated = true
	what := "random reads"
	if c.model.Class() == model.HDD && random < c.policy.MinRequests {
		// Too few random reads to judge (a strided or sequential load):
		// the reads the HDD model itself predicts as misses testify
		// instead. They are the ones its read-miss table would price, and
		// if nearly all are as fast as hits, that table never learns and
		// the model keeps predicting seeks the device does not have.
		random, fast = c.predictedMisses(reqs)
		what = "reads the HDD model predicted as misses"
	}
	if c.model.Class() == model.HDD && random >= c.policy.MinRequests && fast*10 >= random*9 {
		m := model.Default(model.SSD, c.model.Config().CapacitySectors)
		c.model, c.disk = m, m.NewDisk(0)
		c.note = fmt.Sprintf("modelled as ssd: %d of %d %s were faster than the HDD hit threshold", fast, random, what)
	}
	if c.model.Class() != model.HDD {
		c.model.SetServers(model.EstimateServers(reqs))
	}
}

// predictedMisses replays the measured requests, in dispatch order, on a
// scratch copy of the (HDD) model, as learn does, and counts the reads it
// predicts slower than the hit threshold (misses: a seek) and, of those,
// the ones measured faster than it.
func (c *deviceController) predictedMisses(reqs []trace.Request) (misses, fast int) {
	order := make([]int, 0, len(reqs))
	for i := range reqs {
		if reqs[i].HasService() {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpInt64(reqs[a].Dispatch, reqs[b].Dispatch)
	})
	thr := c.model.Config().Hit
	d := c.model.Clone().NewDisk(0)
	for _, i := range order {
		q := &reqs[i]
		p := d.PredictObserve(q.Op, q.Sector, q.Sectors, q.ServiceTime())
		if q.Op == trace.Read && !thr.IsHit(q.Sectors, p) {
			misses++
			if thr.IsHit(q.Sectors, q.ServiceTime()) {
				fast++
			}
		}
	}
	return misses, fast
}

// step processes one window recorded on the device at time now: it
// calibrates (until done), learns every request, then evaluates.
func (c *deviceController) step(reqs []trace.Request, now time.Time) (WindowReport, error) {
	if !c.calibrated {
		c.calibrate(reqs)
	}
	l := learned{requests: len(reqs)}
	l.realNs, l.predNs, l.errPct = c.learn(reqs)
	return c.evaluate(reqs, l, now)
}

// evaluate processes a window whose requests were learned already (l, and
// l.requests of them in all): reqs are its newest requests, at least the
// newest MaxSimulated, in arrival order (the agent keeps no more:
// collect.go).
func (c *deviceController) evaluate(reqs []trace.Request, l learned, now time.Time) (WindowReport, error) {
	rep := WindowReport{Device: c.name, Start: now, Requests: l.requests}
	rep.RealServiceNs, rep.PredictedServiceNs, rep.ModelErrorPct = l.realNs, l.predNs, l.errPct
	if l.requests < c.policy.MinRequests {
		rep.Skipped = fmt.Sprintf("%d requests (fewer than %d)", l.requests, c.policy.MinRequests)
		return rep, nil
	}
	simReqs := reqs
	if n := c.policy.MaxSimulated; len(simReqs) > n {
		simReqs = simReqs[len(simReqs)-n:]
	}
	er, simReqs, screened, err := c.simulate(simReqs)
	if err != nil {
		return rep, err
	}
	var sliceReal int64 // measured service time of the simulated slice
	for i := range simReqs {
		if simReqs[i].HasService() {
			sliceReal += simReqs[i].ServiceTime()
		}
	}
	rep.Report, rep.SimulatedRealNs, rep.Screened = &er, sliceReal, screened
	curSim := simulatedTotal(er, c.current.Candidate.Name())

	// Verification of the last change comes first: a regression reverts
	// whatever this window recommends.
	if v := c.verify; v != nil {
		v.realNs += sliceReal
		v.prevNs += float64(simulatedTotal(er, v.previous.Candidate.Name())) * v.bias
		v.left--
		rep.Verifying = v.left
		if v.left <= 0 {
			c.verify = nil
			limit := v.prevNs * (1 + c.policy.ToleratedRegressionPct/100)
			if v.prevNs > 0 && float64(v.realNs) > limit {
				c.backoff[v.target.Candidate.Name()] = now.Add(c.policy.Backoff)
				rep.Action = Action{Kind: ActionRevert, Setting: v.previous, Reason: fmt.Sprintf(
					"regression: real %.1f ms vs %.1f ms expected of %s (+%.1f %% > %.1f %%)",
					float64(v.realNs)/1e6, v.prevNs/1e6, v.previous.Candidate.Name(),
					100*(float64(v.realNs)/v.prevNs-1), c.policy.ToleratedRegressionPct)}
				c.current = v.previous
				c.guard = er.Guard
				prev := v.previous
				rep.Target, rep.Reason = &prev, ReasonRegressionReverted
				return rep, nil
			}
		}
	}
	if curSim > 0 && sliceReal > 0 && c.verify == nil {
		r := float64(sliceReal) / float64(curSim)
		c.bias = 0.7*c.bias + 0.3*r
	}

	// In Observe mode a predicted switch is not made, so it does not count
	// towards the thrash guard (DADS §4.2 counts changes): the
	// recommendation stays the best candidate instead of the pinned
	// default after a few windows.
	if c.policy.Apply || !er.Decision.Switch {
		c.guard = er.Guard
	}
	target := c.current
	d := er.Decision
	rep.Reason = string(d.Reason)
	if d.Switch {
		if until, ok := c.backoff[d.Target]; ok && now.Before(until) {
			rep.Skipped = fmt.Sprintf("%s regressed before; not retried until %s", d.Target, until.Format(time.RFC3339))
			rep.Reason = ReasonRegressionBackoff
		} else {
			target.Candidate = candidateByName(er, d.Target)
		}
	}
	if c.policy.ReadAhead && er.ReadAhead.KiB > 0 {
		if raStable(c.raAdvice, er.ReadAhead.KiB) && !raClose(er.ReadAhead.KiB, c.current.ReadAheadKiB) {
			target.ReadAheadKiB = er.ReadAhead.KiB
		}
		c.raAdvice = er.ReadAhead.KiB
	}
	rep.Target = &target
	if !c.policy.Apply || sameSetting(target, c.current) {
		return rep, nil
	}
	rep.Action = Action{Kind: ActionApply, Setting: target, Reason: d.Message}
	if target.Candidate.Name() != c.current.Candidate.Name() {
		c.verify = &verification{previous: c.current, target: target, bias: c.bias, left: c.policy.VerifyWindows}
		rep.Verifying = c.policy.VerifyWindows
	}
	c.current = target
	return rep, nil
}

// simulate evaluates the window over reqs (its newest requests, in arrival
// order), screening first (Policy.ScreenRequests) unless a change is being
// verified; it returns the evaluation, the requests it covers and whether
// it was the screening pass.
func (c *deviceController) simulate(reqs []trace.Request) (engine.Report, []trace.Request, bool, error) {
	m := c.model.Clone() // one snapshot for both passes
	if n := c.policy.ScreenRequests; n > 0 && len(reqs) > n && c.verify == nil {
		tail := reqs[len(reqs)-n:]
		er, err := c.evaluateOver(tail, m)
		if err != nil {
			return er, nil, false, err
		}
		if engine.ScreenAccepts(er, c.policy.Decide.MarginPct) {
			return er, tail, true, nil
		}
	}
	er, err := c.evaluateOver(reqs, m)
	return er, reqs, false, err
}

// evaluateOver simulates reqs under every candidate with model m (which
// it only reads) and decides, from the controller's current setting and
// thrash-guard state (which it does not change).
func (c *deviceController) evaluateOver(reqs []trace.Request, m *model.Model) (engine.Report, error) {
	w, err := sim.NewWindow(reqs, sim.LoopAuto)
	if err != nil {
		return engine.Report{}, fmt.Errorf("%s: window: %w", c.name, err)
	}
	opt := c.policy.Engine
	if opt.Parallel == 0 {
		// The agent stays in the background: one candidate at a time, so
		// an evaluation never takes more than one core (and allocates one
		// candidate's per-request state at a time).
		opt.Parallel = 1
	}
	opt.Model = m
	opt.Current = c.current.Candidate
	opt.Decide = c.policy.Decide
	opt.Guard = c.guard
	er, err := engine.Evaluate(w, c.policy.Candidates, opt)
	if err != nil {
		return engine.Report{}, fmt.Errorf("%s: evaluate: %w", c.name, err)
	}
	return er, nil
}

// ctrlState is the part of a controller's state a window may change when
// it asks for a change: what denied puts back.
type ctrlState struct {
	current Setting
	guard   decide.State
	verify  *verification
}

func (c *deviceController) save() ctrlState {
	return ctrlState{current: c.current, guard: c.guard, verify: c.verify}
}

// denied tells the controller that its last ActionApply was not allowed
// (no grant, or the policy is paused): the device did not change, so the
// setting, the verification in progress and the thrash guard are as
// before the window (a change not made does not count towards the guard;
// the verification keeps this window's measurements, accumulated in
// place).
func (c *deviceController) denied(s ctrlState) {
	c.current, c.guard, c.verify = s.current, s.guard, nil
	if s.verify != nil && s.verify.left > 0 {
		c.verify = s.verify // still verifying (step counted this window)
	}
}

// rejected tells the controller that the agent could not apply its last
// action (the device did not change).
func (c *deviceController) rejected(previous Setting) {
	c.current = previous
	c.verify = nil
}

// raStable reports whether two consecutive read-ahead advices agree
// within a factor of 1.5: the competitive depth of a device whose switch
// cost is near zero is noise, and read-ahead should not flap with it.
func raStable(prev, cur int) bool { return prev > 0 && raClose(prev, cur) }

// raClose reports whether two depths are within a factor of 1.5.
func raClose(a, b int) bool {
	if a <= 0 || b <= 0 {
		return false
	}
	return 2*max(a, b) <= 3*min(a, b)
}

func sameSetting(a, b Setting) bool {
	return a.Candidate.Name() == b.Candidate.Name() && a.ReadAheadKiB == b.ReadAheadKiB
}

func simulatedTotal(r engine.Report, name string) int64 {
	for _, o := range r.Outcomes {
		if o.Candidate.Name() == name {
			return o.Result.TotalServiceNs
		}
	}
	return 0
}

func candidateByName(r engine.Report, name string) engine.Candidate {
	for _, o := range r.Outcomes {
		if o.Candidate.Name() == name {
			return o.Candidate
		}
	}
	return engine.Candidate{}
}
