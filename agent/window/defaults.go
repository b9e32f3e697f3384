package window

import (
	"strconv"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// DefaultCosts are the predicted device times, ns, of the same work at a
// changed knob's new and old defaults; 0, 0 when the window does not
// price them. read_ahead_kb: the read-ahead road's cost of the readers'
// decayed page-cache evidence at each depth (readahead.Cost), once the
// evidence resolved enough pages to be judged. scheduler: the
// simulation of the window's requests (r) under each, when both are
// candidates of the policy.
func (c *Controller) DefaultCosts(k v1alpha1.KnobChange, r *engine.Report) (newNs, oldNs float64) {
	switch k.Knob {
	case "read_ahead_kb":
		n, errN := strconv.Atoi(k.New)
		o, errO := strconv.Atoi(k.Old)
		if !c.Policy.ReadAhead || len(c.ra.Decision.Costs) == 0 || errN != nil || errO != nil {
			return 0, 0
		}
		s, ev := c.raSettings(Gate{}), c.road.Evidence()
		cost := func(kib int) float64 {
			return readahead.Cost(c.ra.Device, ev, kib, c.Current.ReadAheadKiB, s.Seeks, s.LowWastePct)
		}
		return cost(n), cost(o)
	case "scheduler":
		if r == nil {
			return 0, 0
		}
		return float64(c.simulatedTotal(*r, k.New)), float64(c.simulatedTotal(*r, k.Old))
	}
	return 0, 0
}
