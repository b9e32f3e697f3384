package sched

import (
	"strings"
	"testing"
)

// dispatchN dispatches up to n requests at time now, completing each at
// once.
func dispatchN(s Scheduler, now int64, n int) []*Request {
	var out []*Request
	for i := 0; i < n; i++ {
		r, _ := s.Dispatch(now)
		if r == nil {
			break
		}
		out = append(out, r)
		s.Complete(r, now)
	}
	return out
}

func TestDeadlineSortedOneWay(t *testing.T) {
	s := mustNew(t, "mq-deadline", nil, DefaultDevice)
	insert(t, s, 0, rq(0, 'R', 500, 8, 1), rq(1, 'R', 100, 8, 2), rq(2, 'R', 300, 8, 3),
		rq(3, 'R', 900, 8, 4), rq(4, 'R', 700, 8, 5))
	got := dispatchN(s, 0, 3)
	insert(t, s, ms, rq(5, 'R', 200, 8, 6), rq(6, 'R', 600, 8, 7))
	got = append(got, dispatchN(s, 2*ms, 10)...)
	// Sector order upward from the head; 200 is behind the head after
	// 500, so it waits until the elevator runs out of requests ahead and
	// restarts from the oldest request.
	if g, want := ids(got), "1 2 0 6 4 3 5"; g != want {
		t.Fatalf("order = %q, want %q", g, want)
	}
}

func TestDeadlineReadExpire(t *testing.T) {
	setup := func(tun Tunables) Scheduler {
		s := mustNew(t, "mq-deadline", tun, DefaultDevice)
		insert(t, s, 0, rq(0, 'R', 1000, 8, 1))
		if r, _ := s.Dispatch(0); r.ID != 0 {
			t.Fatal("first dispatch")
		}
		insert(t, s, ms, rq(1, 'R', 50, 8, 2)) // behind the head
		for i := 2; i <= 21; i++ {
			insert(t, s, ms, rq(i, 'R', uint64(2000+100*i), 8, uint32(i)))
		}
		return s
	}
	seq := func(a, b int) string {
		var p []string
		for i := a; i <= b; i++ {
			p = append(p, itoa(i))
		}
		return strings.Join(p, " ")
	}
	cases := []struct {
		name string
		tun  Tunables
		at   int64
		want string
	}{
		// Not expired: the old read behind the head waits for the sweep.
		{"fresh", nil, 2 * ms, seq(2, 21) + " 1"},
		// Expired (inserted at 1 ms, read_expire 500 ms): served as soon
		// as the running batch of fifo_batch=16 (the first request plus
		// 15) ends, then the sweep continues from it.
		{"expired", nil, 600 * ms, seq(2, 16) + " 1 " + seq(17, 21)},
		{"expired batch 4", Tunables{"fifo_batch": 4}, 600 * ms, seq(2, 4) + " 1 " + seq(5, 21)},
		{"expired batch 1", Tunables{"fifo_batch": 1}, 600 * ms, "1 " + seq(2, 21)},
		// read_expire=1000: still fresh at 600 ms.
		{"longer expire", Tunables{"read_expire": 1000}, 600 * ms, seq(2, 21) + " 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := setup(c.tun)
			if got := ids(dispatchN(s, c.at, 100)); got != c.want {
				t.Fatalf("order = %q\nwant    %q", got, c.want)
			}
		})
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestDeadlineWritesStarved(t *testing.T) {
	cases := []struct {
		tun  Tunables
		want string
	}{
		// The model starts like the kernel with last_dir = write, so the
		// first dispatch continues a write "batch".
		{Tunables{"fifo_batch": 1}, "WRRWRRWRRWWW"},
		{Tunables{"fifo_batch": 1, "writes_starved": 1}, "WRWRWRWRWRWR"},
		{Tunables{"fifo_batch": 1, "writes_starved": 0}, "WWWWWWRRRRRR"},
		// Negative: starved is unsigned in the kernel, writes never win.
		{Tunables{"fifo_batch": 1, "writes_starved": -1}, "WRRRRRRWWWWW"},
		{Tunables{"fifo_batch": 2}, "WWRRRRWWRRWW"},
	}
	for _, c := range cases {
		t.Run(c.tun.String(), func(t *testing.T) {
			s := mustNew(t, "mq-deadline", c.tun, DefaultDevice)
			for i := 0; i < 6; i++ {
				insert(t, s, 0, rq(i, 'R', uint64(1000+100*i), 8, 1))
				insert(t, s, 0, rq(10+i, 'W', uint64(50000+100*i), 8, 2))
			}
			var b strings.Builder
			for _, r := range dispatchN(s, ms, 100) {
				if r.IsRead() {
					b.WriteByte('R')
				} else {
					b.WriteByte('W')
				}
			}
			if b.String() != c.want {
				t.Fatalf("directions = %s, want %s", b.String(), c.want)
			}
		})
	}
}

func TestDeadlineFrontMerges(t *testing.T) {
	for _, fm := range []int64{0, 1} {
		s := mustNew(t, "mq-deadline", Tunables{"front_merges": fm}, DefaultDevice)
		x := rq(0, 'R', 90000, 8, 1) // becomes q->last_merge
		a := rq(1, 'R', 100, 8, 1)
		insert(t, s, 0, x, a)
		b := rq(2, 'R', 92, 8, 1) // ends where a starts
		if got := s.Insert(b, 0); got != (fm == 1) {
			t.Fatalf("front_merges=%d: front merge = %v", fm, got)
		}
		if fm == 1 && (a.Sector != 92 || a.Sectors != 16) {
			t.Fatalf("front merge gave [%d,+%d)", a.Sector, a.Sectors)
		}
		c := rq(3, 'R', a.End(), 8, 1) // back merges always happen
		if !s.Insert(c, 0) {
			t.Fatalf("front_merges=%d: back merge refused", fm)
		}
	}
	// The one-hit cache (q->last_merge) front-merges whatever
	// front_merges says, as elv_merge does.
	s := mustNew(t, "mq-deadline", Tunables{"front_merges": 0}, DefaultDevice)
	a := rq(1, 'R', 100, 8, 1)
	insert(t, s, 0, a)
	if !s.Insert(rq(2, 'R', 92, 8, 1), 0) || a.Sector != 92 {
		t.Fatal("last_merge front merge refused")
	}
}

func TestDeadlineMergeCoalesce(t *testing.T) {
	// Back merge into A, then A absorbs C (attempt_back_merge).
	s := mustNew(t, "mq-deadline", nil, DefaultDevice)
	a, c := rq(0, 'W', 0, 8, 1), rq(1, 'W', 16, 8, 1)
	insert(t, s, 0, a, c)
	b := rq(2, 'W', 8, 8, 1)
	if !s.Insert(b, ms) {
		t.Fatal("not merged")
	}
	if a.Sectors != 24 || s.Queued() != 1 || len(a.Merged) != 2 || a.Merged[0] != b || a.Merged[1] != c {
		t.Fatalf("A = [%d,+%d), Queued %d, Merged %v", a.Sector, a.Sectors, s.Queued(), ids(a.Merged))
	}
	// Front merge into C (the last_merge), then A absorbs C
	// (attempt_front_merge) and takes C's older deadline.
	s = mustNew(t, "mq-deadline", nil, DefaultDevice)
	a, c = rq(0, 'W', 0, 8, 1), rq(1, 'W', 16, 8, 1)
	insert(t, s, 0, c)
	insert(t, s, 10*ms, a)
	b = rq(2, 'W', 8, 8, 1)
	if !s.Insert(b, 20*ms) {
		t.Fatal("not merged")
	}
	if a.Sector != 0 || a.Sectors != 24 || s.Queued() != 1 || ids(a.Merged) != "1 2" || a.Deadline != c.Deadline {
		t.Fatalf("A = [%d,+%d) deadline %d, Queued %d, Merged %v", a.Sector, a.Sectors, a.Deadline, s.Queued(), ids(a.Merged))
	}
	if out := run(t, s, 30*ms, ms, 1, 0, nil); len(out) != 1 || out[0] != a {
		t.Fatalf("dispatched %v", ids(out))
	}
	// Max sectors stops the chain.
	s = mustNew(t, "mq-deadline", nil, Device{MaxSectors: 16, QueueDepth: 1})
	a, c = rq(0, 'W', 0, 8, 1), rq(1, 'W', 16, 8, 1)
	insert(t, s, 0, a, c)
	if !s.Insert(rq(2, 'W', 8, 8, 1), 0) || a.Sectors != 16 || s.Queued() != 2 {
		t.Fatalf("A = %d sectors, Queued %d", a.Sectors, s.Queued())
	}
}
