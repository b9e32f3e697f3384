package agent

// What the agent owns on the host: the devices it governs are claimed
// through the actuator (a host-wide claim per device, so that a second
// agent with another state directory is refused, naming the owner), and
// each device's pacing (the time of its last change, the thrash guard,
// the regression back-offs) is kept in the state directory, so that
// spec.rollout.minDwell holds across restarts.

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/selection"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/internal/decide"
)

// actuatorNotes are the status notes of what the actuator found at start:
// records it could not load (each skipped, every other device restored as
// usual) and why it cannot take claims, if it cannot.
func actuatorNotes(act *actuate.Actuator, log logr.Logger) []string {
	var notes []string
	for dev, err := range act.BadRecords() {
		log.Error(err, "a record of an original setting cannot be used; the device is left as it is", "device", dev)
		notes = append(notes, fmt.Sprintf("record of %s not used: %v", dev, err))
	}
	if err := act.ClaimsUnavailable(); err != nil {
		notes = append(notes, "device ownership is not enforced: "+err.Error())
	}
	return notes
}

// claim claims the selected devices the agent does not govern yet. It
// returns the ones another agent owns, with its error, leaving them out of
// sel: `shadowtune run` refuses them; the cluster agent reports them.
func (a *Agent) claim(sel []selection.Governed) (kept []selection.Governed, owned []error) {
	for _, s := range sel {
		err := a.act.Claim(s.Device.Name)
		var oe *actuate.OwnedError
		switch {
		case errors.As(err, &oe):
			owned = append(owned, err)
			continue
		case err != nil:
			a.opt.Log.Error(err, "claim a device", "device", s.Device.Name)
		}
		kept = append(kept, s)
	}
	return kept, owned
}

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

// restoreUnverified puts back, exactly as recorded, every device whose
// memo says its last change was still unverified when the previous run
// ended (Actuator.RestoreUnverified: killed during the change's
// verification windows). The verification died with that run, and a
// change is kept only once verified; the windows after the start decide
// it again, under a new grant. It runs once, at start, before the
// policies are taken (a policy change while running must not undo a
// verification in progress). It returns the status notes of what it did
// and could not do.
func restoreUnverified(act *actuate.Actuator, log logr.Logger) []string {
	var notes, done []string
	for _, r := range act.RestoreUnverified() {
		if r.Err != nil {
			notes = append(notes, fmt.Sprintf("the unverified change of %s not put back: %v", r.Device, r.Err))
			continue
		}
		if r.Left != "" {
			log.Info("restored a device whose change was not verified, except what another writer changed since", "device", r.Device, "left", r.Left)
		}
		done = append(done, r.Device)
	}
	if len(done) > 0 {
		log.Info("restored devices whose last change the previous run did not verify", "devices", done)
		notes = append(notes, "restored at start, their change not verified by the previous run: "+strings.Join(done, ", "))
	}
	return notes
}
