//go:build linux

package tracer

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEBPFPauseFilter checks the filter SetPaused leaves: fast_paused set
// at the indexes of the paused disks in fast_devs, the devices map's
// value SEL_PAUSED for them and SEL_TRACED for the others, with up to
// fastDevs disks and with more (fast_many), and a pause of a disk not
// traced taking effect once it is.
func TestEBPFPauseFilter(t *testing.T) {
	tr, et := newFilterTracer(t)
	var devs []uint32
	for i := range uint32(fastDevs + 2) {
		devs = append(devs, Mkdev(7, 100+i))
	}
	check := func(sel, paused []uint32) {
		t.Helper()
		if err := tr.SetDevices(sel); err != nil {
			t.Fatal(err)
		}
		if err := tr.SetPaused(paused); err != nil {
			t.Fatal(err)
		}
		want := map[uint32]uint8{}
		for _, d := range sel {
			want[d] = selTraced
		}
		for _, d := range paused {
			if _, ok := want[d]; ok {
				want[d] = selPaused
			}
		}
		var k uint32
		var v uint8
		n := 0
		for it := et.devs.Iterate(); it.Next(&k, &v); n++ {
			if want[k] != v {
				t.Errorf("devices map: %s is %d, want %d", DevString(k), v, want[k])
			}
		}
		if n != len(want) {
			t.Errorf("devices map holds %d disks, want %d", n, len(want))
		}
		if len(sel) > fastDevs {
			return
		}
		var fast, fp [fastDevs]uint32
		if err := et.fastDevs.Get(&fast); err != nil {
			t.Fatal(err)
		}
		if err := et.fastPaused.Get(&fp); err != nil {
			t.Fatal(err)
		}
		for i, d := range fast {
			if got := fp[i] == 1; d != 0 && got != (want[d] == selPaused) {
				t.Errorf("fast_devs[%d] = %s: paused %v, want %v", i, DevString(d), got, !got)
			}
		}
	}
	check(devs[:4], devs[1:3])
	check(devs[:4], nil)
	check(devs[:2], devs[3:4]) // devs[3] paused, not traced
	check(devs[:4], devs[3:4]) // now traced: paused
	check(devs, devs[fastDevs:])
	check(devs[2:5], devs[:3])
}

// TestEBPFPauseLosesNothing traces a loop device while reads run, pausing
// and resuming it: reads made while it is paused are not delivered, and
// the requests in flight at a pause are delivered, not counted lost (the
// reaper would count an entry its completion left behind), at a resume
// they are orphans, and delivery is never held back.
func TestEBPFPauseLosesNothing(t *testing.T) {
	needRoot(t)
	l := newLoop(t, 64<<20)
	rec := startRecording(t, KindEBPF, l.dev)
	tr := rec.tr
	mustRead := func(n int, seed uint64) {
		t.Helper()
		if err := randomReads(l.path, l.size, n, seed); err != nil {
			t.Fatal(err)
		}
	}
	mustRead(20, 1)
	if err := tr.SetPaused([]uint32{l.dev}); err != nil {
		t.Fatal(err)
	}
	mustRead(30, 2)
	if err := tr.SetPaused(nil); err != nil {
		t.Fatal(err)
	}
	mustRead(10, 3)
	if n := rec.waitFor(30, 5*time.Second); n != 30 {
		t.Fatalf("%d requests delivered, want the 30 made while traced; stats %+v", n, tr.Stats())
	}
	time.Sleep(300 * time.Millisecond)
	if n := rec.count(); n != 30 {
		t.Fatalf("%d requests delivered, want 30: reads made while paused were recorded", n)
	}

	// Four readers while the disk is paused and resumed every 2 ms.
	const readers, each = 4, 4000
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Go(func() {
			if err := randomReads(l.path, l.size, each, uint64(10+i)); err != nil {
				errs <- err
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	toggles := 0
	for paused := true; ; paused = !paused {
		select {
		case <-done:
		case <-time.After(2 * time.Millisecond):
			var devs []uint32
			if paused {
				devs = []uint32{l.dev}
			}
			if err := tr.SetPaused(devs); err != nil {
				t.Fatal(err)
			}
			toggles++
			continue
		}
		break
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := tr.SetPaused(nil); err != nil {
		t.Fatal(err)
	}
	mustRead(10, 4)
	time.Sleep(1500 * time.Millisecond) // past the reaper's age limit
	reqs := rec.stop(t)
	st := tr.Stats()
	t.Logf("%d pauses and resumes; %d of %d reads delivered; stats %+v", toggles, len(reqs), 70+readers*each, st)
	if st.Lost != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v: a pause lost requests", st)
	}
	if toggles < 4 || len(reqs) <= 40 || len(reqs) >= 40+readers*each {
		t.Errorf("%d requests delivered in %d toggles: want some, not all, of the %d concurrent reads", len(reqs)-40, toggles, readers*each)
	}
	for _, q := range reqs {
		if q.Arrival <= 0 || q.Dispatch < q.Arrival || q.Complete < q.Dispatch {
			t.Fatalf("request %+v: times out of order", q)
		}
	}
}

// waitFor waits until n requests were delivered or d passed, and returns
// how many were.
func (r *recording) waitFor(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		got := r.count()
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count is how many requests were delivered so far.
func (r *recording) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// TestEBPFPauseDetaches pauses the only traced disk: the programs are
// detached once no request is left in the in-flight table (a request
// followed at the pause holds them; a fake entry stands for one here),
// reads made then are not recorded, and a resume attaches them again and
// records the reads after it, with nothing lost.
func TestEBPFPauseDetaches(t *testing.T) {
	needRoot(t)
	l := newLoop(t, 64<<20)
	rec := startRecording(t, KindEBPF, l.dev)
	tr := rec.tr
	et := tr.(*ebpfTracer)
	attached := et.linkState
	programs, _ := attached()
	mustRead := func(n int, seed uint64) {
		t.Helper()
		if err := randomReads(l.path, l.size, n, seed); err != nil {
			t.Fatal(err)
		}
	}
	mustRead(20, 1)
	if n := rec.waitFor(20, 5*time.Second); n != 20 {
		t.Fatalf("%d requests delivered, want 20", n)
	}
	// A request still followed (its slot taken; 1 is no struct request's
	// address) holds the programs attached.
	fake := &et.slots[len(et.slots)-1].Key
	atomic.StoreUint64(fake, 1)
	if err := tr.SetPaused([]uint32{l.dev}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(detachAfter + 3*maxPoll)
	if n, detached := attached(); detached || n != programs {
		t.Fatalf("with a request in flight: %d links, detached %v; want %d attached", n, detached, programs)
	}
	atomic.StoreUint64(fake, 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n, detached := attached(); detached && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the programs of a tracer whose only disk is paused were not detached")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Detached, the table is empty and stays so: the reaper does not run.
	reaps := et.reaps.Load()
	time.Sleep(reapEvery + 3*maxPoll)
	if n := et.reaps.Load(); n != reaps {
		t.Errorf("the reaper ran %d time(s) while the programs were detached, want none", n-reaps)
	}
	mustRead(30, 2)
	if err := tr.SetPaused(nil); err != nil {
		t.Fatal(err)
	}
	if n, detached := attached(); detached || n != programs {
		t.Fatalf("after the resume: %d links, detached %v; want %d attached", n, detached, programs)
	}
	mustRead(10, 3)
	if n := rec.waitFor(30, 5*time.Second); n != 30 {
		t.Fatalf("%d requests delivered, want the 30 made while traced; stats %+v", n, tr.Stats())
	}
	time.Sleep(1500 * time.Millisecond) // past the reaper's age limit
	if et.reaps.Load() == reaps {
		t.Error("the reaper did not run once the programs were attached again")
	}
	reqs := rec.stop(t)
	if st := tr.Stats(); len(reqs) != 30 || st.Lost != 0 || st.Dropped != 0 {
		t.Errorf("%d requests delivered, stats %+v: want 30, none lost", len(reqs), st)
	}
}

// TestEBPFStartPaused starts a tracer with its only disk paused
// (Options.Paused): no program is attached, so reads made then are not
// recorded and the reaper does not run, until a resume attaches them and
// the reads after it are recorded, with nothing lost.
func TestEBPFStartPaused(t *testing.T) {
	needRoot(t)
	l := newLoop(t, 64<<20)
	rec := startRecordingWith(t, Options{Kind: KindEBPF, Devices: []uint32{l.dev}, Paused: []uint32{l.dev}, FlushInterval: 50 * time.Millisecond})
	tr := rec.tr
	et := tr.(*ebpfTracer)
	attached := et.linkState
	if n, detached := attached(); !detached || n != 0 {
		t.Fatalf("started paused: %d links, detached %v; want none attached", n, detached)
	}
	if err := randomReads(l.path, l.size, 30, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reapEvery + 3*maxPoll)
	if n := et.reaps.Load(); n != 0 {
		t.Errorf("the reaper ran %d time(s) before any program was attached, want none", n)
	}
	if n := rec.count(); n != 0 {
		t.Fatalf("%d requests delivered while the disk was paused from the start, want 0", n)
	}
	if err := tr.SetPaused(nil); err != nil {
		t.Fatal(err)
	}
	if n, detached := attached(); detached || n == 0 {
		t.Fatalf("after the resume: %d links, detached %v; want the programs attached", n, detached)
	}
	if err := randomReads(l.path, l.size, 20, 2); err != nil {
		t.Fatal(err)
	}
	if n := rec.waitFor(20, 5*time.Second); n != 20 {
		t.Fatalf("%d requests delivered, want the 20 made after the resume; stats %+v", n, tr.Stats())
	}
	reqs := rec.stop(t)
	if st := tr.Stats(); len(reqs) != 20 || st.Lost != 0 || st.Dropped != 0 {
		t.Errorf("%d requests delivered, stats %+v: want 20, none lost", len(reqs), st)
	}
}

// linkState is how many program links t holds and whether it is detached.
func (t *ebpfTracer) linkState() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.links), t.detached
}
