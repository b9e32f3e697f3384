package window

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestReadCostNs: the cost of a read at the origin is the device time it
// takes from the others, not its time in the queue. Behind a 500 IOPS cap
// at queue depth 16, a 4 KiB read and a 64 KiB promotion take one token
// each, however long a burst of promotions queues behind itself; on a
// device serving one request at a time the cost follows the service.
func TestReadCostNs(t *testing.T) {
	const block = 128 // sectors, 64 KiB
	// fifo serves, one at a time at gap ns each in dispatch order, a
	// closed loop of 16 4 KiB reads (each completion dispatches the next)
	// and the block reads dispatched at the times in blocks: a virtio
	// disk's queue holds them all, so a burst of promotions waits behind
	// itself and its service times (dispatch to completion) grow.
	fifo := func(n int, gap int64, blocks []int64) []trace.Request {
		var reqs []trace.Request
		var free int64
		pending := slices.Clone(blocks)
		serve := func(dispatch int64, sectors uint32) int64 {
			done := max(dispatch, free) + gap
			free = done
			reqs = append(reqs, trace.Request{Op: trace.Read, Sector: uint64(len(reqs)) * 1024, Sectors: sectors,
				Arrival: dispatch, Dispatch: dispatch, Complete: done})
			return done
		}
		inflight := make([]int64, 16) // dispatch times of fio's next reads
		for len(reqs) < n {
			i := slices.Index(inflight, slices.Min(inflight))
			for len(pending) > 0 && pending[0] <= inflight[i] {
				serve(pending[0], block)
				pending = pending[1:]
			}
			inflight[i] = serve(inflight[i], 8)
		}
		slices.SortFunc(reqs, func(a, b trace.Request) int { return cmp.Compare(a.Dispatch, b.Dispatch) })
		return reqs
	}
	burst := make([]int64, 100) // 100 promotions at once, 1 s in
	for i := range burst {
		burst[i] = 1_000_000_000
	}
	var spread []int64 // one every 20 ms
	for i := range 100 {
		spread = append(spread, int64(i)*20_000_000)
	}
	throttled, err := model.NewThrottled(1<<20, model.Throttle{IOPS: 500})
	if err != nil {
		t.Fatal(err)
	}
	serial := model.Default(model.SSD, 1<<20)
	serial.SetServers(1)
	// One request at a time: 4 KiB reads take 100 µs, block reads 400 µs.
	var one []trace.Request
	var now int64
	for i := range 200 {
		svc, sectors := int64(100_000), uint32(8)
		if i%10 == 0 {
			svc, sectors = 400_000, block
		}
		one = append(one, trace.Request{Op: trace.Read, Sector: uint64(i) * 1024, Sectors: sectors,
			Arrival: now, Dispatch: now, Complete: now + svc})
		now += svc + 50_000
	}
	for _, c := range []struct {
		name       string
		reqs       []trace.Request
		m          *model.Model
		read, want float64 // ns: the 4 KiB reads' cost, and blockNs/readNs
	}{
		{"throttled, a burst of promotions", fifo(1000, 2_000_000, burst), throttled, 2e6, 1},
		{"throttled, promotions spread out", fifo(1000, 2_000_000, spread), throttled, 2e6, 1},
		{"one at a time", one, serial, 1e5, 4},
	} {
		var scratch []int64
		readNs, blockNs := readCostNs(c.reqs, block, c.m, &scratch)
		if math.Abs(readNs-c.read) > 0.05*c.read || math.Abs(blockNs/readNs-c.want) > 0.05*c.want {
			t.Errorf("%s: readNs %.0f, blockNs %.0f (ratio %.2f), want %.0f and ratio %.2f", c.name, readNs, blockNs, blockNs/readNs, c.read, c.want)
		}
	}
}
