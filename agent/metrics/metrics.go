// Package metrics is the node agent's Prometheus instrumentation and its
// /metrics, /healthz and /readyz HTTP endpoint (DESIGN §7).
//
// Every metric is named shadowtune_agent_<what>_<unit>, in base units
// (seconds; ratios 0–1, never percent), and carries the label device (the
// kernel name, e.g. "sda"); per-candidate metrics add candidate (the
// candidate's stable name, e.g. "bfq" or "mq-deadline(fifo_batch=8)").
//
// Cardinality is bounded: per window the package keeps gauges (the latest
// window's totals) and counters (running totals), never a series per
// request; label values with a closed set (revert reason, tracer, skip
// reason) are mapped onto that set, unknown values becoming "other"; series
// of candidates no longer simulated, of a replaced setting and of a removed
// device are deleted.
//
// [New] registers the collectors on the Registerer it is given, never on
// the global default registry. The agent typically builds its own registry
// with the Go and process collectors next to these:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
//	m, err := metrics.New(reg)
//	...
//	err = metrics.Serve(ctx, *metricsBindAddress, reg, agent.Ready, log)
//
// All methods of [Metrics] are safe for concurrent use.
package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	namespace = "shadowtune"
	subsystem = "agent"
)

// Revert reasons, the values of the reason label of
// shadowtune_agent_setting_reverts_total.
const (
	// RevertRegression: the verification after a change measured a real
	// regression beyond the tolerance.
	RevertRegression = "regression"
	// RevertObserve: the policy switched to Observe mode, so every change
	// is put back.
	RevertObserve = "observe"
	// RevertShutdown: the agent is stopping (uninstall) and restores the
	// original settings.
	RevertShutdown = "shutdown"
	// RevertManual: an administrator asked for the revert.
	RevertManual = "manual"
)

// Tracers, the values of the tracer label of the trace metrics.
const (
	// TracerEBPF: block tracepoints through eBPF.
	TracerEBPF = "ebpf"
	// TracerTracefs: block tracepoints through tracefs (the fallback).
	TracerTracefs = "tracefs"
)

// Reasons for skipping a window, the values of the reason label of
// shadowtune_agent_windows_skipped_total.
const (
	// SkipCPUBudget: evaluating the window would exceed the CPU budget.
	SkipCPUBudget = "cpu_budget"
	// SkipTooFewRequests: the window holds too few requests to judge.
	SkipTooFewRequests = "too_few_requests"
	// SkipModelNotReady: the disk model has not learned enough yet.
	SkipModelNotReady = "model_not_ready"
	// SkipError: the evaluation failed.
	SkipError = "error"
	// SkipSampleMissed: the window was traced for its last part only,
	// and that part missed the window's work.
	SkipSampleMissed = "sample_missed"
)

// otherValue replaces a label value outside its closed set.
const otherValue = "other"

var (
	revertReasons = []string{RevertRegression, RevertObserve, RevertShutdown, RevertManual}
	// openFileOutcomes are AddOpenFiles' outcomes, in its arguments' order.
	openFileOutcomes = []string{"followed", "left_marked", "left_own", "failed"}
	skipReasons      = []string{SkipCPUBudget, SkipTooFewRequests, SkipModelNotReady, SkipError, SkipSampleMissed}
	tracers          = []string{TracerEBPF, TracerTracefs}
)

// EvaluationBuckets are the bucket bounds, in seconds, of
// shadowtune_agent_evaluation_duration_seconds: 1 ms to 60 s, which covers a
// small window on a fast host up to a long window with many candidates at
// the edge of the CPU budget. (The histogram is also a native histogram for
// scrapers that negotiate them.) Read only.
var EvaluationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// WindowReport is what the agent learned from one window of one device.
type WindowReport struct {
	// Requests is the number of requests completed on the real device in
	// the window.
	Requests uint64
	// RealService is the measured total service time of those requests
	// (the sum of their issue-to-completion times).
	RealService time.Duration
	// PredictedService is the disk model's prediction of RealService:
	// each request's service time predicted before the model learned it,
	// the online prediction whose per-group error is the device status's
	// modelErrorPercent (KDSim §6). Its total against RealService's is
	// the model's bias over any span of windows.
	PredictedService time.Duration
	// Current names the setting in effect during the window, as a candidate
	// name; it should be a key of Simulated. The model's window error
	// compares its simulated total with RealService, and the predicted
	// gains are relative to it; when it is missing from Simulated (or its
	// total is 0) neither is exported for the window.
	Current string
	// Simulated maps each simulated candidate, the current setting
	// included, to its total simulated service time for the window. Empty
	// when the window was not simulated (e.g. skipped): then the
	// simulated-side series of the device are removed, so that they never
	// pair with another window's measurements.
	Simulated map[string]time.Duration
	// SimulatedRealService is the measured total service time of the
	// requests that were simulated, when that was only the window's newest
	// (a busy window, or a screening pass); 0 means all of them
	// (RealService). The model error compares Current's simulated total
	// with it, like with like.
	SimulatedRealService time.Duration
	// Screened: the window was evaluated by a screening pass over its
	// newest requests only, which found the setting settled.
	Screened bool
	// Predicted maps each simulated candidate to the measure the decision
	// compares for it over the window (the simulated measure of the
	// policy's rank, times its scheduler's dispatch factor and its learned
	// correction). Over any span of windows the ratio of two candidates'
	// sums is the predicted ratio of their times for that span's work, the
	// counterfactual that a measured run of each setting checks.
	Predicted map[string]time.Duration
	// SwitchCost is the estimated cost of switching away from Current,
	// T_change = pending requests × mean service time (DESIGN §6).
	SwitchCost time.Duration
	// End is when the window closed; the zero time means now.
	End time.Time
}

// Metrics holds the agent's collectors. Create it with [New].
type Metrics struct {
	realWindow     *prometheus.GaugeVec
	realTotal      *prometheus.CounterVec
	predTotal      *prometheus.CounterVec
	predicted      *prometheus.CounterVec
	requests       *prometheus.CounterVec
	windowEnd      *prometheus.GaugeVec
	simulated      *prometheus.GaugeVec
	modelError     *prometheus.GaugeVec
	gain           *prometheus.GaugeVec
	setting        *prometheus.GaugeVec
	changes        *prometheus.CounterVec
	reverts        *prometheus.CounterVec
	guardChanges   *prometheus.GaugeVec
	guardQuiet     *prometheus.GaugeVec
	guardPinned    *prometheus.GaugeVec
	traceEvents    *prometheus.CounterVec
	traceDropped   *prometheus.CounterVec
	evalDuration   *prometheus.HistogramVec
	evalCPU        *prometheus.CounterVec
	windowsSkipped *prometheus.CounterVec
	screened       *prometheus.CounterVec
	otherWriter    *prometheus.CounterVec
	openFiles      *prometheus.CounterVec
	raWaste        *prometheus.GaugeVec
	throttleIOPS   *prometheus.GaugeVec
	throttleBytes  *prometheus.GaugeVec
	correction     *prometheus.GaugeVec
	cfError        *prometheus.GaugeVec
	cfChecks       *prometheus.GaugeVec
	cfHolding      *prometheus.GaugeVec
	cacheMode      *prometheus.GaugeVec
	cacheHit       *prometheus.GaugeVec
	cachePredHit   *prometheus.GaugeVec
	cacheGain      *prometheus.GaugeVec
	cacheDirty     *prometheus.GaugeVec
	defaultsChange *prometheus.GaugeVec
	defaultsSlower *prometheus.GaugeVec
	dispatchCost   *prometheus.GaugeVec
	all            []prometheus.Collector
	perDeviceVecs  []interface{ DeletePartialMatch(prometheus.Labels) int }
	mu             sync.Mutex
	devices        map[string]*deviceState
	now            func() time.Time
}

// deviceState is what must be remembered to delete stale series.
type deviceState struct {
	candidates map[string]struct{} // candidate label values now exported
	setting    []string            // scheduler, read_ahead_kib, tunables; nil if unset
}

// New creates the agent's metrics and registers them on reg. It fails if
// reg is nil or any metric is already registered there (then nothing stays
// registered).
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil Registerer")
	}
	dev := []string{"device"}
	devCand := []string{"device", "candidate"}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	}
	m := &Metrics{
		realWindow: gauge("window_real_service_seconds",
			"Measured total service time of the requests completed on the device in the last window.", dev),
		realTotal: counter("real_service_seconds_total",
			"Measured total service time of the requests completed on the device.", dev),
		predTotal: counter("model_predicted_service_seconds_total",
			"The disk model's prediction of real_service_seconds_total: each request predicted before it was learned.", dev),
		requests: counter("requests_total",
			"Requests completed on the device, as traced.", dev),
		windowEnd: gauge("window_end_timestamp_seconds",
			"Unix time at which the last observed window of the device closed.", dev),
		predicted: counter("predicted_seconds_total",
			"The measure the decision compares for a candidate (its simulated time under the policy's rank, with its scheduler's dispatch cost and learned correction), summed over the evaluated windows: the ratio of two candidates' increases over a span is their predicted time ratio for that span's work.", devCand),
		simulated: gauge("window_simulated_service_seconds",
			"Simulated total service time of the last window under a candidate setting (the current setting included).", devCand),
		modelError: gauge("model_window_error_ratio",
			"Relative error of the disk model over the last window: (simulated − measured) / measured total service time under the current setting; positive when the model overestimates.", dev),
		gain: gauge("predicted_gain_ratio",
			"Predicted gain of switching to a candidate over the last window, including the switch cost: (T_current − T_candidate − T_change) / T_current; 0 for the current setting.", devCand),
		setting: gauge("device_setting_info",
			"The setting in effect on the device; always 1.", []string{"device", "scheduler", "read_ahead_kib", "tunables"}),
		changes: counter("setting_changes_total",
			"Setting changes applied to the device.", dev),
		reverts: counter("setting_reverts_total",
			"Setting changes reverted on the device, by reason (regression, observe, shutdown, manual, other).", []string{"device", "reason"}),
		guardChanges: gauge("thrash_guard_consecutive_changes",
			"Thrash guard: changes decided in consecutive checks.", dev),
		guardQuiet: gauge("thrash_guard_quiet_checks",
			"Thrash guard: consecutive checks, while pinned, that predicted no change.", dev),
		guardPinned: gauge("thrash_guard_pinned",
			"Thrash guard: 1 while the default setting is pinned, else 0.", dev),
		traceEvents: counter("trace_events_total",
			"Block trace events received, by tracer (ebpf, tracefs, other).", []string{"device", "tracer"}),
		traceDropped: counter("trace_events_dropped_total",
			"Block trace events lost (ring-buffer overruns, unpaired events), by tracer.", []string{"device", "tracer"}),
		evalDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "evaluation_duration_seconds",
			Help:                            "Wall-clock time to evaluate one window (simulate every candidate and decide).",
			Buckets:                         EvaluationBuckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}, dev),
		evalCPU: counter("evaluation_cpu_seconds_total",
			"CPU time spent evaluating windows.", dev),
		windowsSkipped: counter("windows_skipped_total",
			"Windows not evaluated, by reason (cpu_budget, too_few_requests, model_not_ready, error, sample_missed, other).", []string{"device", "reason"}),
		screened: counter("windows_screened_total",
			"Windows evaluated by a screening pass over their newest requests only, which found the setting settled (no switch, and no candidate within 1.5 points of the switching margin).", dev),
		otherWriter: counter("other_writer_changes_total",
			"Changes to a setting the agent governs on the device that the agent did not make (another writer).", dev),
		openFiles: counter("read_ahead_open_files_total",
			"Files already open on the device when the agent wrote its read_ahead_kb, by outcome: followed (brought to the new value by fadvise), left_marked (the application's POSIX_FADV_RANDOM or NOREUSE), left_own (another value of its own), failed.", []string{"device", "outcome"}),
		raWaste: gauge("read_ahead_waste_ratio",
			"Share of the pages read into the page cache from the device's files in the last window that were evicted without being read or mapped (the page-cache probe); absent when not measured.", dev),
		throttleIOPS: gauge("throttle_requests_per_second",
			"The request cap of the token bucket measured in front of the device (a cloud volume's IOPS cap); absent when none was measured.", dev),
		throttleBytes: gauge("throttle_bytes_per_second",
			"The bandwidth cap of the token bucket measured in front of the device; absent when none was measured.", dev),
		correction: gauge("correction_ratio",
			"Learned correction of a candidate on the device: the factor its predicted wait is multiplied by, from verified changes (above 1: measured slower than predicted).", devCand),
		cfError: gauge("counterfactual_error_ratio",
			"Mean absolute error of the predicted time ratio (new setting over previous) of the device's verified scheduler changes against the measured ratio (0.1: 10 percentage points); absent before the first.", dev),
		cfChecks: gauge("counterfactual_checks",
			"Verified scheduler changes counted in counterfactual_error_ratio.", dev),
		cfHolding: gauge("counterfactual_holding",
			"1 while the device's counterfactual error exceeds the policy's margin and holds switches on predictions alone back (until the back-off after the last check), else 0.", dev),
		cacheMode: gauge("cache_mode_info",
			"The mode of the dm-cache in front of the device (writethrough, passthrough or writeback); always 1.", []string{"device", "cache", "mode"}),
		cacheHit: gauge("cache_read_hit_ratio",
			"Share of the reads through the device's dm-cache that it served from the cache in the last window (its counters); absent while off or without reads.", []string{"device", "cache"}),
		cachePredHit: gauge("cache_predicted_read_hit_ratio",
			"Share of the reads that the simulated cache served: while the dm-cache is off, in the last simulated window; while on, in the window its switch on rested on; absent when not simulated.", []string{"device", "cache"}),
		cacheGain: gauge("cache_gain_ratio",
			"The gain the last cache decision rested on, as a ratio of I/O time: simulated while the cache is off (source=predicted), from its counters while on (source=measured).", []string{"device", "cache", "source"}),
		cacheDirty: gauge("cache_dirty_blocks",
			"Dirty blocks of the device's dm-cache (0 in writethrough and passthrough).", []string{"device", "cache"}),
		dispatchCost: gauge("scheduler_dispatch_cost_seconds",
			"CPU time per request each scheduler costs beyond none's on this node, which the decision charges: measured at start on a private RAM-backed loop device (source=measured), or BFQ's documented figures when it could not be (source=prior).", []string{"scheduler", "source"}),
		devices: make(map[string]*deviceState),
		now:     time.Now,
	}
	m.defaultsChange, m.defaultsSlower = sentinelGauges(gauge)
	if err := m.register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// sentinelGauges are the regression sentinel's gauges (agent/sentinel):
// the changed defaults, and their verdicts.
func sentinelGauges(gauge func(name, help string, labels []string) *prometheus.GaugeVec) (changed, slower *prometheus.GaugeVec) {
	knob := []string{"device", "knob"}
	changed = gauge("defaults_changed",
		"1 for each queue attribute of the device (knob: scheduler, read_ahead_kb, nr_requests, max_sectors_kb, wbt_lat_usec, rotational) whose default differed, at the agent's start, from the one read at its previous start on the same disk (a kernel or node-image upgrade); absent otherwise.", knob)
	slower = gauge("defaults_slower",
		"For each changed default of the device (knob, as in defaults_changed) that the agent judged: 1 when the new default is predicted slower than the previous one by the policy's margin (read_ahead_kb on the readers' page-cache evidence, scheduler by simulating the window's requests under both), 0 when it is not; absent until judged.", knob)
	return changed, slower
}

// register lists m's collectors, the per-device ones apart, and
// registers them all on reg.
func (m *Metrics) register(reg prometheus.Registerer) error {
	m.all = []prometheus.Collector{
		m.realWindow, m.realTotal, m.predTotal, m.requests, m.windowEnd, m.predicted, m.simulated, m.modelError, m.gain,
		m.setting, m.changes, m.reverts, m.guardChanges, m.guardQuiet, m.guardPinned,
		m.traceEvents, m.traceDropped, m.evalDuration, m.evalCPU, m.windowsSkipped, m.screened, m.otherWriter,
		m.openFiles, m.raWaste, m.throttleIOPS, m.throttleBytes, m.correction, m.cfError, m.cfChecks, m.cfHolding, m.cacheMode, m.cacheHit, m.cachePredHit, m.cacheGain, m.cacheDirty,
		m.defaultsChange, m.defaultsSlower,
	}
	for _, c := range m.all {
		m.perDeviceVecs = append(m.perDeviceVecs, c.(interface{ DeletePartialMatch(prometheus.Labels) int }))
	}
	m.all = append(m.all, m.dispatchCost) // the node's, not a device's
	return registerAll(reg, m.all)
}

// registerAll registers cs on reg, or none of them: on an error the ones
// registered are unregistered again.
func registerAll(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}

// ObserveWindow records one window of dev: the measured totals, and, when
// w.Simulated is not empty, every candidate's simulated total, the
// predicted gains and the model's window error. Candidates simulated in an
// earlier window but not in this one lose their series.
func (m *Metrics) ObserveWindow(dev string, w WindowReport) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.device(dev)

	realSec := w.RealService.Seconds()
	m.realWindow.WithLabelValues(dev).Set(realSec)
	m.realTotal.WithLabelValues(dev).Add(max(realSec, 0))
	m.predTotal.WithLabelValues(dev).Add(max(w.PredictedService.Seconds(), 0))
	m.requests.WithLabelValues(dev).Add(float64(w.Requests))
	end := w.End
	if end.IsZero() {
		end = m.now()
	}
	m.windowEnd.WithLabelValues(dev).Set(float64(end.UnixNano()) / 1e9)

	seen := make(map[string]struct{}, len(w.Simulated))
	for name := range w.Simulated {
		seen[labelValue(name)] = struct{}{}
	}
	for name := range st.candidates {
		if _, ok := seen[name]; !ok {
			m.simulated.DeleteLabelValues(dev, name)
			m.gain.DeleteLabelValues(dev, name)
		}
	}
	st.candidates = seen
	for name, t := range w.Predicted {
		m.predicted.WithLabelValues(dev, labelValue(name)).Add(max(t.Seconds(), 0))
	}

	if w.Screened {
		m.screened.WithLabelValues(dev).Inc()
	}
	measured := w.RealService
	if w.SimulatedRealService > 0 {
		measured = w.SimulatedRealService
	}
	cur, haveCur := w.Simulated[w.Current]
	if haveCur && measured > 0 {
		m.modelError.WithLabelValues(dev).Set((cur - measured).Seconds() / measured.Seconds())
	} else {
		m.modelError.DeleteLabelValues(dev)
	}
	// A gain needs the current setting's total as its reference; without
	// one (not simulated, or an empty window) the gain series are absent.
	judge := haveCur && cur > 0
	for name, t := range w.Simulated {
		lv := labelValue(name)
		m.simulated.WithLabelValues(dev, lv).Set(t.Seconds())
		switch {
		case !judge:
			m.gain.DeleteLabelValues(dev, lv)
		case name == w.Current:
			m.gain.WithLabelValues(dev, lv).Set(0)
		default:
			m.gain.WithLabelValues(dev, lv).Set(float64(cur-t-w.SwitchCost) / float64(cur))
		}
	}
}

// SetSetting records the setting in effect on dev: the scheduler (e.g.
// "mq-deadline"), read_ahead_kb and its tunables in canonical form (e.g.
// "fifo_batch=8,read_expire=100"; "" for none). The previous setting's
// series is deleted when the setting changed, so exactly one
// shadowtune_agent_device_setting_info series exists per device.
func (m *Metrics) SetSetting(dev, scheduler string, readAheadKiB int, tunables string) {
	dev = labelValue(dev)
	lv := []string{labelValue(scheduler), strconv.Itoa(readAheadKiB), labelValue(tunables)}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.device(dev)
	if st.setting != nil && !slices.Equal(st.setting, lv) {
		m.setting.DeleteLabelValues(append([]string{dev}, st.setting...)...)
	}
	st.setting = lv
	m.setting.WithLabelValues(append([]string{dev}, lv...)...).Set(1)
}

// IncChange counts one setting change applied to dev.
func (m *Metrics) IncChange(dev string) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	m.changes.WithLabelValues(dev).Inc()
}

// IncRevert counts one change reverted on dev; reason is one of
// RevertRegression, RevertObserve, RevertShutdown or RevertManual (any
// other value is counted as "other").
func (m *Metrics) IncRevert(dev, reason string) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	m.reverts.WithLabelValues(dev, closed(reason, revertReasons)).Inc()
}

// IncOtherWriter counts one change of dev's setting that the agent did not
// make.
func (m *Metrics) IncOtherWriter(dev string) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	m.otherWriter.WithLabelValues(dev).Inc()
}

// SetDefaultsChanged sets dev's defaults_changed series: 1 for each of
// knobs (the queue attributes whose defaults changed since the agent's
// previous start), the others removed.
func (m *Metrics) SetDefaultsChanged(dev string, knobs []string) {
	values := make(map[string]float64, len(knobs))
	for _, k := range knobs {
		values[k] = 1
	}
	m.setKnobs(m.defaultsChange, dev, values)
}

// SetDefaultsSlower sets dev's defaults_slower series: for each knob
// judged, 1 when its new default is predicted slower, else 0; the others
// removed.
func (m *Metrics) SetDefaultsSlower(dev string, judged map[string]bool) {
	values := make(map[string]float64, len(judged))
	for k, slower := range judged {
		values[k] = 0
		if slower {
			values[k] = 1
		}
	}
	m.setKnobs(m.defaultsSlower, dev, values)
}

// setKnobs replaces dev's series of v (labels device, knob) with one per
// knob of values, at its value.
func (m *Metrics) setKnobs(v *prometheus.GaugeVec, dev string, values map[string]float64) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	v.DeletePartialMatch(prometheus.Labels{"device": dev})
	for k, x := range values {
		v.WithLabelValues(dev, labelValue(k)).Set(x)
	}
}

// AddOpenFiles counts the files open on dev when the agent wrote its
// read_ahead_kb (package agent/openfiles): followed, left with an
// application's mark, left at a value of their own, and failed.
func (m *Metrics) AddOpenFiles(dev string, followed, marked, own, failed int) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	for i, n := range []int{followed, marked, own, failed} {
		m.openFiles.WithLabelValues(dev, openFileOutcomes[i]).Add(float64(n))
	}
}

// SetEvidence records what dev's recommendations rest on: the last
// window's read-ahead waste (a ratio, 0–1; measured false removes the
// series) and the learned corrections by candidate (factors; a candidate
// not listed loses its series).
func (m *Metrics) SetEvidence(dev string, waste float64, measured bool, corrections map[string]float64) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	if measured {
		m.raWaste.WithLabelValues(dev).Set(waste)
	} else {
		m.raWaste.DeleteLabelValues(dev)
	}
	m.correction.DeletePartialMatch(prometheus.Labels{"device": dev})
	for c, f := range corrections {
		m.correction.WithLabelValues(dev, labelValue(c)).Set(f)
	}
}

// SetCounterfactual records dev's counterfactual error: errPct
// (percentage points) over checks verified changes, and whether it holds
// switches back now; with no checks the series are removed.
func (m *Metrics) SetCounterfactual(dev string, errPct float64, checks int, holding bool) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	if checks == 0 {
		for _, v := range []*prometheus.GaugeVec{m.cfError, m.cfChecks, m.cfHolding} {
			v.DeleteLabelValues(dev)
		}
		return
	}
	m.cfError.WithLabelValues(dev).Set(errPct / 100)
	m.cfChecks.WithLabelValues(dev).Set(float64(checks))
	h := 0.0
	if holding {
		h = 1
	}
	m.cfHolding.WithLabelValues(dev).Set(h)
}

// SetThrottle records the caps of the token bucket measured in front of
// dev, requests and bytes per second; a cap of 0 removes its series.
func (m *Metrics) SetThrottle(dev string, requestsPerSec, bytesPerSec float64) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	for _, g := range []struct {
		v   *prometheus.GaugeVec
		cap float64
	}{{m.throttleIOPS, requestsPerSec}, {m.throttleBytes, bytesPerSec}} {
		if g.cap > 0 {
			g.v.WithLabelValues(dev).Set(g.cap)
		} else {
			g.v.DeleteLabelValues(dev)
		}
	}
}

// CacheState is what SetCache exports of the dm-cache in front of a
// device.
type CacheState struct {
	Name, Mode string
	// HitRatio is the last window's read hits ÷ reads (0–1); HitMeasured
	// false removes the series.
	HitRatio    float64
	HitMeasured bool
	// PredictedHitRatio is the simulated cache's read hits ÷ reads (0–1)
	// that the decision rested on; PredictedHitKnown false removes the
	// series.
	PredictedHitRatio float64
	PredictedHitKnown bool
	// Gain is the ratio the last decision rested on; Measured tells its
	// source; GainKnown false removes the series.
	Gain                float64
	Measured, GainKnown bool
	Dirty               uint64
}

// SetDispatchCosts sets each scheduler's CPU time per request beyond
// none's (ns, as schedcost.Costs.PerRequestNs gives them); measured tells
// a measurement from the prior. The series of an earlier call are
// replaced.
func (m *Metrics) SetDispatchCosts(perRequestNs map[string]float64, measured bool) {
	src := "prior"
	if measured {
		src = "measured"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dispatchCost.Reset()
	for sched, ns := range perRequestNs {
		if sched == "none" {
			continue
		}
		m.dispatchCost.WithLabelValues(labelValue(sched), src).Set(ns / 1e9)
	}
}

// SetCache records the dm-cache in front of dev; nil removes its series
// (no cache, or not governed).
func (m *Metrics) SetCache(dev string, c *CacheState) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	for _, v := range []*prometheus.GaugeVec{m.cacheMode, m.cacheHit, m.cachePredHit, m.cacheGain, m.cacheDirty} {
		v.DeletePartialMatch(prometheus.Labels{"device": dev})
	}
	if c == nil {
		return
	}
	name := labelValue(c.Name)
	m.cacheMode.WithLabelValues(dev, name, closed(c.Mode, cacheModes)).Set(1)
	if c.HitMeasured {
		m.cacheHit.WithLabelValues(dev, name).Set(c.HitRatio)
	}
	if c.PredictedHitKnown {
		m.cachePredHit.WithLabelValues(dev, name).Set(c.PredictedHitRatio)
	}
	if c.GainKnown {
		src := "predicted"
		if c.Measured {
			src = "measured"
		}
		m.cacheGain.WithLabelValues(dev, name, src).Set(c.Gain)
	}
	m.cacheDirty.WithLabelValues(dev, name).Set(float64(c.Dirty))
}

// cacheModes are the values of cache_mode_info's mode label.
var cacheModes = []string{"writethrough", "passthrough", "writeback"}

// SetThrashGuard records the thrash guard's state on dev (DESIGN §6):
// changes decided in consecutive checks, consecutive quiet checks while
// pinned, and whether the default is pinned.
func (m *Metrics) SetThrashGuard(dev string, consecutiveChanges, quietChecks int, pinned bool) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	m.guardChanges.WithLabelValues(dev).Set(float64(consecutiveChanges))
	m.guardQuiet.WithLabelValues(dev).Set(float64(quietChecks))
	p := 0.0
	if pinned {
		p = 1
	}
	m.guardPinned.WithLabelValues(dev).Set(p)
}

// AddTraceEvents adds events received and events dropped, both counted
// since the previous call (deltas, not running totals), by tracer
// (TracerEBPF or TracerTracefs; any other value is counted as "other").
// Events or drops that belong to no single device (e.g. a ring-buffer
// overrun) are reported with dev "" and exported without a device value.
func (m *Metrics) AddTraceEvents(dev, tracer string, events, dropped uint64) {
	dev = labelValue(dev)
	tr := closed(tracer, tracers)
	m.mu.Lock()
	defer m.mu.Unlock()
	if dev != "" {
		m.device(dev)
	}
	m.traceEvents.WithLabelValues(dev, tr).Add(float64(events))
	m.traceDropped.WithLabelValues(dev, tr).Add(float64(dropped))
}

// ObserveEvaluation records the evaluation of one window of dev: its wall
// time (into the duration histogram) and the CPU time it used.
func (m *Metrics) ObserveEvaluation(dev string, wall, cpu time.Duration) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	m.evalDuration.WithLabelValues(dev).Observe(max(wall.Seconds(), 0))
	m.evalCPU.WithLabelValues(dev).Add(max(cpu.Seconds(), 0))
}

// SkipWindow counts one window of dev that was not evaluated; reason is one
// of SkipCPUBudget, SkipTooFewRequests, SkipModelNotReady or SkipError (any
// other value is counted as "other").
func (m *Metrics) SkipWindow(dev, reason string) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.device(dev)
	m.windowsSkipped.WithLabelValues(dev, closed(reason, skipReasons)).Inc()
}

// ForgetDevice deletes every series of dev (the device was removed, or is
// no longer managed). A later call for dev starts it afresh.
func (m *Metrics) ForgetDevice(dev string) {
	dev = labelValue(dev)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.perDeviceVecs {
		v.DeletePartialMatch(prometheus.Labels{"device": dev})
	}
	delete(m.devices, dev)
}

// device returns dev's state, creating it on first use; then the counters
// with a closed label set start at 0, so that rate() and increase() see
// the first event. m.mu must be held.
func (m *Metrics) device(dev string) *deviceState {
	st, ok := m.devices[dev]
	if ok {
		return st
	}
	st = &deviceState{}
	m.devices[dev] = st
	m.changes.WithLabelValues(dev)
	m.otherWriter.WithLabelValues(dev)
	for _, o := range openFileOutcomes {
		m.openFiles.WithLabelValues(dev, o)
	}
	for _, r := range revertReasons {
		m.reverts.WithLabelValues(dev, r)
	}
	for _, r := range skipReasons {
		m.windowsSkipped.WithLabelValues(dev, r)
	}
	return st
}

// closed maps v onto the closed set, or "other".
func closed(v string, set []string) string {
	for _, s := range set {
		if v == s {
			return s
		}
	}
	return otherValue
}

// labelValue makes s a valid label value (client_golang panics on invalid
// UTF-8).
func labelValue(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}
