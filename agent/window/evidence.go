package window

// The evidence a device's recommendations rest on, in its status (issue
// 14 item 6): the read-ahead measurements of the last window, the learned
// corrections, the last verification and the window's charges for each
// scheduler's CPU cost.

import (
	"maps"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// maxCorrections bounds status.corrections (the schema's MaxItems).
const maxCorrections = 16

// status is the road's evidence of the last window in the API's terms:
// its used and wasted pages, the window's read-ahead share and streams,
// the decision's rule, and the waste once enough pages resolved.
func (r *readAheadRoad) status() *v1alpha1.ReadAheadEvidence {
	ev := r.step.Evidence
	st := &v1alpha1.ReadAheadEvidence{
		UsedPages: int64(min(ev.Used(), 1<<62)), WastedPages: int64(min(ev.Random.Wasted+ev.Sequential.Wasted, 1<<62)),
		ReadAheadSharePercent: v1alpha1.FormatPercent(r.share), SequentialStreams: int32(min(r.streams, 1<<30)),
		Rule: string(r.step.Decision.Reason),
	}
	if ev.Resolved() >= readahead.MinResolvedPages {
		st.WastePercent = v1alpha1.FormatPercent(ev.WastePct())
	}
	return st
}

// correctionsStatus is the learned corrections in the API's terms: at
// most 16, by candidate name, in a new slice (the old one may be shared
// with a status already handed out).
func correctionsStatus(corrections map[string]float64) []v1alpha1.LearnedCorrection {
	out := make([]v1alpha1.LearnedCorrection, 0, min(len(corrections), maxCorrections))
	for _, name := range slices.Sorted(maps.Keys(corrections)) {
		if len(out) == maxCorrections {
			break
		}
		out = append(out, v1alpha1.LearnedCorrection{
			Candidate: name, Factor: strconv.FormatFloat(corrections[name], 'f', 2, 64)})
	}
	return out
}

// counterfactualStatus is r in the API's terms (nil without checks),
// with the end of its hold when its error exceeds marginPct.
func counterfactualStatus(r counterfactual.Record, backoff time.Duration, marginPct float64) *v1alpha1.CounterfactualState {
	if r.Checks == 0 {
		return nil
	}
	ratio := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	at := metav1.NewTime(r.At)
	out := &v1alpha1.CounterfactualState{Checks: int32(min(r.Checks, 1<<30)), ErrorPercent: v1alpha1.FormatPercent(r.ErrorPct()),
		WrongSigns: int32(min(r.WrongSigns, 1<<30)), LastPredictedRatio: ratio(r.Last.Predicted), LastMeasuredRatio: ratio(r.Last.Measured),
		LastCheckTime: &at}
	if r.ErrorPct() > marginPct {
		until := metav1.NewTime(r.At.Add(backoff))
		out.HoldUntil = &until
	}
	return out
}

// verificationStatus is v in the API's terms: ms of application wait for
// a scheduler change, µs per used page for read-ahead.
func verificationStatus(v *verificationResult) *v1alpha1.Verification {
	scale, unit := 1e6, "ms"
	if v.Unit != "ns" {
		scale, unit = 1e3, "µs of device time per used page"
	}
	f := func(ns float64) string {
		if ns <= 0 {
			return ""
		}
		return strconv.FormatFloat(ns/scale, 'f', 2, 64)
	}
	return &v1alpha1.Verification{Change: v.What, Outcome: v.Outcome,
		Baseline: f(v.BaselineNs), Predicted: f(v.PredictedNs), Measured: f(v.MeasuredNs), Unit: unit}
}

// maxDispatchCharges bounds DispatchCharges (the schema's MaxItems).
const maxDispatchCharges = 8

// DispatchCharges is r's dispatch factors by scheduler (the factor a
// window multiplied each simulated service time by, to charge the
// scheduler's measured CPU cost per request), none's (always 1) left out,
// sorted by name, at most 8; nil when nothing was charged.
func DispatchCharges(r *engine.Report) []v1alpha1.DispatchCharge {
	var out []v1alpha1.DispatchCharge
	for _, s := range slices.Sorted(maps.Keys(r.DispatchFactors)) {
		if s == "none" {
			continue
		}
		if len(out) == maxDispatchCharges {
			break
		}
		out = append(out, v1alpha1.DispatchCharge{Scheduler: s, Factor: strconv.FormatFloat(r.DispatchFactors[s], 'f', 3, 64)})
	}
	return out
}
