package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// EvalMode says whether the model keeps learning while it is evaluated.
type EvalMode uint8

// Evaluation modes.
const (
	// EvalOnline predicts each test request, then learns its measured time
	// (how the agent runs: KDSim §3.1.1's dynamic table).
	EvalOnline EvalMode = iota
	// EvalFrozen predicts the test requests with the table learned on the
	// training part only.
	EvalFrozen
)

// String returns "online" or "frozen".
func (e EvalMode) String() string {
	switch e {
	case EvalOnline:
		return "online"
	case EvalFrozen:
		return "frozen"
	}
	return fmt.Sprintf("EvalMode(%d)", uint8(e))
}

// ParseEvalMode parses "online" or "frozen" ("" means online).
func ParseEvalMode(s string) (EvalMode, error) {
	switch s {
	case "", "online":
		return EvalOnline, nil
	case "frozen":
		return EvalFrozen, nil
	}
	return 0, fmt.Errorf("unknown eval mode %q (want online or frozen)", s)
}

// EvalOptions parameterise Evaluate. The zero value is valid: half the
// trace trains an HDD model online, predictions are cell means.
type EvalOptions struct {
	// TrainFraction is the leading fraction of the trace the model learns
	// from before predicting (0 < f < 1; 0 means 0.5).
	TrainFraction float64
	// Mode is online (learn after each prediction) or frozen.
	Mode EvalMode
	// Class is the device class (0 means HDD).
	Class Class
	// Predict is mean or sample.
	Predict PredictMode
	// Seed seeds the sampling of PredictSample.
	Seed int64
	// HitThreshold, when > 0, is a fixed HDD hit/miss threshold (DADS:
	// 1 ms), without a per-sector allowance. When 0 the classifier is
	// derived from the training reads ([DeriveHitClassifier]) or, if their
	// times are not clearly bimodal, [DefaultHitClassifier] is used.
	HitThreshold time.Duration
	// CapacitySectors is the device size in sectors (0: the largest end
	// sector in the trace).
	CapacitySectors uint64
	// Window is the number of requests per error window (0 means 1000,
	// KDSim §6).
	Window int
	// Cache fixes the HDD disk-cache parameters. nil: they are calibrated
	// on the training part ([CalibrateCache] from [DefaultCacheConfig]).
	Cache *CacheConfig
	// KeepSorted keeps the sorted measured and predicted service times
	// the demerit is computed from in EvalResult.Sorted (for drawing the
	// two CDFs); it costs 16 bytes per scored test request.
	KeepSorted bool
}

// SortedTimes are the measured and predicted service times of the scored
// test requests, each sorted ascending, in ns: the order statistics of the
// two empirical CDFs the demerit compares (equally long).
type SortedTimes struct {
	MeasuredNs  []int64
	PredictedNs []int64
}

// WindowError summarises the per-window errors, in percent.
type WindowError struct {
	Mean   float64 `json:"mean"`   // mean over the windows, %
	Median float64 `json:"median"` // median over the windows, %
	Max    float64 `json:"max"`    // largest window error, %
}

// EvalResult is the outcome of Evaluate. Times are in ms, errors in %.
type EvalResult struct {
	// Class, Mode and Predict echo the options ("hdd", "online", "mean", …).
	Class   string `json:"class"`
	Mode    string `json:"mode"`
	Predict string `json:"predict"`
	// TrainRequests and TestRequests count the two parts of the trace.
	TrainRequests int `json:"trainRequests"`
	TestRequests  int `json:"testRequests"`
	// Windows is the number of error windows (Window requests each; a
	// trailing partial window counts when it holds at least half a window).
	Windows int `json:"windows"`
	// WindowErrorPct: per window, |Σpredicted − Σmeasured| / Σmeasured × 100
	// over the window's service times (KDSim §6 accuracy measure).
	WindowErrorPct WindowError `json:"windowErrorPct"`
	// TotalErrorPct is (Σpredicted − Σmeasured) / Σmeasured × 100 over the
	// whole test part, signed: > 0 means the model is slower than the disk.
	TotalErrorPct float64 `json:"totalErrorPct"`
	// MeanMeasuredMs and MeanPredictedMs are mean service times, ms.
	MeanMeasuredMs  float64 `json:"meanMeasuredMs"`
	MeanPredictedMs float64 `json:"meanPredictedMs"`
	// DemeritMs is the Ruemmler–Wilkes demerit figure, ms: the RMS
	// horizontal distance between the measured and the predicted
	// service-time CDFs. With n test requests both CDFs are step functions
	// with steps of 1/n, so it is computed exactly as the RMS of the
	// differences of the i-th smallest measured and predicted times,
	// i = 1…n (the quantiles at p = (i − ½)/n).
	DemeritMs float64 `json:"demeritMs"`
	// HitThresholdUs and HitUsPerSector are the HDD hit classifier used
	// (threshold + length × allowance, µs); HitThresholdDerived says
	// whether it was derived from the trace.
	HitThresholdUs      float64 `json:"hitThresholdUs"`
	HitUsPerSector      float64 `json:"hitUsPerSector"`
	HitThresholdDerived bool    `json:"hitThresholdDerived"`
	// MeasuredHitPct and PredictedHitPct are the shares of test reads that
	// the classifier (measured times) and the disk-cache model (predicted)
	// call drive-cache hits, %. HDD only.
	MeasuredHitPct  float64 `json:"measuredHitPct"`
	PredictedHitPct float64 `json:"predictedHitPct"`
	// Cache is the HDD disk-cache configuration used; CacheCalibrated says
	// whether it was calibrated on the training part.
	Cache           *CacheConfig `json:"cache,omitempty"`
	CacheCalibrated bool         `json:"cacheCalibrated"`
	// Throttle is a Throttled device's caps, estimated on the training
	// part.
	Throttle *Throttle `json:"throttle,omitempty"`
	// Sorted holds the sorted samples behind DemeritMs when
	// EvalOptions.KeepSorted is set (not part of the JSON report).
	Sorted *SortedTimes `json:"-"`
}

// ErrNoServiceTimes is returned by Evaluate for a trace without measured
// service times.
var ErrNoServiceTimes = errors.New("trace carries no measured service times (needs dispatch and completion times, e.g. the DiskSim validation traces or an eBPF recording); the model can only be evaluated against measured times")

// Evaluate measures the accuracy of the table model on a trace with
// measured service times. Requests are taken in dispatch order (the
// order of reqs when dispatch times are unknown). The model learns on the
// first TrainFraction of them through a Disk ([Disk.Observe]: cells,
// position and disk cache), then predicts the rest in order through the
// same Disk ([Disk.Service]; the cache state evolves by the model's own
// hit/miss decisions, as in a simulation); in online mode each prediction
// is followed by [Model.Learn] of the measured time. Measured times are
// net of the wait inside the device ([NetServiceTimes], with k from
// [EstimateServers] for SSD/NVMe and 1 for HDD), and for a Throttled
// device of the wait for its bucket, whose caps are estimated on the
// training part ([EstimateThrottle]), as the model learns them. Requests without a
// measured time still move the position and the cache but are neither
// learned nor scored. The same inputs and Seed give the same result, bit
// for bit.
func Evaluate(reqs []trace.Request, opt EvalOptions) (EvalResult, error) {
	frac, class, window, err := evalParams(reqs, opt)
	if err != nil {
		return EvalResult{}, err
	}
	order, capacity, measured := dispatchOrder(reqs)
	if measured == 0 {
		return EvalResult{}, fmt.Errorf("model eval: %w", ErrNoServiceTimes)
	}
	nTrain := int(frac * float64(len(reqs)))
	if nTrain < 1 || nTrain >= len(reqs) {
		return EvalResult{}, fmt.Errorf("model eval: %d requests are too few to split at %g", len(reqs), frac)
	}
	if opt.CapacitySectors > 0 {
		capacity = opt.CapacitySectors
	}

	res := EvalResult{
		Class: class.String(), Mode: opt.Mode.String(), Predict: opt.Predict.String(),
		TrainRequests: nTrain, TestRequests: len(reqs) - nTrain,
	}
	train := make([]trace.Request, nTrain)
	for i := range train {
		train[i] = reqs[order[i]]
	}
	setup := configure(train, class, capacity, opt.HitThreshold, opt.Cache)
	cfg := setup.cfg
	if class == HDD {
		res.HitThresholdDerived, res.CacheCalibrated = setup.hitDerived, setup.cacheCalibrate
		res.HitThresholdUs = float64(cfg.Hit.ThresholdNs) / 1e3
		res.HitUsPerSector = float64(cfg.Hit.NsPerSector) / 1e3
		c := cfg.Cache
		res.Cache = &c
	}
	if class == Throttled {
		t, ev, ok := EstimateThrottle(train)
		if !ok {
			return EvalResult{}, fmt.Errorf("model eval: class throttled, but the training part shows no cap (%s)", ev)
		}
		cfg.Throttle, res.Throttle = t, &t
	}
	m, err := New(cfg)
	if err != nil {
		return EvalResult{}, fmt.Errorf("model eval: %w", err)
	}
	d := m.NewDisk(opt.Seed)
	d.SetPredictMode(opt.Predict)

	k := 1
	if class != HDD {
		k = EstimateServersBehind(reqs, cfg.Throttle)
	}
	var ns NetService
	ns.SetThrottle(cfg.Throttle)
	net := ns.Times(reqs, k, nil)
	observeAll(d, reqs, order[:nTrain], net)
	s := predictTest(m, d, reqs, net, order[nTrain:], opt.Mode)
	if len(s.meas) == 0 {
		return EvalResult{}, fmt.Errorf("model eval: the test part (%d requests) has no measured service time", res.TestRequests)
	}
	if class == HDD && s.reads > 0 {
		res.MeasuredHitPct = 100 * float64(s.measHits) / float64(s.reads)
		res.PredictedHitPct = 100 * float64(s.predHits) / float64(s.reads)
	}
	res.Windows, res.WindowErrorPct = windowErrors(s.meas, s.pred, window)
	sm, sp := sum(s.meas), sum(s.pred)
	n := float64(len(s.meas))
	if sm > 0 {
		res.TotalErrorPct = 100 * float64(sp-sm) / float64(sm)
	}
	res.MeanMeasuredMs = float64(sm) / n / 1e6
	res.MeanPredictedMs = float64(sp) / n / 1e6
	// The window errors above needed dispatch order; the demerit needs
	// the order statistics: sort both samples in place, once.
	slices.Sort(s.meas)
	slices.Sort(s.pred)
	res.DemeritMs = demeritSorted(s.meas, s.pred) / 1e6
	if opt.KeepSorted {
		res.Sorted = &SortedTimes{MeasuredNs: s.meas, PredictedNs: s.pred}
	}
	return res, nil
}

// evalParams validates the options of Evaluate and returns the train
// fraction, device class and window (requests) with their defaults
// applied. Errors name the offending option; an empty trace wraps
// trace.ErrEmpty.
func evalParams(reqs []trace.Request, opt EvalOptions) (frac float64, class Class, window int, err error) {
	frac = opt.TrainFraction
	if frac == 0 {
		frac = 0.5
	}
	if !(frac > 0 && frac < 1) {
		return 0, 0, 0, fmt.Errorf("model eval: train fraction must be in (0, 1), got %g", opt.TrainFraction)
	}
	class = opt.Class
	if class == 0 {
		class = HDD
	}
	if !class.Valid() {
		return 0, 0, 0, fmt.Errorf("model eval: invalid device class %d", uint8(opt.Class))
	}
	window = opt.Window
	if window == 0 {
		window = 1000
	}
	if window < 1 {
		return 0, 0, 0, fmt.Errorf("model eval: window must be ≥ 1 request, got %d", opt.Window)
	}
	if opt.HitThreshold < 0 {
		return 0, 0, 0, fmt.Errorf("model eval: hit threshold must be ≥ 0, got %v", opt.HitThreshold)
	}
	if len(reqs) == 0 {
		return 0, 0, 0, fmt.Errorf("model eval: %w", trace.ErrEmpty)
	}
	return frac, class, window, nil
}

// evalSample holds the scored test requests of Evaluate: measured and
// predicted service times (ns, one pair per request with a measured time)
// and the read counts behind the hit shares.
type evalSample struct {
	meas, pred                []int64
	reads, measHits, predHits int
}

// predictTest predicts the test requests test (indices into reqs, in
// dispatch order) through d, scoring those with a measured service time
// by their net service times (net, by index of reqs; NetServiceTimes);
// in online mode m learns each net time after its prediction.
func predictTest(m *Model, d *Disk, reqs []trace.Request, net []int64, test []int, mode EvalMode) evalSample {
	var s evalSample
	for _, i := range test {
		q := &reqs[i]
		dist := d.distance(q.Sector)
		p := d.Service(q.Op, q.Sector, q.Sectors)
		if !q.HasService() {
			continue
		}
		svc := net[i]
		s.meas, s.pred = append(s.meas, svc), append(s.pred, p)
		if q.Op == trace.Read {
			s.reads++
			if d.LastHit() {
				s.predHits++
			}
			if m.classify(q.Op, q.Sectors, svc) == ReadHit {
				s.measHits++
			}
		}
		if mode == EvalOnline {
			if q.Op == trace.Flush {
				m.Learn(q.Op, 0, 0, svc)
			} else {
				m.Learn(q.Op, q.Sectors, dist, svc)
			}
		}
	}
	return s
}

// windowErrors splits the measured and predicted service times into
// windows of window requests (a trailing partial window counts when it
// holds at least half a window, or when no earlier window was scored) and
// returns the number of windows scored and the mean, median and largest
// of their |Σpredicted − Σmeasured| / Σmeasured errors, in %.
func windowErrors(meas, pred []int64, window int) (int, WindowError) {
	var errs []float64
	for lo := 0; lo < len(meas); lo += window {
		hi := min(lo+window, len(meas))
		if hi-lo < window && (hi-lo)*2 < window && len(errs) > 0 {
			break
		}
		sm, sp := sum(meas[lo:hi]), sum(pred[lo:hi])
		if sm > 0 {
			errs = append(errs, 100*math.Abs(float64(sp-sm))/float64(sm))
		}
	}
	var we WindowError
	if len(errs) == 0 {
		return 0, we
	}
	var s float64
	for _, e := range errs {
		s += e
	}
	we.Mean = s / float64(len(errs))
	slices.Sort(errs)
	we.Max = errs[len(errs)-1]
	if k := len(errs); k%2 == 1 {
		we.Median = errs[k/2]
	} else {
		we.Median = (errs[k/2-1] + errs[k/2]) / 2
	}
	return len(errs), we
}

// Demerit returns the Ruemmler–Wilkes demerit figure of two equally long
// samples of service times (ns): the RMS horizontal distance between their
// empirical CDFs, i.e. the RMS difference of their order statistics, in
// ns. The inputs are not modified. It returns 0 for empty or unequal
// inputs.
func Demerit(measured, predicted []int64) float64 {
	if len(measured) == 0 || len(measured) != len(predicted) {
		return 0
	}
	a, b := slices.Clone(measured), slices.Clone(predicted)
	slices.Sort(a)
	slices.Sort(b)
	return demeritSorted(a, b)
}

// demeritSorted is Demerit of two equally long, non-empty samples already
// sorted ascending.
func demeritSorted(a, b []int64) float64 {
	var s float64
	for i := range a {
		d := float64(a[i] - b[i])
		s += d * d
	}
	return math.Sqrt(s / float64(len(a)))
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
