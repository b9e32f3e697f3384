package window

// The read costs a dm-cache in front of the device is judged on
// (decide.CacheInput): what a read takes from the origin's device time.

import (
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

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
