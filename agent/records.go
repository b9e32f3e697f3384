package agent

// The actuator's records at start: what it could not load or enforce, and
// the devices whose last change the previous run did not verify, put back
// before the policies are taken. Both become status notes.

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
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
