package sim

import (
	"testing"

	"github.com/shadowtune/shadowtune/internal/sched"
)

// TestNrRequestsBoundsTheElevator checks Config.NrRequests with the run of
// TestTagsQueueInTheDevice: 64 random reads released at once on one
// server with one tag, so the elevator holds the backlog. With one
// request slot, a request enters the elevator only when the one before
// completes: mq-deadline then has nothing to sort and its run is none's,
// request for request, each response waiting for every request before.
// The more slots, the more the elevator sorts and the shorter the seeks;
// with as many slots as requests the limit never binds.
func TestNrRequestsBoundsTheElevator(t *testing.T) {
	reqs := randomBurst(64)
	w := mustWindow(t, reqs, LoopOpen)
	newDisk := func(int64) DeviceModel { return &seekDisk{} }
	run := func(name string, nr int) Result {
		dev := sched.Device{MaxSectors: 2560, QueueDepth: 1}
		return mustRun(t, w, Config{Scheduler: name, Device: dev, Servers: 1, NrRequests: nr, NewDisk: newDisk, KeepPerRequest: true})
	}
	none := run("none", 0)
	one := run("mq-deadline", 1)
	for i := range reqs {
		if one.ResponseNs[i] != none.ResponseNs[i] {
			t.Fatalf("nr_requests 1: request %d responds in %d ns, none in %d; want the same (nothing to sort)", i, one.ResponseNs[i], none.ResponseNs[i])
		}
	}
	prev := one.TotalServiceNs
	for _, nr := range []int{4, 16, 64} {
		r := run("mq-deadline", nr)
		if r.TotalServiceNs >= prev {
			t.Errorf("nr_requests %d: service %d ns, not below the smaller limit's %d", nr, r.TotalServiceNs, prev)
		}
		prev = r.TotalServiceNs
	}
	unbounded := run("mq-deadline", 0)
	if at64 := run("mq-deadline", 64); at64.TotalServiceNs != unbounded.TotalServiceNs || at64.MeanResponseNs != unbounded.MeanResponseNs {
		t.Errorf("nr_requests 64 of 64 requests: %d ns (mean %.0f), no limit %d ns (%.0f); want the same",
			at64.TotalServiceNs, at64.MeanResponseNs, unbounded.TotalServiceNs, unbounded.MeanResponseNs)
	}
	// none's limit is the device's tags: NrRequests does not apply.
	if n1 := run("none", 1); n1.MeanResponseNs != none.MeanResponseNs {
		t.Errorf("none with NrRequests 1: mean response %.0f ns, without %.0f; want the same", n1.MeanResponseNs, none.MeanResponseNs)
	}
}
