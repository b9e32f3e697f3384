package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/shadowtune/shadowtune/agent/schedcost"
)

// measureDispatch sets a.dispatch: the schedulers' CPU time per request
// beyond none's on this node (agent/schedcost), loaded from the state
// directory when it was measured on this kernel release with as many
// CPUs, else measured (a few seconds on a private RAM-backed loop device,
// before any device is traced) and saved. When it cannot be measured (a
// busy machine: schedcost.ErrContended; no loop devices) the decision
// charges schedcost.Prior, and a note says so.
func (a *Agent) measureDispatch(ctx context.Context) {
	c, err := schedcost.Load(a.opt.StateDir)
	if err != nil {
		a.notes = append(a.notes, "scheduler costs measured before are ignored: "+err.Error())
	}
	if !c.Usable(schedcost.Kernel(), runtime.NumCPU()) {
		if c, err = measureOnce(ctx, a.opt.HostRoot, a.opt.StateDir); err != nil {
			a.notes = append(a.notes, "scheduler dispatch costs not measured, BFQ's documented figures charged instead "+
				"(measured again at the next start): "+err.Error())
			a.dispatch = schedcost.Prior(runtime.NumCPU())
			if a.opt.Metrics != nil {
				a.opt.Metrics.SetDispatchCosts(a.dispatch.PerRequestNs, false)
			}
			return
		}
		if err := schedcost.Save(a.opt.StateDir, c); err != nil {
			a.notes = append(a.notes, "scheduler dispatch costs not saved (measured again at the next start): "+err.Error())
		}
	}
	a.dispatch = c
	if a.opt.Metrics != nil {
		a.opt.Metrics.SetDispatchCosts(c.PerRequestNs, true)
	}
	a.opt.Log.Info("scheduler dispatch costs", "cpuNsPerRequestOverNone", dispatchSummary(c), "kernel", c.Kernel, "cpus", c.CPUs,
		"measured", c.Time)
}

// dispatchSummary is c's costs as "mq-deadline=3012 kyber=2487 …" (ns).
func dispatchSummary(c schedcost.Costs) string {
	s := ""
	for _, name := range []string{"mq-deadline", "kyber", "bfq"} {
		if ns, ok := c.PerRequestNs[name]; ok {
			s += fmt.Sprintf(" %s=%.0f", name, ns)
		}
	}
	if s == "" {
		return "none measured"
	}
	return s[1:]
}

// chargeDispatch gives every device's decision the measured dispatch
// costs (engine.Options.DispatchCostNs).
func (a *Agent) chargeDispatch(devs []*device) {
	for _, d := range devs {
		d.ctrl.policy.Engine.DispatchCostNs, d.ctrl.policy.Engine.CPUs = a.dispatch.PerRequestNs, a.dispatch.CPUs
	}
}

// measured memoizes schedcost.Measure by host root for the process: an
// agent started again in the same process (the cluster agent after a
// failure, or tests) does not measure again.
var measured struct {
	sync.Mutex
	byRoot map[string]measurement
}

type measurement struct {
	c   schedcost.Costs
	err error
}

// measureOnce is schedcost.Measure with default options, recording the
// loop device's scheduler under stateDir, once per host root and
// process; a cancelled measurement is not kept.
func measureOnce(ctx context.Context, hostRoot, stateDir string) (schedcost.Costs, error) {
	measured.Lock()
	defer measured.Unlock()
	if m, ok := measured.byRoot[hostRoot]; ok {
		return m.c, m.err
	}
	c, err := schedcost.Measure(ctx, hostRoot, schedcost.Options{RecordDir: filepath.Join(stateDir, "node")})
	if ctx.Err() == nil {
		if measured.byRoot == nil {
			measured.byRoot = map[string]measurement{}
		}
		measured.byRoot[hostRoot] = measurement{c, err}
	}
	return c, err
}
