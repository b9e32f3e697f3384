package engine

import (
	"fmt"

	"github.com/shadowtune/shadowtune/api/knob"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// split separates a candidate's tunables into its scheduler's
// (queue/iosched/NAME, for internal/sched) and the queue attributes set
// with it that the simulator models: nr_requests (sim.Config.NrRequests;
// 0 when the candidate does not set it). Which names are queue attributes
// is the knob table's (api/knob).
func (c Candidate) split() (iosched sched.Tunables, nrRequests int) {
	for k, v := range c.Tunables {
		if !knob.IsQueue(k) {
			if iosched == nil {
				iosched = sched.Tunables{}
			}
			iosched[k] = v
			continue
		}
		if k == "nr_requests" {
			nrRequests = int(v)
		}
	}
	return iosched, nrRequests
}

// checkQueueKnobs returns an error naming the first tunable of t that is a
// queue attribute the simulator does not model, is not tuned, or is
// outside the kernel's bounds (knob.Knob Min and Max), or that is set
// with none (whose limit is the device's tags).
func checkQueueKnobs(scheduler string, t sched.Tunables) error {
	for k, v := range t {
		row, ok := knob.Lookup("", k)
		switch {
		case !ok:
			continue
		case row.Role != knob.Tuned || k != "nr_requests":
			return fmt.Errorf("engine: %s is not a queue attribute the simulator models", k)
		case scheduler == "none":
			return fmt.Errorf("engine: %s=%d: none has no scheduler requests to bound", k, v)
		case !row.Within(v):
			return fmt.Errorf("engine: %s=%d is outside [%d, %d] %s", k, v, row.Min, row.Max, row.Unit)
		}
	}
	return nil
}
