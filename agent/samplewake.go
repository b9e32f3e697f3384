package agent

// A paused sample is probed early on a surge of reads or of read-around.
//
// A settled device's window is traced for its last part only
// (sampling.go), and its pages are followed in that part only too, so a
// thrash that starts during the pause would wait for the sample to be
// seen (the thrash check, thrashcheck.go, has no waste to look at until
// then). Two counts go on during the pause, and at every thrash check
// either can resume the device's tracing for ProbeChecks checks (a
// second), a probe, which the first check that finds the thrash ends:
//
//   - the device's reads, which the kernel counts whether or not the
//     agent traces them (/sys/block/NAME/stat): a read rate since the
//     last check of SurgeFactor times the rate over the last window, and
//     at least SurgeFloorSectorsPerSec;
//   - its page faults that missed the page cache and the read-around
//     windows they read, which the page-cache probe counts lightly while
//     the device is paused (with the pages they read around, whose waste
//     the thrash check cuts on before any probe when it is the mapped
//     files': thrashcheck.go): at least AroundMinFaults faults reading
//     AroundMinPagesPerFault pages each on average, and at least
//     SurgeFloorSectorsPerSec of them. That is what read-ahead that
//     thrashes under random mmap reads looks like, whatever ran before it
//     (a surge needs a quieter window before it, and in the
//     decision-quality benchmark MEM followed a heavier reader).
//
// If a thrash check then finds the device thrashing, the window ends
// there and decides on what the probe traced; if none of the probe's
// checks does, the device is paused again until its sample. Each count
// probes a device at most once a window, so the probes cost at most two
// seconds of tracing a window, and a surge at a workload's start (every
// workload of the AIR suite begins with one) does not use up the probe
// of a thrash that follows within the window. Only devices whose
// read-ahead a thrash could cut now (deviceController.mayCut) are
// probed, as only they have a decision to gain.

import (
	"slices"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// Thresholds of a read surge.
const (
	// SurgeFactor is how many times the last window's read rate a
	// check's interval must reach.
	SurgeFactor = 4.0
	// SurgeFloorSectorsPerSec is the least read rate that is a surge,
	// sectors (512 B) a second: 8 MiB/s.
	SurgeFloorSectorsPerSec = 16384.0
	// AroundMinFaults is how many page faults that missed the page cache
	// a check's interval must have for their read-around to be probed.
	AroundMinFaults = 32
	// AroundMinPagesPerFault is the least mean read-around window of
	// those faults, pages (4 KiB): 256 KiB, a tenth of the 2560 KiB at
	// which MEM's random mmap reads thrash its cgroup's page cache
	// (docs/bench-decisions.md); at 128 KiB and below, where the thrash
	// check's cuts leave a device, no probe is asked for.
	AroundMinPagesPerFault = 64
	// ProbeChecks is how many thrash checks a probe lasts unless one of
	// them finds the device thrashing: a second at ThrashCheckEvery. A
	// probe of one check (500 ms) resolved too few pages to show the
	// thrash after a heavy reader (TestThrashCutAfterHeavyReader).
	ProbeChecks = int(time.Second / ThrashCheckEvery)
	// MinCheckInterval is the shortest interval a surge or a read-around
	// rate is taken over. A check right after a window's end (its tick
	// waited behind the window's evaluation) would divide a burst by
	// milliseconds; the next check takes the longer interval instead.
	MinCheckInterval = ThrashCheckEvery / 4
)

// readRates are a device's read rates, sectors (512 B) a second.
type readRates struct {
	// Window is the rate over the last whole window (0 before the first
	// window's end).
	Window float64
	// Windowed says a whole window's rate is known: false until the
	// agent's first window has ended, when no rate is a surge.
	Windowed bool
	// Interval is the rate since the last check (or window end), over
	// the interval's length El.
	Interval float64
	El       time.Duration
}

// surges reports whether r is a surge of reads: an interval rate of at
// least SurgeFloorSectorsPerSec and SurgeFactor times the window's, once
// a window's rate is known. Before the agent's first window has ended
// nothing is quiet to surge over: in the decision benchmark every start
// "surged" on the first workload's reads, and that workload was traced
// for its whole run (a thrash by page faults is probed on their
// read-around, readsAround, all the same).
func surges(r readRates) bool {
	return r.Windowed && r.Interval >= SurgeFloorSectorsPerSec && r.Interval >= SurgeFactor*r.Window
}

// readsAround reports whether pc, a paused device's counts over a check's
// interval of el, show faults reading large read-around windows:
// AroundMinFaults faults or more, AroundMinPagesPerFault pages read around
// each on average, and SurgeFloorSectorsPerSec or more of them.
func readsAround(pc PageCacheWindow, el time.Duration) bool {
	if el < MinCheckInterval || pc.Faults < AroundMinFaults || pc.AroundPages < AroundMinPagesPerFault*pc.Faults {
		return false
	}
	return float64(pc.AroundPages)*8/el.Seconds() >= SurgeFloorSectorsPerSec
}

// readWatch follows a device's read sectors between checks and windows.
type readWatch struct {
	known            bool
	windowed         bool // windowRate is a whole window's
	at, windowAt     time.Time
	sectors, wSector uint64
	windowRate       float64 // sectors/s over the last window
}

// rate is the rate from (at0, s0) to (at1, s1), sectors a second.
func rate(at0, at1 time.Time, s0, s1 uint64) float64 {
	el := at1.Sub(at0).Seconds()
	if el <= 0 || s1 < s0 {
		return 0
	}
	return float64(s1-s0) / el
}

// check takes the device's read sectors s, read at now, and returns the
// rates since the last check and over the last window; none (false) when
// the last check was less than MinCheckInterval before, which the next
// check's interval then includes.
func (w *readWatch) check(now time.Time, s uint64) (readRates, bool) {
	if !w.known {
		w.known, w.at, w.windowAt, w.sectors, w.wSector = true, now, now, s, s
		return readRates{}, false
	}
	el := now.Sub(w.at)
	if el < MinCheckInterval {
		return readRates{}, false
	}
	r := readRates{Window: w.windowRate, Windowed: w.windowed, Interval: rate(w.at, now, w.sectors, s), El: el}
	w.at, w.sectors = now, s
	return r, true
}

// endWindow takes the device's read sectors s at a window's end, read at
// now.
func (w *readWatch) endWindow(now time.Time, s uint64) {
	if w.known {
		w.windowRate, w.windowed = rate(w.windowAt, now, w.wSector, s), true
	}
	w.known, w.at, w.windowAt, w.sectors, w.wSector = true, now, now, s, s
}

// readSectors is the device's sectors read so far, from sysfs. The loop
// times it with time.Now(), not a tick's time: a tick waits while the
// loop evaluates a window, and a rate over the ticks' times divided the
// sectors of hundreds of milliseconds by microseconds (a "surge" of
// 645,609 MiB/s on the decision benchmark).
func (a *Agent) readSectors(d *device) (uint64, bool) {
	st, err := sysfs.ReadStat(a.opt.HostRoot, d.sys.Name)
	if err != nil {
		return 0, false // gone: the window's end says so
	}
	return st.ReadSectors, true
}

// wakeState is a device's probe in the current window.
type wakeState struct {
	// probing is how many more checks the device's probe lasts (0: not
	// probing);
	probing int
	// surged, around: it was probed on a surge of reads, on its faults'
	// read-around, in this window, and is not again on the same count.
	surged, around bool
}

// wakeOnSurge probes, at now (the time its read counts are read at),
// every paused device whose read-ahead a thrash could cut, and whose
// reads surged since the last check or whose faults read large
// read-around windows in iv, the devices' page-cache counts since the
// last check (empty when the probe has none), unless that count probed
// it already in this window.
func (a *Agent) wakeOnSurge(now time.Time, iv pcInterval) {
	if len(a.paused) == 0 {
		return
	}
	keep := a.paused[:0:0]
	for _, d := range a.devs {
		if !slices.Contains(a.paused, d.sys.Dev) {
			continue
		}
		if !d.ctrl.policy.ReadAhead || (d.wake.surged && d.wake.around) || !d.ctrl.mayCut(d.checkGate(), now) {
			keep = append(keep, d.sys.Dev)
			continue
		}
		s, ok := a.readSectors(d)
		r, known := d.reads.check(now, s)
		pc := iv.devs[d.sys.Name]
		switch {
		case !d.wake.surged && ok && known && surges(r):
			d.wake.surged = true
			a.opt.Log.Info("sample probed early: reads surged", "device", d.sys.Name,
				"readMiBPerSec", r.Interval/2048, "windowMiBPerSec", r.Window/2048, "over", r.El.Round(time.Millisecond))
		case !d.wake.around && readsAround(pc, iv.el):
			d.wake.around = true
			a.opt.Log.Info("sample probed early: faults read around", "device", d.sys.Name,
				"faults", pc.Faults, "aroundKiBPerFault", 4*pc.AroundPages/pc.Faults)
		default:
			keep = append(keep, d.sys.Dev)
			continue
		}
		d.wake.probing = ProbeChecks
	}
	if len(keep) < len(a.paused) {
		a.setPaused(keep)
	}
}

// endProbes counts a check off every probe, and pauses again, until
// their samples begin at sampleAt, the devices whose probe has lasted
// ProbeChecks checks (the thrash check found them not thrashing).
func (a *Agent) endProbes(now, sampleAt time.Time) {
	paused := slices.Clone(a.paused)
	for _, d := range a.devs {
		if d.wake.probing == 0 {
			continue
		}
		if d.wake.probing--; d.wake.probing == 0 {
			paused = append(paused, d.sys.Dev)
		}
	}
	if len(paused) > len(a.paused) && now.Before(sampleAt) {
		a.setPaused(paused)
	}
}

// markReads takes the read sectors of every device whose read-ahead is
// governed (the only ones probed) at a window's end, read at now.
func (a *Agent) markReads(now time.Time) {
	for _, d := range a.devs {
		if !d.ctrl.policy.ReadAhead {
			continue
		}
		if s, ok := a.readSectors(d); ok {
			d.reads.endWindow(now, s)
		}
	}
}
