package actuate

// Putting devices back as recorded, for the agent's start and its
// releases: a knob another writer changed is left to it without an
// error, and the changes a previous run did not verify are undone.

import (
	"errors"
	"maps"
	"slices"
)

// RevertLeaving puts dev back exactly as recorded (Revert). A knob
// another writer changed since keeps the writer's value, which is not an
// error: left then names it (the *LeftError's text; empty when none was
// left). err is Revert's other errors, a *RecordError included.
func (a *Actuator) RevertLeaving(dev string) (left string, err error) {
	err = a.Revert(dev)
	var l *LeftError
	var rerr *RecordError
	if errors.As(err, &l) && !errors.As(err, &rerr) {
		return l.Error(), nil
	}
	return "", err
}

// Restored is what RestoreUnverified did to one device.
type Restored struct {
	Device string // kernel name
	// Left names the knobs another writer changed since, kept at the
	// writer's values (RevertLeaving); empty when none.
	Left string
	// Err is why the device could not be put back (RevertLeaving's
	// error); nil when it was.
	Err error
}

// RestoreUnverified puts back, exactly as recorded (RevertLeaving), every
// device whose memo says its last change was still unverified when the
// previous run ended (DeviceMemo.Unverified: killed during the change's
// verification windows), in the order of the devices' names. A memo that
// cannot be read is skipped.
func (a *Actuator) RestoreUnverified() []Restored {
	var out []Restored
	for _, dev := range slices.Sorted(maps.Keys(a.Originals())) {
		m, ok, err := a.LoadDeviceState(dev)
		if err != nil || !ok || !m.Unverified {
			continue
		}
		left, err := a.RevertLeaving(dev)
		out = append(out, Restored{Device: dev, Left: left, Err: err})
	}
	return out
}
