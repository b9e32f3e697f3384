// Package throttlecal checks the Throttled device class against a disk
// behind a real token bucket (issue 15 item 4): phases of fio recorded on
// the VM lab's throttled virtio disk (e2e/vm TestThrottleClass), the caps
// estimated from them (model.EstimateThrottle), and each phase's time
// predicted by a model learned on the other phases, as a throttled device
// and as an SSD.
package throttlecal

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Phase is one fio job: rw (fio's --rw), block size in KiB, queue depth
// and number of requests.
type Phase struct {
	Name     string
	RW       string
	BlockKiB int
	Depth    int
	Requests int
}

// Shell is the phase as a call of the VM script's ph function.
func (p Phase) Shell() string {
	return fmt.Sprintf("ph %s %s %dk %d %d", p.Name, p.RW, p.BlockKiB, p.Depth, p.Requests)
}

// Phases are the recorded phases: 4 KiB random reads at depths 1–32
// (IOPS-bound above depth 1 or 2), 4 KiB random writes (the caps count
// writes too), and 64 KiB random and 256 KiB sequential reads
// (bandwidth-bound).
var Phases = []Phase{
	{"rr4k-d1", "randread", 4, 1, 1500},
	{"rr4k-d2", "randread", 4, 2, 3000},
	{"rr4k-d4", "randread", 4, 4, 3000},
	{"rr4k-d8", "randread", 4, 8, 3000},
	{"rr4k-d16", "randread", 4, 16, 3000},
	{"rr4k-d32", "randread", 4, 32, 3000},
	{"rw4k-d8", "randwrite", 4, 8, 3000},
	{"rr64k-d4", "randread", 64, 4, 2000},
	{"rr64k-d16", "randread", 64, 16, 2000},
	{"sr256k-d4", "read", 256, 4, 512},
}

// Row is one phase: its measured time (first arrival to last completion)
// and the times the two models predict, s, with their errors, %.
type Row struct {
	Phase           string  `json:"phase"`
	Requests        int     `json:"requests"`
	MeasuredS       float64 `json:"measuredSeconds"`
	ThrottledS      float64 `json:"throttledSeconds"`
	ThrottledErrPct float64 `json:"throttledErrorPct"`
	SSDS            float64 `json:"ssdSeconds"`
	SSDErrPct       float64 `json:"ssdErrorPct"`
}

// Result is the caps found on all phases together and the rows.
type Result struct {
	Found    model.Throttle `json:"found"`
	Evidence string         `json:"evidence"`
	Rows     []Row          `json:"rows"`
}

// Run reads dir/NAME.st for every phase and evaluates them (see the
// package doc). It returns a trace's read error, an error when the caps
// are not found, and model.Fit's or the engine's errors.
func Run(dir string) (Result, error) {
	phases := make([][]trace.Request, len(Phases))
	for i, p := range Phases {
		reqs, err := trace.ReadFile("native", filepath.Join(dir, p.Name+".st"))
		if err != nil {
			return Result{}, err
		}
		phases[i] = reqs
	}
	var res Result
	t, ev, ok := model.EstimateThrottle(concat(phases, -1))
	res.Found, res.Evidence = t, ev.String()
	if !ok {
		return res, fmt.Errorf("no token bucket found in the phases together (%s)", ev)
	}
	for i, p := range Phases {
		row, err := predictPhase(p.Name, phases, i)
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// predictPhase predicts phase i with models learned on the others.
func predictPhase(name string, phases [][]trace.Request, i int) (Row, error) {
	train, test := concat(phases, i), phases[i]
	row := Row{Phase: name, Requests: len(test), MeasuredS: span(test)}
	for _, c := range []struct {
		class   model.Class
		s, errP *float64
	}{{model.Throttled, &row.ThrottledS, &row.ThrottledErrPct}, {model.SSD, &row.SSDS, &row.SSDErrPct}} {
		m, err := model.Fit(train, model.FitOptions{Class: c.class})
		if err != nil {
			return row, fmt.Errorf("%s: learning on the other phases: %w", name, err)
		}
		ns, err := makespan(test, m.WindowModel()) // as the agent simulates a window
		if err != nil {
			return row, fmt.Errorf("%s: %w", name, err)
		}
		*c.s = float64(ns) / 1e9
		*c.errP = 100 * (*c.s - row.MeasuredS) / row.MeasuredS
	}
	return row, nil
}

// makespan simulates reqs under none as the agent replays a window (the
// loop inferred, the device's tags at the most requests the trace had
// outstanding) and returns the simulated first-release-to-last-completion
// time, ns.
func makespan(reqs []trace.Request, m *model.Model) (int64, error) {
	none := engine.Candidate{Scheduler: "none"}
	rep, err := engine.EvaluateRequests(reqs, engine.LoopAuto, []engine.Candidate{none}, engine.Options{
		Model: m, Seed: 1, Tags: model.MaxInFlight(reqs), Current: none,
		Rank: engine.RankWait, Parallel: 1, Decide: decide.DefaultConfig(none.Name())})
	if err != nil {
		return 0, err
	}
	return rep.Outcomes[0].Result.MakespanNs, nil
}

// span is the measured first-arrival-to-last-completion time of reqs, s.
func span(reqs []trace.Request) float64 {
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range reqs {
		first = min(first, reqs[i].Arrival)
		if reqs[i].HasService() {
			last = max(last, reqs[i].Complete)
		}
	}
	return float64(last-first) / 1e9
}

// concat joins the phases except skip (-1: none), each shifted to start
// 2 s after the previous one ended, so that their times never overlap
// and the bucket refills between them, as it did in the recording.
func concat(phases [][]trace.Request, skip int) []trace.Request {
	var out []trace.Request
	var end int64
	for i, reqs := range phases {
		if i == skip || len(reqs) == 0 {
			continue
		}
		shift := end + 2e9 - reqs[0].Arrival
		for _, q := range reqs {
			q.Arrival += shift
			if q.Dispatch != trace.Unknown {
				q.Dispatch += shift
			}
			if q.Complete != trace.Unknown {
				q.Complete += shift
			}
			end = max(end, q.Arrival, q.Complete)
			out = append(out, q)
		}
	}
	return out
}

// Table formats a result's rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| phase | requests | measured | throttled model | ssd model |\n|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %.2f s | %.2f s (%+.1f %%) | %.2f s (%+.1f %%) |\n",
			r.Phase, r.Requests, r.MeasuredS, r.ThrottledS, r.ThrottledErrPct, r.SSDS, r.SSDErrPct)
	}
	return b.String()
}
