package model

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func TestBucketAdmit(t *testing.T) {
	const ms = int64(1e6)
	tests := []struct {
		name    string
		t       Throttle
		at      []int64  // arrival, ns
		sectors []uint32 // per request (cycled)
		want    []int64  // admission of the requests listed in check
		check   []int
	}{
		{
			// 1000 IOPS, default bucket of 100: 101 pass at once (the
			// level may reach the burst), then one per ms.
			name: "iops burst then rate", t: Throttle{IOPS: 1000},
			at: make([]int64, 110), sectors: []uint32{8},
			check: []int{0, 100, 101, 102, 109}, want: []int64{0, 0, 1 * ms, 2 * ms, 9 * ms},
		},
		{
			name: "explicit burst", t: Throttle{IOPS: 1000, BurstIOs: 1},
			at: make([]int64, 4), sectors: []uint32{8},
			check: []int{1, 2, 3}, want: []int64{0, 1 * ms, 2 * ms},
		},
		{
			// 1 MB/s, bucket 100 kB: 1 MiB requests wait for the bytes.
			name: "bandwidth", t: Throttle{BytesPerSec: 1e6, BurstBytes: 1},
			at: make([]int64, 3), sectors: []uint32{2048},
			check: []int{0, 1, 2}, want: []int64{0, 1048575 * 1000, 2097151 * 1000},
		},
		{
			// A flush passes at once and counts nothing.
			name: "flush passes", t: Throttle{IOPS: 1000, BurstIOs: 1},
			at: make([]int64, 4), sectors: []uint32{8, 8, 0, 8},
			check: []int{1, 2, 3}, want: []int64{0, 0, 1 * ms},
		},
		{
			// Idle time drains the bucket: a late request passes at
			// once; admissions stay in order.
			name: "drains while idle", t: Throttle{IOPS: 1000, BurstIOs: 1},
			at: []int64{0, 0, 0, 50 * ms, 50 * ms, 50 * ms}, sectors: []uint32{8},
			check: []int{2, 3, 4, 5}, want: []int64{1 * ms, 50 * ms, 50 * ms, 51 * ms},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.t.NewBucket()
			got := make([]int64, len(tc.at))
			for i, at := range tc.at {
				got[i] = b.Admit(at, tc.sectors[i%len(tc.sectors)])
			}
			for j, i := range tc.check {
				if d := got[i] - tc.want[j]; d < -1 || d > 1 {
					t.Errorf("request %d admitted at %d ns, want %d", i, got[i], tc.want[j])
				}
			}
		})
	}
}

// closedLoop records depth requests kept outstanding on a device whose
// requests start service when gate admits them and take svc(size) ns on
// any of unlimited servers, or on k servers when k > 0.
func closedLoop(reqs []trace.Request, n, depth int, sectors uint32, gate *Bucket, k int, svc func(uint32) int64, now int64) ([]trace.Request, int64) {
	var free []int64 // server free times, when k > 0
	for range k {
		free = append(free, now)
	}
	outstanding := make([]int64, 0, depth) // completion times
	sector := uint64(0)
	for i := 0; i < n; i++ {
		d := now
		if len(outstanding) == depth {
			// The earliest completion frees a slot.
			j := 0
			for x := range outstanding {
				if outstanding[x] < outstanding[j] {
					j = x
				}
			}
			d = max(d, outstanding[j])
			outstanding = append(outstanding[:j], outstanding[j+1:]...)
		}
		start := d
		if gate != nil {
			start = gate.Admit(d, sectors)
		}
		if k > 0 {
			j := 0
			for x := range free {
				if free[x] < free[j] {
					j = x
				}
			}
			start = max(start, free[j])
			free[j] = start + svc(sectors)
		}
		c := start + svc(sectors)
		sector = (sector*7919 + 1_000_003) % (1 << 28)
		reqs = append(reqs, trace.Request{Op: trace.Read, Sector: sector, Sectors: sectors, Arrival: d, Dispatch: d, Complete: c})
		outstanding = append(outstanding, c)
	}
	end := now
	for _, c := range outstanding {
		end = max(end, c)
	}
	return reqs, end + 50e6 // an idle gap before the next phase
}

func TestEstimateThrottle(t *testing.T) {
	under := func(s uint32) int64 { return 100_000 + int64(s)*512*4 } // 100 µs + 250 MB/s
	type phase struct {
		depth   int
		sectors uint32
	}
	tests := []struct {
		name   string
		t      Throttle // the bucket that recorded the trace (none: an unthrottled device)
		k      int      // the device's servers (0: unlimited)
		phases []phase
		lastN  int      // requests of the last phase (0: 3,000 as the others)
		want   Throttle // zero: no throttle found
	}{
		{
			name: "iops cap over depths", t: Throttle{IOPS: 3000, BytesPerSec: 125e6},
			phases: []phase{{2, 8}, {4, 8}, {8, 8}, {16, 8}, {32, 8}},
			want:   Throttle{IOPS: 3000},
		},
		{
			name: "iops and bandwidth caps", t: Throttle{IOPS: 3000, BytesPerSec: 125e6},
			phases: []phase{{4, 8}, {16, 8}, {4, 256}, {16, 256}},
			want:   Throttle{IOPS: 3000, BytesPerSec: 125e6},
		},
		{
			name: "bandwidth cap of large requests", t: Throttle{IOPS: 3000, BytesPerSec: 125e6},
			phases: []phase{{2, 2048}, {8, 2048}},
			want:   Throttle{BytesPerSec: 125e6},
		},
		{
			// A few large requests beside many small ones (the VM lab's
			// phases): the bandwidth cap is held by 7 of about 290
			// windows, fewer than a tenth of all.
			name: "bandwidth cap of a short phase", t: Throttle{IOPS: 3000, BytesPerSec: 125e6},
			phases: []phase{{2, 8}, {4, 8}, {8, 8}, {16, 8}, {32, 8}, {8, 8}, {16, 128}},
			lastN:  500,
			want:   Throttle{IOPS: 3000, BytesPerSec: 125e6},
		},
		{
			name: "one depth cannot tell", t: Throttle{IOPS: 3000},
			phases: []phase{{16, 8}, {16, 8}},
		},
		{
			// Four servers below saturation: the rate follows the depth.
			name: "ssd below saturation", k: 4,
			phases: []phase{{1, 8}, {2, 8}, {3, 8}, {4, 8}},
		},
		{
			name: "unthrottled device", phases: []phase{{2, 8}, {8, 8}, {32, 8}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var gate *Bucket
			if tc.t.Enabled() {
				gate = tc.t.NewBucket()
			}
			var reqs []trace.Request
			now := int64(0)
			for j, p := range tc.phases {
				n := 3000
				if j == len(tc.phases)-1 && tc.lastN > 0 {
					n = tc.lastN
				}
				reqs, now = closedLoop(reqs, n, p.depth, p.sectors, gate, tc.k, under, now)
			}
			got, ev, ok := EstimateThrottle(reqs)
			if ok != tc.want.Enabled() {
				t.Fatalf("found %v (%v), want %v; evidence: %s", ok, got, tc.want, ev)
			}
			near := func(name string, g, w float64) {
				if (w == 0) != (g == 0) || w > 0 && math.Abs(g-w) > 0.03*w {
					t.Errorf("%s = %.0f, want %.0f (±3 %%); evidence: %s", name, g, w, ev)
				}
			}
			near("IOPS", got.IOPS, tc.want.IOPS)
			near("BytesPerSec", got.BytesPerSec, tc.want.BytesPerSec)
		})
	}
}

// TestEstimateThrottleVirtio: recordings on the VM lab's virtio disk,
// which QEMU throttles to 3,000 IOPS and 131,072,000 bytes/s. Five fio
// phases at depths 2–32 and 4–256 KiB show both caps; random 4 KiB reads
// at depths 1–16 on the TCG guest never kept the device backlogged, and
// show none.
func TestEstimateThrottleVirtio(t *testing.T) {
	read := func(name string) []trace.Request {
		reqs, err := trace.ReadFile("native", filepath.Join("..", "..", "agent", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return reqs
	}
	got, ev, ok := EstimateThrottle(read("virtio-throttled-phases.st.gz"))
	if !ok || math.Abs(got.IOPS-3000) > 300 || math.Abs(got.BytesPerSec-131072000) > 13107200 {
		t.Errorf("phases: found %v, caps %v (%s); want 3000 IOPS and 131.1 MB/s within 10 %%", ok, got, ev)
	}
	if got, ev, ok := EstimateThrottle(read("virtio-throttled-3000iops.st.gz")); ok {
		t.Errorf("depths 1-16 without a backlog: found %v (%s); want none", got, ev)
	}
}

// TestThrottledSaveLoad: a throttled model keeps its caps through Save
// and Load, and Load rejects caps on another class, a throttled class
// without caps and a negative cap, naming the field.
func TestThrottledSaveLoad(t *testing.T) {
	th := Throttle{IOPS: 3000, BytesPerSec: 125e6}
	m, err := NewThrottled(1<<20, th)
	if err != nil {
		t.Fatal(err)
	}
	m.SetServers(2)
	var b bytes.Buffer
	if err := m.Save(&b); err != nil {
		t.Fatal(err)
	}
	l, err := Load(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if l.Class() != Throttled || l.Throttle() != th || l.Servers() != 2 {
		t.Fatalf("loaded class %v, caps %v, k %d; want throttled, %v, 2", l.Class(), l.Throttle(), l.Servers(), th)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"caps on an ssd", `"class":"throttled"`, `"class":"ssd"`, `field "throttle"`},
		{"no caps", `"throttle":{"iops":3000,"bytesPerSec":125000000},`, ``, `field "throttle"`},
		{"negative cap", `"iops":3000`, `"iops":-1`, `field "throttle.iops"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(b.String(), tc.from, tc.to, 1)
			if in == b.String() {
				t.Fatalf("%q is not in the saved model: %s", tc.from, b.String())
			}
			if _, err := Load(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v; want an error naming %s", err, tc.want)
			}
		})
	}
	if _, err := NewThrottled(1<<20, Throttle{}); err == nil {
		t.Error("NewThrottled without a cap: no error")
	}
}

// TestFitThrottled: Fit as throttled estimates the caps from the trace, or
// fails when it shows none.
func TestFitThrottled(t *testing.T) {
	under := func(s uint32) int64 { return 100_000 + int64(s)*512*4 }
	var reqs []trace.Request
	now := int64(0)
	gate := Throttle{IOPS: 3000}.NewBucket()
	for _, depth := range []int{2, 8, 32} {
		reqs, now = closedLoop(reqs, 3000, depth, 8, gate, 0, under, now)
	}
	m, err := Fit(reqs, FitOptions{Class: Throttled})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Throttle().IOPS; got < 2900 || got > 3100 {
		t.Errorf("IOPS cap %.0f, want 3000", got)
	}
	var free []trace.Request
	free, _ = closedLoop(free, 3000, 4, 8, nil, 0, under, 0)
	if _, err := Fit(free, FitOptions{Class: Throttled}); err == nil || !strings.Contains(err.Error(), "shows no cap") {
		t.Errorf("Fit of an unthrottled trace as throttled: %v; want an error", err)
	}
}

// TestExceedsThrottle: a window refutes caps it ran well above, and not
// the caps it ran at.
func TestExceedsThrottle(t *testing.T) {
	under := func(s uint32) int64 { return 100_000 + int64(s)*512*4 }
	capped, _ := closedLoop(nil, 3000, 16, 8, Throttle{IOPS: 3000}.NewBucket(), 0, under, 0)
	free, _ := closedLoop(nil, 3000, 16, 8, nil, 4, under, 0) // 4 servers: ~36,000 IOPS
	for _, tc := range []struct {
		name string
		reqs []trace.Request
		t    Throttle
		want bool
	}{
		{"at its caps", capped, Throttle{IOPS: 3000}, false},
		{"above lower caps", capped, Throttle{IOPS: 1000}, true},
		{"an uncapped device", free, Throttle{IOPS: 3000, BytesPerSec: 125e6}, true},
		{"under a bandwidth cap it never reached", capped, Throttle{BytesPerSec: 125e6}, false},
		{"too few windows", capped[:500], Throttle{IOPS: 1000}, false},
	} {
		if got := ExceedsThrottle(tc.reqs, tc.t); got != tc.want {
			t.Errorf("%s: ExceedsThrottle = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEvaluateThrottled: model eval as throttled estimates the caps on the
// training part, and fails with a one-line error when it shows none.
func TestEvaluateThrottled(t *testing.T) {
	under := func(s uint32) int64 { return 100_000 + int64(s)*512*4 }
	var reqs []trace.Request
	now := int64(0)
	gate := Throttle{IOPS: 3000}.NewBucket()
	for _, depth := range []int{2, 8, 32, 4, 16} {
		reqs, now = closedLoop(reqs, 3000, depth, 8, gate, 0, under, now)
	}
	r, err := Evaluate(reqs, EvalOptions{Class: Throttled, TrainFraction: 0.6})
	if err != nil {
		t.Fatal(err)
	}
	if r.Throttle == nil || math.Abs(r.Throttle.IOPS-3000) > 90 || r.Class != "throttled" {
		t.Errorf("class %s, caps %v; want throttled at 3000 IOPS", r.Class, r.Throttle)
	}
	if _, err := Evaluate(reqs[:6000], EvalOptions{Class: Throttled, TrainFraction: 0.2}); err == nil ||
		!strings.Contains(err.Error(), "shows no cap") {
		t.Errorf("a training part at one depth: %v; want an error", err)
	}
}
