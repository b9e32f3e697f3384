package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// DefaultStateDir holds the originals of changed devices and the learned
// models, so that a restarted agent starts warm and can always revert.
const DefaultStateDir = "/var/lib/shadowtune"

// Options configure Run.
type Options struct {
	// HostRoot prefixes /sys (e.g. "/host" in a container); "" is the
	// machine's own root.
	HostRoot string
	// StateDir holds the actuator's records of original values and the
	// learned models (default DefaultStateDir).
	StateDir string
	// Spec is the defaulted, validated policy of `shadowtune run`: it
	// governs every device it selects, whatever its node selector says.
	// Ignored when Policies is non-nil.
	Spec v1alpha1.StorageTuningSpec
	// Policies, when non-nil (even empty), replace Spec: each device is
	// governed by v1alpha1.Governing(Policies, NodeLabels, device), as the
	// operator computes it, unless that policy's device-kind rules
	// (sysfs.SelectFor: partitions and empty devices never, virtual
	// devices only when an include glob names them) leave it out; it then
	// uses that policy's candidates, margin, thrash guard, read-ahead
	// bounds and mode. A device no policy selects
	// is neither traced nor changed; selecting no device is then not an
	// error (Run keeps reporting windows with no device). The policies
	// must be defaulted (StorageTuning.Default; the API server does it)
	// and are not modified.
	Policies []*v1alpha1.StorageTuning
	// NodeLabels are this node's labels, for the policies' node selectors
	// (Policies only).
	NodeLabels map[string]string
	// MayChange, when non-nil, is asked before every change Apply mode
	// would make to a device (not before putting a setting back: a
	// regression revert, a restore at start for Observe or an ungoverned
	// device, or at shutdown); false leaves the device as it is and
	// reports it as awaiting a grant. nil allows every change. It may be
	// called from the window loop and must be quick.
	MayChange func(device string, policy *v1alpha1.StorageTuning) bool
	// KeepIf, when non-nil, is asked at shutdown instead of Keep: the
	// cluster agent keeps the settings when it restarts Run for a policy
	// change, and restores them when it stops.
	KeepIf func() bool
	// Resume, when non-nil, carries per-device state from one Run to the
	// next (see Resume).
	Resume *Resume
	// Tracer is tracer.KindAuto, KindEBPF or KindTracefs.
	Tracer string
	// Metrics, when non-nil, receives every window's figures.
	Metrics *metrics.Metrics
	// Log receives progress and problems.
	Log logr.Logger
	// Keep leaves applied settings in place at shutdown (Apply mode).
	Keep bool
	// OnWindow is called after every window with the current status.
	OnWindow func(Status)
	// Ready is set once tracing runs (for /readyz).
	Ready func(error)
}

// Status is the agent's view of its devices after a window.
type Status struct {
	// Mode is the policy's mode; with several policies (Options.Policies),
	// Apply when any device is governed in Apply mode, else Observe.
	Mode    string         `json:"mode"`
	Tracer  string         `json:"tracer"`
	Notes   []string       `json:"notes,omitempty"`
	Windows int            `json:"windows"`
	Devices []DeviceStatus `json:"devices"`
	// Ungoverned are the host's other tunable disks, which no policy
	// selects: not traced, never changed, reported with their identity and
	// current setting only (Options.Policies only; virtual devices such as
	// loop devices are left out unless a policy governs them).
	Ungoverned []DeviceStatus `json:"ungoverned,omitempty"`
}

// DeviceStatus is one device's line of the live table and JSON report.
type DeviceStatus struct {
	Name            string    `json:"name"`
	Class           string    `json:"class"`
	Current         string    `json:"current"`
	ReadAheadKiB    int       `json:"readAheadKiB"`
	Best            string    `json:"best,omitempty"`
	GainPct         float64   `json:"predictedGainPct"`
	ReadAheadAdvice int       `json:"recommendedReadAheadKiB,omitempty"`
	ModelErrorPct   float64   `json:"modelErrorPct"`
	Requests        int       `json:"requests"`
	TotalRequests   uint64    `json:"totalRequests"`
	EventsDropped   uint64    `json:"eventsDropped"`
	EventsLost      uint64    `json:"eventsLost"`
	Changes         int       `json:"changes"`
	Reverts         int       `json:"reverts"`
	LastChange      time.Time `json:"lastChange,omitzero"`
	LastChangeWhat  string    `json:"lastChangeWhat,omitempty"`
	Skipped         string    `json:"skipped,omitempty"`
	Note            string    `json:"note,omitempty"`
	Error           string    `json:"error,omitempty"`
	// LastError is the latest Error of any window; unlike Error it is not
	// cleared by the next window, so the final report keeps it.
	LastError string `json:"lastError,omitempty"`

	// Policy is the name of the StorageTuning that governs the device
	// (empty for an unnamed `shadowtune run` policy and for ungoverned
	// devices); Mode is its mode.
	Policy string `json:"policy,omitempty"`
	Mode   string `json:"mode,omitempty"`
	// Identity, from sysfs when the device was selected.
	MajorMinor string `json:"majorMinor,omitempty"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	WWN        string `json:"wwn,omitempty"`
	SizeBytes  uint64 `json:"sizeBytes,omitempty"`
	Rotational bool   `json:"rotational,omitempty"`
	// Settings is the device's setting as read from sysfs after the
	// window: the scheduler, its tunables (raw text) and read-ahead.
	Settings *Settings `json:"settings,omitempty"`
	// Original is the setting recorded before shadowtune's first change
	// (the actuator's record, put back on revert); nil while the device
	// has its original setting.
	Original *Settings `json:"original,omitempty"`
	// Candidates are the fastest candidates of the last evaluated window,
	// fastest first, at most v1alpha1.MaxDeviceCandidates, the current
	// setting always included.
	Candidates []CandidateStatus `json:"candidates,omitempty"`
	// Recommendation is the last evaluated window's decision.
	Recommendation *Recommendation `json:"recommendation,omitempty"`
	// Pending: the recommendation differs from the setting in effect.
	Pending bool `json:"pending,omitempty"`
	// AwaitingGrant: Apply mode, pending, and Options.MayChange does not
	// allow the change.
	AwaitingGrant bool `json:"awaitingGrant,omitempty"`
	// Paused: the governing policy is paused (no new change is made).
	Paused bool `json:"paused,omitempty"`
	// Applied is the last setting the agent wrote (a change or a
	// regression revert); nil once the device has its original setting
	// again.
	Applied *AppliedSetting `json:"applied,omitempty"`
	// ApplyError is this window's failure to change the device.
	ApplyError string `json:"applyError,omitempty"`
	// Verifying is the number of windows left to verify the last change
	// (0: none under verification).
	Verifying int `json:"verifying,omitempty"`
	// LastRevert is when verification last reverted a regression.
	LastRevert time.Time `json:"lastRevert,omitzero"`
	// ThrashGuard is the thrash guard's state.
	ThrashGuard GuardStatus `json:"thrashGuard"`
	// ModelCalibrated: the disk model was trained (loaded from the state
	// directory) or calibrated on a loaded window of this device; before,
	// decisions use the class default.
	ModelCalibrated bool `json:"modelCalibrated"`
}

// Settings is a device's block-stack setting as sysfs shows it.
type Settings struct {
	Scheduler    string            `json:"scheduler"`
	Tunables     map[string]string `json:"tunables,omitempty"`
	ReadAheadKiB int               `json:"readAheadKiB"`
}

// CandidateStatus is one simulated candidate of a window.
type CandidateStatus struct {
	// Name is the candidate in the CLI's syntax (engine.ParseCandidate):
	// "bfq:slice_idle=0", "mq-deadline+redcap".
	Name string `json:"name"`
	// ServiceTimeUs is the window's total simulated service time, µs.
	ServiceTimeUs int64 `json:"predictedServiceTimeUs"`
	// GainPct is 100·(T_current − T)/T_current (switch cost not counted).
	GainPct float64 `json:"predictedGainPct"`
}

// Recommendation is the setting a window recommends.
type Recommendation struct {
	Scheduler string            `json:"scheduler"`
	Tunables  map[string]string `json:"tunables,omitempty"`
	// ReadAheadKiB is the recommended read_ahead_kb; 0 when the policy
	// does not tune read-ahead.
	ReadAheadKiB int `json:"readAheadKiB,omitempty"`
	// Redcap: ADA would keep the simulated REDCAP cache on.
	Redcap bool `json:"redcap,omitempty"`
	// GainPct is decide's predicted improvement of the switch, switch cost
	// included (0 when not switching).
	GainPct float64 `json:"predictedGainPct"`
	// Reason is decide's reason (e.g. "Better", "BelowMargin") or
	// ReasonRegressionReverted / ReasonRegressionBackoff.
	Reason string `json:"reason,omitempty"`
}

// AppliedSetting is a setting the agent wrote.
type AppliedSetting struct {
	Scheduler    string            `json:"scheduler"`
	Tunables     map[string]string `json:"tunables,omitempty"`
	ReadAheadKiB int               `json:"readAheadKiB,omitempty"`
	At           time.Time         `json:"at"`
}

// GuardStatus is the thrash guard's state (decide.State).
type GuardStatus struct {
	Changes     int  `json:"changes"`
	QuietChecks int  `json:"quietChecks"`
	Pinned      bool `json:"pinned"`
}

// device is the agent's state for one selected device.
type device struct {
	sys    sysfs.Device
	ctrl   *deviceController
	status DeviceStatus
	reqs   *collect // the current window's requests (collect.go); nil before Run

	policy *v1alpha1.StorageTuning // the governing policy
	key    string                  // policyKey(policy)
	apply  bool                    // policy in Apply mode
	target *Setting                // the last evaluated window's recommendation
}

// ErrNoDevice is returned when the policy selects no device on the host.
var ErrNoDevice = errors.New("agent: the policy selects no device on this host")

// Revert restores every device recorded in stateDir to its original
// settings (`shadowtune run --revert`).
func Revert(hostRoot, stateDir string) ([]string, error) {
	a, err := actuate.New(hostRoot, stateDir)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return a.RevertAll()
}

// Run traces, learns, simulates, decides and (in Apply mode) applies until
// ctx is done; then, in Apply mode and unless Keep (KeepIf), it restores
// every device it changed. It returns the last status.
//
// At start it restores, exactly as recorded (actuate's per-device
// Revert), every device an earlier run changed that no policy now governs
// in Apply mode (Observe mode, or no policy).
func Run(ctx context.Context, opt Options) (Status, error) {
	if opt.StateDir == "" {
		opt.StateDir = DefaultStateDir
	}
	policies, cluster := opt.policies()
	st := Status{}
	act, err := actuate.New(opt.HostRoot, opt.StateDir)
	if err != nil {
		return st, err
	}
	defer act.Close()

	sel, others, err := selectDevices(opt.HostRoot, policies, opt.NodeLabels)
	if err != nil {
		return st, err
	}
	st.Mode = runMode(policies, sel, cluster)
	apply := st.Mode == string(v1alpha1.ModeApply)
	if err := restoreUngoverned(act, sel, opt); err != nil {
		if !cluster {
			return st, fmt.Errorf("restore devices changed by an earlier run: %w", err)
		}
		st.Notes = append(st.Notes, "restore at start: "+err.Error())
	}
	if len(sel) == 0 && !cluster {
		return st, ErrNoDevice
	}
	devs := make([]sysfs.Device, len(sel))
	for i := range sel {
		devs[i] = sel[i].sys
	}
	window := minWindow(sel)
	if !cluster {
		others = nil
	}
	deco := newDecorator(opt.HostRoot, others, opt.Resume)
	if cb := opt.OnWindow; cb != nil {
		opt.OnWindow = func(s Status) { cb(deco.decorate(s)) }
	}
	tr, err := tracer.New(tracer.Options{Devices: devNumbers(devs), Kind: opt.Tracer})
	if err != nil {
		return st, fmt.Errorf("start tracer: %w", err)
	}
	defer tr.Close()
	info := tr.Info()
	st.Tracer = info.Kind
	st.Notes = info.Notes
	if info.EBPFError != nil {
		st.Notes = append(st.Notes, "eBPF not used: "+info.EBPFError.Error())
	}

	ds, err := newDevices(sel, opt.StateDir, opt.Resume)
	if err != nil {
		return st, err
	}
	if opt.Metrics != nil {
		for _, name := range opt.Resume.droppedDevices(ds) {
			opt.Metrics.ForgetDevice(name) // no longer governed: its series go
		}
	}
	byDev := map[uint32]*device{}
	for _, d := range ds {
		byDev[d.sys.Dev] = d
	}

	// The tracer's callback only copies each device's requests into its
	// pending buffer and signals arrived; Run's goroutine ingests them
	// (learning online, keeping the newest MaxSimulated: collect.go).
	var mu sync.Mutex
	arrived := make(chan struct{}, 1)
	for _, d := range ds {
		d.reqs = newCollect(d.ctrl)
	}
	ingest := func() {
		for _, d := range ds {
			d.reqs.ingest(d.ctrl, &mu)
		}
	}
	runErr := make(chan error, 1)
	trCtx, stopTrace := context.WithCancel(context.Background())
	go func() {
		runErr <- tr.Run(trCtx, func(batch []trace.Request) {
			mu.Lock()
			for i := range batch {
				if d := byDev[batch[i].Dev]; d != nil {
					d.reqs.pending = append(d.reqs.pending, batch[i])
				}
			}
			mu.Unlock()
			select {
			case arrived <- struct{}{}:
			default:
			}
		})
	}()
	if opt.Ready != nil {
		opt.Ready(nil)
	}
	opt.Log.Info("tracing", "tracer", st.Tracer, "devices", names(ds), "mode", st.Mode, "window", window)

	budget := newCPUBudget(window, cpuBudgetPct(sel))
	ticker := time.NewTicker(window)
	defer ticker.Stop()
	var lastStats tracer.Stats
	// cpuMark is the process CPU time at the end of the last window's
	// evaluations: what the process uses between windows (the tracer's
	// reading and ordering, online learning, GC) is charged to the CPU
	// budget at the next window, before its evaluations, which charge
	// their own. (The BPF programs run in the I/O's own context and are
	// not counted.)
	cpuMark := processCPU()
	loop := true
	for loop {
		select {
		case <-ctx.Done():
			loop = false
		case err := <-runErr:
			stopTrace()
			return st, fmt.Errorf("tracer stopped: %w", err)
		case <-arrived:
			ingest()
		case now := <-ticker.C:
			ingest()
			stats := tr.Stats()
			dropped := stats.Dropped - lastStats.Dropped
			lastStats = stats
			budget.refill()
			budget.spend(processCPU() - cpuMark)
			for _, d := range ds {
				n := d.reqs.total
				d.window(now, budget, act, opt)
				d.reqs.next(d.ctrl)
				d.status.EventsDropped, d.status.EventsLost = stats.Dropped, stats.Lost
				if opt.Metrics != nil {
					opt.Metrics.AddTraceEvents(d.sys.Name, st.Tracer, uint64(n), 0)
				}
			}
			cpuMark = processCPU()
			if opt.Metrics != nil && dropped > 0 {
				opt.Metrics.AddTraceEvents("", st.Tracer, 0, dropped)
			}
			st.Windows++
			st.Devices = statuses(ds)
			if opt.OnWindow != nil {
				opt.OnWindow(st)
			}
		}
	}
	stopTrace()
	if err := <-runErr; err != nil {
		opt.Log.Error(err, "tracer stopped with an error")
	}
	for _, d := range ds {
		if err := saveModel(opt.StateDir, d); err != nil {
			opt.Log.Error(err, "save model", "device", d.sys.Name)
		}
	}
	keep := opt.Keep
	if opt.KeepIf != nil {
		keep = opt.KeepIf()
	}
	final := tr.Stats()
	if !apply || keep {
		opt.Resume.put(ds, true, final)
		return deco.decorate(st), nil
	}
	done, err := act.RevertAll()
	opt.Resume.put(ds, false, final)
	for _, d := range ds {
		if slices.Contains(done, d.sys.Name) && opt.Metrics != nil {
			opt.Metrics.IncRevert(d.sys.Name, metrics.RevertShutdown)
		}
	}
	if err != nil {
		return deco.decorate(st), fmt.Errorf("restore devices at shutdown: %w", err)
	}
	opt.Log.Info("restored original settings", "devices", done)
	for _, d := range ds {
		if dev, err := sysfs.Read(opt.HostRoot, d.sys.Name); err == nil {
			d.status.Current, d.status.ReadAheadKiB = dev.Scheduler, dev.ReadAheadKiB
		}
		d.refresh(act, opt)
	}
	st.Devices = statuses(ds)
	return deco.decorate(st), nil
}

// window runs one window of one device, then refreshes its status from
// sysfs and the actuator's record.
func (d *device) window(now time.Time, b *cpuBudget, act *actuate.Actuator, opt Options) {
	d.step(now, b, act, opt)
	d.refresh(act, opt)
}

// allowed reports whether the device may be changed now: its policy is not
// paused, spec.rollout.minDwell has passed since the device's last change
// (a setting is kept at least that long, whatever the grant; reverts are
// not changes and never wait), and Options.MayChange allows it.
func (d *device) allowed(now time.Time, opt Options) bool {
	if d.policy.Spec.Paused || d.dwelling(now) {
		return false
	}
	return opt.MayChange == nil || opt.MayChange(d.sys.Name, d.policy)
}

// dwelling reports whether the device's last change is more recent than
// its policy's spec.rollout.minDwell.
func (d *device) dwelling(now time.Time) bool {
	dw := d.policy.Spec.Rollout.MinDwell
	return dw != nil && !d.status.LastChange.IsZero() && now.Sub(d.status.LastChange) < dw.Duration
}

// step evaluates one window of the device (d.reqs) and, in Apply mode,
// acts.
func (d *device) step(now time.Time, b *cpuBudget, act *actuate.Actuator, opt Options) {
	d.status.Requests = d.reqs.total
	d.status.TotalRequests += uint64(d.reqs.total)
	d.status.Skipped, d.status.Error, d.status.ApplyError = "", "", ""
	if !b.allow() {
		d.reqs.skip(d.ctrl)
		d.status.Skipped = "over the CPU budget"
		if opt.Metrics != nil {
			opt.Metrics.SkipWindow(d.sys.Name, metrics.SkipCPUBudget)
		}
		return
	}
	prev := d.setting()
	saved := d.ctrl.save()
	cpu0 := processCPU()
	t0 := time.Now()
	rep, err := d.reqs.step(d.ctrl, now)
	wall, cpu := time.Since(t0), processCPU()-cpu0
	b.spend(cpu)
	d.status.ModelErrorPct = rep.ModelErrorPct
	d.status.Class = d.ctrl.model.Class().String()
	d.status.Note = d.ctrl.note
	if opt.Metrics != nil {
		opt.Metrics.ObserveEvaluation(d.sys.Name, wall, cpu)
	}
	if err != nil {
		d.status.Error, d.status.LastError = err.Error(), err.Error()
		opt.Log.Error(err, "evaluate window", "device", d.sys.Name)
		if opt.Metrics != nil {
			opt.Metrics.SkipWindow(d.sys.Name, metrics.SkipError)
		}
		return
	}
	d.status.Skipped = rep.Skipped
	if rep.Report == nil {
		if opt.Metrics != nil {
			opt.Metrics.SkipWindow(d.sys.Name, metrics.SkipTooFewRequests)
		}
		return
	}
	r := rep.Report
	d.status.Best = r.Decision.Best
	d.status.GainPct = r.Decision.BestImprovementPct
	d.status.ReadAheadAdvice = r.ReadAhead.KiB
	d.status.Candidates = topCandidates(r, v1alpha1.MaxDeviceCandidates)
	if rep.Target != nil {
		d.target = rep.Target
		d.status.Recommendation = recommendationOf(rep, d.ctrl.policy.ReadAhead)
	}
	if opt.Metrics != nil {
		sim := map[string]time.Duration{}
		for _, o := range r.Outcomes {
			sim[o.Candidate.Name()] = time.Duration(o.Result.TotalServiceNs)
		}
		opt.Metrics.ObserveWindow(d.sys.Name, metrics.WindowReport{
			Requests: uint64(rep.Requests), RealService: time.Duration(rep.RealServiceNs),
			Current: r.Current, Simulated: sim, SwitchCost: time.Duration(r.Decision.SwitchCostNs), End: now,
			SimulatedRealService: time.Duration(rep.SimulatedRealNs), Screened: rep.Screened,
		})
		opt.Metrics.SetThrashGuard(d.sys.Name, r.Guard.ConsecutiveChanges, r.Guard.QuietChecks, r.Guard.Pinned)
	}
	if !d.apply || rep.Action.Kind == ActionNone {
		return
	}
	if rep.Action.Kind == ActionApply && !d.allowed(now, opt) {
		// No grant, paused, or within the dwell time: the device stays as
		// it is, and the controller forgets the change it asked for.
		if d.dwelling(now) {
			d.status.Note = "keeping the setting for spec.rollout.minDwell, until " +
				d.status.LastChange.Add(d.policy.Spec.Rollout.MinDwell.Duration).UTC().Format(time.RFC3339)
		}
		d.ctrl.denied(saved)
		return
	}
	s := rep.Action.Setting
	_, err = act.Apply(d.sys.Name, actuate.Setting{
		Scheduler: s.Candidate.Scheduler, Tunables: s.Candidate.Tunables, ReadAheadKiB: s.ReadAheadKiB,
	})
	if err != nil {
		d.ctrl.rejected(prev)
		d.status.Error, d.status.LastError, d.status.ApplyError = err.Error(), err.Error(), err.Error()
		opt.Log.Error(err, "apply", "device", d.sys.Name, "setting", s.Candidate.Name())
		return
	}
	d.status.Applied = &AppliedSetting{Scheduler: s.Candidate.Scheduler, Tunables: tunablesText(s.Candidate.Tunables),
		ReadAheadKiB: s.ReadAheadKiB, At: now}
	var parts []string
	if s.Candidate.Name() != prev.Candidate.Name() {
		parts = append(parts, fmt.Sprintf("%s -> %s", prev.Candidate.Name(), s.Candidate.Name()))
	}
	if s.ReadAheadKiB != 0 && s.ReadAheadKiB != prev.ReadAheadKiB {
		parts = append(parts, fmt.Sprintf("read_ahead_kb %d -> %d", prev.ReadAheadKiB, s.ReadAheadKiB))
	}
	what := strings.Join(parts, ", ")
	d.status.Current = s.Candidate.Name()
	if s.ReadAheadKiB != 0 {
		d.status.ReadAheadKiB = s.ReadAheadKiB
	}
	d.status.LastChange, d.status.LastChangeWhat = now, what
	if rep.Action.Kind == ActionRevert {
		d.status.Reverts++
		d.status.LastRevert = now
		d.status.LastChangeWhat = "reverted " + what + ": " + rep.Action.Reason
		if opt.Metrics != nil {
			opt.Metrics.IncRevert(d.sys.Name, metrics.RevertRegression)
		}
	} else {
		d.status.Changes++
		if opt.Metrics != nil {
			opt.Metrics.IncChange(d.sys.Name)
		}
	}
	if opt.Metrics != nil {
		opt.Metrics.SetSetting(d.sys.Name, s.Candidate.Scheduler, d.status.ReadAheadKiB, s.Candidate.Tunables.String())
	}
	opt.Log.Info("applied", "device", d.sys.Name, "change", d.status.LastChangeWhat)
}

func (d *device) setting() Setting {
	return Setting{Candidate: d.ctrl.current.Candidate, ReadAheadKiB: d.status.ReadAheadKiB}
}

func statuses(ds []*device) []DeviceStatus {
	out := make([]DeviceStatus, len(ds))
	for i, d := range ds {
		out[i] = d.status
	}
	return out
}

func names(ds []*device) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.sys.Name
	}
	return out
}

func devNumbers(devs []sysfs.Device) []uint32 {
	out := make([]uint32, len(devs))
	for i, d := range devs {
		out[i] = d.Dev
	}
	return out
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func containsCandidate(cs []engine.Candidate, c engine.Candidate) bool {
	return slices.ContainsFunc(cs, func(x engine.Candidate) bool { return x.Name() == c.Name() })
}

// ModelPath names the file under stateDir where a device's learned model
// is kept (models/NAME[-SERIAL].json); the serial or WWN keeps a model from
// being loaded for a different disk that took the same name. `shadowtune
// model train` writes there by default, and Run loads it at start.
func ModelPath(stateDir string, sd sysfs.Device) string {
	id := sd.Serial
	if id == "" {
		id = sd.WWN
	}
	name := sd.Name
	if id != "" {
		name += "-" + sanitize(id)
	}
	return filepath.Join(stateDir, "models", name+".json")
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// loadModel returns the saved model of the device when one was saved for
// a device of the same size (its class may differ from sysfs's after
// calibration), else the default of the class sysfs reports.
func loadModel(stateDir string, sd sysfs.Device) (m *model.Model, loaded bool) {
	capacity := max(sd.SizeBytes/trace.SectorSize, 1)
	if fh, err := os.Open(ModelPath(stateDir, sd)); err == nil {
		defer fh.Close()
		if m, err := model.Load(fh); err == nil && m.Config().CapacitySectors == capacity {
			return m, true
		}
	}
	return model.Default(sd.Class(), capacity), false
}

// saveModel writes the device's model atomically (temp file, fsync,
// rename).
func saveModel(stateDir string, d *device) error {
	path := ModelPath(stateDir, d.sys)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".model-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := d.ctrl.model.Save(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// cpuBudget is a token bucket of CPU time: each window adds pct % of the
// window; an evaluation spends the process CPU time it took; a window is
// evaluated only while the bucket is not empty (DESIGN §1: evaluation at
// a small fraction of one core). At most two windows' worth accumulate.
type cpuBudget struct {
	per, tokens, cap time.Duration
}

func newCPUBudget(window time.Duration, pct int) *cpuBudget {
	per := window * time.Duration(pct) / 100
	return &cpuBudget{per: per, tokens: per, cap: 2 * per}
}

// refill adds one window's allowance.
func (b *cpuBudget) refill() { b.tokens = min(b.tokens+b.per, b.cap) }

// allow reports whether an evaluation may run now.
func (b *cpuBudget) allow() bool { return b.tokens > 0 }

func (b *cpuBudget) spend(cpu time.Duration) { b.tokens -= cpu }

// processCPU returns the CPU time (user + system) the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MarshalStatus encodes a status as indented JSON.
func MarshalStatus(st Status) ([]byte, error) { return json.MarshalIndent(st, "", "  ") }
