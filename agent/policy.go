package agent

// Per-device policy (which StorageTuning governs a device), the restore of
// devices no policy governs in Apply mode, the state carried from one Run
// to the next (Resume), and the status fields filled from a window's
// report.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/readahead"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// selected is a device and the policy that governs it.
type selected struct {
	sys    sysfs.Device
	policy *v1alpha1.StorageTuning
}

// policies returns the policies Run works with, and whether they came from
// Options.Policies (the cluster agent) rather than Options.Spec (`shadowtune
// run`, whose one policy ignores its node selector).
func (o *Options) policies() ([]*v1alpha1.StorageTuning, bool) {
	if o.Policies != nil {
		return o.Policies, true
	}
	spec := *o.Spec.DeepCopy()
	spec.NodeSelector = nil
	return []*v1alpha1.StorageTuning{{Spec: spec}}, false
}

// selectDevices discovers the host's block devices and finds the policy
// that governs each tunable whole disk (one with a queue/scheduler): the
// API's rule, v1alpha1.Governing (the operator's too), then the device-kind
// rules of sysfs.SelectFor for that policy (virtual devices such as loop
// devices only when one of its include globs names them), which may leave
// the device ungoverned. others are the remaining tunable disks that are
// not virtual.
func selectDevices(hostRoot string, policies []*v1alpha1.StorageTuning, nodeLabels map[string]string) (sel []selected, others []sysfs.Device, err error) {
	all, err := sysfs.Discover(hostRoot)
	if err != nil && len(all) == 0 {
		return nil, nil, fmt.Errorf("discover devices: %w", err)
	}
	for _, d := range all {
		if d.Partition || d.SizeBytes == 0 || len(d.Schedulers) == 0 {
			continue // no queue/scheduler (zram, most dm): nothing to tune
		}
		info := v1alpha1.DeviceInfo{Name: d.Name, Rotational: d.Rotational, SizeBytes: int64(min(d.SizeBytes, math.MaxInt64))}
		p := v1alpha1.Governing(policies, nodeLabels, info)
		if p != nil && len(sysfs.SelectFor([]sysfs.Device{d}, &p.Spec.Devices)) == 1 {
			sel = append(sel, selected{sys: d, policy: p})
		} else if !d.Virtual() {
			others = append(others, d)
		}
	}
	return sel, others, nil
}

// runMode is Status.Mode: the policy's mode for `shadowtune run`; Apply
// when some device is governed in Apply mode, else Observe, for the
// cluster agent.
func runMode(policies []*v1alpha1.StorageTuning, sel []selected, cluster bool) string {
	if !cluster {
		return string(policies[0].Spec.Mode)
	}
	for _, s := range sel {
		if s.policy.Spec.Mode == v1alpha1.ModeApply {
			return string(v1alpha1.ModeApply)
		}
	}
	return string(v1alpha1.ModeObserve)
}

// restoreUngoverned reverts, exactly as recorded, every device the
// actuator has a record of that no policy governs in Apply mode now. A
// device that is gone keeps its record (it is logged, not an error).
func restoreUngoverned(act *actuate.Actuator, sel []selected, opt Options) error {
	applyDevs := map[string]bool{}
	for _, s := range sel {
		if s.policy.Spec.Mode == v1alpha1.ModeApply {
			applyDevs[s.sys.Name] = true
		}
	}
	var errs []error
	var done []string
	for _, dev := range slices.Sorted(maps.Keys(act.Originals())) {
		if applyDevs[dev] {
			continue
		}
		if err := act.Revert(dev); err != nil {
			if errors.Is(err, actuate.ErrDeviceGone) {
				opt.Log.Info("a device changed by an earlier run is gone; its record is kept", "device", dev, "error", err.Error())
				continue
			}
			errs = append(errs, err)
			continue
		}
		done = append(done, dev)
		opt.Resume.forgetSettings(dev)
		if opt.Metrics != nil {
			opt.Metrics.IncRevert(dev, metrics.RevertObserve)
		}
	}
	if len(done) > 0 {
		opt.Log.Info("restored devices no policy governs in Apply mode", "devices", done)
	}
	return errors.Join(errs...)
}

// minWindow is the shortest window of the governing policies (the default
// window when none governs a device).
func minWindow(sel []selected) time.Duration {
	def, _ := time.ParseDuration(v1alpha1.DefaultWindow)
	w := time.Duration(0)
	for _, s := range sel {
		d := def
		if p := s.policy.Spec.Evaluation.Window; p != nil && p.Duration > 0 {
			d = p.Duration
		}
		if w == 0 || d < w {
			w = d
		}
	}
	if w == 0 {
		w = def
	}
	return w
}

// cpuBudgetPct is the largest CPU budget of the governing policies: the
// devices share one budget.
func cpuBudgetPct(sel []selected) int {
	pct := 0
	for _, s := range sel {
		pct = max(pct, int(deref(s.policy.Spec.Evaluation.CPUBudgetPercent, v1alpha1.DefaultCPUBudgetPercent)))
	}
	if pct == 0 {
		pct = v1alpha1.DefaultCPUBudgetPercent
	}
	return pct
}

// policyKey identifies a policy's spec: a controller built for one key
// is valid for another Run with the same key.
func policyKey(p *v1alpha1.StorageTuning) string {
	return fmt.Sprintf("%s/%s/%d", p.Name, p.UID, p.Generation)
}

// newDevices builds a controller per device (newDevice), or takes it over
// from the previous Run (Resume).
func newDevices(sel []selected, stateDir string, r *Resume) ([]*device, error) {
	var out []*device
	for _, s := range sel {
		if d := r.reuse(s); d != nil {
			out = append(out, d)
			continue
		}
		d, err := newDevice(s, stateDir)
		if err != nil {
			return nil, err
		}
		r.carry(d)
		out = append(out, d)
	}
	return out, nil
}

// newDevice builds a device's controller under its governing policy: its
// model (loaded from the state directory when one was saved for the same
// device, else the class default) and its candidates.
func newDevice(s selected, stateDir string) (*device, error) {
	sd, spec := s.sys, &s.policy.Spec
	apply := spec.Mode == v1alpha1.ModeApply
	m, loaded := loadModel(stateDir, sd)
	cands := candidates(spec, sd)
	def := engine.Candidate{Scheduler: string(spec.Schedulers.Default)}
	if !slices.Contains(sd.Schedulers, def.Scheduler) {
		def = engine.Candidate{Scheduler: sd.Scheduler}
	}
	if !containsCandidate(cands, def) {
		cands = append(cands, def)
	}
	dcfg := decide.DefaultConfig(def.Name())
	dcfg.MarginPct = float64(deref(spec.Evaluation.MarginPercent, v1alpha1.DefaultMarginPercent))
	dcfg.GuardChanges = int(deref(spec.Evaluation.ThrashGuard.Changes, v1alpha1.DefaultThrashGuardChanges))
	dcfg.QuietChecks = int(deref(spec.Evaluation.ThrashGuard.QuietChecks, v1alpha1.DefaultThrashGuardQuietChecks))
	ra := readahead.Bounds{
		MinKiB: int(deref(spec.ReadAhead.MinKiB, v1alpha1.DefaultReadAheadMinKiB)),
		MaxKiB: int(deref(spec.ReadAhead.MaxKiB, v1alpha1.DefaultReadAheadMaxKiB)),
	}
	rot := sd.Rotational
	eopt := engine.Options{MaxSectors: uint32(sd.MaxSectorsKB * 2), ReadAhead: ra, Rotational: &rot}
	if spec.Cache.Enabled {
		budget := int64(64 << 20)
		if q := spec.Cache.MemoryBudget; q != nil {
			budget = q.Value()
		}
		eopt.Cache = redcap.Config{Segments: int(max(budget/(128<<10), 1)), SegmentSectors: 256}
		for _, c := range slices.Clone(cands) {
			c.Cache = true
			cands = append(cands, c)
		}
	}
	p := Policy{
		Apply:                  apply,
		Candidates:             cands,
		Decide:                 dcfg,
		Engine:                 eopt,
		ReadAhead:              deref(spec.ReadAhead.Enabled, v1alpha1.DefaultReadAheadEnabled),
		ToleratedRegressionPct: float64(deref(spec.Rollout.ToleratedRegressionPercent, v1alpha1.DefaultToleratedRegressionPercent)),
	}
	cur := Setting{Candidate: engine.Candidate{Scheduler: sd.Scheduler}, ReadAheadKiB: sd.ReadAheadKiB}
	ctrl, err := newDeviceController(sd.Name, m, cur, p)
	if err != nil {
		return nil, err
	}
	ctrl.calibrated = loaded // a saved model was calibrated when it was learned
	d := &device{sys: sd, ctrl: ctrl, policy: s.policy, key: policyKey(s.policy), apply: apply, status: DeviceStatus{
		Name: sd.Name, Class: sd.Class().String(), Current: sd.Scheduler, ReadAheadKiB: sd.ReadAheadKiB,
	}}
	d.setIdentity()
	return d, nil
}

// setIdentity fills the status fields that come from sysfs and the policy.
func (d *device) setIdentity() {
	sd := &d.sys
	d.status.Policy, d.status.Mode, d.status.Paused = d.policy.Name, string(d.policy.Spec.Mode), d.policy.Spec.Paused
	d.status.MajorMinor, d.status.Model, d.status.Serial, d.status.WWN = sd.MajorMinor, sd.Model, sd.Serial, sd.WWN
	d.status.SizeBytes, d.status.Rotational = sd.SizeBytes, sd.Rotational
}

// candidates lists the settings allowed by the policy that the device
// offers: each allowed scheduler it lists in queue/scheduler, with each
// combination of the policy's tunable values.
func candidates(spec *v1alpha1.StorageTuningSpec, sd sysfs.Device) []engine.Candidate {
	var out []engine.Candidate
	for _, name := range spec.Schedulers.Candidates {
		if !slices.Contains(sd.Schedulers, string(name)) {
			continue
		}
		for _, tun := range spec.TunableCandidates(name) {
			c := engine.Candidate{Scheduler: string(name)}
			if len(tun) > 0 {
				c.Tunables = sched.Tunables(tun)
			}
			if _, err := sched.New(c.Scheduler, c.Tunables, sched.DefaultDevice); err != nil {
				continue // a value the model rejects (validated by the API already)
			}
			if !containsCandidate(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// refresh fills the status fields read from the device and the actuator
// after a window: the settings in sysfs, the recorded original, the
// controller's guard and verification, and whether a recommended change
// is pending or awaiting a grant.
func (d *device) refresh(act *actuate.Actuator, opt Options) {
	if s, err := act.Read(d.sys.Name); err == nil {
		d.status.Settings = &Settings{Scheduler: s.Scheduler, Tunables: s.Tunables, ReadAheadKiB: s.ReadAheadKiB}
	}
	if o, ok := act.Original(d.sys.Name); ok {
		d.status.Original = &Settings{Scheduler: o.State.Scheduler, Tunables: o.State.Tunables, ReadAheadKiB: o.State.ReadAheadKiB}
	} else {
		// Without a record the device has its original setting: nothing
		// the agent wrote is in effect.
		d.status.Original, d.status.Applied = nil, nil
	}
	g := d.ctrl.guard
	d.status.ThrashGuard = GuardStatus{Changes: g.ConsecutiveChanges, QuietChecks: g.QuietChecks, Pinned: g.Pinned}
	d.status.Verifying = 0
	if v := d.ctrl.verify; v != nil {
		d.status.Verifying = max(v.left, 0)
	}
	d.status.ModelCalibrated = d.ctrl.calibrated
	d.status.Pending = d.target != nil && !sameSetting(*d.target, d.ctrl.current)
	d.status.AwaitingGrant = d.status.Pending && d.apply && !d.policy.Spec.Paused &&
		opt.MayChange != nil && !opt.MayChange(d.sys.Name, d.policy)
}

// topCandidates returns the n fastest candidates of the report, fastest
// first (ties by name), the current setting always included.
func topCandidates(r *engine.Report, n int) []CandidateStatus {
	outs := slices.Clone(r.Outcomes)
	slices.SortStableFunc(outs, func(a, b engine.Outcome) int {
		if c := cmp.Compare(a.Result.TotalServiceNs, b.Result.TotalServiceNs); c != 0 {
			return c
		}
		return cmp.Compare(a.Candidate.Name(), b.Candidate.Name())
	})
	var curNs int64
	cur := -1
	for i, o := range outs {
		if o.Candidate.Name() == r.Current {
			curNs, cur = o.Result.TotalServiceNs, i
		}
	}
	if len(outs) > n {
		if cur >= n {
			outs = append(outs[:n-1], outs[cur])
		} else {
			outs = outs[:n]
		}
	}
	out := make([]CandidateStatus, len(outs))
	for i, o := range outs {
		gain := 0.0
		if curNs > 0 {
			gain = 100 * float64(curNs-o.Result.TotalServiceNs) / float64(curNs)
		}
		out[i] = CandidateStatus{Name: CandidateSpec(o.Candidate), ServiceTimeUs: o.Result.TotalServiceNs / 1000, GainPct: gain}
	}
	return out
}

// CandidateSpec returns a candidate in the CLI's syntax, which
// engine.ParseCandidate reads back: "bfq", "bfq:slice_idle=0",
// "mq-deadline:fifo_batch=8,read_expire=100+redcap".
func CandidateSpec(c engine.Candidate) string {
	s := c.Scheduler
	if len(c.Tunables) > 0 {
		s += ":" + c.Tunables.String()
	}
	if c.Cache {
		s += "+redcap"
	}
	return s
}

// recommendationOf is the status of a window's recommendation.
func recommendationOf(rep WindowReport, readAhead bool) *Recommendation {
	t := rep.Target
	rec := &Recommendation{Scheduler: t.Candidate.Scheduler, Tunables: tunablesText(t.Candidate.Tunables), Reason: rep.Reason}
	if readAhead {
		rec.ReadAheadKiB = t.ReadAheadKiB
	}
	if r := rep.Report; r != nil {
		if r.Decision.Switch && rep.Reason == string(r.Decision.Reason) {
			rec.GainPct = r.Decision.ImprovementPct
		}
		rec.Redcap = r.ADA != nil && r.ADA.On
	}
	return rec
}

// tunablesText writes tunables as sysfs text.
func tunablesText(t sched.Tunables) map[string]string {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[k] = strconv.FormatInt(v, 10)
	}
	return out
}

// Resume carries the agent's per-device state from one Run to the next:
// the cluster agent restarts Run, keeping the devices' settings (KeepIf),
// whenever the policies that select its node change.
//
// A device that is still the same disk (MAJOR:MINOR and diskseq), still
// governed by the same policy (name, UID and generation), and whose
// scheduler and read-ahead are still the ones its controller set, keeps its
// whole controller (learned model, thrash guard, a verification in
// progress, regression back-off) and status. Any other device that was
// governed before keeps its learned model, its regression back-off, its
// change and revert counters and its last change. The tracer's event
// counters continue across Runs.
//
// Create it with NewResume; Runs that share a Resume must not overlap.
// A nil *Resume carries nothing.
type Resume struct {
	devs          map[string]*resumed
	dropped, lost uint64
}

type resumed struct {
	d *device
	// settings: the Run ended leaving the device's setting as the
	// controller knows it (no revert since).
	settings bool
}

// NewResume returns an empty Resume.
func NewResume() *Resume { return &Resume{devs: map[string]*resumed{}} }

// put records the devices at the end of a Run. kept says the devices were
// left as the controllers know them (not restored at shutdown).
func (r *Resume) put(ds []*device, kept bool, st tracer.Stats) {
	if r == nil {
		return
	}
	r.dropped += st.Dropped
	r.lost += st.Lost
	clear(r.devs)
	for _, d := range ds {
		d.reqs = nil
		r.devs[d.sys.Name] = &resumed{d: d, settings: kept}
	}
}

// droppedDevices returns, sorted, the devices of the previous Run that are not
// among ds (no longer governed, or gone).
func (r *Resume) droppedDevices(ds []*device) []string {
	if r == nil {
		return nil
	}
	var out []string
	for name := range r.devs {
		if !slices.ContainsFunc(ds, func(d *device) bool { return d.sys.Name == name }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// forgetSettings notes that dev was restored: its controller no longer
// knows its setting.
func (r *Resume) forgetSettings(dev string) {
	if r == nil {
		return
	}
	if p := r.devs[dev]; p != nil {
		p.settings = false
	}
}

// previous returns the device of the last Run that is the same disk as
// s.sys, or nil.
func (r *Resume) previous(s selected) *resumed {
	if r == nil {
		return nil
	}
	p := r.devs[s.sys.Name]
	if p == nil || p.d.sys.MajorMinor != s.sys.MajorMinor || p.d.sys.DiskSeq != s.sys.DiskSeq {
		return nil
	}
	return p
}

// reuse returns the previous Run's device for s when its controller is
// still valid, updated with the fresh sysfs view; else nil.
func (r *Resume) reuse(s selected) *device {
	p := r.previous(s)
	if p == nil || !p.settings || p.d.key != policyKey(s.policy) {
		return nil
	}
	cur := p.d.ctrl.current
	if cur.Candidate.Scheduler != s.sys.Scheduler || cur.ReadAheadKiB != s.sys.ReadAheadKiB {
		return nil // changed behind the agent's back
	}
	d := p.d
	d.sys, d.policy = s.sys, s.policy
	d.setIdentity()
	return d
}

// carry gives a new device what its previous Run learned about the disk.
func (r *Resume) carry(d *device) {
	p := r.previous(selected{sys: d.sys})
	if p == nil {
		return
	}
	old := p.d
	if old.ctrl.model.Config().CapacitySectors == d.ctrl.model.Config().CapacitySectors {
		d.ctrl.model, d.ctrl.disk = old.ctrl.model, old.ctrl.model.NewDisk(0)
		d.ctrl.calibrated = old.ctrl.calibrated
		d.ctrl.note = old.ctrl.note
	}
	maps.Copy(d.ctrl.backoff, old.ctrl.backoff)
	was, st := &old.status, &d.status
	if d.ctrl.model == old.ctrl.model {
		st.Class = was.Class
	}
	st.TotalRequests = was.TotalRequests
	st.Changes, st.Reverts, st.LastRevert = was.Changes, was.Reverts, was.LastRevert
	st.LastChange, st.LastChangeWhat, st.LastError = was.LastChange, was.LastChangeWhat, was.LastError
	st.Applied = was.Applied
}

// decorator completes the statuses Run hands out: the ungoverned disks,
// and the tracer counters of earlier Runs (Resume).
type decorator struct {
	hostRoot      string
	others        []sysfs.Device
	dropped, lost uint64
}

func newDecorator(hostRoot string, others []sysfs.Device, r *Resume) *decorator {
	d := &decorator{hostRoot: hostRoot, others: others}
	if r != nil {
		d.dropped, d.lost = r.dropped, r.lost
	}
	return d
}

func (c *decorator) decorate(s Status) Status {
	if c.dropped > 0 || c.lost > 0 {
		s.Devices = slices.Clone(s.Devices)
		for i := range s.Devices {
			s.Devices[i].EventsDropped += c.dropped
			s.Devices[i].EventsLost += c.lost
		}
	}
	s.Ungoverned = nil
	for _, o := range c.others {
		sd, err := sysfs.Read(c.hostRoot, o.Name)
		if err != nil {
			continue // gone
		}
		s.Ungoverned = append(s.Ungoverned, DeviceStatus{
			Name: sd.Name, Class: sd.Class().String(), Current: sd.Scheduler, ReadAheadKiB: sd.ReadAheadKiB,
			MajorMinor: sd.MajorMinor, Model: sd.Model, Serial: sd.Serial, WWN: sd.WWN, SizeBytes: sd.SizeBytes,
			Rotational: sd.Rotational,
			Settings:   &Settings{Scheduler: sd.Scheduler, Tunables: sd.Tunables, ReadAheadKiB: sd.ReadAheadKiB},
		})
	}
	return s
}
