// Package counterfactual keeps a device's counterfactual error: how far
// the simulation's predicted effect of a setting change was from the
// effect measured once the change was made.
//
// A scheduler switch rests on a predicted difference: the new setting's
// simulated time over the previous one's on the same window (DADS, JPDC
// 2014 §4.1). Each switch the agent makes is verified over the windows
// after it (agent, verifyWindow), which gives one measurement of that
// difference: the time the new setting took against what the previous
// setting would have taken (its simulated time scaled by the model's
// bias, measured while it was in force). A Check pairs the two ratios;
// a Record is the device's mean absolute error over its checks.
//
// The decision does not switch on predictions alone while the device's
// error is above the policy's margin (decide.ReasonCounterfactualError):
// a margin smaller than the error the predictions are known to make does
// not absorb that error. The hold lasts the policy's back-off after the
// last check, as a regressed candidate's does; then one switch may be
// made, and its verification adds a check.
//
// Ratios are new ÷ previous (below 1: the new setting is faster); errors
// are in percentage points of the previous setting's time.
package counterfactual

import (
	"fmt"
	"math"
	"time"
)

// Check is one verified change: the predicted and the measured ratio of
// the new setting's time to the previous one's over the same windows.
type Check struct {
	Predicted, Measured float64
}

// NewCheck is the check of a change whose previous setting would have
// taken prevNs, whose new setting was predicted to take predictedNs and
// took measuredNs, over the same windows (any unit, the same for all
// three). ok is false when a time is not positive and finite.
func NewCheck(prevNs, predictedNs, measuredNs float64) (Check, bool) {
	for _, v := range []float64{prevNs, predictedNs, measuredNs} {
		if !(v > 0) || math.IsInf(v, 0) {
			return Check{}, false
		}
	}
	return Check{Predicted: predictedNs / prevNs, Measured: measuredNs / prevNs}, true
}

// ErrorPoints is the absolute error of the predicted ratio, percentage
// points.
func (c Check) ErrorPoints() float64 { return 100 * math.Abs(c.Measured-c.Predicted) }

// SignRight reports whether the prediction had the measured effect's
// direction (faster or slower), judged only where the measured effect
// exceeds marginPct percent; a smaller effect is right either way.
func (c Check) SignRight(marginPct float64) bool {
	if 100*math.Abs(c.Measured-1) <= marginPct {
		return true
	}
	return (c.Predicted < 1) == (c.Measured < 1)
}

// Record is a device's counterfactual error over its verified changes.
// The zero value has no checks. It is kept in the device's memo (JSON).
type Record struct {
	// Checks is the number of verified changes counted.
	Checks int `json:"checks"`
	// SumErrorPoints is the sum of their ErrorPoints.
	SumErrorPoints float64 `json:"sum_error_points"`
	// WrongSigns counts the checks whose SignRight was false (at the
	// margin in force when each was counted).
	WrongSigns int `json:"wrong_signs,omitempty"`
	// Last is the latest check, At when it was counted.
	Last Check     `json:"last"`
	At   time.Time `json:"at,omitzero"`
}

// Add counts check c, made at now, with the policy's margin marginPct.
func (r *Record) Add(c Check, now time.Time, marginPct float64) {
	r.Checks++
	r.SumErrorPoints += c.ErrorPoints()
	if !c.SignRight(marginPct) {
		r.WrongSigns++
	}
	r.Last, r.At = c, now
}

// ErrorPct is the mean absolute error of the predicted ratio over the
// checks, percentage points; 0 without checks.
func (r Record) ErrorPct() float64 {
	if r.Checks == 0 {
		return 0
	}
	return r.SumErrorPoints / float64(r.Checks)
}

// Holding is the error that holds a switch back at now: ErrorPct while
// it exceeds marginPct and now is within backoff of the last check;
// otherwise 0 (no checks, an error within the margin, or a hold that has
// expired).
func (r Record) Holding(now time.Time, backoff time.Duration, marginPct float64) float64 {
	if r.Checks == 0 || r.ErrorPct() <= marginPct || !now.Before(r.At.Add(backoff)) {
		return 0
	}
	return r.ErrorPct()
}

// Valid reports whether a record read back from a memo is sound: counts
// not negative, sums finite and not negative, and no more wrong signs
// than checks.
func (r Record) Valid() error {
	switch {
	case r.Checks < 0 || r.WrongSigns < 0 || r.WrongSigns > r.Checks:
		return fmt.Errorf("counterfactual: %d checks with %d wrong signs", r.Checks, r.WrongSigns)
	case !(r.SumErrorPoints >= 0) || math.IsInf(r.SumErrorPoints, 0):
		return fmt.Errorf("counterfactual: error sum %v is not a finite number ≥ 0", r.SumErrorPoints)
	case r.Checks > 0 && !(r.Last.Predicted > 0 && r.Last.Measured > 0):
		return fmt.Errorf("counterfactual: last check's ratios %v and %v must be > 0", r.Last.Predicted, r.Last.Measured)
	}
	return nil
}
