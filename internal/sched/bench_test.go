package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// benchPool recycles requests so that the benchmarks measure the
// schedulers, not the allocation of requests.
type benchPool struct {
	free []*Request
	rng  *rand.Rand
	id   int32
	pos  [16]uint64
}

func newBenchPool() *benchPool {
	p := &benchPool{rng: rand.New(rand.NewPCG(1, 2))}
	for i := range p.pos {
		p.pos[i] = uint64(i) * 100_000_000
	}
	return p
}

// get returns a request of one of 16 processes: 70 % reads, 30 % async
// writes; half of them continue the process's stream with a small gap,
// the others are random.
func (p *benchPool) get(now int64) *Request {
	var r *Request
	if k := len(p.free); k > 0 {
		r = p.free[k-1]
		p.free = p.free[:k-1]
		merged := r.Merged[:0]
		*r = Request{Merged: merged}
	} else {
		r = &Request{}
	}
	p.id++
	pid := p.rng.IntN(16)
	r.ID, r.PID, r.Sectors, r.Insert = p.id, uint32(pid+1), 8<<p.rng.IntN(4), now
	if p.rng.IntN(10) < 7 {
		r.Op, r.Flags = trace.Read, trace.Sync
	} else {
		r.Op = trace.Write
	}
	if p.rng.IntN(2) == 0 {
		r.Sector = p.pos[pid]
		p.pos[pid] += uint64(r.Sectors) + 8
	} else {
		r.Sector = p.rng.Uint64N(1 << 31)
	}
	return r
}

func (p *benchPool) put(r *Request) {
	for _, m := range r.Merged {
		p.put(m)
	}
	p.free = append(p.free, r)
}

var benchDevs = []struct {
	name string
	dev  Device
}{
	{"hdd", Device{Rotational: true, MaxSectors: 2560, QueueDepth: 1}},
	{"ssd", Device{Rotational: false, MaxSectors: 2560, QueueDepth: 32}},
}

// BenchmarkSteady measures one Insert + Dispatch + Complete with about n
// requests queued.
func BenchmarkSteady(b *testing.B) {
	for _, name := range Names() {
		for _, d := range benchDevs {
			for _, n := range []int{64, 1024} {
				b.Run(fmt.Sprintf("%s/%s/q%d", name, d.name, n), func(b *testing.B) {
					s := mustNew(b, name, nil, d.dev)
					p := newBenchPool()
					now := int64(0)
					for i := 0; i < n; i++ {
						s.Insert(p.get(now), now)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						s.Insert(p.get(now), now)
						r, wake := s.Dispatch(now)
						if r == nil && wake >= 0 {
							now = wake
							r, _ = s.Dispatch(now)
						}
						now += 50_000
						if r != nil {
							r.Dispatch = now - 50_000
							s.Complete(r, now)
							p.put(r)
						}
					}
				})
			}
		}
	}
}

// BenchmarkReplay replays 100k open-loop arrivals (mean 40 us apart) on a
// device with QueueDepth parallel servers and a fixed service time, with a
// minimal event loop, and reports the cost per simulated request.
func BenchmarkReplay(b *testing.B) {
	const n = 100_000
	for _, name := range Names() {
		for _, d := range benchDevs {
			b.Run(name+"/"+d.name, func(b *testing.B) {
				svc := int64(35_000)
				if d.dev.QueueDepth > 1 {
					svc = 35_000 * int64(d.dev.QueueDepth)
				}
				p := newBenchPool()
				reqs := make([]*Request, n)
				arr := make([]int64, n)
				now := int64(0)
				for i := range reqs {
					now += p.rng.Int64N(80_000)
					arr[i] = now
					reqs[i] = p.get(now)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for it := 0; it < b.N; it++ {
					for _, r := range reqs {
						merged := r.Merged[:0]
						sec, sz := r.Sector, r.Sectors
						*r = Request{ID: r.ID, PID: r.PID, Op: r.Op, Flags: r.Flags, Sector: sec, Sectors: sz, Merged: merged}
					}
					replay(mustNew(b, name, nil, d.dev), reqs, arr, d.dev.QueueDepth, svc)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/req")
			})
		}
	}
}

// replay is a minimal discrete-event loop: arrivals in order, depth
// servers, fixed service time, elevator wakes honoured.
func replay(s Scheduler, reqs []*Request, arr []int64, depth int, svc int64) {
	type slot struct {
		r *Request
		t int64
	}
	slots := make([]slot, 0, depth)
	ai, wake := 0, int64(-1)
	now := int64(0)
	for ai < len(reqs) || len(slots) > 0 || s.Queued() > 0 {
		// next event
		next := int64(-1)
		if ai < len(reqs) {
			next = arr[ai]
		}
		for _, sl := range slots {
			if next < 0 || sl.t < next {
				next = sl.t
			}
		}
		if wake >= 0 && (next < 0 || wake < next) {
			next = wake
		}
		if next < 0 {
			panic("stall")
		}
		if next > now {
			now = next
		}
		k := 0
		for _, sl := range slots {
			if sl.t <= now {
				s.Complete(sl.r, now)
			} else {
				slots[k] = sl
				k++
			}
		}
		slots = slots[:k]
		for ai < len(reqs) && arr[ai] <= now {
			reqs[ai].Insert = now
			s.Insert(reqs[ai], now)
			ai++
		}
		wake = -1
		for len(slots) < depth {
			r, w := s.Dispatch(now)
			if r == nil {
				if w > now {
					wake = w
				}
				break
			}
			r.Dispatch = now
			slots = append(slots, slot{r, now + svc})
		}
	}
}
