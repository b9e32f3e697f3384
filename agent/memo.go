package agent

// The device's memo in the state directory (actuate.DeviceMemo): its
// pacing (the time of its last change, the thrash guard, the regression
// back-offs), learned corrections and counterfactual error, so that
// spec.rollout.minDwell and what was learned hold across restarts; and
// its queue defaults (agent/sentinel): at a device's first adoption in a
// run its defaults are compared with those kept at the previous start on
// the same disk, a change goes to the device's status (and from there to
// an Event and a metric), and the new defaults are kept in the memo. Each
// window then judges the changed knobs it can price (judgeDefaults), and a
// read_ahead_kb default judged slower is put back through the read-ahead
// road when the policy asks for it (readahead.Input.RestorePrevious).

import (
	"maps"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/internal/decide"
)

// remember restores a new device's pacing, corrections and counterfactual
// error from its memo in the state directory, when one was kept for the
// same disk, and its original read-ahead from the actuator's record. It
// compares the device's defaults (cur, when read) with the memo's and
// keeps them in the memo (checkDefaults).
func (d *device) remember(act *actuate.Actuator, cur *sentinel.Seen, log logr.Logger) {
	if o, ok := act.Original(d.sys.Name); ok && o.State.ReadAheadKiB > 0 {
		// The device was changed before this start: read-ahead is
		// restored to what it had before the agent, not to what it has.
		d.ctrl.SetOriginalReadAhead(o.State.ReadAheadKiB)
	}
	m, ok, err := act.LoadDeviceState(d.sys.Name)
	if err != nil {
		log.Error(err, "read the device's memo; starting without it", "device", d.sys.Name)
	}
	if cur != nil {
		d.checkDefaults(m.Defaults, m.PreviousDefaults, *cur, log)
		defer d.memorize(act, log)
	}
	if !ok {
		return
	}
	guard := decide.State{ConsecutiveChanges: m.GuardChanges, QuietChecks: m.GuardQuietChecks, Pinned: m.Pinned}
	memo := window.Memo{LastChange: m.LastChange, Guard: guard, Backoff: m.Backoff, Corrections: m.Corrections,
		Counterfactual: m.Counterfactual}
	if err := d.ctrl.RestoreMemo(memo); err != nil {
		log.Error(err, "the device's memo holds an unsound counterfactual record; starting without it", "device", d.sys.Name)
	}
}

// memorize keeps the device's pacing, learned corrections and
// counterfactual error in the state directory (after every write to the
// device, and when a verification taught a correction or a check).
func (d *device) memorize(act *actuate.Actuator, log logr.Logger) {
	c := d.ctrl
	m := actuate.DeviceMemo{LastChange: c.Memo.LastChange, GuardChanges: c.Memo.Guard.ConsecutiveChanges,
		GuardQuietChecks: c.Memo.Guard.QuietChecks, Pinned: c.Memo.Guard.Pinned, Backoff: maps.Clone(c.Memo.Backoff),
		Corrections: maps.Clone(c.Memo.Corrections), Counterfactual: c.Memo.Counterfactual, Unverified: c.Unverified(),
		Defaults: sentinel.Clone(d.defaults), PreviousDefaults: sentinel.Clone(d.previousDefaults)}
	c.MemoWritten(m.Unverified)
	if err := act.SaveDeviceState(d.sys.Name, m); err != nil {
		log.Error(err, "keep the device's pacing in the state directory", "device", d.sys.Name)
	}
}

// readDefaults returns the device's queue defaults now (sentinel.Current),
// with the original the actuator recorded when it holds one for the
// device (a change of an earlier run not put back).
func (d *device) readDefaults(act *actuate.Actuator, host sentinel.Host, now time.Time) sentinel.Seen {
	var orig *sentinel.Original
	if o, ok := act.Original(d.sys.Name); ok {
		orig = &sentinel.Original{Scheduler: o.State.Scheduler, ReadAheadKiB: o.State.ReadAheadKiB}
	}
	return sentinel.Current(d.sys, orig, host, now)
}

// checkDefaults compares the device's defaults now (cur) with those its
// memo kept, last and before (sentinel.Check). A change in force goes to
// the status, its previous read-ahead to the controller, and the log; the
// defaults to keep for the memo go to the device.
func (d *device) checkDefaults(last, before *sentinel.Seen, cur sentinel.Seen, log logr.Logger) {
	c := sentinel.Check(last, before, cur)
	d.defaults, d.previousDefaults = &c.Keep, c.Previous
	if c.Change == nil {
		return
	}
	d.status.DefaultsChanged = c.Change
	d.ctrl.SetPreviousReadAhead(sentinel.PreviousReadAhead(c.Change))
	msg := "the device's defaults changed since the agent's previous start"
	if !c.New {
		msg = "the device's defaults still differ from those before a change found earlier"
	}
	log.Info(msg, "device", d.sys.Name, "change", c.Finding.String())
}
