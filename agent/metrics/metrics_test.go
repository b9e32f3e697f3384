package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// newTest returns metrics on a fresh registry, with a fixed clock.
func newTest(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m.now = func() time.Time { return time.Unix(1700000000, 500_000_000) }
	return m, reg
}

// exercise calls every method once for dev.
func exercise(m *Metrics, dev string) {
	m.SetDispatchCosts(map[string]float64{"none": 0, "mq-deadline": 3000, "kyber": 2600}, true)
	m.ObserveWindow(dev, WindowReport{
		Requests:         1000,
		RealService:      2 * time.Second,
		PredictedService: 1900 * time.Millisecond,
		Current:          "mq-deadline",
		Simulated: map[string]time.Duration{
			"mq-deadline":               2500 * time.Millisecond,
			"bfq":                       2 * time.Second,
			"mq-deadline(fifo_batch=8)": 2250 * time.Millisecond,
		},
		Predicted: map[string]time.Duration{
			"mq-deadline": 3 * time.Second,
			"bfq":         2 * time.Second,
		},
		SwitchCost: 250 * time.Millisecond,
		Screened:   true,
	})
	m.SetSetting(dev, "mq-deadline", 128, "")
	m.IncChange(dev)
	m.IncRevert(dev, RevertRegression)
	m.SetThrashGuard(dev, 2, 0, false)
	m.SetEvidence(dev, 0.97, true, map[string]float64{"mq-deadline": 1.3})
	m.SetThrottle(dev, 3000, 131072000)
	m.SetCounterfactual(dev, 12.5, 2, true)
	m.SetCache(dev, &CacheState{Name: "c", Mode: "writethrough", HitRatio: 0.5, HitMeasured: true, Gain: 0.2, GainKnown: true,
		PredictedHitRatio: 0.4, PredictedHitKnown: true})
	m.AddTraceEvents(dev, TracerEBPF, 2000, 3)
	m.ObserveEvaluation(dev, 30*time.Millisecond, 25*time.Millisecond)
	m.SkipWindow(dev, SkipCPUBudget)
	m.SetDefaultsChanged(dev, []string{"read_ahead_kb"})
	m.SetDefaultsSlower(dev, map[string]bool{"read_ahead_kb": true})
}

// families gathers reg into name → family.
func families(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelNames(m *dto.Metric) []string {
	var n []string
	for _, lp := range m.GetLabel() {
		n = append(n, lp.GetName())
	}
	return n
}

// TestNamesTypesLabels pins the exported names, types and label sets.
func TestNamesTypesLabels(t *testing.T) {
	m, reg := newTest(t)
	exercise(m, "sda")

	want := map[string]struct {
		typ    dto.MetricType
		labels []string
	}{
		"shadowtune_agent_window_real_service_seconds":           {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_real_service_seconds_total":            {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_requests_total":                        {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_window_end_timestamp_seconds":          {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_window_simulated_service_seconds":      {dto.MetricType_GAUGE, []string{"candidate", "device"}},
		"shadowtune_agent_predicted_seconds_total":               {dto.MetricType_COUNTER, []string{"candidate", "device"}},
		"shadowtune_agent_model_window_error_ratio":              {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_predicted_gain_ratio":                  {dto.MetricType_GAUGE, []string{"candidate", "device"}},
		"shadowtune_agent_device_setting_info":                   {dto.MetricType_GAUGE, []string{"device", "read_ahead_kib", "scheduler", "tunables"}},
		"shadowtune_agent_setting_changes_total":                 {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_setting_reverts_total":                 {dto.MetricType_COUNTER, []string{"device", "reason"}},
		"shadowtune_agent_thrash_guard_consecutive_changes":      {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_thrash_guard_quiet_checks":             {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_thrash_guard_pinned":                   {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_trace_events_total":                    {dto.MetricType_COUNTER, []string{"device", "tracer"}},
		"shadowtune_agent_model_predicted_service_seconds_total": {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_trace_events_dropped_total":            {dto.MetricType_COUNTER, []string{"device", "tracer"}},
		"shadowtune_agent_evaluation_duration_seconds":           {dto.MetricType_HISTOGRAM, []string{"device"}},
		"shadowtune_agent_evaluation_cpu_seconds_total":          {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_windows_skipped_total":                 {dto.MetricType_COUNTER, []string{"device", "reason"}},
		"shadowtune_agent_windows_screened_total":                {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_other_writer_changes_total":            {dto.MetricType_COUNTER, []string{"device"}},
		"shadowtune_agent_read_ahead_open_files_total":           {dto.MetricType_COUNTER, []string{"device", "outcome"}},
		"shadowtune_agent_read_ahead_waste_ratio":                {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_throttle_requests_per_second":          {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_throttle_bytes_per_second":             {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_correction_ratio":                      {dto.MetricType_GAUGE, []string{"candidate", "device"}},
		"shadowtune_agent_counterfactual_error_ratio":            {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_counterfactual_checks":                 {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_counterfactual_holding":                {dto.MetricType_GAUGE, []string{"device"}},
		"shadowtune_agent_cache_mode_info":                       {dto.MetricType_GAUGE, []string{"cache", "device", "mode"}},
		"shadowtune_agent_cache_read_hit_ratio":                  {dto.MetricType_GAUGE, []string{"cache", "device"}},
		"shadowtune_agent_cache_predicted_read_hit_ratio":        {dto.MetricType_GAUGE, []string{"cache", "device"}},
		"shadowtune_agent_cache_gain_ratio":                      {dto.MetricType_GAUGE, []string{"cache", "device", "source"}},
		"shadowtune_agent_cache_dirty_blocks":                    {dto.MetricType_GAUGE, []string{"cache", "device"}},
		"shadowtune_agent_scheduler_dispatch_cost_seconds":       {dto.MetricType_GAUGE, []string{"scheduler", "source"}},
		"shadowtune_agent_defaults_changed":                      {dto.MetricType_GAUGE, []string{"device", "knob"}},
		"shadowtune_agent_defaults_slower":                       {dto.MetricType_GAUGE, []string{"device", "knob"}},
	}
	got := families(t, reg)
	for name, w := range want {
		mf, ok := got[name]
		if !ok {
			t.Errorf("%s: not exported", name)
			continue
		}
		if mf.GetType() != w.typ {
			t.Errorf("%s: type %v, want %v", name, mf.GetType(), w.typ)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s: no help", name)
		}
		for _, s := range mf.GetMetric() {
			if l := labelNames(s); !slices.Equal(l, w.labels) {
				t.Errorf("%s: labels %v, want %v", name, l, w.labels)
			}
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected metric %s", name)
		}
	}
	if len(m.all) != len(want) {
		t.Errorf("%d collectors, want %d", len(m.all), len(want))
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestObserveWindowValues(t *testing.T) {
	m, reg := newTest(t)
	exercise(m, "sda")
	const want = `
# HELP shadowtune_agent_model_window_error_ratio Relative error of the disk model over the last window: (simulated − measured) / measured total service time under the current setting; positive when the model overestimates.
# TYPE shadowtune_agent_model_window_error_ratio gauge
shadowtune_agent_model_window_error_ratio{device="sda"} 0.25
# HELP shadowtune_agent_predicted_gain_ratio Predicted gain of switching to a candidate over the last window, including the switch cost: (T_current − T_candidate − T_change) / T_current; 0 for the current setting.
# TYPE shadowtune_agent_predicted_gain_ratio gauge
shadowtune_agent_predicted_gain_ratio{candidate="bfq",device="sda"} 0.1
shadowtune_agent_predicted_gain_ratio{candidate="mq-deadline",device="sda"} 0
shadowtune_agent_predicted_gain_ratio{candidate="mq-deadline(fifo_batch=8)",device="sda"} 0
# HELP shadowtune_agent_real_service_seconds_total Measured total service time of the requests completed on the device.
# TYPE shadowtune_agent_real_service_seconds_total counter
shadowtune_agent_real_service_seconds_total{device="sda"} 2
# HELP shadowtune_agent_requests_total Requests completed on the device, as traced.
# TYPE shadowtune_agent_requests_total counter
shadowtune_agent_requests_total{device="sda"} 1000
# HELP shadowtune_agent_window_end_timestamp_seconds Unix time at which the last observed window of the device closed.
# TYPE shadowtune_agent_window_end_timestamp_seconds gauge
shadowtune_agent_window_end_timestamp_seconds{device="sda"} 1.7000000005e+09
# HELP shadowtune_agent_window_real_service_seconds Measured total service time of the requests completed on the device in the last window.
# TYPE shadowtune_agent_window_real_service_seconds gauge
shadowtune_agent_window_real_service_seconds{device="sda"} 2
# HELP shadowtune_agent_window_simulated_service_seconds Simulated total service time of the last window under a candidate setting (the current setting included).
# TYPE shadowtune_agent_window_simulated_service_seconds gauge
shadowtune_agent_window_simulated_service_seconds{candidate="bfq",device="sda"} 2
shadowtune_agent_window_simulated_service_seconds{candidate="mq-deadline",device="sda"} 2.5
shadowtune_agent_window_simulated_service_seconds{candidate="mq-deadline(fifo_batch=8)",device="sda"} 2.25
`
	names := []string{
		"shadowtune_agent_model_window_error_ratio", "shadowtune_agent_predicted_gain_ratio",
		"shadowtune_agent_real_service_seconds_total", "shadowtune_agent_requests_total",
		"shadowtune_agent_window_end_timestamp_seconds", "shadowtune_agent_window_real_service_seconds",
		"shadowtune_agent_window_simulated_service_seconds",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// Next window: bfq is no longer a candidate, so its series go; the
	// counters accumulate; End is taken from the report.
	end := time.Unix(1700000010, 0)
	m.ObserveWindow("sda", WindowReport{
		Requests:         500,
		RealService:      time.Second,
		PredictedService: 1200 * time.Millisecond,
		Current:          "mq-deadline",
		Simulated: map[string]time.Duration{
			"mq-deadline":               800 * time.Millisecond,
			"mq-deadline(fifo_batch=8)": 400 * time.Millisecond,
		},
		Predicted: map[string]time.Duration{"mq-deadline": time.Second},
		End:       end,
	})
	if n := testutil.CollectAndCount(m.simulated); n != 2 {
		t.Errorf("%d simulated series after the candidate set shrank, want 2", n)
	}
	if n := testutil.CollectAndCount(m.gain); n != 2 {
		t.Errorf("%d gain series after the candidate set shrank, want 2", n)
	}
	checks := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"gain fifo_batch=8", m.gain.WithLabelValues("sda", "mq-deadline(fifo_batch=8)"), 0.5},
		{"model error", m.modelError.WithLabelValues("sda"), -0.2},
		{"requests", m.requests.WithLabelValues("sda"), 1500},
		{"real total", m.realTotal.WithLabelValues("sda"), 3},
		{"predicted total", m.predTotal.WithLabelValues("sda"), 3.1},
		{"real window", m.realWindow.WithLabelValues("sda"), 1},
		{"predicted mq-deadline", m.predicted.WithLabelValues("sda", "mq-deadline"), 4},
		{"predicted bfq, not simulated since", m.predicted.WithLabelValues("sda", "bfq"), 2},
		{"window end", m.windowEnd.WithLabelValues("sda"), 1700000010},
	}
	for _, c := range checks {
		if got := testutil.ToFloat64(c.c); !near(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}

	// A window that was not simulated keeps the real side and clears the
	// simulated side.
	m.ObserveWindow("sda", WindowReport{Requests: 10, RealService: 10 * time.Millisecond})
	for name, c := range map[string]prometheus.Collector{"simulated": m.simulated, "gain": m.gain, "model error": m.modelError} {
		if n := testutil.CollectAndCount(c); n != 0 {
			t.Errorf("%s: %d series after an unsimulated window, want 0", name, n)
		}
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("sda")); got != 1510 {
		t.Errorf("requests = %v, want 1510", got)
	}

	// Current not simulated: totals are exported, gains and error are not.
	m.ObserveWindow("sda", WindowReport{
		Requests: 1, RealService: time.Millisecond, Current: "kyber",
		Simulated: map[string]time.Duration{"bfq": time.Millisecond},
	})
	if n := testutil.CollectAndCount(m.simulated); n != 1 {
		t.Errorf("%d simulated series, want 1", n)
	}
	if n := testutil.CollectAndCount(m.gain) + testutil.CollectAndCount(m.modelError); n != 0 {
		t.Errorf("%d gain/error series without the current setting, want 0", n)
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

// TestSettingInfoReplaced: a new setting deletes the old label set.
func TestSettingInfoReplaced(t *testing.T) {
	m, reg := newTest(t)
	m.SetSetting("sda", "mq-deadline", 128, "")
	m.SetSetting("sdb", "none", 4096, "")
	m.SetSetting("sda", "mq-deadline", 128, "") // unchanged: no-op
	m.SetSetting("sda", "bfq", 512, "slice_idle=0")
	const want = `
# HELP shadowtune_agent_device_setting_info The setting in effect on the device; always 1.
# TYPE shadowtune_agent_device_setting_info gauge
shadowtune_agent_device_setting_info{device="sda",read_ahead_kib="512",scheduler="bfq",tunables="slice_idle=0"} 1
shadowtune_agent_device_setting_info{device="sdb",read_ahead_kib="4096",scheduler="none",tunables=""} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shadowtune_agent_device_setting_info"); err != nil {
		t.Fatal(err)
	}
	// Only the tunables change.
	m.SetSetting("sda", "bfq", 512, "slice_idle=8")
	if n := testutil.CollectAndCount(m.setting); n != 2 {
		t.Fatalf("%d setting series, want 2", n)
	}
	if got := testutil.ToFloat64(m.setting.WithLabelValues("sda", "bfq", "512", "slice_idle=8")); got != 1 {
		t.Errorf("new setting = %v, want 1", got)
	}
}

// TestForgetDevice: every series of the device goes; others stay.
func TestForgetDevice(t *testing.T) {
	m, reg := newTest(t)
	exercise(m, "sda")
	exercise(m, "nvme0n1")
	m.AddTraceEvents("", TracerEBPF, 0, 7) // unattributed drops
	before := families(t, reg)

	m.ForgetDevice("sda")
	after := families(t, reg)
	for name, mf := range after {
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "device" && lp.GetValue() == "sda" {
					t.Errorf("%s still has a series for sda: %v", name, s.GetLabel())
				}
			}
		}
		want := len(before[name].GetMetric()) / 2
		if name == "shadowtune_agent_scheduler_dispatch_cost_seconds" { // the node's: kept
			want = len(before[name].GetMetric())
		}
		if got, was := len(mf.GetMetric()), len(before[name].GetMetric()); got != want && name != "shadowtune_agent_trace_events_total" && name != "shadowtune_agent_trace_events_dropped_total" {
			t.Errorf("%s: %d series after forgetting one of two devices, had %d", name, got, was)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d families after ForgetDevice, want %d (nvme0n1 keeps all)", len(after), len(before))
	}
	if got := testutil.ToFloat64(m.traceDropped.WithLabelValues("", TracerEBPF)); got != 7 {
		t.Errorf("unattributed drops = %v, want 7", got)
	}

	// The device comes back afresh: counters restart at zero, and a
	// setting equal to the forgotten one is exported again.
	m.SetSetting("sda", "mq-deadline", 128, "")
	if got := testutil.ToFloat64(m.setting.WithLabelValues("sda", "mq-deadline", "128", "")); got != 1 {
		t.Errorf("setting after re-adding = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.changes.WithLabelValues("sda")); got != 0 {
		t.Errorf("changes after re-adding = %v, want 0", got)
	}
}

// TestCountersAndClosedLabels: counters start at zero for a new device;
// unknown reasons and tracers become "other".
func TestCountersAndClosedLabels(t *testing.T) {
	m, reg := newTest(t)
	m.SetThrashGuard("sdc", 5, 3, true)
	const want = `
# HELP shadowtune_agent_setting_reverts_total Setting changes reverted on the device, by reason (regression, observe, shutdown, manual, other).
# TYPE shadowtune_agent_setting_reverts_total counter
shadowtune_agent_setting_reverts_total{device="sdc",reason="manual"} 0
shadowtune_agent_setting_reverts_total{device="sdc",reason="observe"} 0
shadowtune_agent_setting_reverts_total{device="sdc",reason="regression"} 0
shadowtune_agent_setting_reverts_total{device="sdc",reason="shutdown"} 0
# HELP shadowtune_agent_setting_changes_total Setting changes applied to the device.
# TYPE shadowtune_agent_setting_changes_total counter
shadowtune_agent_setting_changes_total{device="sdc"} 0
# HELP shadowtune_agent_thrash_guard_consecutive_changes Thrash guard: changes decided in consecutive checks.
# TYPE shadowtune_agent_thrash_guard_consecutive_changes gauge
shadowtune_agent_thrash_guard_consecutive_changes{device="sdc"} 5
# HELP shadowtune_agent_thrash_guard_pinned Thrash guard: 1 while the default setting is pinned, else 0.
# TYPE shadowtune_agent_thrash_guard_pinned gauge
shadowtune_agent_thrash_guard_pinned{device="sdc"} 1
# HELP shadowtune_agent_thrash_guard_quiet_checks Thrash guard: consecutive checks, while pinned, that predicted no change.
# TYPE shadowtune_agent_thrash_guard_quiet_checks gauge
shadowtune_agent_thrash_guard_quiet_checks{device="sdc"} 3
# HELP shadowtune_agent_windows_skipped_total Windows not evaluated, by reason (cpu_budget, too_few_requests, model_not_ready, error, sample_missed, other).
# TYPE shadowtune_agent_windows_skipped_total counter
shadowtune_agent_windows_skipped_total{device="sdc",reason="cpu_budget"} 0
shadowtune_agent_windows_skipped_total{device="sdc",reason="error"} 0
shadowtune_agent_windows_skipped_total{device="sdc",reason="model_not_ready"} 0
shadowtune_agent_windows_skipped_total{device="sdc",reason="sample_missed"} 0
shadowtune_agent_windows_skipped_total{device="sdc",reason="too_few_requests"} 0
`
	names := []string{
		"shadowtune_agent_setting_reverts_total", "shadowtune_agent_setting_changes_total",
		"shadowtune_agent_thrash_guard_consecutive_changes", "shadowtune_agent_thrash_guard_pinned",
		"shadowtune_agent_thrash_guard_quiet_checks", "shadowtune_agent_windows_skipped_total",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	m.IncRevert("sdc", "Regression: 12% slower") // not a known reason
	m.SkipWindow("sdc", "disk on fire")
	m.AddTraceEvents("sdc", "blktrace", 5, 1)
	m.AddTraceEvents("sdc", TracerTracefs, 10, 0)
	m.SetThrashGuard("sdc", 0, 0, false)
	m.AddOpenFiles("sdc", 3, 1, 2, 0)
	m.AddOpenFiles("sdc", 1, 0, 0, 1)
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"revert other", m.reverts.WithLabelValues("sdc", "other"), 1},
		{"skip other", m.windowsSkipped.WithLabelValues("sdc", "other"), 1},
		{"events other", m.traceEvents.WithLabelValues("sdc", "other"), 5},
		{"dropped other", m.traceDropped.WithLabelValues("sdc", "other"), 1},
		{"events tracefs", m.traceEvents.WithLabelValues("sdc", "tracefs"), 10},
		{"pinned", m.guardPinned.WithLabelValues("sdc"), 0},
		{"open files followed", m.openFiles.WithLabelValues("sdc", "followed"), 4},
		{"open files left marked", m.openFiles.WithLabelValues("sdc", "left_marked"), 1},
		{"open files left own", m.openFiles.WithLabelValues("sdc", "left_own"), 2},
		{"open files failed", m.openFiles.WithLabelValues("sdc", "failed"), 1},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.reverts); n != 5 {
		t.Errorf("%d revert series, want 5 (4 reasons + other)", n)
	}
}

func TestEvaluation(t *testing.T) {
	m, reg := newTest(t)
	m.ObserveEvaluation("sda", 30*time.Millisecond, 20*time.Millisecond)
	m.ObserveEvaluation("sda", 3*time.Second, 2*time.Second)
	m.ObserveEvaluation("sda", -time.Second, -time.Second) // clock step: clamped to 0
	if got := testutil.ToFloat64(m.evalCPU.WithLabelValues("sda")); !near(got, 2.02) {
		t.Errorf("cpu = %v, want 2.02", got)
	}
	mf := families(t, reg)["shadowtune_agent_evaluation_duration_seconds"]
	h := mf.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || !near(h.GetSampleSum(), 3.03) {
		t.Errorf("histogram count %d sum %v, want 3 and 3.03", h.GetSampleCount(), h.GetSampleSum())
	}
	var bounds []float64
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if !slices.Equal(bounds, EvaluationBuckets) {
		t.Errorf("buckets %v, want %v", bounds, EvaluationBuckets)
	}
	if !slices.IsSorted(EvaluationBuckets) {
		t.Error("EvaluationBuckets not sorted")
	}
}

// TestDispatchCosts: the node's costs in seconds, none left out, and a
// second call (the prior replaced by a measurement) leaves no stale series;
// forgetting a device keeps them.
func TestDispatchCosts(t *testing.T) {
	m, reg := newTest(t)
	m.SetDispatchCosts(map[string]float64{"none": 0, "mq-deadline": 700, "bfq": 1900}, false)
	m.SetDispatchCosts(map[string]float64{"none": 0, "mq-deadline": 3000, "kyber": 2600}, true)
	exercise(m, "sda")
	m.ForgetDevice("sda")
	want := `
# HELP shadowtune_agent_scheduler_dispatch_cost_seconds CPU time per request each scheduler costs beyond none's on this node, which the decision charges: measured at start on a private RAM-backed loop device (source=measured), or BFQ's documented figures when it could not be (source=prior).
# TYPE shadowtune_agent_scheduler_dispatch_cost_seconds gauge
shadowtune_agent_scheduler_dispatch_cost_seconds{scheduler="kyber",source="measured"} 2.6e-06
shadowtune_agent_scheduler_dispatch_cost_seconds{scheduler="mq-deadline",source="measured"} 3e-06
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shadowtune_agent_scheduler_dispatch_cost_seconds"); err != nil {
		t.Error(err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Error("New(nil): no error")
	}

	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	var are prometheus.AlreadyRegisteredError
	if _, err := New(reg); !errors.As(err, &are) {
		t.Errorf("second New on one registry: %v, want AlreadyRegisteredError", err)
	}

	// A clash on the last metric registered leaves nothing of ours
	// registered. (The clash has the same descriptor: a registry remembers
	// the label names and help of every name it has seen.)
	reg = prometheus.NewRegistry()
	other, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clash := other.windowsSkipped
	reg.MustRegister(clash)
	if _, err := New(reg); err == nil {
		t.Fatal("New with a clashing metric: no error")
	}
	reg.Unregister(clash)
	if _, err := New(reg); err != nil {
		t.Errorf("New after a failed New: %v (partial registration left behind)", err)
	}
}

// TestBadLabelValues: invalid UTF-8 in a name must not panic.
func TestBadLabelValues(t *testing.T) {
	m, reg := newTest(t)
	bad := "sd\xffa"
	m.SetSetting(bad, "bfq", 128, "x=\xfe")
	m.ObserveWindow(bad, WindowReport{Current: "\xff", Simulated: map[string]time.Duration{"\xff": time.Second}, RealService: time.Second, Requests: 1})
	m.ForgetDevice(bad)
	for name, mf := range families(t, reg) {
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "device" {
					t.Errorf("%s: series left for %q", name, lp.GetValue())
				}
			}
		}
	}
}

// TestConcurrent exercises every method from several goroutines (run with
// -race).
func TestConcurrent(t *testing.T) {
	m, reg := newTest(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				dev := fmt.Sprintf("sd%c", 'a'+(g+i)%3)
				exercise(m, dev)
				m.SetSetting(dev, "bfq", 128*(i%3), "")
				if i%50 == 0 {
					m.ForgetDevice(dev)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	for _, dev := range []string{"sda", "sdb", "sdc"} {
		m.mu.Lock()
		st := m.devices[dev]
		m.mu.Unlock()
		n := 0
		for _, mf := range families(t, reg) {
			if mf.GetName() != "shadowtune_agent_device_setting_info" {
				continue
			}
			for _, s := range mf.GetMetric() {
				if s.GetLabel()[0].GetValue() == dev {
					n++
				}
			}
		}
		if want := map[bool]int{true: 1, false: 0}[st != nil && st.setting != nil]; n != want {
			t.Errorf("%s: %d setting series, want %d", dev, n, want)
		}
	}
}

// TestSliceErrorIsLikeWithLike: a window simulated over its newest
// requests only has its model error measured against those requests'
// measured total, not the whole window's; a screening pass is counted.
func TestSliceErrorIsLikeWithLike(t *testing.T) {
	m, _ := newTest(t)
	m.ObserveWindow("sda", WindowReport{
		Requests:             300000,
		RealService:          20 * time.Second,
		SimulatedRealService: 1 * time.Second,
		Current:              "none",
		Simulated:            map[string]time.Duration{"none": 1100 * time.Millisecond, "bfq": 1200 * time.Millisecond},
		Screened:             true,
	})
	m.ObserveWindow("sdb", WindowReport{
		Requests: 1000, RealService: time.Second, Current: "none",
		Simulated: map[string]time.Duration{"none": 900 * time.Millisecond},
	})
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"model error of the slice", m.modelError.WithLabelValues("sda"), 0.1},
		{"model error of a whole window", m.modelError.WithLabelValues("sdb"), -0.1},
		{"real window", m.realWindow.WithLabelValues("sda"), 20},
		{"screened", m.screened.WithLabelValues("sda"), 1},
		{"not screened", m.screened.WithLabelValues("sdb"), 0},
	} {
		if got := testutil.ToFloat64(c.c); !near(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSetEvidence: the waste series goes away when not measured, and a
// candidate's correction series when it is no longer corrected.
func TestSetEvidence(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetEvidence("sdc", 0.5, true, map[string]float64{"bfq": 1.4, "kyber": 0.9})
	if got := testutil.ToFloat64(m.raWaste.WithLabelValues("sdc")); got != 0.5 {
		t.Fatalf("waste %v, want 0.5", got)
	}
	m.SetEvidence("sdc", 0, false, map[string]float64{"bfq": 1.2})
	if n := testutil.CollectAndCount(m.raWaste); n != 0 {
		t.Errorf("%d waste series after an unmeasured window, want 0", n)
	}
	if n := testutil.CollectAndCount(m.correction); n != 1 {
		t.Errorf("%d correction series, want 1 (bfq)", n)
	}
	if got := testutil.ToFloat64(m.correction.WithLabelValues("sdc", "bfq")); got != 1.2 {
		t.Errorf("bfq correction %v, want 1.2", got)
	}
}

func TestSetCounterfactual(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.SetCounterfactual("sdc", 12.5, 2, true)
	if e, n, h := testutil.ToFloat64(m.cfError.WithLabelValues("sdc")), testutil.ToFloat64(m.cfChecks.WithLabelValues("sdc")),
		testutil.ToFloat64(m.cfHolding.WithLabelValues("sdc")); e != 0.125 || n != 2 || h != 1 {
		t.Fatalf("error %v, checks %v, holding %v; want 0.125, 2, 1", e, n, h)
	}
	m.SetCounterfactual("sdc", 3, 3, false)
	if h := testutil.ToFloat64(m.cfHolding.WithLabelValues("sdc")); h != 0 {
		t.Fatalf("holding %v, want 0", h)
	}
	m.SetCounterfactual("sdc", 0, 0, false)
	for _, v := range []*prometheus.GaugeVec{m.cfError, m.cfChecks, m.cfHolding} {
		if n := testutil.CollectAndCount(v); n != 0 {
			t.Errorf("%d series without checks, want 0", n)
		}
	}
}

func TestSetCache(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetCache("vdb", &CacheState{Name: "big", Mode: "writethrough", HitRatio: 0.83, HitMeasured: true, Gain: 0.6, Measured: true, GainKnown: true,
		PredictedHitRatio: 0.71, PredictedHitKnown: true})
	if got := testutil.ToFloat64(m.cacheHit.WithLabelValues("vdb", "big")); got != 0.83 {
		t.Fatalf("hit ratio %v, want 0.83", got)
	}
	if got := testutil.ToFloat64(m.cachePredHit.WithLabelValues("vdb", "big")); got != 0.71 {
		t.Fatalf("predicted hit ratio %v, want 0.71", got)
	}
	if got := testutil.ToFloat64(m.cacheGain.WithLabelValues("vdb", "big", "measured")); got != 0.6 {
		t.Fatalf("gain %v, want 0.6", got)
	}
	// Switched off: the mode changes, the hit ratio and gain go.
	m.SetCache("vdb", &CacheState{Name: "big", Mode: "passthrough"})
	if n := testutil.CollectAndCount(m.cacheMode); n != 1 || testutil.ToFloat64(m.cacheMode.WithLabelValues("vdb", "big", "passthrough")) != 1 {
		t.Errorf("%d mode series after the switch, want 1 (passthrough)", n)
	}
	if n := testutil.CollectAndCount(m.cacheHit) + testutil.CollectAndCount(m.cacheGain) + testutil.CollectAndCount(m.cachePredHit); n != 0 {
		t.Errorf("%d hit or gain series without a measurement, want 0", n)
	}
	m.SetCache("vdb", nil)
	if n := testutil.CollectAndCount(m.cacheMode) + testutil.CollectAndCount(m.cacheDirty); n != 0 {
		t.Errorf("%d cache series after the cache went, want 0", n)
	}
}

// TestDefaultsSlower: each judged knob has its series, 1 when slower and
// 0 when not; a later call's knobs replace the earlier ones.
func TestDefaultsSlower(t *testing.T) {
	m, _ := newTest(t)
	m.SetDefaultsSlower("sda", map[string]bool{"read_ahead_kb": true, "scheduler": false})
	if got := testutil.ToFloat64(m.defaultsSlower.WithLabelValues("sda", "read_ahead_kb")); got != 1 {
		t.Errorf("read_ahead_kb judged slower: %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.defaultsSlower.WithLabelValues("sda", "scheduler")); got != 0 {
		t.Errorf("scheduler judged not slower: %v, want 0", got)
	}
	m.SetDefaultsSlower("sda", map[string]bool{"scheduler": true})
	if n := testutil.CollectAndCount(m.defaultsSlower); n != 1 {
		t.Errorf("after a second judgment of one knob: %d series, want 1", n)
	}
}
