//go:build linux

package tracer

import (
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
	// links[0] and [1] are block_rq_complete and block_rq_complete2.
	for _, lk := range et.links[:2] {
		if err := lk.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := randomReads(l.path, l.size, 1, 2); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{blocktraceProgBlockRqComplete, blocktraceProgBlockRqComplete2} {
		lk, err := link.AttachTracing(link.TracingOptions{Program: et.coll.Programs[name], AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			t.Fatal(err)
		}
		et.links[i] = lk
	}
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
