package sentinel

import "math"

// Verdict is a changed default judged: its predicted device time for
// the same work against the previous default's.
type Verdict struct {
	// Slower: the new default's time exceeds the old one's by more than
	// the margin.
	Slower bool
	// ChangePct is the new default's time over the old one's, less one,
	// percent (positive: slower).
	ChangePct float64
}

// Judge judges a changed default from the predicted device time of the
// same work at the new default (newNs) and at the old one (oldNs), ns:
// slower when newNs exceeds oldNs by more than marginPct percent (the
// policy's margin, the gain a change of the agent's own needs: DADS §4.2).
// ok is false when either time is not positive or not finite (nothing to
// judge on). It is pure.
func Judge(newNs, oldNs, marginPct float64) (v Verdict, ok bool) {
	if !(newNs > 0) || !(oldNs > 0) || math.IsInf(newNs, 0) || math.IsInf(oldNs, 0) {
		return Verdict{}, false
	}
	pct := 100 * (newNs/oldNs - 1)
	return Verdict{Slower: pct > marginPct, ChangePct: pct}, true
}
