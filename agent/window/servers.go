package window

import (
	"fmt"
	"math"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// serverSteps are the k fitServers tries, up to the most requests the
// window had in flight.
var serverSteps = []int{1, 2, 4, 8, 16, 32, 64, 128}

// serversTolerance is how close (a ratio, either way) a k's simulated
// mean response time must come to the measured one for fitServers to
// stop at it. More servers than that explains always reproduce a window
// too (with as many servers as requests in flight, none ever waits), but
// they hide the queue the elevators work on.
const serversTolerance = 1.25

// serversSearchEvery is how many windows a k search waits for after the
// last one, so that its simulations (one candidate per k) stay a small
// share of the agent's work.
const serversSearchEvery = 4

// serverFit is one k tried: the simulated mean response time of the
// setting in effect ÷ the measured one, and the model learned with it.
type serverFit struct {
	k     int
	ratio float64
	model *model.Model
}

// fitServers learns k, the requests a non-rotational device serves at
// once, by what it must reproduce: when a predicted gain was not acted on
// because the simulation of the setting in effect missed the window's
// measured mean response time by more than MaxResponseRatio either way
// (decide.ReasonNotReproduced; er.ResponseRatio), it
// learns the window again on a copy of the model for every k of
// serverSteps up to the window's most requests in flight (the service
// times net of the wait for k servers, model.NetServiceTimes), simulates
// the setting in effect with each copy (model.WindowModel), from the
// fewest servers up. It stops at the first k within serversTolerance,
// else takes the k whose ratio came nearest 1, and puts that copy in
// place of the model when its ratio is within MaxResponseRatio. The next
// windows are simulated with it; the window's own decision stands.
//
// model.EstimateServers learns k once, from throughput against depth on
// the first window, and throughput says little when a window's sizes
// change with its depth or it never ran deep: on the decision benchmark's
// loop device it gave 1, the device had up to 128 requests in flight, and
// the simulated response times were 4 to 78 times the measured ones
// (docs/runs/2026-12-03-history.md). It does nothing for a rotational model (k =
// 1, DESIGN §3), while a change is being verified (the verification
// compares against the current model), or where no decision waits on it.
// Within serversSearchEvery windows of the last search it searches only a
// window that ran deeper than that search could try (serversReach): a
// first window of one second, at 4 requests in flight, can try no more
// than 4 servers, and on the decision benchmark the next window, at 9,
// needed 8 (it waited four windows for them before). Its simulations take
// CPU from the node's work (in the VM lab's TCG guest, seconds), and each
// early search raises the reach, so at most len(serverSteps) run in a
// row. It returns an error from the simulation.
func (l *learning) fitServers(reqs []trace.Request, er engine.Report, verifying bool, opt engine.Options, current engine.Candidate, name string) error {
	l.serversWait--
	ratio := er.ResponseRatio
	if er.Decision.Reason != decide.ReasonNotReproduced || l.model.Class() == model.HDD || verifying ||
		ratio <= 0 {
		return nil
	}
	reach := serversReach(model.MaxInFlight(reqs))
	if l.serversWait > 0 && reach <= l.serversReach {
		return nil
	}
	l.serversWait, l.serversReach = serversSearchEvery, reach
	best := serverFit{k: l.model.Servers(), ratio: ratio}
	for _, k := range serverSteps {
		if k > reach {
			break
		}
		if k == l.model.Servers() {
			continue
		}
		f, err := l.tryServers(reqs, k, opt, current, name)
		if err != nil {
			return err
		}
		if d, b := math.Abs(math.Log(f.ratio)), math.Abs(math.Log(best.ratio)); d < b {
			best = f
		}
		if math.Abs(math.Log(f.ratio)) <= math.Log(serversTolerance) {
			break // the fewest servers that reproduce the window
		}
	}
	if best.model == nil || math.Abs(math.Log(best.ratio)) > math.Log(MaxResponseRatio) {
		return nil
	}
	l.replaceModel(best.model, fmt.Sprintf("k = %d: the simulated mean response time of %q was %.2f× the measured one with k = %d, %.2f× with k = %d",
		best.k, current.Name(), ratio, l.model.Servers(), best.ratio, best.k))
	return nil
}

// serversReach is the largest k of serverSteps a window with at most
// most requests in flight can tell from fewer (at least 1): with as many
// servers as requests in flight, none waits, and more change nothing.
func serversReach(most int) int {
	reach := serverSteps[0]
	for _, k := range serverSteps {
		if k <= most {
			reach = k
		}
	}
	return reach
}

// tryServers learns reqs on a copy of the model with k servers, as the
// agent learns a window, and simulates the setting in effect with it.
func (l *learning) tryServers(reqs []trace.Request, k int, opt engine.Options, current engine.Candidate, name string) (serverFit, error) {
	m := l.model.Clone()
	m.SetServers(k)
	m.StartWindow()
	var wl windowLearner
	wl.observe(m.NewDisk(0), reqs)
	opt.Parallel, opt.Model, opt.Current = 1, m.WindowModel(), current
	// One candidate, the setting in effect, is simulated: only its
	// response ratio is wanted, and a decision over it alone needs it as
	// the default.
	opt.Decide = decide.DefaultConfig(current.Name())
	er, err := engine.EvaluateRequests(reqs, engine.LoopAuto, []engine.Candidate{current}, opt)
	if err != nil {
		return serverFit{}, fmt.Errorf("%s: servers: %w", name, err)
	}
	return serverFit{k: k, ratio: er.ResponseRatio, model: m}, nil
}
