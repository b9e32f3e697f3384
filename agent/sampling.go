package agent

// Sampled tracing: a settled device's windows are traced for their last
// part only.
//
// Tracing costs the traced application in its own I/O calls: the BPF
// programs run in every request's submission and completion and in every
// page-cache event of a tracked file system, and the agent learns every
// request it delivers. On a device where no candidate beats the current
// setting, that cost is all the agent adds (docs/runs/2026-12-03-history.md: 5.8 %
// of the AIR/AIP suite's wall time on a loop device where the agent made
// no change). So once SettleWindows windows in a row left the device
// settled (evaluated, nothing decided, held, pending or being verified),
// each following window pauses the device's tracing
// (tracer.Tracer.SetPaused) and its page-cache tracking (all but the
// read-ahead windows and the pages page faults read around) at its start and
// resumes both Options.TraceSample before its end: the window is then
// evaluated over that sample, the newest part of it. Every window is
// still evaluated, so a workload change is seen within a window as
// before. A sample that decides anything, or is too small to evaluate,
// makes the next window traced whole (after a sample that was only too
// small, or a window not reproduced by the model, one settled whole
// window returns the device to sampling; a whole window too idle to
// evaluate leaves the count as it was: nextSettle), and a change is
// verified on whole windows. A sample's read-ahead evidence counts as a
// whole window's, its read() pages scaled to the window (sampleScale),
// and a scheduler switch a sample decides needs the next, whole, window to
// decide it too (confirmSwitch). Caps of a token bucket that one window
// showed are confirmed on the next, whole, window too (checkThrottle): a
// sample of a second holds too few phases of a varied load to show both
// caps. A sample that holds far fewer requests than its share of what
// the device completed over the window (sampleMissed) missed the window's
// work: it predicts nothing, and the next window is traced whole. A
// device whose policy governs a cache is traced whole: the
// simulated cache is carried warm from window to window
// (engine.CacheWarm).

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/shadowtune/shadowtune/agent/tracer"
)

// DefaultTraceSample is the traced part of a settled device's window
// (Options.TraceSample).
const DefaultTraceSample = time.Second

// sampleMissed reports whether a sampled window's traced part missed
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
func sampleMissed(completed, inSample uint64, scale float64) (string, bool) {
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

// sampleLen is the traced part of a sampled window, 0 when the agent
// does not sample (Options.TraceSample negative, or a window of at most
// twice the sample).
func (a *Agent) sampleLen() time.Duration {
	s := a.opt.TraceSample
	if s == 0 {
		s = DefaultTraceSample
	}
	if s < 0 || a.window <= 2*s || a.noPause {
		return 0
	}
	return s
}

// sampleScale is a sampled window's length over its traced part
// (window.Input.ReadScale), 0 when the agent does not sample.
func (a *Agent) sampleScale() float64 {
	if s := a.sampleLen(); s > 0 {
		return float64(a.window) / float64(s)
	}
	return 0
}

// startSamples begins the window that started at now: it pauses the
// tracing of every device whose window may be sampled, and returns when
// to resume them (the zero time when it paused none).
func (a *Agent) startSamples(now time.Time) time.Time {
	paused := a.sampledNext()
	if len(paused) == 0 {
		return time.Time{}
	}
	if !a.setPaused(paused) {
		return time.Time{}
	}
	return now.Add(a.window - a.sampleLen())
}

// sampledNext marks the devices whose next window may be sampled
// (device.sampled) and returns their device numbers. Start gives the
// first window's to the tracer as it starts (tracer.Options.Paused), so
// that a device whose model was loaded settled is never traced whole at
// the agent's start: its programs attach at the sample, not before.
func (a *Agent) sampledNext() []uint32 {
	s := a.sampleLen()
	var paused []uint32
	for _, d := range a.devs {
		d.sampled = d.status.Gone == "" && d.ctrl.SampleNext(s > 0, d.policy.Spec.Cache.Enabled)
		if d.sampled {
			paused = append(paused, d.sys.Dev)
		}
	}
	return paused
}

// resumeSamples resumes the tracing of every device; the windows stay
// marked sampled until they end.
func (a *Agent) resumeSamples() {
	for _, d := range a.devs {
		if d.sampled {
			d.markSample(a.opt.HostRoot)
		}
	}
	a.setPaused(nil)
}

// setPaused pauses the tracing and page-cache tracking (but for the pages
// page faults read around) of devs and resumes every other device's,
// reporting whether it did. A tracer that cannot pause turns sampling
// off for good (noted in the status); on any other error every device is
// traced whole.
func (a *Agent) setPaused(devs []uint32) bool {
	err := a.tr.SetPaused(devs)
	if err != nil {
		if errors.Is(err, tracer.ErrPauseUnsupported) {
			a.noPause = true
			a.notes = append(a.notes, "windows are traced whole: "+err.Error())
			a.st.Notes = append(a.st.Notes, a.notes[len(a.notes)-1])
		} else {
			a.opt.Log.Error(err, "pause the tracing of settled devices")
		}
		devs = nil
		for _, d := range a.devs {
			d.sampled = false
		}
		if rerr := a.tr.SetPaused(nil); rerr != nil {
			a.opt.Log.Error(rerr, "resume the tracing of every device")
		}
	}
	a.paused = devs
	a.trackPageCache()
	return err == nil
}
