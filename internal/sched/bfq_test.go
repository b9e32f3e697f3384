package sched

import (
	"fmt"
	"strings"
	"testing"
)

var (
	rotDisk = Device{Rotational: true, MaxSectors: 2560, QueueDepth: 1}
	ssd     = Device{Rotational: false, MaxSectors: 2560, QueueDepth: 32}
)

// twoStreams returns n nearly sequential reads of sz sectors (8-sector gaps,
// so that they do not merge) for each of PIDs 1 and 2, interleaved in
// arrival order.
func twoStreams(n int, sz uint32) []*Request {
	var rs []*Request
	stride := uint64(sz) + 8
	for i := 0; i < n; i++ {
		rs = append(rs, rq(2*i, 'R', uint64(i)*stride, sz, 1))
		rs = append(rs, rq(2*i+1, 'R', 50_000_000+uint64(i)*stride, sz, 2))
	}
	return rs
}

func TestBFQBudgetRuns(t *testing.T) {
	cases := []struct {
		name string
		tun  Tunables
		want string
	}{
		// Initial budget 2/3·16384 sectors = 42 requests of 256
		// sectors; exhausting it quadruples the next budget, up to
		// 16384 = 64 requests (58 are left).
		{"low_latency=0", Tunables{"low_latency": 0}, "[42 42 58 58]"},
		// Both queues are new, hence weight-raised: their budget is
		// kept at 2·min_budget = 1024 sectors = 4 requests.
		{"default", nil, "[" + strings.TrimSpace(strings.Repeat("4 ", 50)) + "]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, "bfq", c.tun, rotDisk)
			insert(t, s, 0, twoStreams(100, 256)...)
			out := run(t, s, 0, ms, 1, 0, nil)
			if got := fmt.Sprint(runs(out)); got != c.want {
				t.Fatalf("runs of one process = %s, want %s", got, c.want)
			}
		})
	}
}

func TestBFQLateArrivalStartsAtVirtualTime(t *testing.T) {
	// B becomes busy after A received ~3 budgets. B starts at the
	// system virtual time, not at zero, so it gets one budget and then
	// A gets its turn again, instead of B catching up A's service.
	s := mustNew(t, "bfq", Tunables{"low_latency": 0}, rotDisk)
	var as, bs []*Request
	for i := 0; i < 1000; i++ {
		as = append(as, rq(i, 'R', uint64(i)*264, 256, 1))
		r := rq(1000+i, 'R', 50_000_000+uint64(i)*264, 256, 2)
		r.Insert = 200 * ms
		bs = append(bs, r)
	}
	insert(t, s, 0, as...)
	out := run(t, s, 0, ms, 1, 600, bs)
	rl := runs(out)
	if len(rl) < 4 || out[0].PID != 1 || rl[1] > 64 {
		t.Fatalf("runs %v: B (second run) should get about one budget (<= 64 requests)", rl)
	}
}

func TestBFQFairShare(t *testing.T) {
	// Two greedy sequential readers with equal weights get about the same
	// service.
	s := mustNew(t, "bfq", Tunables{"low_latency": 0}, rotDisk)
	insert(t, s, 0, twoStreams(1000, 64)...)
	out := run(t, s, 0, ms/4, 1, 1200, nil)
	var sec [3]int
	for _, r := range out {
		sec[r.PID] += int(r.Sectors)
	}
	// Service alternates in budget-sized slots, so shares differ by at
	// most about one budget.
	if tot := sec[1] + sec[2]; sec[1]*10 > tot*6 || sec[2]*10 > tot*6 {
		t.Fatalf("service pid1 %d pid2 %d sectors: unfair", sec[1], sec[2])
	}
}

// idleSetup dispatches and completes A's only read at 1 ms while B (pid 2)
// has requests queued; it returns the scheduler, B's requests and the
// result of Dispatch(1 ms).
func idleSetup(t *testing.T, tun Tunables, dev Device, bOp byte) (Scheduler, *Request, int64) {
	t.Helper()
	s := mustNew(t, "bfq", tun, dev)
	a := rq(0, 'R', 0, 256, 1)
	insert(t, s, 0, a)
	for i := 1; i <= 10; i++ {
		insert(t, s, 0, rq(i, bOp, 1_000_000+uint64(264*i), 256, 2))
	}
	r, _ := s.Dispatch(0)
	if r != a {
		t.Fatalf("first dispatch = %d, want A's read", r.ID)
	}
	r.Dispatch = 0
	s.Complete(r, ms)
	r, wake := s.Dispatch(ms)
	return s, r, wake
}

func TestBFQIdling(t *testing.T) {
	cases := []struct {
		name string
		tun  Tunables
		dev  Device
		bOp  byte
		wake int64 // -1: no idling, B is served at once
	}{
		{"rotational low_latency=0", Tunables{"low_latency": 0}, rotDisk, 'R', 9 * ms},
		{"rotational slice_idle=3", Tunables{"low_latency": 0, "slice_idle": 3}, rotDisk, 'R', 4 * ms},
		{"rotational slice_idle_us=2500", Tunables{"low_latency": 0, "slice_idle_us": 2500}, rotDisk, 'R', 3*ms + ms/2},
		{"rotational slice_idle=0", Tunables{"low_latency": 0, "slice_idle": 0}, rotDisk, 'R', -1},
		// Defaults: both new queues are weight-raised, so idling is
		// neither needed for guarantees nor allowed for throughput.
		{"rotational default, two sync", nil, rotDisk, 'R', -1},
		// A weight-raised reader against a non-raised async writer:
		// idling protects it, for max(slice_idle, 20 ms).
		{"rotational default, vs async writer", nil, rotDisk, 'W', 21 * ms},
		{"non-rotational default", nil, ssd, 'R', -1},
		{"non-rotational low_latency=0", Tunables{"low_latency": 0}, ssd, 'R', -1},
		{"non-rotational strict_guarantees", Tunables{"strict_guarantees": 1}, ssd, 'R', 21 * ms},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, r, wake := idleSetup(t, c.tun, c.dev, c.bOp)
			if c.wake < 0 {
				if r == nil || r.PID != 2 {
					t.Fatalf("Dispatch = %v, %d; want B's request at once", r, wake)
				}
				return
			}
			if r != nil || wake != c.wake {
				t.Fatalf("Dispatch = %v, wake %d; want nil, wake %d", r, wake, c.wake)
			}
		})
	}
}

func TestBFQIdlingEnds(t *testing.T) {
	tun := Tunables{"low_latency": 0}
	// A new request of the idling queue's process is dispatched at once.
	s, _, _ := idleSetup(t, tun, rotDisk, 'R')
	a2 := rq(20, 'R', 264, 256, 1)
	insert(t, s, 3*ms, a2)
	if r, _ := s.Dispatch(3 * ms); r != a2 {
		t.Fatalf("after A's new request Dispatch = %v, want it", r)
	}
	// Nothing arrives: at the wake time the queue expires and B runs.
	s, _, _ = idleSetup(t, tun, rotDisk, 'R')
	if r, _ := s.Dispatch(5 * ms); r != nil {
		t.Fatal("idling ended early")
	}
	if r, _ := s.Dispatch(9 * ms); r == nil || r.PID != 2 {
		t.Fatalf("at the wake time Dispatch = %v, want B's request", r)
	}
	// Another process's arrival does not end the idling when idling
	// boosts throughput (no weight raising).
	s, _, _ = idleSetup(t, tun, rotDisk, 'R')
	insert(t, s, 2*ms, rq(30, 'R', 9_000_000, 256, 3))
	if r, w := s.Dispatch(2 * ms); r != nil || w != 9*ms {
		t.Fatalf("Dispatch = %v, %d; want nil, 9 ms", r, w)
	}
}

func TestBFQHwTagDetection(t *testing.T) {
	for _, c := range []struct {
		dev   Device
		depth int
		want  int
	}{{rotDisk, 1, 0}, {ssd, 32, 1}} {
		s := mustNew(t, "bfq", Tunables{"low_latency": 0}, c.dev)
		var rs []*Request
		for i := 0; i < 400; i++ {
			rs = append(rs, rq(i, 'R', uint64(i)*997_003%50_000_000, 8, uint32(1+i%8)))
		}
		insert(t, s, 0, rs...)
		run(t, s, 0, ms, c.depth, 0, nil)
		if got := s.(*bfqSched).hwTag; got != c.want {
			t.Fatalf("rotational=%v depth %d: hw_tag %d, want %d", c.dev.Rotational, c.depth, got, c.want)
		}
	}
}

func TestBFQChooseReq(t *testing.T) {
	at := func(sector uint64) *Request { return rq(int(sector), 'R', sector, 8, 1) }
	cases := []struct {
		tun  Tunables
		want uint64
	}{
		// Head at 10000: 10100 is 100 ahead, 9960 is 40 behind, costing
		// 40·back_seek_penalty.
		{nil, 9960},
		{Tunables{"back_seek_penalty": 3}, 10100},
		// back_seek_max 0 KiB: any backward seek wraps.
		{Tunables{"back_seek_max": 0}, 10100},
	}
	for _, c := range cases {
		b := mustNew(t, "bfq", c.tun, rotDisk).(*bfqSched)
		if got := b.chooseReq(at(10100), at(9960), 10000); got.Sector != c.want {
			t.Errorf("%v: chose %d, want %d", c.tun, got.Sector, c.want)
		}
	}
	b := mustNew(t, "bfq", nil, rotDisk).(*bfqSched)
	// Both beyond back_seek_max behind: the one further behind.
	if got := b.chooseReq(at(100), at(200), 1_000_000); got.Sector != 100 {
		t.Errorf("both wrapped: chose %d", got.Sector)
	}
	// Sync beats async whatever the position.
	w := rq(1, 'W', 10001, 8, 1)
	if got := b.chooseReq(w, at(900_000), 10000); got == w {
		t.Error("async preferred over sync")
	}
}

func TestBFQFifoExpire(t *testing.T) {
	for _, c := range []struct {
		expire int64
		early  bool
	}{{125, true}, {5000, false}} {
		s := mustNew(t, "bfq", Tunables{"low_latency": 0, "fifo_expire_sync": c.expire}, rotDisk)
		z := rq(0, 'R', 5_000_000, 8, 1)
		insert(t, s, 0, z)
		if r, _ := s.Dispatch(0); r != z {
			t.Fatal("first dispatch")
		}
		// x is far behind the head (beyond back_seek_max): the sweep
		// leaves it for last unless its FIFO deadline passes.
		x := rq(1, 'R', 1_000_000, 8, 1)
		var ys []*Request
		for i := 0; i < 30; i++ {
			ys = append(ys, rq(2+i, 'R', 6_000_000+uint64(100*i), 8, 1))
		}
		insert(t, s, 0, x)
		insert(t, s, 0, ys...)
		s.Complete(z, 10*ms)
		out := run(t, s, 10*ms, 10*ms, 1, 0, nil)
		pos := -1
		for i, r := range out {
			if r == x {
				pos = i
			}
		}
		if c.early && (pos < 0 || pos == len(out)-1 || x.Dispatch < 125*ms || x.Dispatch > 200*ms) {
			t.Fatalf("fifo_expire_sync=%d: x dispatched at %d ms (position %d of %d), want soon after its deadline",
				c.expire, x.Dispatch/ms, pos, len(out))
		}
		if !c.early && pos != len(out)-1 {
			t.Fatalf("fifo_expire_sync=%d: x at position %d of %d, want last", c.expire, pos, len(out))
		}
	}
}

func TestBFQPreemption(t *testing.T) {
	cases := []struct {
		name    string
		tun     Tunables
		inServ  byte // op of the in-service process's requests
		preempt bool
	}{
		// The new reader is weight-raised (weight 1200 > 40).
		{"default, async writer in service", nil, 'W', true},
		// strict_guarantees: the writer is worth idling for, but the
		// reader's higher weight still preempts it.
		{"strict, async writer in service", Tunables{"strict_guarantees": 1}, 'W', true},
		// Equal weights, the in-service reader is worth idling for and
		// the newcomer has no service hole to recover: no preemption.
		{"low_latency=0, reader in service", Tunables{"low_latency": 0}, 'R', false},
		// The in-service async writer is not worth idling for: a newly
		// busy queue preempts it even with equal weight.
		{"low_latency=0, async writer in service", Tunables{"low_latency": 0}, 'W', true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, "bfq", c.tun, rotDisk)
			for i := 0; i < 20; i++ {
				insert(t, s, 0, rq(i, c.inServ, uint64(16*i), 8, 1))
			}
			r, _ := s.Dispatch(0)
			s.Complete(r, ms)
			reader := rq(100, 'R', 9_000_000, 8, 2)
			insert(t, s, 2*ms, reader)
			r, _ = s.Dispatch(2 * ms)
			if (r == reader) != c.preempt {
				t.Fatalf("Dispatch = request %d (pid %d), preemption expected: %v", r.ID, r.PID, c.preempt)
			}
		})
	}
}

func TestBFQWeightRaisingEnds(t *testing.T) {
	// Weight raising ends after max_service_from_wr = 120000 sectors.
	s := mustNew(t, "bfq", nil, rotDisk)
	for i := 0; i < 200; i++ {
		insert(t, s, 0, rq(i, 'R', uint64(1032*i), 1024, 1))
	}
	b := s.(*bfqSched)
	q := b.syncQ[1]
	if q.wrCoeff != bfqWrCoeff {
		t.Fatalf("new queue not weight-raised: %d", q.wrCoeff)
	}
	run(t, s, 0, ms, 1, 117, nil) // 117·1024 = 119808 sectors
	if q.wrCoeff != bfqWrCoeff {
		t.Fatal("weight raising ended before 120000 sectors")
	}
	run(t, s, 200*ms, ms, 1, 1, nil)
	if q.wrCoeff != 1 || q.weight != bfqWeight {
		t.Fatalf("weight raising still on after %d sectors of service", q.serviceFromWr)
	}
}

func TestBFQWeightRaisedShare(t *testing.T) {
	// A weight-raised reader (weight 40·30) against a greedy async
	// writer (weight 40, charged 3x its sectors): B-WF2Q+ gives the
	// reader the device almost entirely while raised.
	s := mustNew(t, "bfq", nil, rotDisk)
	for i := 0; i < 1000; i++ {
		insert(t, s, 0, rq(i, 'R', uint64(i)*264, 256, 1), rq(1000+i, 'W', 50_000_000+uint64(i)*264, 256, 2))
	}
	out := run(t, s, 0, ms, 1, 400, nil)
	var sec [3]int
	for _, r := range out {
		sec[r.PID] += int(r.Sectors)
	}
	if sec[1] < 9*(sec[1]+sec[2])/10 {
		t.Fatalf("runs %v: reader got %d of %d sectors, want >= 90%%", runs(out), sec[1], sec[1]+sec[2])
	}
	// Without low_latency the two share by weight: the writer, charged
	// 3x, gets about a quarter of the sectors.
	s = mustNew(t, "bfq", Tunables{"low_latency": 0}, rotDisk)
	for i := 0; i < 1000; i++ {
		insert(t, s, 0, rq(i, 'R', uint64(i)*264, 256, 1), rq(1000+i, 'W', 50_000_000+uint64(i)*264, 256, 2))
	}
	out = run(t, s, 0, ms, 1, 400, nil)
	sec = [3]int{}
	for _, r := range out {
		sec[r.PID] += int(r.Sectors)
	}
	if f := float64(sec[2]) / float64(sec[1]+sec[2]); f < 0.15 || f > 0.4 {
		t.Fatalf("runs %v: writer share %.2f, want about 1/4", runs(out), f)
	}
}
