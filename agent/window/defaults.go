package window

import (
	"strconv"

	"github.com/shadowtune/shadowtune/agent/readahead"
)

// defaultCosts are the read-ahead road's costs, ns of device time, of
// the readers' decayed page-cache evidence (readahead.Cost) at a changed
// read_ahead_kb default's new and old depths (newKiB, oldKiB: KiB as the
// sysfs attribute reads), with the road's settings s; 0, 0 before the
// evidence resolved enough pages to be judged, or when a depth is not a
// number.
func (r *readAheadRoad) defaultCosts(newKiB, oldKiB string, s readahead.Settings) (newNs, oldNs float64) {
	n, errN := strconv.Atoi(newKiB)
	o, errO := strconv.Atoi(oldKiB)
	if len(r.step.Decision.Costs) == 0 || errN != nil || errO != nil {
		return 0, 0
	}
	ev := r.road.Evidence()
	cost := func(kib int) float64 {
		return readahead.Cost(r.step.Device, ev, kib, s.CurrentKiB, s.Seeks, s.LowWastePct)
	}
	return cost(n), cost(o)
}
