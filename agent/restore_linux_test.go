//go:build linux

package agent_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

const (
	// phaseChildEnv makes the test binary TestPhaseChild:
	// "MAPPED:SCANNED", the paths of its two files.
	phaseChildEnv = "SHADOWTUNE_PHASE_CHILD"
	// phaseScanBytes is the size of the file it scans.
	phaseScanBytes = 576 << 20
	// phaseMmap and phaseScan are how long TestPhaseChild reads in each
	// of its two phases.
	phaseMmap, phaseScan = 5 * time.Second, 6 * time.Second
	// phaseReadBytes is the scan's read() size: small, as a database's
	// page-sized reads or a buffered reader's, so that the kernel's
	// read-ahead, not the read's own size, sets the requests' size.
	phaseReadBytes = 8 << 10
)

// TestPhaseChild is the workload child of
// TestReadAheadRestoredWithinAWindow and TestHeldMappedReleasedOnScan,
// run by re-executing the test binary: it waits for a line on stdin (the
// parent has moved it into the memory cgroup by then), maps the first
// file $SHADOWTUNE_PHASE_CHILD names and reads random 4 KiB pages of it
// through the mapping for phaseMmap, then opens the second and reads it
// sequentially in phaseReadBytes read()s for phaseScan or to its end
// (mappedScan: scans the mapping instead), printing the bytes read so far
// every thrashTick ("scan MS BYTES").
func TestPhaseChild(t *testing.T) {
	path, scanned, _ := strings.Cut(os.Getenv(phaseChildEnv), ":")
	if path == "" {
		t.Skip("workload child of TestReadAheadRestoredWithinAWindow")
	}
	loopdev.AwaitGo(t)
	m := mapFile(t, path)
	rng := rand.New(rand.NewPCG(7, 8))
	var sum byte
	t0 := time.Now()
	for time.Since(t0) < phaseMmap {
		sum ^= m[rng.Int64N(int64(len(m))/4096)*4096]
	}
	if scanned == mappedScan {
		scanMapping(m, &sum)
		fmt.Println("checksum", sum)
		return
	}
	sf, err := os.Open(scanned)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	buf := make([]byte, phaseReadBytes)
	var n int64
	t1 := time.Now()
	next := thrashTick
	for el := time.Duration(0); el < phaseScan; el = time.Since(t1) {
		if el >= next {
			fmt.Printf("scan %d %d\n", el.Milliseconds(), n)
			next += thrashTick
		}
		k, err := sf.Read(buf)
		if k == 0 || err != nil {
			break
		}
		sum ^= buf[0]
		n += int64(k)
	}
	fmt.Println("checksum", sum)
}

// mappedScan, as TestPhaseChild's second file, makes it scan its mapping
// instead: one byte of each 4 KiB page in order, from the start, for
// phaseScan or to its end.
const mappedScan = "@mapped"

// scanMapping is TestPhaseChild's scan of its mapping m, printing the
// bytes passed every thrashTick ("scan MS BYTES").
func scanMapping(m []byte, sum *byte) {
	t1 := time.Now()
	next := thrashTick
	for off := 0; off < len(m); off += 4096 {
		if el := time.Since(t1); el >= phaseScan {
			break
		} else if el >= next {
			fmt.Printf("scan %d %d\n", el.Milliseconds(), off)
			next += thrashTick
		}
		*sum ^= m[off]
	}
}

// TestHeldMappedReleasedOnScan: the thrash test's process reads random
// pages of its mapped 1 GiB file for 5 s in a 256 MiB memory cgroup, and
// the agent (12 s windows, minDwell 0) cuts the mapped file alone; then
// the process scans that same mapping in order. The agent must release
// the held file (back to the device's 2560 KiB) within 2 s of the scan's
// start, and the device's read requests in the half second from 0.1 s
// after the release must be at least 4 times as large as in the half
// second before it.
func TestHeldMappedReleasedOnScan(t *testing.T) {
	fx := newThrashFixture(t, 64<<20)
	loopdev.Evict(t, fx.data)
	a, start, out, stats := fx.runPhases(t, mappedScan)
	a.stop(t)
	cut, ok := a.firstCut(fx.l.Name)
	if !ok || !cut.mapped {
		t.Fatalf("no cut of the mapped files alone (%+v, found %v); changes %v", cut, ok, a.changeLog())
	}
	rel, ok := a.firstChange(`held mapped files (read sequentially)`)
	scanStart := start.Add(phaseMmap)
	if !ok {
		t.Fatalf("the held file was not released; changes %v", a.changeLog())
	}
	scan := scanProgress(out)
	after := rel.Sub(scanStart)
	t.Logf("cut to %d KiB at %.2f s of the load, released %.2f s into the scan; changes %v", cut.kib,
		cut.at.Sub(start).Seconds(), after.Seconds(), a.changeLog())
	if after < 0 || after > 2*time.Second {
		t.Errorf("released %.2f s into the scan; want within 2 s of its start", after.Seconds())
	}
	half := time.Second / 2
	samples := <-stats
	sizeBefore := requestSectors(samples, rel.Add(-half), rel)
	sizeAfter := requestSectors(samples, rel.Add(half/5), rel.Add(half+half/5))
	t.Logf("the scan passed %.0f MiB/s in the half second before, %.0f after; the device's reads averaged %.0f sectors, then %.0f",
		rateAround(scan, after-half, after)/(1<<20), rateAround(scan, after, after+half)/(1<<20), sizeBefore, sizeAfter)
	if sizeBefore <= 0 || sizeAfter < 4*sizeBefore {
		t.Errorf("read requests of %.0f sectors before, %.0f after: want at least 4 times as large", sizeBefore, sizeAfter)
	}
}

// TestReadAheadRestoredWithinAWindow: the thrash test's process, in a
// 256 MiB memory cgroup, reads random pages of a mapped 1 GiB file for
// 5 s, and the agent (12 s windows, minDwell 0) cuts read-ahead from 2560
// as in TestThrashCutWithinAWindow; then, the file still mapped, the
// process reads a second file of 576 MiB sequentially in 8 KiB read()s.
// The scan must read at the device's depth within 3 s of its start:
// after a cut of the mapped files alone (Action.mappedOnly), the device
// kept 2560 and no window may show it lower; after a cut of the device,
// sequential readers use read-ahead again and the agent must restore
// 2560 before the window's end (the thrash check ends the window early:
// restoresOnUse, agent/thrashcheck.go), though the scan evicts the mmap
// phase's read-around pages unused. Either way the device's read
// requests in the half second from 0.1 s after the device is at its depth
// for the scan must be at least 4 times as large as in the half second
// before (at the cut depth). The scan's rate is logged, not checked:
// with two busy loops on the two cores the scan's 8 KiB reads were bound
// by the CPU at 240 MiB/s at either depth; the application's gain is
// measured by make bench-decisions (MEM-scan). (A raise keeps the mapped
// file at the cut depth, agent/openfiles/hold.go;
// TestFollowKeepingMappedHoldsAndReleases checks that.)
func TestReadAheadRestoredWithinAWindow(t *testing.T) {
	fx := newThrashFixture(t, phaseScanBytes+64<<20)
	scanned := filepath.Join(filepath.Dir(fx.data), "scanned")
	loopdev.WriteRandom(t, scanned, phaseScanBytes)
	loopdev.Evict(t, scanned)
	loopdev.Evict(t, fx.data)
	a, start, out, stats := fx.runPhases(t, scanned)
	final := a.stop(t)
	scan := scanProgress(out)
	cut, ok := a.firstCut(fx.l.Name)
	if !ok {
		t.Fatalf("no read-ahead cut in %d windows; changes %v; final %+v", len(a.windows()), a.changeLog(), final)
	}
	// The scan reads at the device's depth from its start after a cut of
	// the mapped files alone, else from the device's restore.
	scanStart := start.Add(phaseMmap)
	deep := scanStart
	if !cut.mapped {
		restore, ok := a.firstRestoreAfter(fx.l.Name, cut.window)
		if !ok {
			t.Fatalf("read_ahead_kb cut to %d at %.2f s and not restored; changes %v", cut.kib,
				cut.at.Sub(start).Seconds(), a.changeLog())
		}
		deep = restore.at
	} else {
		held := false
		for _, s := range a.windows() {
			for _, d := range s.Devices {
				if d.Name != fx.l.Name {
					continue
				}
				if d.Current.ReadAheadKiB != 2560 {
					t.Errorf("window %d: after a cut of the mapped files alone the device's read_ahead_kb is %d; want 2560 kept",
						s.Windows, d.Current.ReadAheadKiB)
				}
				if ra := d.ReadAhead; ra != nil && ra.HeldMappedFiles > 0 && int(ra.HeldReadAheadKiB) == cut.kib {
					held = true
				}
			}
		}
		if !held {
			t.Errorf("no window's status shows the mapped file held at %d KiB (readAhead.heldMappedFiles)", cut.kib)
		}
	}
	after := deep.Sub(scanStart)
	t.Logf("read_ahead_kb 2560 -> %d (mapped files only %v) at %.2f s of the load; the device at 2560 %.2f s into the scan; changes %v",
		cut.kib, cut.mapped, cut.at.Sub(start).Seconds(), after.Seconds(), a.changeLog())
	if after > 3*time.Second {
		t.Errorf("read_ahead_kb restored %.2f s into the scan; want within 3 s (the window is %v)", after.Seconds(), thrashWindow)
	}
	for w := 1; w <= len(a.windows()); w++ {
		if m := a.sysAt(w); m != "" {
			t.Errorf("sysfs differs from the status:%s", m)
		}
	}
	half := time.Second / 2
	samples := <-stats
	// Before: the last half second at the cut depth (the mmap phase's
	// read-around after a cut of the mapped files, else the scan's first
	// reads). After: a half second from a tenth of a second after the
	// device is at its depth again.
	at := deep
	if at.Before(scanStart) {
		at = scanStart
	}
	sizeBefore := requestSectors(samples, at.Add(-half), at)
	sizeAfter := requestSectors(samples, at.Add(half/5), at.Add(half+half/5))
	rateBefore, rateAfter := rateAround(scan, after-half, after), rateAround(scan, after, after+half)
	t.Logf("the scan read %.0f MiB/s in the half second before, %.0f in the half second after; the device's reads averaged %.0f sectors, then %.0f",
		rateBefore/(1<<20), rateAfter/(1<<20), sizeBefore, sizeAfter)
	if sizeBefore <= 0 || sizeAfter < 4*sizeBefore {
		t.Errorf("read requests of %.0f sectors before, %.0f after: want at least 4 times as large", sizeBefore, sizeAfter)
	}
}

// runPhases starts the agent (thrashWindow windows, minDwell 0 as in make
// bench-decisions: the default 10 min would hold a restore or release,
// open files followed), runs TestPhaseChild on fx.data then second (a
// file, or mappedScan) in the memory cgroup, and returns the agent, still
// running, when the child started, its output, and the device's read
// samples taken while it ran.
func (fx *thrashFixture) runPhases(t *testing.T, second string) (a *runningAgent, start time.Time, out string, samples <-chan []readSample) {
	t.Helper()
	spec := fx.spec(thrashWindow)
	spec.Rollout.MinDwell = &metav1.Duration{}
	a = startAgent(t, agent.Options{StateDir: fx.stateDir, Spec: spec, Tracer: tracer.KindAuto,
		Log: testr.New(t), TraceSample: -1, FollowOpenFiles: true})
	stop := make(chan struct{})
	samples = sampleReads(fx.l.Name, stop)
	start, out = loopdev.RunChild(t, fx.procs, "TestPhaseChild", phaseChildEnv+"="+fx.data+":"+second)
	close(stop)
	return a, start, out, samples
}

// readSample is the device's completed reads and sectors read at a time.
type readSample struct {
	at             time.Time
	reads, sectors uint64
}

// sampleReads reads /sys/block/NAME/stat every 50 ms until stop is
// closed, then sends the samples.
func sampleReads(name string, stop <-chan struct{}) <-chan []readSample {
	out := make(chan []readSample, 1)
	go func() {
		var s []readSample
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, err := sysfs.ReadStat("/", name); err == nil {
				s = append(s, readSample{at: time.Now(), reads: st.ReadIOs, sectors: st.ReadSectors})
			}
			select {
			case <-stop:
				out <- s
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// requestSectors is the mean size of the read requests the device
// completed between from and to, in sectors, taken at the samples
// nearest to them (0 when it completed none).
func requestSectors(s []readSample, from, to time.Time) float64 {
	near := func(at time.Time) readSample {
		best := s[0]
		for _, x := range s {
			if x.at.Sub(at).Abs() < best.at.Sub(at).Abs() {
				best = x
			}
		}
		return best
	}
	a, b := near(from), near(to)
	if b.reads <= a.reads {
		return 0
	}
	return float64(b.sectors-a.sectors) / float64(b.reads-a.reads)
}

// scanProgress is TestPhaseChild's scan progress: elapsed time into the
// scan → bytes read.
func scanProgress(out string) map[time.Duration]int {
	p := map[time.Duration]int{0: 0}
	for _, line := range strings.Split(out, "\n") {
		var ms int64
		var n int
		if _, err := fmt.Sscanf(line, "scan %d %d", &ms, &n); err == nil {
			p[time.Duration(ms)*time.Millisecond] = n
		}
	}
	return p
}

// firstChange is when the agent first made a change whose text holds
// what: the end of the window whose status shows it.
func (a *runningAgent) firstChange(what string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.wins {
		if d, ok := deviceStatus(s, a.name); ok && strings.Contains(d.LastChangeWhat, what) {
			return a.at[i], true
		}
	}
	return time.Time{}, false
}

// firstRestoreAfter is the first window after window after whose status
// shows read-ahead back at 2560.
func (a *runningAgent) firstRestoreAfter(name string, after int) (cutAt, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.wins {
		if d, ok := deviceStatus(s, name); ok && s.Windows > after && d.ReadAheadKiB == 2560 {
			return cutAt{window: s.Windows, kib: d.ReadAheadKiB, sampled: d.Sampled, at: a.at[i]}, true
		}
	}
	return cutAt{}, false
}
