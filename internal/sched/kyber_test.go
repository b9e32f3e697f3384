package sched

import (
	"fmt"
	"strings"
	"testing"
)

// feed completes n requests of op, one at a time, with the given total
// (insert to completion) and I/O (dispatch to completion) latencies; the
// completions are step ns apart starting at start. It returns the time
// after the last one.
func feed(t *testing.T, k *kyberSched, op byte, n int, total, io, start, step int64) int64 {
	t.Helper()
	now := start
	for i := 0; i < n; i++ {
		r := rq(i, op, uint64(i)*100_000+1_000_000_000, 8, 1)
		r.Insert = now
		if k.Insert(r, now) {
			t.Fatal("merged")
		}
		got, _ := k.Dispatch(now)
		if got != r {
			t.Fatalf("Dispatch = %v, want the fed request (depths %v, in flight %v)", got, k.depth, k.inflight)
		}
		r.Insert, r.Dispatch = now-total, now-io
		k.Complete(r, now)
		now += step
	}
	return now
}

func kyberFor(t *testing.T, tun Tunables) *kyberSched {
	return mustNew(t, "kyber", tun, ssd).(*kyberSched)
}

// timer runs the kyber timer (due 100 ms after the first completion).
func timer(k *kyberSched, now int64) int64 {
	k.Dispatch(now)
	return now
}

func TestKyberDepthAdjustment(t *testing.T) {
	type phase struct {
		rTotal, rIO, wTotal, wIO int64
		want                     [kyDomains]int
	}
	cases := []struct {
		name   string
		tun    Tunables
		phases []phase
	}{
		{"all within target: no change", nil, []phase{
			{ms / 4, ms / 4, ms, ms, [4]int{256, 128, 64, 16}},
		}},
		// Reads miss their 2 ms target (I/O p90 bad = congestion):
		// the domain that meets its target (writes, p99 bucket 0 of 8)
		// is throttled to 1/4; reads would grow but are at their cap.
		{"reads congested: writes throttled", nil, []phase{
			{5 * ms, 5 * ms, ms, ms, [4]int{256, 32, 64, 16}},
		}},
		// Writes miss their 10 ms target: reads, which are fine, are
		// throttled; then, without congestion, reads whose total
		// latency (queueing included) misses the target grow back by
		// (p99 bucket+1)/4 per timer period.
		{"writes congested: reads throttled, then grow back", nil, []phase{
			{ms / 4, ms / 4, 50 * ms, 50 * ms, [4]int{64, 128, 64, 16}},
			{3 * ms, ms / 4, ms, ms, [4]int{96, 128, 64, 16}},
			{3 * ms, ms / 4, ms, ms, [4]int{144, 128, 64, 16}},
			{ms / 4, ms / 4, ms, ms, [4]int{144, 128, 64, 16}},
		}},
		// A larger read target turns the same 5 ms latency into good.
		{"read_lat_nsec=8ms", Tunables{"read_lat_nsec": 8_000_000}, []phase{
			{5 * ms, 5 * ms, ms, ms, [4]int{256, 128, 64, 16}},
		}},
		// write_lat_nsec=40ms: 50 ms writes are still bad (> target),
		// reads at 1/8 of their target are throttled.
		{"write_lat_nsec=40ms", Tunables{"write_lat_nsec": 40_000_000}, []phase{
			{ms / 4, ms / 4, 50 * ms, 50 * ms, [4]int{64, 128, 64, 16}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := kyberFor(t, c.tun)
			now := int64(0)
			for i, p := range c.phases {
				start := now
				now = feed(t, k, 'R', 520, p.rTotal, p.rIO, now, ms/20)
				feed(t, k, 'W', 520, p.wTotal, p.wIO, now, ms/20)
				now = timer(k, start+200*ms)
				if k.depth != p.want {
					t.Fatalf("phase %d: depths %v, want %v", i, k.depth, p.want)
				}
			}
		})
	}
}

func TestKyberFewSamplesAndRememberedP99(t *testing.T) {
	// Reads are too few (100 < 500 samples) to be evaluated before 1 s;
	// writes are evaluated at once, are fine, and their p99 is remembered.
	k := kyberFor(t, nil)
	now := feed(t, k, 'R', 100, 5*ms, 5*ms, 0, ms/10)
	feed(t, k, 'W', 600, ms, ms, now, ms/10)
	timer(k, 210*ms)
	if k.depth != kyberDepth || k.domainP99[kyWrite] != 0 {
		t.Fatalf("depths %v (p99 %v): want unchanged", k.depth, k.domainP99)
	}
	// After 1 s the reads' p90 is evaluated: congestion. The writes have
	// no new p99 (too few samples), so the remembered one throttles them.
	feed(t, k, 'R', 10, 5*ms, 5*ms, 1300*ms, ms)
	timer(k, 1500*ms)
	if k.depth[kyRead] != 256 || k.depth[kyWrite] != 32 {
		t.Fatalf("after 1 s: depths %v, want writes throttled to 32", k.depth)
	}
}

func TestKyberThrottledWake(t *testing.T) {
	k := kyberFor(t, nil)
	now := feed(t, k, 'R', 520, 5*ms, 5*ms, 0, ms/20)
	feed(t, k, 'W', 520, ms, ms, now, ms/20)
	now = timer(k, 200*ms)
	if k.depth[kyWrite] != 32 {
		t.Fatalf("depths %v", k.depth)
	}
	read := rq(1, 'R', 7, 8, 1)
	insert(t, k, now, read)
	for i := 0; i < 40; i++ {
		insert(t, k, now, rq(10+i, 'W', uint64(i)*1000, 8, 2))
	}
	var inflight []*Request
	for {
		r, w := k.Dispatch(now)
		if r == nil {
			if w != -1 {
				t.Fatalf("wake %d with no timer pending", w)
			}
			break
		}
		r.Dispatch = now
		inflight = append(inflight, r)
	}
	if len(inflight) != 33 || k.Queued() != 8 {
		t.Fatalf("%d dispatched, %d queued; want 1 read + 32 writes, 8 writes throttled", len(inflight), k.Queued())
	}
	k.Complete(read, now+ms)
	if r, w := k.Dispatch(now + ms); r != nil || w != now+101*ms {
		t.Fatalf("Dispatch = %v, wake %d; want nil, wake at the timer (%d)", r, w, now+101*ms)
	}
}

func TestKyberRoundRobinBatches(t *testing.T) {
	k := kyberFor(t, nil)
	for i := 0; i < 40; i++ {
		insert(t, k, 0, rq(i, 'R', uint64(i)*1000, 8, 1), rq(100+i, 'W', 50_000_000+uint64(i)*1000, 8, 2))
	}
	got := rle(run(t, k, 0, ms, 1, 0, nil))
	if want := "R16 W8 R16 W8 R8 W24"; got != want {
		t.Fatalf("dispatch = %s, want %s", got, want)
	}
}

func TestKyberWriteFloodCannotStarveReads(t *testing.T) {
	k := kyberFor(t, nil)
	for i := 0; i < 200; i++ {
		insert(t, k, 0, rq(i, 'W', uint64(i)*1000, 8, 2))
	}
	var out []*Request
	r, _ := k.Dispatch(0)
	out = append(out, r)
	k.Complete(r, ms)
	for i := 0; i < 5; i++ {
		insert(t, k, ms, rq(1000+i, 'R', 90_000_000+uint64(i)*1000, 8, 1))
	}
	out = append(out, run(t, k, ms, ms, 4, 0, nil)...)
	if got := rle(out); !strings.HasPrefix(got, "W8 R5 ") {
		t.Fatalf("dispatch = %s, want the reads right after the first write batch", got)
	}
}

// rle run-length encodes dispatch directions, e.g. "R16 W8".
func rle(rs []*Request) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].Op == rs[i].Op {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s%d", rs[i].Op, j-i))
		i = j
	}
	return strings.Join(parts, " ")
}
