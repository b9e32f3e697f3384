// Package agent is shadowtune's node agent: for every selected block
// device it collects a window of traced requests, learns the device's disk
// model online, simulates the window under every allowed candidate,
// decides, and in Apply mode changes the device's settings, verifies the
// change against the next windows and reverts a real regression (DESIGN
// §4, §6, §7; DADS §4.1–4.2).
//
// The Agent is one long-lived loop (a controller-runtime Runnable): it
// takes new policies while it runs (SetPolicies), keeping each device's
// learned state. A window of a device has one road: the tracer's requests
// reach the device's controller as they arrive (device.ingest,
// window.Controller.Add); at the window's end device.window ends the
// controller's window under the device's gate (pause, grant, minDwell),
// performs the action it asks for and refreshes the status, which is the
// API's own device entry (v1alpha1.DeviceState).
//
// Units: times in ns, sectors of 512 bytes, read-ahead in KiB.
package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/blkcaps"
	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/host"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/modelfile"
	"github.com/shadowtune/shadowtune/agent/openfiles"
	"github.com/shadowtune/shadowtune/agent/otherwriter"
	"github.com/shadowtune/shadowtune/agent/pagecache"
	"github.com/shadowtune/shadowtune/agent/sampling"
	"github.com/shadowtune/shadowtune/agent/schedcost"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// DefaultStateDir holds the originals of changed devices and the learned
// models, so that a restarted agent starts warm and can always revert.
const DefaultStateDir = "/var/lib/shadowtune"

// Options configure an Agent.
type Options struct {
	// HostRoot prefixes /sys (e.g. "/host" in a container); "" is the
	// machine's own root.
	HostRoot string
	// StateDir holds the actuator's records of original values and the
	// learned models (default DefaultStateDir).
	StateDir string
	// Spec is the validated policy of `shadowtune run`: it governs every
	// device it selects, whatever its node selector says. Ignored when
	// Policies is non-nil.
	Spec v1alpha1.StorageTuningSpec
	// Policies, when non-nil (even empty), replace Spec, and SetPolicies
	// replaces them while the agent runs: each device is governed by
	// v1alpha1.Governing(Policies, NodeLabels, device), as the operator
	// computes it, unless that policy's device-kind rules
	// (sysfs.SelectFor: partitions and empty devices never, virtual
	// devices only when an include glob names them) leave it out. A device
	// no policy selects is neither traced nor changed; selecting no device
	// is then not an error. The policies are not modified.
	Policies []*v1alpha1.StorageTuning
	// NodeLabels are this node's labels, for the policies' node selectors
	// (Policies only).
	NodeLabels map[string]string
	// Grant, when non-nil, is the operator's grant: asked every window for
	// each device governed in Apply mode whose policy is not paused, it
	// reports whether a change may be made now. It is part of the
	// device's gate (Gate.Granted); a regression revert, a restore of an
	// ungoverned device and the restore at shutdown need no grant. nil
	// grants every change. It must be quick.
	Grant func(device string, policy *v1alpha1.StorageTuning) bool
	// Tracer is tracer.KindAuto, KindEBPF or KindTracefs.
	Tracer string
	// Metrics, when non-nil, receives every window's figures.
	Metrics *metrics.Metrics
	// Log receives progress and problems.
	Log logr.Logger
	// Keep leaves applied settings in place at shutdown (Apply mode).
	Keep bool
	// FollowOpenFiles brings the files already open on a disk to each
	// read_ahead_kb the agent writes (package agent/openfiles): the
	// kernel gives a file the device's read-ahead only when it is
	// opened. It needs the host's PID namespace and CAP_SYS_PTRACE;
	// without them the status says why it is off.
	FollowOpenFiles bool
	// OnWindow is called after every window with the current status.
	OnWindow func(Status)
	// Ready is called with nil once tracing runs (for /readyz).
	Ready func(error)
	// MemoryLimit is the memory the agent may use, bytes (its cgroup's
	// memory.max); 0 for none. Each device's window is simulated over as
	// many requests as fit (host.PlanMemory), and the status notes say so when
	// that is fewer than the default.
	MemoryLimit int64
	// Caches reads and switches dm-caches (the command passes package
	// dmcache's tool when dmsetup is installed); nil governs none. A
	// device behind a dm-cache whose policy has spec.cache.enabled then
	// has the cache turned on and off (Apply mode) and restored with the
	// device.
	Caches dmcache.Caches
	// ExplainDir, when set, keeps the windows whose simulation decided a
	// scheduler switch (made, awaiting confirmation or held back) or
	// predicted one it did not reproduce the window well enough to make
	// (decide.ReasonNotReproduced), for
	// replay with `shadowtune simulate`: per window DEVICE-TIME.trace (the
	// simulated requests, native format), .model.json and .report.json,
	// the newest explain.Keep per device (agent/explain writes them).
	ExplainDir string
	// TraceSample is the traced part of a settled device's window
	// (agent/sampling): 0 takes DefaultTraceSample; negative traces every
	// window whole. A window of at most twice the sample is traced whole.
	TraceSample time.Duration
}

// DefaultTraceSample is the traced part of a settled device's window
// (Options.TraceSample).
const DefaultTraceSample = sampling.DefaultTraceSample

// ErrNoDevice is returned when the policy of `shadowtune run` selects no
// device on the host.
var ErrNoDevice = errors.New("agent: the policy selects no device on this host")

// policySet is a set of policies and the node labels they are matched
// with.
type policySet struct {
	policies []*v1alpha1.StorageTuning
	labels   map[string]string
}

// Agent is the node agent's loop. Create it with New; Start runs it once.
type Agent struct {
	opt     Options
	cluster bool // Options.Policies: the cluster agent

	// mu guards update, byDev and every device's pending buffer (the
	// tracer's callback) and last.
	mu     sync.Mutex
	update *policySet
	poke   chan struct{}
	byDev  map[uint32]*device
	last   Status

	// The loop's own state, on Start's goroutine only.
	// policies are the policies last taken (configure); disks is the
	// host's /sys/block as last read (disksAppeared).
	policies policySet
	disks    map[string]string
	// hostSeen is the kernel release and image this run started on,
	// read at the first adoption (host).
	hostSeen *sentinel.Host
	act      *actuate.Actuator
	tr       tracer.Tracer
	devs     []*device
	others   []sysfs.Device
	st       Status
	notes    []string // the tracer's notes
	// dispatch holds the schedulers' CPU cost per request on this node
	// charged to every device's decision, or schedcost.Prior when it
	// could not be measured.
	dispatch schedcost.Charger
	// pcache follows the page-cache probe (nil when it does not run).
	pcache *pagecache.Watch
	// caps reads the blk-throttle caps of the devices' readers, for the
	// read-ahead road (nil when the page-cache probe does not run);
	// capsErr is the last error it returned, logged once.
	caps    *blkcaps.Reader
	capsErr string
	// writers names other writers of the devices' settings (nil when no
	// probe could be loaded).
	writers otherwriter.Namer
	window  time.Duration
	budget  *host.CPUBudget
	// samples is the sampling of the settled devices' windows, and the
	// devices whose tracing is paused now.
	samples sampling.Tracing
	// volumes attaches caches to LVM volumes (spec.cache.provision): the
	// Caches tool when it can, else nil.
	volumes actuate.CacheVolumes
}

// New returns an agent for opt; StateDir defaults to DefaultStateDir.
func New(opt Options) *Agent {
	if opt.StateDir == "" {
		opt.StateDir = DefaultStateDir
	}
	return &Agent{opt: opt, cluster: opt.Policies != nil, poke: make(chan struct{}, 1), byDev: map[uint32]*device{},
		dispatch: schedcost.Charger{HostRoot: opt.HostRoot, StateDir: opt.StateDir, Metrics: opt.Metrics, Log: opt.Log},
		samples:  sampling.Tracing{Sample: opt.TraceSample, Log: opt.Log}}
}

// Run runs a new agent for opt until ctx is done and returns its last
// status (`shadowtune run`).
func Run(ctx context.Context, opt Options) (Status, error) {
	a := New(opt)
	err := a.Start(ctx)
	return a.Status(), err
}

// NeedLeaderElection is false: every node runs its agent.
func (a *Agent) NeedLeaderElection() bool { return false }

// SetPolicies gives the running agent a new set of policies (cluster
// agent); it takes them before its next window. Devices that stay
// governed by the same policy generation keep their controllers; a device
// governed anew keeps what was learned about the disk; a device no policy
// governs in Apply mode any more is restored exactly as recorded.
func (a *Agent) SetPolicies(policies []*v1alpha1.StorageTuning, nodeLabels map[string]string) {
	a.mu.Lock()
	a.update = &policySet{policies: policies, labels: nodeLabels}
	a.mu.Unlock()
	select {
	case a.poke <- struct{}{}:
	default:
	}
}

// Status returns the status after the last window (the final one once
// Start has returned).
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// Start traces, learns, simulates, decides and (in Apply mode) applies
// until ctx is done; then, in Apply mode and unless Keep, it restores every
// device it changed. At start, and whenever the policies change, it
// restores every device an earlier run changed that no policy now governs
// in Apply mode. It returns ErrNoDevice when the policy of `shadowtune run`
// selects no device, and an error when tracing fails.
func (a *Agent) Start(ctx context.Context) error {
	var modes actuate.CacheModes
	if a.opt.Caches != nil {
		modes = a.opt.Caches
		a.volumes, _ = a.opt.Caches.(actuate.CacheVolumes)
	}
	act, err := actuate.Open(actuate.Options{HostRoot: a.opt.HostRoot, StateDir: a.opt.StateDir, Caches: modes, Volumes: a.volumes})
	if err != nil {
		return err
	}
	defer act.Close()
	a.act = act
	a.notes = append(a.notes, actuatorNotes(act, a.opt.Log)...)
	a.notes = append(a.notes, dmcache.RecoveryNotes(act, a.opt.Log)...)
	a.notes = append(a.notes, restoreUnverified(act, a.opt.Log)...)
	now := time.Now()
	unclean, err := host.MarkRunning(a.opt.StateDir, now)
	if err != nil {
		a.notes = append(a.notes, "an unclean end of this run will not be detected: "+err.Error())
	}
	if unclean {
		a.st.UncleanRestart = ptrTime(now)
		a.notes = append(a.notes, "the previous run on this state directory ended without a clean shutdown (killed: out of memory, SIGKILL; or a node crash)")
		a.opt.Log.Info("the previous run ended without a clean shutdown", "stateDir", a.opt.StateDir)
	}
	if err := a.configure(a.initialPolicies()); err != nil {
		return err
	}
	// The disks the policies were taken with.
	a.disksAppeared()
	configured := len(a.notes) // the notes configure put in the status
	// Measured once devices are selected (a policy that selects none
	// fails first) and before any is traced.
	a.measureDispatch(ctx)
	a.mu.Lock()
	a.chargeDispatch(a.devs)
	a.mu.Unlock()
	paused := a.sampledNext()
	tr, err := tracer.New(tracer.Options{Devices: a.devNumbers(), Paused: paused, Kind: a.opt.Tracer})
	if err != nil {
		return fmt.Errorf("start tracer: %w", err)
	}
	defer tr.Close()
	a.tr = tr
	// The page-cache probe, started next, tracks no device the tracer
	// starts paused. A tracer that cannot pause is found out, and noted,
	// by the loop's first startSamples.
	if tr.SetPaused(paused) == nil {
		a.samples.Started(paused)
	}
	info := tr.Info()
	a.st.Tracer = info.Kind
	a.notes = append(a.notes, info.Notes...)
	if info.EBPFError != nil {
		a.notes = append(a.notes, "eBPF not used: "+info.EBPFError.Error())
	}
	if wp, err := tracer.NewWriterProbe(); err != nil {
		a.notes = append(a.notes, "other writers are detected but not named: "+err.Error())
	} else {
		defer wp.Close()
		a.writers = otherwriter.Probe{P: wp}
		a.opt.Log.Info("other writers are named by the writer probe", "mechanism", wp.Mechanism())
	}
	if pc, err := tracer.NewPageCacheProbe(tracer.PageCacheOptions{SampleEvery: tracer.PageCacheSampleEvery}); err != nil {
		a.notes = append(a.notes, "read-ahead is not changed (no measured waste): "+err.Error())
	} else {
		defer pc.Close()
		a.pcache = pagecache.New(pc)
		a.caps = blkcaps.New(a.opt.HostRoot)
		a.readCaps() // counts from now on
		a.trackPageCache()
	}
	if a.opt.FollowOpenFiles {
		if fo, err := openfiles.New(a.opt.HostRoot, a.opt.StateDir, a.opt.Log.WithName("openfiles"), a.countOpenFiles); err != nil {
			a.notes = append(a.notes, "open files are not followed (--follow-open-files): "+err.Error())
		} else {
			defer fo.Close()
			act.SetReadAheadFollower(fo)
			defer act.SetReadAheadFollower(nil)
		}
	}
	a.st.Notes = append(a.st.Notes, a.notes[configured:]...)
	if err := a.loop(ctx); err != nil {
		return err
	}
	if err := a.shutdown(); err != nil {
		return err
	}
	if err := host.MarkStopped(a.opt.StateDir); err != nil {
		a.opt.Log.Error(err, "remove the run marker")
	}
	return nil
}

// measureDispatch sets the dispatch costs at the agent's start
// (schedcost.Charger.Start) and notes why they were not measured.
func (a *Agent) measureDispatch(ctx context.Context) {
	a.notes = append(a.notes, a.dispatch.Start(ctx)...)
}

// retryDispatch tries a declined measurement of the dispatch costs again
// at a window's end (schedcost.Charger.Retry; idle: the CPUs' idle share
// over the window). When it was tried, the devices' decisions are charged
// the result from this window on, and the note of the prior goes.
func (a *Agent) retryDispatch(ctx context.Context, now time.Time, idle float64) {
	note, tried := a.dispatch.Retry(ctx, now, idle)
	if !tried {
		return
	}
	isPrior := func(n string) bool { return strings.HasPrefix(n, schedcost.PriorNote) }
	a.notes, a.st.Notes = slices.DeleteFunc(a.notes, isPrior), slices.DeleteFunc(a.st.Notes, isPrior)
	if note != "" {
		a.notes = append(a.notes, note)
		a.st.Notes = append(a.st.Notes, note)
	}
	a.mu.Lock()
	a.chargeDispatch(a.devs)
	a.mu.Unlock()
}

// chargeDispatch gives every device's decision the dispatch costs charged
// now (engine.Options.DispatchCostNs).
func (a *Agent) chargeDispatch(devs []*device) {
	c := a.dispatch.Costs()
	for _, d := range devs {
		d.ctrl.Policy.Engine.DispatchCostNs, d.ctrl.Policy.Engine.CPUs = c.PerRequestNs, c.CPUs
	}
}

// countOpenFiles counts what a change of a disk's read-ahead did to the
// files open on it (Options.Metrics, when set).
func (a *Agent) countOpenFiles(disk string, r openfiles.Result) {
	if a.opt.Metrics != nil {
		a.opt.Metrics.AddOpenFiles(disk, r.Followed, r.Marked, r.Own, r.Failed)
	}
}

// initialPolicies are Options.Policies, or the one policy of `shadowtune
// run` made of Options.Spec, whose node selector is ignored.
func (a *Agent) initialPolicies() policySet {
	if a.cluster {
		return policySet{policies: a.opt.Policies, labels: a.opt.NodeLabels}
	}
	spec := *a.opt.Spec.DeepCopy()
	spec.NodeSelector = nil
	spec.Default()
	return policySet{policies: []*v1alpha1.StorageTuning{{Spec: spec}}}
}

// loop runs the windows until ctx is done or the tracer fails.
func (a *Agent) loop(ctx context.Context) error {
	if err := host.Background(); err != nil {
		a.opt.Log.Error(err, "lower the priority of the learning and evaluation thread")
	}
	arrived := make(chan struct{}, 1)
	runErr := make(chan error, 1)
	trCtx, stopTrace := context.WithCancel(context.Background())
	go func() { runErr <- a.tr.Run(trCtx, a.deliver(arrived)) }()
	if a.opt.Ready != nil {
		a.opt.Ready(nil)
	}
	a.opt.Log.Info("tracing", "tracer", a.st.Tracer, "devices", a.names(), "mode", a.st.Mode, "window", a.window)

	ticker := time.NewTicker(a.window)
	defer ticker.Stop()
	// resume ends the pause of the sampled devices' tracing (agent/sampling).
	resume := time.NewTimer(time.Hour)
	resume.Stop()
	defer resume.Stop()
	clk := windowClock{start: time.Now(), resume: resume, cpuMark: host.ProcessCPU(), idle: host.NewIdleMeter(host.ProcStat)}
	clk.idle.Share()
	if clk.sampleAt = a.startSamples(clk.start); !clk.sampleAt.IsZero() {
		resume.Reset(time.Until(clk.sampleAt))
	}
	for {
		select {
		case <-ctx.Done():
			stopTrace()
			if err := <-runErr; err != nil {
				a.opt.Log.Error(err, "tracer stopped with an error")
			}
			return nil
		case err := <-runErr:
			stopTrace()
			return fmt.Errorf("tracer stopped: %w", err)
		case <-arrived:
			a.ingest()
		case <-a.poke:
			if a.reconfigure() {
				a.resumeSamples()
				resume.Stop()
				ticker.Reset(a.window)
				clk.start, clk.sampleAt = time.Now(), time.Time{}
			}
		case <-resume.C:
			a.resumeSamples()
		case now := <-ticker.C:
			a.endWindows(ctx, now, &clk)
		}
	}
}

// windowClock is the loop's state between window ends.
type windowClock struct {
	// start is when the current window began.
	start time.Time
	// resume is the timer that ends the sampled devices' pause at
	// sampleAt (zero: none paused).
	resume   *time.Timer
	sampleAt time.Time
	// lastStats are the tracer's counts at the last window end.
	lastStats tracer.Stats
	// cpuMark is the process CPU time at the end of the last window's
	// evaluations: what the process uses between windows (the tracer's
	// reading and ordering, online learning, GC) is charged to the CPU
	// budget at the next window, before its evaluations, which charge
	// their own. (The BPF programs run in the I/O's own context and are
	// not counted.)
	cpuMark time.Duration
	idle    host.IdleMeter
}

// endWindows ends every device's window at now, on the window ticker,
// and begins the next.
func (a *Agent) endWindows(ctx context.Context, now time.Time, clk *windowClock) {
	a.ingest()
	stats := a.tr.Stats()
	a.budget.Refill(now.Sub(clk.start))
	a.budget.Spend(host.ProcessCPU() - clk.cpuMark)
	a.windows(now, stats, stats.Dropped-clk.lastStats.Dropped)
	if clk.sampleAt = a.startSamples(now); !clk.sampleAt.IsZero() {
		clk.resume.Reset(time.Until(clk.sampleAt))
	}
	if err := a.act.Flush(); err != nil {
		a.opt.Log.Error(err, "write the records of the devices' originals (retried every window)")
	}
	a.retryDispatch(ctx, now, clk.idle.Share())
	if a.disksAppeared() {
		a.requeue()
	}
	clk.lastStats = stats
	clk.cpuMark = host.ProcessCPU()
	clk.start = now
}

// deliver is the tracer's callback: it only copies each device's requests
// into its pending buffer and signals arrived; the loop ingests them.
func (a *Agent) deliver(arrived chan<- struct{}) func([]trace.Request) {
	return func(batch []trace.Request) {
		a.mu.Lock()
		for i := range batch {
			if d := a.byDev[batch[i].Dev]; d != nil {
				d.keepPending(&batch[i])
			}
		}
		a.mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	}
}

// ingest hands every device the requests delivered since the last call.
func (a *Agent) ingest() {
	for _, d := range a.devs {
		d.ingest(&a.mu)
	}
}

// windows ends every device's window at now and reports the status.
func (a *Agent) windows(now time.Time, stats tracer.Stats, dropped uint64) {
	env := &windowEnv{budget: a.budget, act: a.act, metrics: a.opt.Metrics, log: a.opt.Log, grant: a.opt.Grant, writers: a.writers,
		caches: a.opt.Caches, hostRoot: a.opt.HostRoot, readScale: a.samples.Scale(a.window)}
	if a.pcache != nil {
		if err := a.pcache.Read(); err != nil {
			a.opt.Log.Error(err, "read the page-cache counters")
		} else {
			env.pageCache = a.pcache.Window
		}
	}
	env.caps = a.readCaps()
	a.dropGone()
	for _, d := range a.devs {
		if d.status.Gone != "" {
			continue
		}
		n := d.ctrl.Requests()
		d.window(now, env)
		d.status.EventsDropped, d.status.EventsLost = int64(min(stats.Dropped, 1<<63-1)), int64(min(stats.Lost, 1<<63-1))
		if a.opt.Metrics != nil {
			a.opt.Metrics.AddTraceEvents(d.sys.Name, a.st.Tracer, uint64(n), 0)
		}
	}
	if a.opt.Metrics != nil && dropped > 0 {
		a.opt.Metrics.AddTraceEvents("", a.st.Tracer, 0, dropped)
	}
	a.st.Windows++
	a.publish()
	if a.opt.OnWindow != nil {
		a.opt.OnWindow(a.Status())
	}
}

// publish makes the loop's status the one Status returns: the devices'
// entries, and the ungoverned disks as sysfs shows them now.
func (a *Agent) publish() {
	st := a.st
	st.Devices = make([]v1alpha1.DeviceState, len(a.devs))
	for i, d := range a.devs {
		st.Devices[i] = *d.status.DeepCopy()
	}
	st.Ungoverned = ungoverned(a.opt.HostRoot, a.others)
	a.mu.Lock()
	a.last = st
	a.mu.Unlock()
}

// shutdown saves the learned models and, in Apply mode unless Keep,
// restores every device the agent changed.
func (a *Agent) shutdown() error {
	for _, d := range a.devs {
		if d.status.Gone != "" {
			continue
		}
		if err := modelfile.Save(a.opt.StateDir, d.sys, d.ctrl.Model()); err != nil {
			a.opt.Log.Error(err, "save model", "device", d.sys.Name)
		}
	}
	if a.st.Mode != string(v1alpha1.ModeApply) || a.opt.Keep {
		a.publish()
		return nil
	}
	a.leaveToOtherWriters()
	done, err := a.act.RevertAll()
	if m := a.opt.Metrics; m != nil {
		for _, dev := range done {
			m.IncRevert(dev, metrics.RevertShutdown)
		}
	}
	var re *actuate.RevertError
	if errors.As(err, &re) && re.AllRestored() {
		// Devices that are gone, or restored with their record kept (a
		// read-only or full state directory): reported, not a failure.
		a.opt.Log.Info("restored every device still there", "devices", done, "not restored", err.Error())
		a.st.Notes = append(a.st.Notes, "at shutdown: "+err.Error())
		err = nil
	}
	if err != nil {
		a.publish()
		return fmt.Errorf("restore devices at shutdown: %w", err)
	}
	a.opt.Log.Info("restored original settings", "devices", done)
	for _, d := range a.devs {
		if d.status.Gone == "" {
			d.refresh(a.act, window.Gate{Granted: true})
		}
	}
	a.publish()
	return nil
}

// startSamples begins the window that started at now: it pauses the
// tracing of every device whose window may be sampled, and returns when
// to resume them (the zero time when it paused none).
func (a *Agent) startSamples(now time.Time) time.Time {
	paused := a.sampledNext()
	if len(paused) == 0 {
		return time.Time{}
	}
	if !a.setPaused(paused) {
		return time.Time{}
	}
	return now.Add(a.window - a.samples.Len(a.window))
}

// sampledNext marks the devices whose next window may be sampled
// (device.sampled) and returns their device numbers. Start gives the
// first window's to the tracer as it starts (tracer.Options.Paused), so
// that a device whose model was loaded settled is never traced whole at
// the agent's start: its programs attach at the sample, not before.
func (a *Agent) sampledNext() []uint32 {
	s := a.samples.Len(a.window)
	var paused []uint32
	for _, d := range a.devs {
		d.sampled = d.status.Gone == "" && d.ctrl.SampleNext(s > 0, d.policy.Spec.Cache.Enabled)
		if d.sampled {
			paused = append(paused, d.sys.Dev)
		}
	}
	return paused
}

// resumeSamples resumes the tracing of every device; the windows stay
// marked sampled until they end.
func (a *Agent) resumeSamples() {
	for _, d := range a.devs {
		if d.sampled {
			d.ios.MarkSample(a.opt.HostRoot, d.sys.Name)
		}
	}
	a.setPaused(nil)
}

// setPaused pauses the tracing and page-cache tracking (but for the pages
// page faults read around) of devs and resumes every other device's
// (sampling.Tracing.Pause), reporting whether it did; when it did not,
// every device's window is traced whole.
func (a *Agent) setPaused(devs []uint32) bool {
	note, ok := a.samples.Pause(a.tr, devs)
	if note != "" {
		a.notes = append(a.notes, note)
		a.st.Notes = append(a.st.Notes, note)
	}
	if !ok {
		for _, d := range a.devs {
			d.sampled = false
		}
	}
	a.trackPageCache()
	return ok
}

// leaveToOtherWriters hands back the devices the agent yielded to
// another writer (otherwriter.HandBack) and returns those whose records
// were still there.
func (a *Agent) leaveToOtherWriters() []string {
	var yielded []string
	for _, d := range a.devs {
		if d.yielded {
			yielded = append(yielded, d.sys.Name)
		}
	}
	return otherwriter.HandBack(a.act, yielded, a.opt.Log)
}

func (a *Agent) names() []string {
	out := make([]string, len(a.devs))
	for i, d := range a.devs {
		out[i] = d.sys.Name
	}
	return out
}

// trackPageCache makes the page-cache probe, if it runs, count the
// governed devices' file systems, those of the paused devices
// (agent/sampling) lightly.
func (a *Agent) trackPageCache() {
	if a.pcache == nil {
		return
	}
	devs := make([]pagecache.Device, len(a.devs))
	for i, d := range a.devs {
		devs[i] = pagecache.Device{Name: d.sys.Name, Dev: d.sys.Dev, ReadAhead: d.ctrl.Policy.ReadAhead, Gone: d.status.Gone != ""}
	}
	if err := a.pcache.Track(a.opt.HostRoot, devs, a.samples.Paused()); err != nil {
		a.opt.Log.Error(err, "track the devices' page cache")
	}
}

// devNumbers are the device numbers to trace: the devices that are there.
func (a *Agent) devNumbers() []uint32 {
	out := make([]uint32, 0, len(a.devs))
	for _, d := range a.devs {
		if d.status.Gone == "" {
			out = append(out, d.sys.Dev)
		}
	}
	return out
}

// readCaps is the blk-throttle caps of each device's readers since the
// last window (blkcaps), by "MAJ:MIN"; nil without them. An error is
// logged when it differs from the last one.
func (a *Agent) readCaps() map[string]model.Throttle {
	if a.caps == nil {
		return nil
	}
	caps, err := a.caps.Read()
	if err != nil {
		if err.Error() != a.capsErr {
			a.opt.Log.Error(err, "read the readers' blk-throttle caps; read-ahead is costed without them")
		}
		a.capsErr = err.Error()
		return nil
	}
	a.capsErr = ""
	return caps
}
