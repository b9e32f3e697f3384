// Package sampling is the agent's sampled tracing: which part of a
// settled device's window is traced, the pause of the tracing of the
// devices whose windows are sampled, and whether a sample missed its
// window's work. Times are durations; counts are the device's completed
// requests (its stat file).
//
// Sampled tracing: a settled device's windows are traced for their last
// part only.
//
// Tracing costs the traced application in its own I/O calls: the BPF
// programs run in every request's submission and completion and in every
// page-cache event of a tracked file system, and the agent learns every
// request it delivers. On a device where no candidate beats the current
// setting, that cost is all the agent adds. So once SettleWindows windows in a row left the device
// settled (evaluated, nothing decided, held, pending or being verified),
// each following window pauses the device's tracing
// (tracer.Tracer.SetPaused, Tracing.Pause) and its page-cache tracking (all but the
// read-ahead windows and the pages page faults read around) at its start and
// resumes both Tracing.Sample before its end: the window is then
// evaluated over that sample, the newest part of it. Every window is
// still evaluated, so a workload change is seen within a window as
// before. A sample that decides anything, or is too small to evaluate,
// makes the next window traced whole (after a sample that was only too
// small, or a window not reproduced by the model, one settled whole
// window returns the device to sampling; a whole window too idle to
// evaluate leaves the count as it was: nextSettle), and a change is
// verified on whole windows. A sample's read-ahead evidence counts as a
// whole window's, its read() pages scaled to the window (Tracing.Scale),
// and a scheduler switch a sample decides needs the next, whole, window to
// decide it too (confirmSwitch). Caps of a token bucket that one window
// showed are confirmed on the next, whole, window too (checkThrottle): a
// sample of a second holds too few phases of a varied load to show both
// caps. A sample that holds far fewer requests than its share of what
// the device completed over the window (Missed) missed the window's
// work: it predicts nothing, and the next window is traced whole. A
// device whose policy governs a cache is traced whole: the
// simulated cache is carried warm from window to window
// (engine.CacheWarm).
package sampling

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

// DefaultTraceSample is the traced part of a settled device's window
// (Tracing.Sample 0).
const DefaultTraceSample = time.Second

// Missed reports whether a sampled window's traced part missed
// the window's work, and says so: the device completed completed
// requests over the whole window and inSample of them during its traced
// part, 1/scale of the window (both from its stat file, part_stat_show
// in block/genhd.c, which the tracer's delivery does not delay). At a
// steady rate the traced part holds its share, completed/scale. It missed the work when it holds less than half of
// that share, so that the rest of the window ran at more than twice the
// traced part's rate (a burst, a phase that ended before the sample: a
// load other than the one traced, where a steady one's rate varies by
// percents), and when that shortfall is more than three standard
// deviations of a Poisson count of that mean (below 0.2 % at a steady
// rate), so that a handful of requests never counts as a missed load.
// Predictions from such a traced part would be about another load than
// the window's.
func Missed(completed, inSample uint64, scale float64) (string, bool) {
	if scale <= 1 || completed == 0 {
		return "", false
	}
	want := float64(completed) / scale
	if float64(inSample) >= want/2 || float64(inSample) >= want-3*math.Sqrt(want) {
		return "", false
	}
	return fmt.Sprintf("the traced last 1/%.0f of the window held %d of the %d requests the device completed in it (%.0f at a steady rate): "+
		"its work came before the sample, which predicts nothing; the next window is traced whole", scale, inSample, completed, want), true
}

// Pauser pauses the tracing of devices (tracer.Tracer.SetPaused).
type Pauser interface {
	SetPaused(devs []uint32) error
}

// Tracing is the agent's sampling of its devices' windows: the length of
// a sampled window's traced part, and the devices whose tracing is paused
// now. It is used by one goroutine.
type Tracing struct {
	// Sample is the traced part of a settled device's window: 0 takes
	// DefaultTraceSample; negative traces every window whole.
	Sample time.Duration
	// Log receives the errors of pausing and resuming.
	Log logr.Logger

	// paused are the devices whose tracing is paused now; off: the
	// tracer cannot pause, and no window is sampled.
	paused []uint32
	off    bool
}

// Len is the traced part of a sampled window of length window, 0 when
// no window is sampled (Sample negative, a window of at most twice the
// sample, or a tracer that cannot pause).
func (t *Tracing) Len(window time.Duration) time.Duration {
	s := t.Sample
	if s == 0 {
		s = DefaultTraceSample
	}
	if s < 0 || window <= 2*s || t.off {
		return 0
	}
	return s
}

// Scale is a sampled window's length (window) over its traced part
// (window.Input.ReadScale), 0 when no window is sampled.
func (t *Tracing) Scale(window time.Duration) float64 {
	if s := t.Len(window); s > 0 {
		return float64(window) / float64(s)
	}
	return 0
}

// Paused are the devices whose tracing is paused now.
func (t *Tracing) Paused() []uint32 { return t.paused }

// Started records that the tracer started with devs paused
// (tracer.Options.Paused).
func (t *Tracing) Started(devs []uint32) { t.paused = devs }

// Pause pauses the tracing of devs through tr and resumes every other
// device's, reporting whether it did. A tracer that cannot pause turns
// sampling off for good, and note says so for the status; on any other
// error (logged) every device is traced whole.
func (t *Tracing) Pause(tr Pauser, devs []uint32) (note string, ok bool) {
	err := tr.SetPaused(devs)
	if err != nil {
		if errors.Is(err, tracer.ErrPauseUnsupported) {
			t.off = true
			note = "windows are traced whole: " + err.Error()
		} else {
			t.Log.Error(err, "pause the tracing of settled devices")
		}
		devs = nil
		if rerr := tr.SetPaused(nil); rerr != nil {
			t.Log.Error(rerr, "resume the tracing of every device")
		}
	}
	t.paused = devs
	return note, err == nil
}

// Counts are a device's completed reads and writes (its stat file) at
// its window's start (the last window's end) and at its sample's start
// (MarkSample); the ok flags say they were read.
type Counts struct {
	start, sample     uint64
	startOK, sampleOK bool
}

// completedIOs is the reads and writes device dev has completed (its
// stat file under hostRoot); false when the file cannot be read.
func completedIOs(hostRoot, dev string) (uint64, bool) {
	st, err := sysfs.ReadStat(hostRootOr(hostRoot), dev)
	if err != nil {
		return 0, false
	}
	return st.ReadIOs + st.WriteIOs, true
}

// MarkSample notes device dev's completed requests as its sample starts
// (the tracing of a sampled window resumes).
func (c *Counts) MarkSample(hostRoot, dev string) {
	c.sample, c.sampleOK = completedIOs(hostRoot, dev)
}

// Check ends the window's count of device dev's completed requests, at
// its end, and says whether a sampled window's sample missed its work
// (Missed): "" when it did not, or when the window was not sampled or
// its counts were not read. scale is the window's length over the
// sample's.
func (c *Counts) Check(hostRoot, dev string, sampled bool, scale float64) string {
	end, ok := completedIOs(hostRoot, dev)
	start, sample := c.start, c.sample
	known := ok && c.startOK && c.sampleOK && start <= sample && sample <= end
	c.start, c.startOK, c.sampleOK = end, ok, false
	if !sampled || !known {
		return ""
	}
	msg, _ := Missed(end-start, end-sample, scale)
	return msg
}

// hostRootOr is r, or "/" when r is "".
func hostRootOr(r string) string {
	if r == "" {
		return "/"
	}
	return r
}
