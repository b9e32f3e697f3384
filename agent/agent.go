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
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/readahead"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
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
	// Spec is the defaulted, validated policy.
	Spec v1alpha1.StorageTuningSpec
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
	Mode    string         `json:"mode"`
	Tracer  string         `json:"tracer"`
	Notes   []string       `json:"notes,omitempty"`
	Windows int            `json:"windows"`
	Devices []DeviceStatus `json:"devices"`
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
}

// device is the agent's state for one selected device.
type device struct {
	sys    sysfs.Device
	ctrl   *deviceController
	status DeviceStatus
	reqs   []trace.Request // collected in the current window
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
// ctx is done; then, in Apply mode and unless Keep, it restores every
// device it changed. It returns the last status.
func Run(ctx context.Context, opt Options) (Status, error) {
	if opt.StateDir == "" {
		opt.StateDir = DefaultStateDir
	}
	spec := opt.Spec
	apply := spec.Mode == v1alpha1.ModeApply
	st := Status{Mode: string(spec.Mode)}
	act, err := actuate.New(opt.HostRoot, opt.StateDir)
	if err != nil {
		return st, err
	}
	defer act.Close()
	if !apply {
		// Observe mode restores anything an earlier Apply run left changed.
		if done, err := act.RevertAll(); err != nil {
			return st, fmt.Errorf("restore devices changed by an earlier run: %w", err)
		} else if len(done) > 0 {
			opt.Log.Info("observe mode: restored devices changed by an earlier run", "devices", done)
		}
	}

	devs, err := selectDevices(opt.HostRoot, &spec)
	if err != nil {
		return st, err
	}
	window := spec.Evaluation.Window.Duration
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

	ds, err := newDevices(devs, &spec, opt.StateDir, apply)
	if err != nil {
		return st, err
	}
	byDev := map[uint32]*device{}
	for _, d := range ds {
		byDev[d.sys.Dev] = d
	}

	var mu sync.Mutex
	runErr := make(chan error, 1)
	trCtx, stopTrace := context.WithCancel(context.Background())
	go func() {
		runErr <- tr.Run(trCtx, func(batch []trace.Request) {
			mu.Lock()
			defer mu.Unlock()
			for _, q := range batch {
				if d := byDev[q.Dev]; d != nil {
					d.reqs = append(d.reqs, q)
				}
			}
		})
	}()
	if opt.Ready != nil {
		opt.Ready(nil)
	}
	opt.Log.Info("tracing", "tracer", st.Tracer, "devices", names(ds), "mode", spec.Mode, "window", window)

	budget := newCPUBudget(window, int(deref(spec.Evaluation.CPUBudgetPercent, v1alpha1.DefaultCPUBudgetPercent)))
	ticker := time.NewTicker(window)
	defer ticker.Stop()
	var lastStats tracer.Stats
	loop := true
	for loop {
		select {
		case <-ctx.Done():
			loop = false
		case err := <-runErr:
			stopTrace()
			return st, fmt.Errorf("tracer stopped: %w", err)
		case now := <-ticker.C:
			mu.Lock()
			batches := make([][]trace.Request, len(ds))
			for i, d := range ds {
				batches[i], d.reqs = d.reqs, nil
			}
			mu.Unlock()
			stats := tr.Stats()
			dropped := stats.Dropped - lastStats.Dropped
			lastStats = stats
			budget.refill()
			for i, d := range ds {
				d.window(batches[i], now, budget, act, apply, opt)
				d.status.EventsDropped, d.status.EventsLost = stats.Dropped, stats.Lost
				if opt.Metrics != nil {
					opt.Metrics.AddTraceEvents(d.sys.Name, st.Tracer, uint64(len(batches[i])), 0)
				}
			}
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
	if apply && !opt.Keep {
		done, err := act.RevertAll()
		for _, d := range ds {
			if slices.Contains(done, d.sys.Name) && opt.Metrics != nil {
				opt.Metrics.IncRevert(d.sys.Name, metrics.RevertShutdown)
			}
		}
		if err != nil {
			return st, fmt.Errorf("restore devices at shutdown: %w", err)
		}
		opt.Log.Info("restored original settings", "devices", done)
		for _, d := range ds {
			if dev, err := sysfs.Read(opt.HostRoot, d.sys.Name); err == nil {
				d.status.Current, d.status.ReadAheadKiB = dev.Scheduler, dev.ReadAheadKiB
			}
		}
		st.Devices = statuses(ds)
	}
	return st, nil
}

// window runs one window of one device.
func (d *device) window(reqs []trace.Request, now time.Time, b *cpuBudget, act *actuate.Actuator, apply bool, opt Options) {
	d.status.Requests = len(reqs)
	d.status.TotalRequests += uint64(len(reqs))
	d.status.Skipped, d.status.Error = "", ""
	if !b.allow() {
		d.ctrl.learn(reqs)
		d.status.Skipped = "over the CPU budget"
		if opt.Metrics != nil {
			opt.Metrics.SkipWindow(d.sys.Name, metrics.SkipCPUBudget)
		}
		return
	}
	prev := d.setting()
	cpu0 := processCPU()
	t0 := time.Now()
	rep, err := d.ctrl.step(reqs, now)
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
	if opt.Metrics != nil {
		sim := map[string]time.Duration{}
		for _, o := range r.Outcomes {
			sim[o.Candidate.Name()] = time.Duration(o.Result.TotalServiceNs)
		}
		opt.Metrics.ObserveWindow(d.sys.Name, metrics.WindowReport{
			Requests: uint64(rep.Requests), RealService: time.Duration(rep.RealServiceNs),
			Current: r.Current, Simulated: sim, SwitchCost: time.Duration(r.Decision.SwitchCostNs), End: now,
		})
		opt.Metrics.SetThrashGuard(d.sys.Name, r.Guard.ConsecutiveChanges, r.Guard.QuietChecks, r.Guard.Pinned)
	}
	if !apply || rep.Action.Kind == ActionNone {
		return
	}
	s := rep.Action.Setting
	_, err = act.Apply(d.sys.Name, actuate.Setting{
		Scheduler: s.Candidate.Scheduler, Tunables: s.Candidate.Tunables, ReadAheadKiB: s.ReadAheadKiB,
	})
	if err != nil {
		d.ctrl.rejected(prev)
		d.status.Error, d.status.LastError = err.Error(), err.Error()
		opt.Log.Error(err, "apply", "device", d.sys.Name, "setting", s.Candidate.Name())
		return
	}
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

// selectDevices discovers the host's block devices and applies the
// policy's device selector (sysfs.SelectFor: the API's rules, and loop,
// zram and dm devices only when an include pattern names them).
func selectDevices(hostRoot string, spec *v1alpha1.StorageTuningSpec) ([]sysfs.Device, error) {
	all, err := sysfs.Discover(hostRoot)
	if err != nil && len(all) == 0 {
		return nil, fmt.Errorf("discover devices: %w", err)
	}
	sel := sysfs.SelectFor(all, &spec.Devices)
	var out []sysfs.Device
	for _, d := range sel {
		if len(d.Schedulers) == 0 {
			continue // no queue/scheduler (zram, most dm): nothing to tune
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, ErrNoDevice
	}
	return out, nil
}

// newDevices builds a controller per device: its model (loaded from the
// state directory when one was saved for the same device, else the class
// default) and its candidates.
func newDevices(devs []sysfs.Device, spec *v1alpha1.StorageTuningSpec, stateDir string, apply bool) ([]*device, error) {
	var out []*device
	for _, sd := range devs {
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
		out = append(out, &device{sys: sd, ctrl: ctrl, status: DeviceStatus{
			Name: sd.Name, Class: sd.Class().String(), Current: sd.Scheduler, ReadAheadKiB: sd.ReadAheadKiB,
		}})
	}
	return out, nil
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
