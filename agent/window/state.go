package window

// What the device (package agent) reads and sets of its controller
// between windows: for its status, metrics, logs and memo, when its policy
// changes (Carry), and what it found out about the device itself (its
// original read-ahead, a dm-cache in front of it).

import (
	"maps"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/readahead"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Learned tells the controller that its model was learned before (loaded
// from the state directory): it counts as calibrated, its first window is
// learned online (the model's window starts now), and the window may be
// sampled (SettleWindows), since any decision makes the next one whole.
func (c *Controller) Learned() {
	c.learn.loaded()
	c.settled = SettleWindows
}

// Carry gives c what o learned about the same disk under a previous
// policy: the model with its calibration (when the capacity is the same;
// it reports whether it was carried), the regression back-off, the time
// of the last change (for minDwell) and the read-ahead default before a
// change under the device.
func (c *Controller) Carry(o *Controller) bool {
	carried := o.learn.model.Config().CapacitySectors == c.learn.model.Config().CapacitySectors
	if carried {
		c.learn.carry(&o.learn)
	}
	maps.Copy(c.Memo.Backoff, o.Memo.Backoff)
	c.Memo.LastChange, c.ahead.previousKiB = o.Memo.LastChange, o.ahead.previousKiB
	return carried
}

// Model is the device's model (replaced when calibration, a throttle or
// the servers' fit re-model the device).
func (c *Controller) Model() *model.Model { return c.learn.model }

// Note is what calibration, or a later re-modelling, found about the
// device ("" when nothing), for the status.
func (c *Controller) Note() string { return c.learn.note }

// Calibrated reports whether the model was calibrated on the device.
func (c *Controller) Calibrated() bool { return c.learn.calibrated }

// Requests is the number of requests the current window has taken so far
// (Add).
func (c *Controller) Requests() int { return c.win.total }

// Settled is the number of consecutive windows that left the device
// settled (agent/sampling).
func (c *Controller) Settled() int { return c.settled }

// SetSettled sets that count (n windows).
func (c *Controller) SetSettled(n int) { c.settled = n }

// LogThrottle logs to log, at verbosity 1, what the last window showed
// of a token bucket in front of disk (checkThrottle), and the device's
// class; nothing when the window was not checked.
func (c *Controller) LogThrottle(log logr.Logger, disk string) { c.learn.logThrottle(log, disk) }

// LogReadAhead logs to log, at verbosity 1, the last window's read-ahead
// evidence on disk and the costs (ms of device time) its decision
// compared; nothing when the policy does not govern read-ahead.
func (c *Controller) LogReadAhead(log logr.Logger, disk string) {
	if c.Policy.ReadAhead {
		c.ahead.log(log, disk, c.Current.ReadAheadKiB)
	}
}

// sampleInput is the controller's part of the decision whether its next
// window may be sampled.
func (c *Controller) sampleInput(enabled, cache bool) sampleInput {
	return sampleInput{
		Enabled: enabled, Settled: c.settled, Calibrated: c.learn.calibrated,
		Verifying: c.verify != nil,
		Proposed:  c.proposed != "", CapsPending: c.learn.capsPending(),
		Cache: cache,
	}
}

// Predicted is the measure, ns, the decision compares for each candidate of
// the policy in the window r evaluated (engine.Report.Corrected), for the
// counterfactual's counters. In a window that simulated the current
// setting alone, every other candidate is what the agent holds it to be:
// the current setting's simulated outcome, with its own scheduler's
// dispatch factor and correction.
func (c *Controller) Predicted(r engine.Report) map[string]time.Duration {
	return predicted(r, c.Policy.Candidates, c.Policy.Engine.Rank, c.Memo.Corrections, c.narrow)
}

// ShowEvidence puts the evidence of the controller's last window into
// the device's status st: the read-ahead measurements (when the policy
// governs read-ahead), the learned corrections (at most 16, by candidate
// name), the last verification (ms of application wait for a scheduler
// change, µs of device time per used page for read-ahead) and the
// counterfactual error.
func (c *Controller) ShowEvidence(st *v1alpha1.DeviceState) {
	if c.Policy.ReadAhead {
		st.ReadAhead = c.ahead.status()
	}
	st.Corrections = correctionsStatus(c.Memo.Corrections)
	if v := c.lastVerify; v != nil {
		st.LastVerification = verificationStatus(v)
	}
	st.Counterfactual = counterfactualStatus(c.Memo.Counterfactual, c.Policy.Backoff, c.Policy.Decide.MarginPct)
}

// DefaultCosts are the predicted device times, ns, of the same work at a
// changed knob's new and old defaults; 0, 0 when the window does not
// price them. read_ahead_kb: the read-ahead road's cost of the readers'
// decayed page-cache evidence at each depth (readahead.Cost), once the
// evidence resolved enough pages to be judged. scheduler: the
// simulation of the window's requests (r) under each, when both are
// candidates of the policy.
func (c *Controller) DefaultCosts(k v1alpha1.KnobChange, r *engine.Report) (newNs, oldNs float64) {
	switch k.Knob {
	case "read_ahead_kb":
		if !c.Policy.ReadAhead {
			return 0, 0
		}
		return c.ahead.defaultCosts(k.New, k.Old, c.raSettings(0))
	case "scheduler":
		if r == nil {
			return 0, 0
		}
		return float64(simulatedTotal(*r, c.Policy.Engine.Rank, k.New)), float64(simulatedTotal(*r, c.Policy.Engine.Rank, k.Old))
	}
	return 0, 0
}

// SampleNext reports whether the device's next window may be traced in
// part: enabled says the agent samples, cache that the policy governs a
// cache in front of the device.
func (c *Controller) SampleNext(enabled, cache bool) bool {
	return sampleNext(c.sampleInput(enabled, cache))
}

// SetExplain sets the function given every window whose simulation
// decided a scheduler switch, or predicted one it did not reproduce the
// window well enough to make: the window's end, its simulated requests,
// the model they were simulated with, and the report (nil: none).
func (c *Controller) SetExplain(fn func(time.Time, []trace.Request, *model.Model, engine.Report)) {
	c.explain = fn
}

// SetOriginalReadAhead sets the device's read_ahead_kb (KiB) before the
// agent, which the read-ahead road returns to.
func (c *Controller) SetOriginalReadAhead(kib int) { c.ahead.originalKiB = kib }

// SetPreviousReadAhead sets the device's read_ahead_kb (KiB) before its
// default changed under it (agent/sentinel); 0 when it did not.
func (c *Controller) SetPreviousReadAhead(kib int) { c.ahead.previousKiB = kib }

// SetCache tells the controller whether a dm-cache is in front of the
// device (present) and whether it is on (active). An active cache empties
// the simulated cache's contents: the next time it is off, the
// simulation starts afresh.
func (c *Controller) SetCache(present, active bool) {
	c.dmCache, c.cacheActive = present, present && active
	if c.cacheActive {
		c.cacheWarm = engine.CacheWarm{}
	}
}

// ForgetCacheWarm empties the simulated cache's contents carried from
// window to window (another dm-cache is in front of the device).
func (c *Controller) ForgetCacheWarm() { c.cacheWarm = engine.CacheWarm{} }

// ReadCosts are the mean read costs, ns, at the origin below a dm-cache
// and at the cache's block size, of the last window evaluated with a
// dm-cache in front (readCostNs); 0 before one.
func (c *Controller) ReadCosts() (readNs, blockReadNs float64) { return c.readNs, c.blockReadNs }

// Verifying reports whether a scheduler change is being verified.
func (c *Controller) Verifying() bool { return c.verify != nil }

// VerifyingWindows is the number of windows left to verify the last
// scheduler change (0: none).
func (c *Controller) VerifyingWindows() int {
	if c.verify == nil {
		return 0
	}
	return max(c.verify.left, 0)
}

// SetVerificationBias sets the real ÷ simulated ratio by which the
// verification in progress scales its expectation of the previous
// setting (nothing when none is in progress).
func (c *Controller) SetVerificationBias(b float64) {
	if c.verify != nil {
		c.verify.bias = b
	}
}

// SetChanging tells the controller that the device is being written with
// a change that starts a verification (Unverified says so meanwhile).
func (c *Controller) SetChanging(on bool) { c.changing = on }

// MemoDue reports whether the device's memo is out of date: a correction
// or a counterfactual check was learned, or Unverified changed, since
// MemoWritten.
func (c *Controller) MemoDue() bool { return c.memoDirty || c.memoUnverified != c.Unverified() }

// MemoWritten tells the controller that the memo was written, with
// unverified as its Unverified.
func (c *Controller) MemoWritten(unverified bool) { c.memoDirty, c.memoUnverified = false, unverified }

// NarrowedUntil is when the next full evaluation is due while the
// windows simulate the current setting alone because every candidate
// simulated alike (simulate.go); false when the last window was not
// narrowed.
func (c *Controller) NarrowedUntil() (time.Time, bool) { return c.alike.until, c.narrow }

// ReadAheadAdvice is the read_ahead_kb (KiB) the read-ahead road decided
// in the last window; 0 when the policy does not govern read-ahead or the
// road decided nothing.
func (c *Controller) ReadAheadAdvice() int {
	if !c.Policy.ReadAhead {
		return 0
	}
	return c.ahead.step.Decision.KiB
}

// ReadAheadEvidence is the read-ahead road's evidence of the last window.
func (c *Controller) ReadAheadEvidence() readahead.Evidence { return c.ahead.step.Evidence }

// CounterfactualHolding reports whether the counterfactual error held the
// last window's switch back.
func (c *Controller) CounterfactualHolding() bool { return c.cfHolding > 0 }

// CacheActive reports whether a dm-cache in front of the device is on
// (SetCache).
func (c *Controller) CacheActive() bool { return c.cacheActive }

// Simulated is the current window's newest requests, at most
// Policy.MaxSimulated, in arrival order: what EndWindow simulates.
func (c *Controller) Simulated() []trace.Request { return c.win.simulated() }

// Unlearned is the number of the current window's requests dropped
// before they could be learned (Skip).
func (c *Controller) Unlearned() int { return c.win.unlearned }

// ModelDMCache sets the simulated cache that stands for a dm-cache of
// blocks blocks of blockSectors 512-byte sectors in front of an origin of
// originSectors sectors: smq by its own rules (engine.SMQ, its hotspots
// sized by the origin), filled from empty over one window
// (engine.Options.CacheFill) as the real cache fills after a switch. With
// hitNs > 0, the cache device's measured read time in ns, each hit is
// charged it on one of the engine's CPUs (hostCPUs when the policy sets
// none); with hitNs 0 the hits keep the default RAM copy cost. It returns
// the servers the hits are charged on (0 with hitNs 0).
func (c *Controller) ModelDMCache(blocks, blockSectors, originSectors uint64, hitNs int64, hostCPUs int) (hitServers int) {
	cfg := &c.Policy.Engine.Cache
	*cfg = engine.SMQ(blocks, uint32(blockSectors), originSectors)
	c.Policy.Engine.CacheFill = true
	if hitNs <= 0 {
		return 0
	}
	cfg.HitOverheadNs = hitNs
	cfg.HitServers = c.Policy.Engine.CPUs
	if cfg.HitServers <= 0 {
		cfg.HitServers = hostCPUs
	}
	return cfg.HitServers
}

// RestoreMemo takes the device's memo an earlier run kept (m): its pacing
// (LastChange, Guard, Backoff added to the controller's), its corrections
// within [CorrectionMin, CorrectionMax] (the others are dropped) and its
// counterfactual record. An unsound record (counterfactual.Record.Valid)
// is not taken, the rest is, and Valid's error is returned.
func (c *Controller) RestoreMemo(m Memo) error {
	c.Memo.LastChange = m.LastChange
	c.Memo.Guard = m.Guard
	maps.Copy(c.Memo.Backoff, m.Backoff)
	for name, f := range m.Corrections {
		if f >= CorrectionMin && f <= CorrectionMax {
			c.Memo.Corrections[name] = f
		}
	}
	if err := m.Counterfactual.Valid(); err != nil {
		return err
	}
	c.Memo.Counterfactual = m.Counterfactual
	return nil
}
