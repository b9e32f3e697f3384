package readahead

import (
	"math"
	"slices"
)

// Reason names the rule that chose a depth.
type Reason string

// The rules, in the order Decide tries them.
const (
	// ReasonBounds: the depth is outside the policy's [MinKiB, MaxKiB]
	// and is brought to the nearer bound (the administrator's range).
	ReasonBounds Reason = "PolicyBounds"
	// ReasonNoEvidence: the evidence resolved too few pages to judge;
	// the depth is kept.
	ReasonNoEvidence Reason = "NoWasteEvidence"
	// ReasonWaste: a lower depth is predicted to serve the readers by
	// the margin: their read-around is wasted.
	ReasonWaste Reason = "ReadAheadWasted"
	// ReasonSequential: a higher depth is predicted to serve them by the
	// margin: sequential readers use what read-ahead brings.
	ReasonSequential Reason = "SequentialDemand"
	// ReasonKeep: no depth beats the current one by the margin.
	ReasonKeep Reason = "Keep"
	// ReasonPreviousDefault: the device's depth before its default
	// changed under it (agent/sentinel) is predicted to serve the
	// readers by the margin, and the policy asks for it back
	// (Input.RestorePrevious).
	ReasonPreviousDefault Reason = "PreviousDefault"
)

// Input is what Decide needs: the device's depths, the policy's bounds
// and thresholds, the evidence, and the device's costs.
type Input struct {
	// CurrentKiB is read_ahead_kb now; OriginalKiB what it was before
	// the agent changed it (the kernel's or the administrator's).
	CurrentKiB, OriginalKiB int
	// MinKiB and MaxKiB are the policy's bounds (spec.readAhead).
	MinKiB, MaxKiB int
	// Evidence is the readers' evidence: the window's, with the recent
	// windows' decayed (Road). It prices the depths.
	Evidence Evidence
	// Window is the window's own evidence. It says which way the depth
	// may move (moves): a cut needs waste measured in it, a raise
	// sequential readers using what read-ahead brought.
	Window Evidence
	// Device predicts the reads' service times.
	Device Device
	// MarginPct is the predicted gain a change needs, percent
	// (spec.evaluation's margin; DADS §4.2).
	MarginPct float64
	// LowWastePct is the waste, percent, up to which a class of readers
	// uses all it is given (spec.rollout.toleratedRegressionPercent: less
	// waste costs less than the regression a verification tolerates).
	LowWastePct float64
	// Seeks says sequential windows seek (a rotational device read by
	// two streams or more): depths above OriginalKiB are then candidates
	// too, up to MaxKiB (competitive prefetching, EuroSys 2007 §3).
	Seeks bool
	// BackedOff reports whether a depth is in the back-off of a change
	// that regressed (Road); nil: none is.
	BackedOff func(kib int) bool
	// PreviousKiB is read_ahead_kb before the device's default changed
	// under it, at an upgrade or a reboot (agent/sentinel); 0 when it did
	// not. It is a candidate within MinKiB and MaxKiB.
	PreviousKiB int
	// RestorePrevious asks for PreviousKiB back while the device is at
	// its new default (CurrentKiB is OriginalKiB), when PreviousKiB is
	// predicted to serve the readers by the margin in a direction the
	// window's evidence allows (spec.sentinel.restorePreviousDefaults).
	// It then wins over the depth the road would choose.
	RestorePrevious bool
}

// DepthCost is one candidate depth's predicted service time.
type DepthCost struct {
	KiB int
	Ns  float64
}

// Decision is Decide's answer.
type Decision struct {
	// KiB is the depth to set (CurrentKiB to keep it).
	KiB    int
	Reason Reason
	// Costs are the candidate depths' predicted service times for the
	// evidence, ascending by depth (empty unless the evidence was
	// judged).
	Costs []DepthCost
}

// Decide chooses read_ahead_kb for the evidence. A depth outside the
// policy's bounds goes to the nearer bound. Otherwise, with enough pages
// resolved, every candidate depth (powers of two from MinKiB, the
// original and current depths, all within the bounds and at most the
// original unless Seeks) is costed (Cost). A depth is eligible when its
// cost is within the margin of the least or it is at most the
// competitive depth (competitiveKiB); the choice is the deepest eligible
// depth, the current one or one whose cost is below the current depth's
// by the margin. Of depths that serve the evidence alike, the deepest
// serves a sequential reader to come best, and a cut stops at the depth
// that keeps both kinds of reader within twice their least (EuroSys 2007
// §4). A change needs its own gain, and a direction the window's own
// evidence calls for (moves): the decayed evidence holds readers that
// may be gone, which choose how far a change goes, not whether one is
// made. Depths in back-off are not chosen. A previous default asked for
// back (RestorePrevious, restorable) wins over that choice. Decide is
// pure.
func Decide(in Input) Decision {
	cur := in.CurrentKiB
	switch {
	case in.MinKiB > 0 && cur < in.MinKiB:
		return Decision{KiB: in.MinKiB, Reason: ReasonBounds}
	case in.MaxKiB > 0 && cur > in.MaxKiB:
		return Decision{KiB: in.MaxKiB, Reason: ReasonBounds}
	case in.Evidence.Resolved() < th.resolved || in.Device == nil || cur <= 0:
		return Decision{KiB: cur, Reason: ReasonNoEvidence}
	}
	d := Decision{KiB: cur, Reason: ReasonKeep}
	curNs, best := math.NaN(), math.Inf(1)
	for _, kib := range candidates(in) {
		ns := Cost(in.Device, in.Evidence, kib, cur, in.Seeks, in.LowWastePct)
		d.Costs = append(d.Costs, DepthCost{KiB: kib, Ns: ns})
		if kib == cur {
			curNs = ns
		}
		if kib != cur && in.BackedOff != nil && in.BackedOff(kib) {
			continue
		}
		best = min(best, ns)
	}
	near, limit := best*(1+in.MarginPct/100), curNs*(1-in.MarginPct/100)
	floor := competitiveKiB(in.Device, d.Costs)
	cut, raise := moves(in.Window, in.LowWastePct)
	choice := cur
	for _, c := range d.Costs { // ascending: the deepest eligible depth wins
		allowed := (c.KiB < cur && cut) || (c.KiB > cur && raise)
		switch eligible := c.Ns <= near || c.KiB <= floor; {
		case c.KiB == cur && eligible:
			choice = cur // no cut below a depth that serves alike
		case allowed && eligible && c.Ns <= limit && (in.BackedOff == nil || !in.BackedOff(c.KiB)):
			choice = c.KiB
		}
	}
	if restorable(in, d.Costs, limit, cut, raise) {
		d.KiB, d.Reason = in.PreviousKiB, ReasonPreviousDefault
		return d
	}
	if choice == cur {
		return d
	}
	d.KiB, d.Reason = choice, ReasonWaste
	if choice > cur {
		d.Reason = ReasonSequential
	}
	return d
}

// moves says which ways the window's own evidence w lets the depth move.
// A cut, when w resolved enough pages to judge (MinResolvedPages) and
// wasted more than lowWastePct of them: there is waste to cut. A raise,
// when w's sequential readers (windows as long as their files' depth)
// resolved enough pages and wasted at most lowWastePct of them: streams
// that use what read-ahead brings, whose next windows a deeper depth
// serves in fewer requests.
func moves(w Evidence, lowWastePct float64) (cut, raise bool) {
	cut = w.Resolved() >= th.resolved && w.WastePct() > lowWastePct
	s := w.Sequential
	raise = s.Resolved() >= th.resolved && s.WastePct() <= lowWastePct
	return cut, raise
}

// restorable reports whether in's previous default is to be put back:
// asked for (RestorePrevious), the device still at its new default, the
// previous depth costed below limit (the current depth's cost less the
// margin), in a direction the window allows (cut or raise) and not in
// back-off.
func restorable(in Input, costs []DepthCost, limit float64, cut, raise bool) bool {
	prev, cur := in.PreviousKiB, in.CurrentKiB
	if !in.RestorePrevious || prev <= 0 || prev == cur || cur != in.OriginalKiB || (prev < cur && !cut) || (prev > cur && !raise) {
		return false
	}
	if in.BackedOff != nil && in.BackedOff(prev) {
		return false
	}
	for _, c := range costs {
		if c.KiB == prev {
			return c.Ns <= limit
		}
	}
	return false
}

// competitiveKiB is the competitive depth among the candidates: the
// deepest whose random window dev serves within CompetitiveRatio times a
// one-page (4 KiB) read (EuroSys 2007 §4.1); 0 when none is.
func competitiveKiB(dev Device, costs []DepthCost) int {
	page := dev.ReadNs(8, true)
	kib := 0
	for _, c := range costs {
		if dev.ReadNs(uint32(c.KiB)*2, true) <= th.ratio*page {
			kib = c.KiB
		}
	}
	return kib
}

// candidates are the depths Decide costs, ascending: powers of two from
// MinKiB (16 by default, the smallest whose window is not the 4 KiB
// page a reader asked for), the current and original depths, all within
// [MinKiB, top], where top is MaxKiB, and at most OriginalKiB unless
// Seeks; and the previous default within [MinKiB, MaxKiB].
func candidates(in Input) []int {
	lo, top := max(in.MinKiB, 4), in.MaxKiB
	if top <= 0 {
		top = math.MaxInt32
	}
	if !in.Seeks && in.OriginalKiB > 0 {
		top = min(top, max(in.OriginalKiB, in.CurrentKiB))
	}
	out := []int{in.CurrentKiB}
	for k := lo; k <= top; k *= 2 {
		out = append(out, k)
	}
	for _, k := range []int{in.OriginalKiB, top, lo} {
		if k >= lo && k <= top && k%4 == 0 {
			out = append(out, k)
		}
	}
	if k := in.PreviousKiB; k >= lo && (in.MaxKiB <= 0 || k <= in.MaxKiB) && k%4 == 0 {
		out = append(out, k) // above OriginalKiB too: the device had it
	}
	slices.Sort(out)
	return slices.Compact(out)
}
