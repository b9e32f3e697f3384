package sched

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

const ms = int64(1e6)

// rq builds a request. op: 'R' read, 'W' async write, 'S' sync write,
// 'F' flush, 'D' discard.
func rq(id int, op byte, sector uint64, sectors uint32, pid uint32) *Request {
	r := &Request{ID: int32(id), Sector: sector, Sectors: sectors, PID: pid}
	switch op {
	case 'R':
		r.Op, r.Flags = trace.Read, trace.Sync
	case 'W':
		r.Op = trace.Write
	case 'S':
		r.Op, r.Flags = trace.Write, trace.Sync
	case 'F':
		r.Op = trace.Flush
	case 'D':
		r.Op = trace.Discard
	default:
		panic("bad op")
	}
	return r
}

func mustNew(t testing.TB, name string, tun Tunables, dev Device) Scheduler {
	t.Helper()
	s, err := New(name, tun, dev)
	if err != nil {
		t.Fatalf("New(%s, %v): %v", name, tun, err)
	}
	return s
}

func insert(t testing.TB, s Scheduler, now int64, rs ...*Request) {
	t.Helper()
	for _, r := range rs {
		r.Insert = now
		if s.Insert(r, now) {
			t.Fatalf("%s: request %d merged unexpectedly", s.Name(), r.ID)
		}
	}
}

// run drives s in virtual time with a device of the given depth in which
// every request takes svc ns, until nothing is queued or in flight or
// until limit dispatches. Requests in arrivals are inserted at their
// Insert time. It returns the dispatched requests in order.
func run(t testing.TB, s Scheduler, now, svc int64, depth, limit int, arrivals []*Request) []*Request {
	t.Helper()
	type fl struct {
		r *Request
		t int64
	}
	var inflight []fl
	var out []*Request
	sort.SliceStable(arrivals, func(i, j int) bool { return arrivals[i].Insert < arrivals[j].Insert })
	ai := 0
	for steps := 0; steps < 10_000_000; steps++ {
		for ai < len(arrivals) && arrivals[ai].Insert <= now {
			s.Insert(arrivals[ai], now)
			ai++
		}
		wake := int64(-1)
		for len(inflight) < depth && (limit <= 0 || len(out) < limit) {
			r, w := s.Dispatch(now)
			if r == nil {
				wake = w
				break
			}
			r.Dispatch = now
			out = append(out, r)
			inflight = append(inflight, fl{r, now + svc})
		}
		if limit > 0 && len(out) >= limit {
			return out
		}
		next := int64(-1)
		if len(inflight) > 0 {
			next = inflight[0].t
			for _, f := range inflight {
				if f.t < next {
					next = f.t
				}
			}
		}
		if wake >= 0 && (next < 0 || wake < next) {
			next = wake
		}
		if ai < len(arrivals) && (next < 0 || arrivals[ai].Insert < next) {
			next = arrivals[ai].Insert
		}
		if next < 0 {
			if s.Queued() != 0 {
				t.Fatalf("%s: stalled at %d ns with %d queued", s.Name(), now, s.Queued())
			}
			return out
		}
		if next < now {
			t.Fatalf("%s: time went back from %d to %d", s.Name(), now, next)
		}
		now = next
		k := 0
		for _, f := range inflight {
			if f.t <= now {
				f.r.Complete = now
				s.Complete(f.r, now)
			} else {
				inflight[k] = f
				k++
			}
		}
		inflight = inflight[:k]
	}
	t.Fatalf("%s: did not finish", s.Name())
	return nil
}

func ids(rs []*Request) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, r.ID)
	}
	return b.String()
}

// runs returns the lengths of maximal runs of equal PIDs.
func runs(rs []*Request) []int {
	var out []int
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].PID == rs[i].PID {
			j++
		}
		out = append(out, j-i)
		i = j
	}
	return out
}
