package sched

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func TestRegistry(t *testing.T) {
	if got := Names(); !reflect.DeepEqual(got, []string{"none", "mq-deadline", "bfq", "kyber"}) {
		t.Fatalf("Names = %v", got)
	}
	for _, n := range Names() {
		s := mustNew(t, n, nil, DefaultDevice)
		if s.Name() != n || s.Queued() != 0 {
			t.Fatalf("%s: Name %q Queued %d", n, s.Name(), s.Queued())
		}
		if r, w := s.Dispatch(0); r != nil || w != -1 {
			t.Fatalf("%s: empty Dispatch = %v, %d", n, r, w)
		}
	}
	if _, err := New("cfq", nil, DefaultDevice); err == nil {
		t.Fatal("unknown scheduler accepted")
	}
}

func TestDefaults(t *testing.T) {
	want := map[string]string{
		"none":        "",
		"mq-deadline": "fifo_batch=16,front_merges=1,read_expire=500,write_expire=5000,writes_starved=2",
		"bfq": "back_seek_max=16384,back_seek_penalty=2,fifo_expire_async=250,fifo_expire_sync=125," +
			"low_latency=1,max_budget=0,slice_idle=8,slice_idle_us=8000,strict_guarantees=0,timeout_sync=125",
		"kyber": "read_lat_nsec=2000000,write_lat_nsec=10000000",
	}
	for _, dev := range []Device{DefaultDevice, {Rotational: false, MaxSectors: 256, QueueDepth: 64}} {
		for n, w := range want {
			tun, err := Defaults(n, dev)
			if err != nil {
				t.Fatal(err)
			}
			if tun.String() != w {
				t.Errorf("%s (rotational=%v) defaults = %s, want %s", n, dev.Rotational, tun, w)
			}
		}
	}
	if _, err := Defaults("noop", DefaultDevice); err == nil {
		t.Fatal("unknown scheduler accepted")
	}
}

func TestTunableValidation(t *testing.T) {
	cases := []struct {
		sched string
		tun   string
		ok    bool
		msg   string
	}{
		{"none", "", true, ""},
		{"none", "fifo_batch=1", false, "unknown tunable"},
		{"mq-deadline", "read_expire=0,write_expire=0,fifo_batch=0,writes_starved=-5,front_merges=0", true, ""},
		{"mq-deadline", "read_expire=-1", false, "out of range"},
		{"mq-deadline", "write_expire=2147483648", false, "out of range"},
		{"mq-deadline", "front_merges=2", false, "out of range"},
		{"mq-deadline", "fifo_batch=-1", false, "out of range"},
		{"mq-deadline", "slice_idle=0", false, "unknown tunable"},
		{"mq-deadline", "async_depth=64", false, "unknown tunable"},
		{"bfq", "slice_idle=0,low_latency=0,strict_guarantees=1,max_budget=4096,timeout_sync=1", true, ""},
		{"bfq", "slice_idle_us=4000", true, ""},
		{"bfq", "slice_idle=4,slice_idle_us=4000", true, ""},
		{"bfq", "slice_idle=4,slice_idle_us=3000", false, "disagree"},
		{"bfq", "slice_idle=-1", false, "out of range"},
		{"bfq", "back_seek_penalty=0", false, "out of range"},
		{"bfq", "timeout_sync=0", false, "out of range"},
		{"bfq", "fifo_expire_sync=0", false, "out of range"},
		{"bfq", "low_latency=2", false, "out of range"},
		{"bfq", "max_budget=-1", false, "out of range"},
		{"bfq", "read_expire=500", false, "unknown tunable"},
		{"kyber", "read_lat_nsec=1,write_lat_nsec=0", true, ""},
		{"kyber", "read_lat_nsec=-1", false, "out of range"},
		{"kyber", "discard_lat_nsec=1", false, "unknown tunable"},
	}
	for _, c := range cases {
		tun, err := ParseTunables(c.tun)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(c.sched, tun, DefaultDevice)
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("New(%s, %s) error = %v, want ok=%v %q", c.sched, c.tun, err, c.ok, c.msg)
		}
	}
}

// workload returns a mixed random workload: sequential and random streams
// of 8 processes, reads, async and sync writes, some discards, FUA writes
// and flushes, arriving over about one second.
func workload(seed uint64, n int) []*Request {
	rng := rand.New(rand.NewPCG(seed, 7))
	pos := make([]uint64, 9)
	for p := range pos {
		pos[p] = uint64(p) * 40_000_000
	}
	var rs []*Request
	now := int64(0)
	for i := 0; i < n; i++ {
		now += rng.Int64N(2 * ms)
		pid := uint32(1 + rng.IntN(8))
		sz := uint32(8 << rng.IntN(6))
		var r *Request
		switch k := rng.IntN(100); {
		case k < 45:
			r = rq(i, 'R', 0, sz, pid)
		case k < 75:
			r = rq(i, 'W', 0, sz, pid)
		case k < 90:
			r = rq(i, 'S', 0, sz, pid)
		case k < 94:
			r = rq(i, 'D', 0, sz, pid)
		case k < 97:
			r = rq(i, 'S', 0, sz, pid)
			r.Flags |= trace.FUA
		default:
			r = rq(i, 'F', 0, 0, pid)
		}
		if rng.IntN(3) == 0 { // random
			r.Sector = rng.Uint64N(200_000_000)
		} else { // sequential in the process's stream
			r.Sector = pos[pid]
			pos[pid] += uint64(sz)
		}
		if rng.IntN(10) == 0 {
			r.Flags |= trace.Meta
		}
		r.Insert = now
		rs = append(rs, r)
	}
	return rs
}

// TestConservationAndDeterminism runs every model over random workloads
// and checks that each request is dispatched exactly once or merged into
// exactly one dispatched request, that sectors add up, that merged
// requests are contiguous and within MaxSectors, and that two runs give the
// same order.
func TestConservationAndDeterminism(t *testing.T) {
	// Service times above the mean inter-arrival time (1 ms) so that
	// queues build up to hundreds of requests.
	devs := []struct {
		dev   Device
		depth int
		svc   int64
	}{
		{Device{Rotational: true, MaxSectors: 256, QueueDepth: 1}, 1, 3 * ms / 2},
		{Device{Rotational: false, MaxSectors: 2560, QueueDepth: 32}, 32, 40 * ms},
	}
	for _, name := range Names() {
		for _, d := range devs {
			for seed := uint64(1); seed <= 3; seed++ {
				var orders [2]string
				for k := 0; k < 2; k++ {
					rs := workload(seed, 3000)
					var in uint64
					for _, r := range rs {
						in += uint64(r.Sectors)
					}
					s := mustNew(t, name, nil, d.dev)
					out := run(t, s, 0, d.svc, d.depth, 0, rs)
					orders[k] = ids(out)
					checkConservation(t, name, d.dev, rs, out, in)
					if s.Queued() != 0 {
						t.Fatalf("%s: %d still queued", name, s.Queued())
					}
				}
				if orders[0] != orders[1] {
					t.Fatalf("%s seed %d: two runs dispatched in different orders", name, seed)
				}
			}
		}
	}
}

func checkConservation(t *testing.T, name string, dev Device, rs, out []*Request, inSectors uint64) {
	t.Helper()
	seen := make(map[*Request]int)
	var walk func(r *Request)
	walk = func(r *Request) {
		seen[r]++
		for _, m := range r.Merged {
			walk(m)
		}
	}
	var outSectors uint64
	for _, r := range out {
		outSectors += uint64(r.Sectors)
		if r.Sectors > dev.MaxSectors {
			t.Fatalf("%s: dispatched %d sectors > MaxSectors %d", name, r.Sectors, dev.MaxSectors)
		}
		if r.Class == ClassMerged {
			t.Fatalf("%s: dispatched request %d was merged", name, r.ID)
		}
		walk(r)
		// Merged parts lie inside the dispatched request and share its op.
		var check func(x *Request)
		check = func(x *Request) {
			for _, m := range x.Merged {
				if m.Op != r.Op || m.Sector < r.Sector || m.End() > r.End() || m.Class != ClassMerged {
					t.Fatalf("%s: merged request %d [%d,%d) outside %d [%d,%d)", name, m.ID, m.Sector, m.End(), r.ID, r.Sector, r.End())
				}
				check(m)
			}
		}
		check(r)
	}
	for _, r := range rs {
		if seen[r] != 1 {
			t.Fatalf("%s: request %d seen %d times", name, r.ID, seen[r])
		}
	}
	if outSectors != inSectors {
		t.Fatalf("%s: dispatched %d sectors, inserted %d", name, outSectors, inSectors)
	}
}
