package agent

// One governed device: its controller, its share of the tracer's output,
// and its status. A window of the device has one entry point, window: it
// ends the controller's window under the device's gate, performs the
// action the controller asks for, and refreshes the status.

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/host"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/modelfile"
	"github.com/shadowtune/shadowtune/agent/otherwriter"
	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/agent/sampling"
	"github.com/shadowtune/shadowtune/agent/selection"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// device is the agent's state for one governed device.
type device struct {
	sys    sysfs.Device
	ctrl   *window.Controller
	status v1alpha1.DeviceState

	policy *v1alpha1.StorageTuning // the governing policy
	key    string                  // selection.PolicyKey(policy)
	target *window.Setting         // the last evaluated window's recommendation
	// yielded: another writer changed the device and the policy yields to
	// it (watchWriters): no change is made any more.
	yielded bool
	// cache is the dm-cache in front of the device, when the policy
	// governs caches and there is one (cacheBefore).
	cache *dmcache.Governed
	// defaults are the device's queue defaults read at its adoption
	// (checkDefaults), previousDefaults those before a change of them
	// that is still in force (nil when none is); both kept in its memo.
	defaults, previousDefaults *sentinel.Seen
	// sampled: the current window is traced for its last part only
	// (agent/sampling); ios counts its completed requests for the check
	// that the sample held its share of them.
	sampled bool
	ios     sampling.Counts

	// pending is filled by the tracer's callback, under the agent's
	// mutex; ingest swaps it with chunk, so both buffers are reused.
	pending, chunk []trace.Request
	// pendingMax bounds pending (keepPending), in requests; overflow
	// counts the requests it dropped since the last ingest. Both are
	// guarded by the agent's mutex.
	pendingMax, overflow int
}

// keepPending appends r to pending, keeping at most pendingMax requests:
// when pending is full its older half is dropped and counted in overflow.
// The loop ingests pending between windows but not while it evaluates
// one, which on the heaviest policy the CRD accepts takes tens of
// seconds; unbounded, pending grew by the device's whole request rate
// meanwhile (56 bytes a request; a 3.9 GB live heap at ~400,000 requests
// a second). The newer half kept is at least the window's simulated slice
// (pendingMax = 2 × Policy.MaxSimulated), so the window still simulates
// contiguous requests; the dropped ones are not learned.
func (d *device) keepPending(r *trace.Request) {
	if d.pendingMax > 0 && len(d.pending) >= d.pendingMax {
		half := len(d.pending) / 2
		d.pending = d.pending[:copy(d.pending, d.pending[half:])]
		d.overflow += half
	}
	d.pending = append(d.pending, *r)
}

// windowEnv is what a device's window uses besides the device.
type windowEnv struct {
	budget  *host.CPUBudget
	act     *actuate.Actuator
	metrics *metrics.Metrics
	log     logr.Logger
	// grant reports whether the operator's grant allows changing the
	// device under its policy now; nil allows every change.
	grant func(device string, policy *v1alpha1.StorageTuning) bool
	// writers names other writers; nil when no probe runs.
	writers otherwriter.Namer
	// pageCache is a device's page-cache counts in the window; nil when
	// the page-cache probe does not run.
	pageCache func(device string) readahead.PageCache
	// caps are the blk-throttle caps of each device's readers, by
	// "MAJ:MIN" (blkcaps); nil: none are known.
	caps map[string]model.Throttle
	// readScale is the window's length over a sampled window's traced
	// part (window.Input.ReadScale).
	readScale float64
	// caches reads and switches dm-caches below hostRoot; nil: none are
	// governed.
	caches   dmcache.Caches
	hostRoot string
}

// newDevice builds a device's controller under its governing policy, whose
// spec must be defaulted: its model (loaded from the state directory when
// one was saved for the same device, else the class default) and its
// candidates.
func newDevice(s selection.Governed, stateDir string) (*device, error) {
	sd := s.Device
	m, loaded := modelfile.Load(stateDir, sd)
	cur := window.Setting{Candidate: engine.Candidate{Scheduler: sd.Scheduler}, ReadAheadKiB: sd.ReadAheadKiB}
	ctrl, err := window.New(sd.Name, m, cur, policyFor(&s.Policy.Spec, sd))
	if err != nil {
		return nil, err
	}
	if loaded {
		// A saved model was calibrated when it was learned: the first
		// window is learned online, and may be sampled (agent/sampling).
		ctrl.Learned()
	}
	d := &device{sys: sd, ctrl: ctrl, policy: s.Policy, key: selection.PolicyKey(s.Policy)}
	d.status = v1alpha1.DeviceState{
		Current: v1alpha1.DeviceSettings{Scheduler: sd.Scheduler, ReadAheadKiB: int32(sd.ReadAheadKiB)},
		Class:   v1alpha1.DeviceClass(sd.Class().String()),
	}
	d.setIdentity()
	return d, nil
}

// holds reports whether the disk still has the setting the device's
// controller knows (nothing changed it behind the agent's back).
func (d *device) holds(sd sysfs.Device) bool {
	cur := d.ctrl.Current
	return cur.Candidate.Scheduler == sd.Scheduler && cur.ReadAheadKiB == sd.ReadAheadKiB
}

// carry gives a new device what was learned about the same disk under
// its previous policy: the model (when the capacity is the same), the
// regression back-off, the time of the last change (for minDwell), the
// read-ahead default before a change under it, and the status counters.
func (d *device) carry(old *device) {
	if d.ctrl.Carry(old.ctrl) {
		d.status.Class = old.status.Class
	}
	st, was := &d.status, &old.status
	st.TotalRequests, st.UnlearnedRequests, st.EventsDropped, st.EventsLost = was.TotalRequests, was.UnlearnedRequests, was.EventsDropped, was.EventsLost
	st.Changes, st.Reverts, st.LastRevertTime = was.Changes, was.Reverts, was.LastRevertTime
	st.LastChangeTime, st.LastChange, st.LastError = was.LastChangeTime, was.LastChange, was.LastError
	st.Applied = was.Applied
	st.DefaultsChanged = was.DefaultsChanged
	d.defaults, d.previousDefaults = old.defaults, old.previousDefaults
}

// setIdentity fills the status fields that come from sysfs and the policy.
func (d *device) setIdentity() {
	sd, st := &d.sys, &d.status
	st.Name, st.GovernedBy, st.Mode, st.Paused = sd.Name, d.policy.Name, d.policy.Spec.Mode, d.policy.Spec.Paused
	st.MajorMinor, st.Model, st.Serial, st.WWN = sd.MajorMinor, sd.Model, sd.Serial, sd.WWN
	st.SizeBytes, st.Rotational = int64(min(sd.SizeBytes, 1<<63-1)), sd.Rotational
}

// apply reports whether the device is governed in Apply mode.
func (d *device) apply() bool { return d.policy.Spec.Mode == v1alpha1.ModeApply }

// ingest hands the requests the tracer delivered since the last call to
// the controller (mu guards pending).
func (d *device) ingest(mu *sync.Mutex) {
	mu.Lock()
	d.pending, d.chunk = d.chunk[:0], d.pending
	d.pendingMax = 2 * d.ctrl.Policy.MaxSimulated
	dropped := d.overflow
	d.overflow = 0
	mu.Unlock()
	d.ctrl.Add(d.chunk)
	d.ctrl.Skip(dropped)
}

// gate is the device's gate now: its policy's pause and minDwell, and, in
// Apply mode, the grant (asked only then).
func (d *device) gate(e *windowEnv) window.Gate {
	g := window.Gate{Paused: d.policy.Spec.Paused, Granted: true, Yielded: d.yielded}
	if dw := d.policy.Spec.Rollout.MinDwell; dw != nil {
		g.MinDwell = dw.Duration
	}
	if d.apply() && !g.Paused && !g.Yielded && e.grant != nil {
		g.Granted = e.grant(d.sys.Name, d.policy)
	}
	return g
}

// window ends the device's window at now: evaluation (within the CPU
// budget), the action the controller asks for, and the status.
func (d *device) window(now time.Time, e *windowEnv) {
	d.watchWriters(now, e)
	d.cacheBefore(e)
	in := window.Input{Now: now, Gate: d.gate(e), Sampled: d.sampled}
	if d.sampled {
		in.ReadScale = e.readScale
	}
	in.Missed = d.ios.Check(e.hostRoot, d.sys.Name, d.sampled, e.readScale)
	if e.pageCache != nil {
		in.PageCache = e.pageCache(d.sys.Name)
	}
	in.Caps = e.caps[d.sys.MajorMinor]
	if !e.budget.Allow() {
		in.Skip = "over the CPU budget"
	}
	cpu0, t0 := host.ProcessCPU(), time.Now()
	rep, err := d.ctrl.EndWindow(in)
	if in.Skip == "" {
		wall, cpu := time.Since(t0), host.ProcessCPU()-cpu0
		e.budget.Spend(cpu)
		if e.metrics != nil {
			e.metrics.ObserveEvaluation(d.sys.Name, wall, cpu)
		}
	}
	d.report(rep, err, in, e)
	if err == nil && in.Skip == "" {
		d.judgeDefaults(rep.Report, e.metrics)
	}
	d.ctrl.LogReadAhead(e.log, d.sys.Name)
	d.ctrl.LogThrottle(e.log, d.sys.Name)
	if err == nil && rep.Action.Kind != window.ActionNone {
		d.act(rep.Action, now, e)
	}
	if err == nil && in.Skip == "" {
		d.cacheAfter(rep, in.Gate, now, e)
	}
	if d.ctrl.MemoDue() {
		d.memorize(e.act, e.log)
	}
	d.refresh(e.act, in.Gate)
}

// watchWriters looks for another writer's change of the device's
// setting at now (otherwriter.Check) and, when it finds one, reports it
// (status, metrics, log) and takes the new setting as the controller's
// current one; under spec.otherWriters Yield the device is then yielded.
func (d *device) watchWriters(now time.Time, e *windowEnv) {
	yield := d.policy.Spec.OtherWriters != v1alpha1.OtherWritersReclaim
	f, found := otherwriter.Check(e.act, d.sys.Name, d.ctrl.Current, yield, e.writers, now, e.log)
	if !found {
		return
	}
	if yield {
		d.yielded = true
	}
	d.ctrl.Resync(f.Now)
	d.status.OtherWriter = &v1alpha1.OtherWriterState{Time: metav1.NewTime(now), Change: f.Change, Writer: f.Writer, Yielded: d.yielded}
	if e.metrics != nil {
		e.metrics.IncOtherWriter(d.sys.Name)
	}
	e.log.Info("OtherWriter: another writer changed a setting the agent governs", "device", d.sys.Name,
		"change", f.Change, "writer", f.Writer, "yielded", d.yielded)
}

// report puts a window's report into the status and the metrics.
func (d *device) report(rep window.Report, err error, in window.Input, e *windowEnv) {
	st, m := &d.status, e.metrics
	st.TotalRequests += int64(rep.Requests)
	st.UnlearnedRequests += int64(rep.Unlearned)
	w := &v1alpha1.WindowState{Requests: int64(rep.Requests), Sampled: in.Sampled}
	st.Window = w
	if in.Skip != "" {
		w.Skipped = in.Skip
		st.CPUBudgetSkips++
		st.LastCPUBudgetSkipTime = ptrTime(in.Now)
		if m != nil {
			m.SkipWindow(d.sys.Name, metrics.SkipCPUBudget)
		}
		return
	}
	if st.TotalRequests > 0 {
		st.ModelErrorPercent = v1alpha1.FormatPercent(rep.ModelErrorPct)
		st.DeviceVariationPercent = ""
		if rep.DeviceVariationPct >= 0 {
			st.DeviceVariationPercent = v1alpha1.FormatPercent(rep.DeviceVariationPct)
		}
	}
	st.Class, w.Note = v1alpha1.DeviceClass(d.ctrl.Model().Class().String()), d.ctrl.Note()
	st.Throttle = nil
	if th := d.ctrl.Model().Throttle(); th.Enabled() {
		st.Throttle = &v1alpha1.DeviceThrottle{IOPS: int64(math.Round(th.IOPS)), BytesPerSecond: int64(math.Round(th.BytesPerSec))}
	}
	if until, narrow := d.ctrl.NarrowedUntil(); narrow {
		w.Note = strings.TrimPrefix(w.Note+"; ", "; ") + "every candidate simulated alike: the current setting alone is simulated until " +
			until.UTC().Format(time.RFC3339)
	}
	if rep.Unlearned > 0 {
		w.Note = strings.TrimPrefix(w.Note+"; ", "; ") + fmt.Sprintf("%d requests arrived while the agent was evaluating and were not learned (memory bound)", rep.Unlearned)
	}
	if err != nil {
		w.Error, st.LastError = err.Error(), err.Error()
		e.log.Error(err, "evaluate window", "device", d.sys.Name)
		if m != nil {
			m.SkipWindow(d.sys.Name, metrics.SkipError)
		}
		return
	}
	w.Skipped = rep.Skipped
	r := rep.Report
	if r == nil {
		if m != nil {
			reason := metrics.SkipTooFewRequests
			if rep.Reason == window.ReasonSampleMissed {
				reason = metrics.SkipSampleMissed
			}
			m.SkipWindow(d.sys.Name, reason)
		}
		return
	}
	w.Best, w.BestGainPercent = r.Decision.Best, v1alpha1.FormatPercent(r.Decision.BestImprovementPct)
	w.ReadAheadAdviceKiB = int32(r.ReadAhead.KiB)
	if kib := d.ctrl.ReadAheadAdvice(); kib > 0 {
		w.ReadAheadAdviceKiB = int32(kib)
	}
	w.DispatchCharges = window.DispatchCharges(r)
	st.Candidates = topCandidates(r, d.ctrl.Policy.Engine.Rank, v1alpha1.MaxDeviceCandidates)
	d.ctrl.ShowEvidence(&d.status)
	if rep.Target != nil {
		d.target = rep.Target
		st.Recommendation = recommendationOf(rep, d.ctrl.Policy.ReadAhead)
	}
	if rep.Held == window.HoldDwell {
		w.Note = "keeping the setting for spec.rollout.minDwell, until " +
			d.ctrl.Memo.LastChange.Add(in.Gate.MinDwell).UTC().Format(time.RFC3339)
	}
	if m != nil {
		observeWindow(m, d.sys.Name, rep, d.ctrl.Predicted(*rep.Report), in.Now)
		d.observeEvidence(m)
	}
}

// judgeDefaults judges each changed knob of the device that the window
// prices (window.Controller.DefaultCosts) by the policy's margin
// (sentinel.JudgeKnobs), and exports the verdicts; a knob the window does
// not price keeps its last verdict.
func (d *device) judgeDefaults(r *engine.Report, m *metrics.Metrics) {
	dc := d.status.DefaultsChanged
	if dc == nil {
		return
	}
	costs := func(k v1alpha1.KnobChange) (newNs, oldNs float64) { return d.ctrl.DefaultCosts(k, r) }
	judged := sentinel.JudgeKnobs(dc, costs, d.ctrl.Policy.Decide.MarginPct)
	if m != nil {
		m.SetDefaultsSlower(d.sys.Name, judged)
	}
}

// observeWindow exports a simulated window's figures.
func observeWindow(m *metrics.Metrics, dev string, rep window.Report, pred map[string]time.Duration, now time.Time) {
	r := rep.Report
	sim := map[string]time.Duration{}
	for _, o := range r.Outcomes {
		sim[o.Candidate.Name()] = time.Duration(o.Result.TotalServiceNs)
	}
	m.ObserveWindow(dev, metrics.WindowReport{Predicted: pred,
		Requests: uint64(rep.Requests), RealService: time.Duration(rep.RealServiceNs), PredictedService: time.Duration(rep.PredictedServiceNs),
		Current: r.Current, Simulated: sim, SwitchCost: time.Duration(r.Decision.SwitchCostNs), End: now,
		SimulatedRealService: time.Duration(rep.SimulatedRealNs), Screened: rep.Screened,
	})
	m.SetThrashGuard(dev, r.Guard.ConsecutiveChanges, r.Guard.QuietChecks, r.Guard.Pinned)
}

// observeEvidence exports the evidence of the device's last window.
func (d *device) observeEvidence(m *metrics.Metrics) {
	c := d.ctrl
	ev := c.ReadAheadEvidence()
	m.SetEvidence(d.sys.Name, ev.WastePct()/100, ev.Resolved() >= readahead.MinResolvedPages, c.Memo.Corrections)
	th := c.Model().Throttle()
	m.SetThrottle(d.sys.Name, th.IOPS, th.BytesPerSec)
	m.SetCounterfactual(d.sys.Name, c.Memo.Counterfactual.ErrorPct(), c.Memo.Counterfactual.Checks, c.CounterfactualHolding())
}

// act writes the action's setting to the device (the actuator records the
// original first) and, when it is written, commits it to the controller.
func (d *device) act(a window.Action, now time.Time, e *windowEnv) {
	prev := d.ctrl.Current
	s := a.Setting
	st := &d.status
	if d.ctrl.StartsVerification(a) {
		// The memo says a change is unverified before the device has it.
		d.ctrl.SetChanging(true)
		d.memorize(e.act, e.log)
	}
	written := d.write(s, prev, e)
	d.ctrl.SetChanging(false)
	if !written {
		return
	}
	d.ctrl.Commit(a, now)
	d.memorize(e.act, e.log)
	st.Applied = &v1alpha1.AppliedSetting{Scheduler: s.Candidate.Scheduler, Tunables: tunablesText(s.Candidate.Tunables),
		ReadAheadKiB: int32(s.ReadAheadKiB), At: metav1.NewTime(now)}
	st.LastChangeTime, st.LastChange = ptrTime(now), changeText(prev, s)
	if a.Kind == window.ActionRevert {
		st.Reverts++
		st.LastRevertTime = ptrTime(now)
		st.LastChange = "reverted " + st.LastChange + ": " + a.Reason
	} else {
		st.Changes++
	}
	if m := e.metrics; m != nil {
		if a.Kind == window.ActionRevert {
			m.IncRevert(d.sys.Name, metrics.RevertRegression)
		} else {
			m.IncChange(d.sys.Name)
		}
		ra := s.ReadAheadKiB
		if ra == 0 {
			ra = prev.ReadAheadKiB
		}
		m.SetSetting(d.sys.Name, s.Candidate.Scheduler, ra, s.Candidate.Tunables.String())
	}
	e.log.Info("applied", "device", d.sys.Name, "change", st.LastChange)
}

// write writes setting s to the device, expecting what the controller
// last saw (was): a value another writer set since this window's check is
// not overwritten (ErrOtherWriter); the next window's check names the
// writer and yields. It reports whether s was written; an error is in
// the status and logged.
func (d *device) write(s, was window.Setting, e *windowEnv) bool {
	var queueDefaults map[string]int64
	if s.DropsQueueKnob(was) {
		var err error
		if queueDefaults, err = e.act.QueueDefaults(d.sys.Name); err != nil {
			e.log.Error(err, "the queue attributes the setting leaves out keep the values written before", "device", d.sys.Name)
		}
	}
	ap, err := e.act.Apply(d.sys.Name, actuate.Setting{
		Scheduler: s.Candidate.Scheduler, Tunables: s.Writes(was, queueDefaults), ReadAheadKiB: s.ReadAheadKiB,
		Expect: &actuate.Expected{Scheduler: was.Candidate.Scheduler, ReadAheadKiB: was.ReadAheadKiB},
	})
	st := &d.status
	if err != nil {
		st.Window.Error, st.Window.ApplyError, st.LastError = err.Error(), err.Error(), err.Error()
		e.log.Error(err, "apply", "device", d.sys.Name, "setting", s.Candidate.Name())
		return false
	}
	if ap.RecordError != nil {
		// The device changed; its record is written again every window.
		st.LastError = ap.RecordError.Error()
		e.log.Error(ap.RecordError, "the change is made, its record is not updated yet", "device", d.sys.Name)
	}
	return true
}

// changeText says what a write changed: "none -> bfq, read_ahead_kb 128 -> 16".
func changeText(prev, s window.Setting) string {
	var parts []string
	if s.Candidate.Name() != prev.Candidate.Name() {
		parts = append(parts, fmt.Sprintf("%s -> %s", prev.Candidate.Name(), s.Candidate.Name()))
	}
	if s.ReadAheadKiB != 0 && s.ReadAheadKiB != prev.ReadAheadKiB {
		parts = append(parts, fmt.Sprintf("read_ahead_kb %d -> %d", prev.ReadAheadKiB, s.ReadAheadKiB))
	}
	return strings.Join(parts, ", ")
}

// refresh fills the status fields read from the device and the actuator
// after a window: the setting in sysfs, the recorded original, the
// controller's guard and verification, and whether a recommended change
// awaits a grant (gate g).
func (d *device) refresh(act *actuate.Actuator, g window.Gate) {
	st := &d.status
	if s, err := act.Read(d.sys.Name); err == nil {
		st.Current = v1alpha1.DeviceSettings{Scheduler: s.Scheduler, Tunables: s.Tunables, ReadAheadKiB: int32(s.ReadAheadKiB)}
	}
	if o, ok := act.Original(d.sys.Name); ok {
		st.Original = &v1alpha1.DeviceSettings{Scheduler: o.State.Scheduler, Tunables: o.State.Tunables,
			ReadAheadKiB: int32(o.State.ReadAheadKiB)}
	} else {
		// Without a record the device has its original setting: nothing
		// the agent wrote is in effect, and no dwell holds it.
		st.Original, st.Applied = nil, nil
		d.ctrl.Memo.LastChange = time.Time{}
	}
	gd := d.ctrl.Memo.Guard
	st.ThrashGuard = v1alpha1.ThrashGuardState{Changes: int32(gd.ConsecutiveChanges), QuietChecks: int32(gd.QuietChecks),
		Pinned: gd.Pinned}
	st.VerifyingWindows = 0
	st.VerifyingWindows = int32(d.ctrl.VerifyingWindows())
	st.ModelCalibrated = d.ctrl.Calibrated()
	pending := d.target != nil && !window.SameSetting(*d.target, d.ctrl.Current)
	st.AwaitingGrant = pending && d.apply() && !g.Paused && !g.Yielded && !g.Granted
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
