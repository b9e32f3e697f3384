package window

// What the window's simulation runs and what it reads: the candidates
// the model cannot tell apart, simulated alone for a while (alike), and
// the cost at the origin of the window's reads, which a dm-cache in front
// of the device is judged on (readCostNs).

// Candidates the model cannot tell apart (issue 43 item 6): on a device
// whose simulation gives every candidate the same measure (a flash device
// modelled with as many servers as requests in flight, where no elevator
// reorders anything), simulating each of them every window costs the
// node CPU and decides nothing the dispatch charge alone would not. After
// an evaluation where every candidate's simulated measure equalled the
// current setting's, the next windows simulate the current setting
// alone, for a span that doubles with each such evaluation in a row, up
// to minDwell: a switch the full evaluation would find then waits at
// most as long as the policy's own pacing holds a switch after a change.

import (
	"time"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// alike is a device's state of candidates that simulate alike.
type alike struct {
	// run counts the full evaluations in a row whose candidates all
	// simulated alike; until is when the next full one is due.
	run   int
	until time.Time
	last  time.Time // the end of the last window evaluated
}

// narrowed reports whether the window ending at now simulates the current
// setting alone.
func (a *alike) narrowed(now time.Time) bool {
	return a.run > 0 && !now.After(a.until)
}

// observe takes a full evaluation's report at now: when every candidate's
// simulated measure (before the dispatch charge and the corrections)
// equals the current setting's, the span doubles, up to maxSpan;
// otherwise the run ends. A window's length is the time since the last
// evaluation.
func (a *alike) observe(er engine.Report, rank engine.Rank, now time.Time, maxSpan time.Duration) {
	window := now.Sub(a.last)
	known := !a.last.IsZero()
	a.last = now
	if !allAlike(er, rank) || !known || window <= 0 {
		a.run, a.until = 0, time.Time{}
		return
	}
	a.run++
	span := window << min(a.run-1, 20)
	a.until = now.Add(min(span, max(maxSpan, window)))
}

// allAlike reports whether every outcome of er has the current setting's
// simulated measure, with two candidates or more.
func allAlike(er engine.Report, rank engine.Rank) bool {
	if len(er.Outcomes) < 2 {
		return false
	}
	cur := int64(-1)
	for _, o := range er.Outcomes {
		if o.Candidate.Name() == er.Current {
			cur = rank.Measure(o.Result)
		}
	}
	for _, o := range er.Outcomes {
		if rank.Measure(o.Result) != cur {
			return false
		}
	}
	return true
}

// currentOnly is cands narrowed to the current setting, and the thrash
// guard's default setting (defaultName: the rule needs it among the
// candidates, decide.Config.Default) when that is another.
func currentOnly(current engine.Candidate, cands []engine.Candidate, defaultName string) []engine.Candidate {
	out := []engine.Candidate{current}
	for _, cand := range cands {
		if cand.Name() == defaultName && cand.Name() != current.Name() {
			out = append(out, cand)
		}
	}
	return out
}

// predicted is the measure, ns, the decision compares for each of cands
// in the window r evaluated (engine.Report.Corrected by rank, with the
// learned corrections). In a window that simulated the current setting
// alone (narrow), every other candidate is what the agent holds it to
// be: the current setting's simulated outcome, with its own scheduler's
// dispatch factor and correction.
func predicted(r engine.Report, cands []engine.Candidate, rank engine.Rank, corrections map[string]float64, narrow bool) map[string]time.Duration {
	out := make(map[string]time.Duration, len(cands))
	var cur *engine.Outcome
	for i, o := range r.Outcomes {
		out[o.Candidate.Name()] = time.Duration(r.Corrected(rank, corrections, o))
		if o.Candidate.Name() == r.Current {
			cur = &r.Outcomes[i]
		}
	}
	if !narrow || cur == nil {
		return out
	}
	for _, cand := range cands {
		if _, ok := out[cand.Name()]; !ok && !cand.Cache {
			out[cand.Name()] = time.Duration(r.Corrected(rank, corrections, engine.Outcome{Candidate: cand, Result: cur.Result}))
		}
	}
	return out
}

// The read costs a dm-cache in front of the device is judged on
// (decide.CacheInput): what a read takes from the origin's device time.

// readCostNs is the mean cost at the origin of a read in reqs smaller
// than blockSectors (readNs) and of one at least that large (blockNs), ns;
// 0 for a class without reads, which then borrows the other's cost. A
// read's cost is the device time it takes from others: its service time
// net of the wait inside the device for one of m's k servers and m's
// throttle (model.NetServiceTimes, what the model learns) divided by k,
// and no less than the throttle's interval per request and per byte.
// Its measured service time (dispatch to completion) is not that cost:
// at queue depth 16 behind a 500 IOPS cap every read's is about 32 ms,
// and dm-cache's promotions, copied in bursts, wait behind each other
// and the reads (in the VM lab their mean was 1.38 times the 4 KiB
// reads', their cost 1.14 times, where the cap makes them equal).
// scratch is reused for the net times.
func readCostNs(reqs []trace.Request, blockSectors uint64, m *model.Model, scratch *[]int64) (readNs, blockNs float64) {
	th, k := m.Throttle(), max(m.Servers(), 1)
	var net model.NetService
	net.SetThrottle(th)
	*scratch = net.Times(reqs, k, *scratch)
	var small, large, ns, nl float64
	for i := range reqs {
		r, t := &reqs[i], (*scratch)[i]
		if r.Op != trace.Read || t == trace.Unknown {
			continue
		}
		c := float64(t) / float64(k)
		if th.IOPS > 0 {
			c = max(c, 1e9/th.IOPS)
		}
		if th.BytesPerSec > 0 {
			c = max(c, float64(r.Sectors)*trace.SectorSize*1e9/th.BytesPerSec)
		}
		if uint64(r.Sectors) >= blockSectors {
			large += c
			nl++
		} else {
			small += c
			ns++
		}
	}
	if ns > 0 {
		readNs = small / ns
	}
	if nl > 0 {
		blockNs = large / nl
	}
	if readNs == 0 {
		readNs = blockNs
	}
	if blockNs == 0 {
		blockNs = readNs
	}
	return readNs, blockNs
}

var waitsFor = engine.WaitsFor

// measuredService is the measured service time of reqs, ns.
func measuredService(reqs []trace.Request) int64 {
	var n int64
	for i := range reqs {
		if reqs[i].HasService() {
			n += reqs[i].ServiceTime()
		}
	}
	return n
}

// uncached returns the candidates without a cache.
func uncached(cands []engine.Candidate) []engine.Candidate {
	out := make([]engine.Candidate, 0, len(cands))
	for _, c := range cands {
		if !c.Cache {
			out = append(out, c)
		}
	}
	return out
}
