// Command replay-windows replays windows kept by `shadowtune run
// --explain-dir` under none, mq-deadline and bfq twice: with the model as
// the window left it (each cell's newest 64 service times) and with the
// window's own means (model.WindowModel), after learning the window again
// from the kept model. It prints one Markdown row per window: the most
// requests in flight, the device's busy time (the service times net of the
// wait inside the device, summed), the measured mean response time, and
// for each model the simulated service of none, its mean response time and
// the best candidate. docs/bench-decisions.md ("The model a window is
// simulated with") shows its output:
//
//	go run ./hack/replay-windows DIR/*.trace
package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

func main() {
	fmt.Println("| window | most in flight | device busy | measured mean response | end of window: simulated service, mean response, best | whole window: simulated service, mean response, best |")
	fmt.Println("|---|---:|---:|---:|---|---|")
	for _, p := range os.Args[1:] {
		if err := replay(p); err != nil {
			fmt.Fprintf(os.Stderr, "replay-windows: %s: %v\n", p, err)
			os.Exit(1)
		}
	}
}

// replay prints the row of the kept window whose trace is at path (its
// model beside it, .model.json).
func replay(path string) error {
	reqs, err := trace.ReadFile("native", path)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(path, ".trace")
	f, err := os.Open(base + ".model.json")
	if err != nil {
		return err
	}
	kept, err := model.Load(f)
	f.Close()
	if err != nil {
		return err
	}
	resp := engine.MeasuredResponseNs(reqs)
	if resp == 0 {
		return fmt.Errorf("no measured response times")
	}
	m := kept.Clone()
	m.StartWindow()
	busy := relearn(m, reqs)
	cols := []string{}
	for _, sm := range []*model.Model{m.Clone(), m.WindowModel()} {
		svc, r, best, err := simulate(reqs, sm)
		if err != nil {
			return err
		}
		cols = append(cols, fmt.Sprintf("%.2f s, %.2f ms (%.2f×), %s", svc/1e9, r/1e6, r/resp, best))
	}
	fmt.Printf("| %s | %d | %.2f s | %.3f ms | %s | %s |\n", filepath.Base(base), model.MaxInFlight(reqs),
		busy/1e9, resp/1e6, cols[0], cols[1])
	return nil
}

// relearn learns reqs on m in dispatch order, with their service times
// net of the wait inside the device for one of m's servers, as the agent
// learns a window, and returns their sum, ns.
func relearn(m *model.Model, reqs []trace.Request) float64 {
	net := model.NetServiceTimes(reqs, m.Servers(), nil)
	var order []int
	for i := range reqs {
		if reqs[i].HasService() {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(reqs[a].Dispatch, reqs[b].Dispatch) })
	d := m.NewDisk(0)
	var busy float64
	for _, i := range order {
		q := &reqs[i]
		d.Observe(q.Op, q.Sector, q.Sectors, net[i])
		busy += float64(net[i])
	}
	return busy
}

// simulate replays reqs with m under none, mq-deadline and bfq, none in
// effect, ranked by the application's wait as the agent ranks them, and
// returns none's simulated service (ns) and mean response time (ns) and
// the best candidate with its predicted gain.
func simulate(reqs []trace.Request, m *model.Model) (svc, resp float64, best string, err error) {
	none := engine.Candidate{Scheduler: "none"}
	rep, err := engine.EvaluateRequests(reqs, engine.LoopAuto,
		[]engine.Candidate{none, {Scheduler: "mq-deadline"}, {Scheduler: "bfq"}}, engine.Options{
			Model: m, Seed: 1, Tags: model.MaxInFlight(reqs), Current: none,
			Rank: engine.RankWait, Parallel: 1, Decide: decide.DefaultConfig(none.Name())})
	if err != nil {
		return 0, 0, "", err
	}
	for _, o := range rep.Outcomes {
		if o.Candidate.Name() == none.Name() {
			svc, resp = float64(o.Result.TotalServiceNs), o.Result.MeanResponseNs
		}
	}
	return svc, resp, fmt.Sprintf("%s %+.1f %%", rep.Decision.Best, rep.Decision.BestImprovementPct), nil
}
