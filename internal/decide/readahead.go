package decide

// The read-ahead rule: read_ahead_kb chosen from measured evidence (issue
// 14 item 3), never from a model alone. Lowering read-ahead is safe only
// where the pages it brings in are measured to go unused: a sequential
// reader loses throughput at once when the depth falls (the kernel reads
// the file in requests no larger than the depth), and its pages are all
// used, so no amount of modelling of the device justifies a cut there.

// ReadAheadInput is what one window measured of a device's read-ahead,
// and the bounds the policy allows. Depths are in KiB.
type ReadAheadInput struct {
	// CurrentKiB is the device's read_ahead_kb now; OriginalKiB the one
	// it had before the agent changed it (the kernel's or the admin's).
	CurrentKiB, OriginalKiB int
	// MinKiB and MaxKiB bound any depth chosen (spec.readAhead).
	MinKiB, MaxKiB int
	// WasteMeasured says the window resolved enough page-cache pages of
	// the device to judge (the page-cache probe ran and saw enough pages
	// used or evicted, 1 MiB by default); WastePct is then the share,
	// in percent, of the pages read into the page cache that were evicted
	// without ever being read or mapped.
	WasteMeasured bool
	WastePct      float64
	// ReadAheadSharePct is the share, in percent, of the window's read
	// sectors that the kernel issued as read-ahead (REQ_RAHEAD).
	ReadAheadSharePct float64
	// Streams is the number of processes that issued read-ahead requests
	// in the window: concurrent sequential streams.
	Streams int
	// Rotational: the device seeks (measured class, not queue/rotational
	// alone).
	Rotational bool
	// CompetitiveKiB is the competitive depth for the window
	// (competitive prefetching, EuroSys 2007 §3; 0 when not computed).
	CompetitiveKiB int
}

// ReadAheadReason names the rule that chose a depth.
type ReadAheadReason string

// The read-ahead rules, in the order they are tried.
const (
	// RABounds: the depth is outside the policy's [MinKiB, MaxKiB] and is
	// brought to the nearer bound: the administrator's range, not a
	// judgement of the agent's.
	RABounds ReadAheadReason = "PolicyBounds"
	// RANoEvidence: the waste was not measured; the depth is kept.
	RANoEvidence ReadAheadReason = "NoWasteEvidence"
	// RAWaste: most read-ahead pages went unused; the depth is cut to
	// about what was used.
	RAWaste ReadAheadReason = "ReadAheadWasted"
	// RARestore: read-ahead pages are used again by sequential readers
	// after a cut; the original depth is put back.
	RARestore ReadAheadReason = "ReadAheadUsed"
	// RACompetitive: a rotational device with concurrent sequential
	// streams and no waste gets the competitive depth.
	RACompetitive ReadAheadReason = "CompetitiveDepth"
	// RAKeep: the evidence asks for no change.
	RAKeep ReadAheadReason = "Keep"
)

// Thresholds of the read-ahead rule.
const (
	// HighWastePct: at or above it the depth is cut.
	HighWastePct = 50.0
	// LowWastePct: at or below it the depth may rise.
	LowWastePct = 5.0
	// MinReadAheadSharePct: read-ahead must carry at least this share of
	// the read sectors for a rise to matter.
	MinReadAheadSharePct = 25.0
)

// ReadAhead chooses read_ahead_kb from one window's evidence. It returns
// the depth (CurrentKiB when it keeps it) and the rule that chose it. A
// depth outside the policy's bounds is brought inside them; otherwise the
// rule never lowers the depth without measured waste and never raises it
// while waste is measured; it cuts by at least half, to about the used
// share of the current depth, and restores the original depth (within
// MaxKiB) once read-ahead is used again.
func ReadAhead(in ReadAheadInput) (int, ReadAheadReason) {
	cur := in.CurrentKiB
	switch {
	case in.MinKiB > 0 && cur < in.MinKiB:
		return in.MinKiB, RABounds
	case in.MaxKiB > 0 && cur > in.MaxKiB:
		return in.MaxKiB, RABounds
	case !in.WasteMeasured:
		return cur, RANoEvidence
	case in.WastePct >= HighWastePct:
		used := float64(cur) * (100 - in.WastePct) / 100
		kib := min(floorPow2(int(used)), cur/2)
		kib = max(kib, in.MinKiB)
		if kib >= cur {
			return cur, RAKeep
		}
		return kib, RAWaste
	case in.WastePct > LowWastePct || in.ReadAheadSharePct < MinReadAheadSharePct:
		return cur, RAKeep
	case in.Rotational && in.Streams >= 2 && min(in.CompetitiveKiB, in.MaxKiB) > max(cur, in.OriginalKiB):
		return min(in.CompetitiveKiB, in.MaxKiB), RACompetitive
	case cur < min(in.OriginalKiB, in.MaxKiB):
		return min(in.OriginalKiB, in.MaxKiB), RARestore
	}
	return cur, RAKeep
}

// floorPow2 is the largest power of two ≤ n (1 for n < 2).
func floorPow2(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}
