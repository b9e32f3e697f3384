//go:build linux

package tracer

import (
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// TestEBPFMissedCompletionIsReaped makes the programs miss one completion
// (their links are closed around one read), then checks that the request
// is counted lost and that it does not hold back the delivery of the
// requests after it.
func TestEBPFMissedCompletionIsReaped(t *testing.T) {
	needRoot(t)
	l := newLoop(t, 64<<20)
	rec := startRecording(t, KindEBPF, l.dev)
	et := rec.tr.(*ebpfTracer)
	if et.reap == nil {
		t.Skip("kernel cannot run the reaper")
	}
	if err := randomReads(l.path, l.size, 10, 1); err != nil {
		t.Fatal(err)
	}
	// links[0] is block_rq_complete.
	if err := et.links[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := randomReads(l.path, l.size, 1, 2); err != nil {
		t.Fatal(err)
	}
	lk, err := link.AttachTracing(link.TracingOptions{Program: et.coll.Programs[blocktraceProgBlockRqComplete], AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		t.Fatal(err)
	}
	et.links[0] = lk
	if err := randomReads(l.path, l.size, 20, 3); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.reqs)
		rec.mu.Unlock()
		if n == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 30 requests delivered 5 s after the missed completion; stats %+v", n, rec.tr.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	reqs := rec.stop(t)
	if st := rec.tr.Stats(); len(reqs) != 30 || st.Lost != 1 {
		t.Errorf("%d requests, stats %+v; want 30 and 1 lost", len(reqs), st)
	}
}

// TestEBPFDeviceFilter checks the programs' device filter as SetDevices
// leaves it: up to fastDevs disks in the global array, more in the map
// (fast_many set), and back.
func TestEBPFDeviceFilter(t *testing.T) {
	needRoot(t)
	tr, err := New(Options{Kind: KindEBPF})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	et := tr.(*ebpfTracer)
	check := func(devs []uint32, many uint32) {
		t.Helper()
		if err := tr.SetDevices(devs); err != nil {
			t.Fatal(err)
		}
		var fast [fastDevs]uint32
		var gotMany uint32
		if err := et.fastDevs.Get(&fast); err != nil {
			t.Fatal(err)
		}
		if err := et.fastMany.Get(&gotMany); err != nil {
			t.Fatal(err)
		}
		if gotMany != many {
			t.Errorf("%d devices: fast_many %d, want %d", len(devs), gotMany, many)
		}
		if many == 0 {
			got := slices.DeleteFunc(slices.Clone(fast[:]), func(d uint32) bool { return d == 0 })
			slices.Sort(got)
			if !slices.Equal(got, devs) {
				t.Errorf("fast_devs %v, want %v", fast, devs)
			}
		}
		var n int
		var k uint32
		var v uint8
		for it := et.devs.Iterate(); it.Next(&k, &v); {
			n++
			if !slices.Contains(devs, k) {
				t.Errorf("devices map holds %s, not selected", DevString(k))
			}
		}
		if n != len(devs) {
			t.Errorf("devices map holds %d disks, want %d", n, len(devs))
		}
	}
	var many []uint32
	for i := range uint32(fastDevs + 3) {
		many = append(many, Mkdev(7, 100+i))
	}
	check(many[:1], 0)
	check(many[:fastDevs], 0)
	check(many, 1)
	check(many[2:4], 0)
	check(nil, 0)
}
