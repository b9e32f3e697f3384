package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// seekDisk costs a fixed time plus one proportional to the distance from
// the previous request's end: an elevator that sorts shortens it.
type seekDisk struct{ pos uint64 }

func (d *seekDisk) Service(_ trace.Op, sector uint64, sectors uint32) int64 {
	dist := sector - d.pos
	if sector < d.pos {
		dist = d.pos - sector
	}
	d.pos = sector + uint64(sectors)
	return ms + int64(dist/1024)
}

// randomBurst is n 4 KiB reads released at once at random sectors of the
// first 512 GiB, the same on every call (seeded).
func randomBurst(n int) []trace.Request {
	rng := rand.New(rand.NewPCG(1, 2))
	var reqs []trace.Request
	for range n {
		reqs = append(reqs, openReq(0, rng.Uint64N(1<<30), 8, trace.Read))
	}
	return reqs
}

// TestTagsQueueInTheDevice checks Config.Tags: 64 random reads released at
// once on one server. Without tags beyond the server the elevator holds
// the backlog and mq-deadline's sector order shortens the seeks; with 64
// tags every request is dispatched at once, waits in the device in
// arrival order, and the elevator's order cannot matter, as on a fast
// device whose queue is deeper than its load. The timing is the device's
// FIFO: the i-th request completes after i+1 services.
func TestTagsQueueInTheDevice(t *testing.T) {
	reqs := randomBurst(64)
	w := mustWindow(t, reqs, LoopOpen)
	newDisk := func(int64) DeviceModel { return &seekDisk{} }
	run := func(name string, tags int) Result {
		dev := sched.Device{MaxSectors: 2560, QueueDepth: max(tags, 1)}
		return mustRun(t, w, Config{Scheduler: name, Device: dev, Servers: 1, Tags: tags, NewDisk: newDisk, KeepPerRequest: true})
	}
	none0, dl0 := run("none", 0), run("mq-deadline", 0)
	if dl0.TotalServiceNs >= none0.TotalServiceNs*9/10 {
		t.Errorf("one tag: mq-deadline %d ns, none %d ns; want the elevator's sorting to save over 10 %%", dl0.TotalServiceNs, none0.TotalServiceNs)
	}
	none64, dl64 := run("none", 64), run("mq-deadline", 64)
	if dl64.TotalServiceNs != none64.TotalServiceNs || dl64.MeanResponseNs != none64.MeanResponseNs {
		t.Errorf("64 tags: mq-deadline %d ns (mean response %.0f), none %d ns (%.0f); want the same: the elevator holds nothing",
			dl64.TotalServiceNs, dl64.MeanResponseNs, none64.TotalServiceNs, none64.MeanResponseNs)
	}
	if none64.TotalServiceNs != none0.TotalServiceNs {
		t.Errorf("none: %d ns with 64 tags, %d ns with one; want the same arrival order", none64.TotalServiceNs, none0.TotalServiceNs)
	}
	// The device serves its queue first in first out: each response is the
	// sum of the services up to it, and the last one is the makespan.
	d := &seekDisk{}
	var at int64
	for i, q := range reqs {
		at += d.Service(q.Op, q.Sector, q.Sectors)
		if got := none64.ResponseNs[i]; got != at {
			t.Fatalf("request %d: response %d ns, want %d (FIFO in the device)", i, got, at)
		}
	}
	if none64.MakespanNs != at {
		t.Errorf("makespan %d ns, want %d", none64.MakespanNs, at)
	}
}

// TestTagsBelowServers checks that tags fewer than the servers mean one
// per server: the same run as Tags 0.
func TestTagsBelowServers(t *testing.T) {
	reqs := []trace.Request{openReq(0, 0, 8, trace.Read), openReq(0, 1<<20, 8, trace.Read), openReq(0, 1<<10, 8, trace.Read)}
	w := mustWindow(t, reqs, LoopOpen)
	dev := sched.Device{MaxSectors: 2560, QueueDepth: 2}
	a := mustRun(t, w, Config{Scheduler: "mq-deadline", Device: dev, Servers: 2, NewDisk: constModel(ms, 0), KeepPerRequest: true})
	b := mustRun(t, w, Config{Scheduler: "mq-deadline", Device: dev, Servers: 2, Tags: 1, NewDisk: constModel(ms, 0), KeepPerRequest: true})
	if a.MakespanNs != b.MakespanNs || a.MeanResponseNs != b.MeanResponseNs {
		t.Errorf("Tags 1 on 2 servers: makespan %d, mean %.0f; Tags 0: %d, %.0f; want the same", b.MakespanNs, b.MeanResponseNs, a.MakespanNs, a.MeanResponseNs)
	}
}

// TestTagsLongDeviceQueue: 5,000 requests dispatched at once into a
// device of one server stay first in first out while the device's queue
// is compacted under them.
func TestTagsLongDeviceQueue(t *testing.T) {
	var reqs []trace.Request
	for i := range 5000 {
		reqs = append(reqs, openReq(0, uint64(i)*64, 8, trace.Read))
	}
	w := mustWindow(t, reqs, LoopOpen)
	dev := sched.Device{MaxSectors: 2560, QueueDepth: 5000}
	res := mustRun(t, w, Config{Scheduler: "none", Device: dev, Servers: 1, Tags: 5000, NewDisk: constModel(ms, 0), KeepPerRequest: true})
	for i, got := range res.ResponseNs {
		if want := int64(i+1) * ms; got != want {
			t.Fatalf("request %d: response %d ns, want %d", i, got, want)
		}
	}
}

// TestGateDelaysService checks Config.NewGate: 200 reads released at once
// on 8 servers of 100 µs behind a bucket of 1,000 IOPS (burst 1). The
// bucket, not the servers, sets the pace: request i starts at
// max(0, i−1) ms, first in first out, including those that waited in the
// elevator for one of the 64 tags.
func TestGateDelaysService(t *testing.T) {
	var reqs []trace.Request
	for i := range 200 {
		reqs = append(reqs, openReq(0, uint64(i)<<20, 8, trace.Read))
	}
	w := mustWindow(t, reqs, LoopOpen)
	const svc = ms / 10
	dev := sched.Device{MaxSectors: 2560, QueueDepth: 64}
	cfg := Config{Scheduler: "none", Device: dev, Servers: 8, Tags: 64, NewDisk: constModel(svc, 0), KeepPerRequest: true}
	free := mustRun(t, w, cfg)
	if want := int64(200/8) * svc; free.MakespanNs != want {
		t.Errorf("no gate: makespan %d ns, want %d", free.MakespanNs, want)
	}
	cfg.NewGate = func() Gate { return model.Throttle{IOPS: 1000, BurstIOs: 1}.NewBucket() }
	res := mustRun(t, w, cfg)
	for i, got := range res.ResponseNs {
		if want := int64(max(0, i-1))*ms + svc; got < want-1 || got > want+1 {
			t.Fatalf("request %d: response %d ns, want %d", i, got, want)
		}
	}
	again := mustRun(t, w, cfg)
	if again.MakespanNs != res.MakespanNs || again.TotalServiceNs != res.TotalServiceNs {
		t.Errorf("a second run differs: makespan %d against %d", again.MakespanNs, res.MakespanNs)
	}
}
