package actuate

// Other writers. A record says, knob by knob, which values on the device
// are shadowtune's: the original (State), the values its last finished
// change left (Applied) and the target of a change in progress (the
// journal, Interrupted.Target: written before the device is changed, so
// a crash between the record write and the sysfs write still finds the
// value it was about to write accepted). A revert restores a knob only
// while it holds one of these values; any other value is another
// writer's (a udev rule, TuneD, an administrator, changing the device
// after shadowtune did) and stays, with a line in the *LeftError. The
// scheduler's tunables (queue/iosched/*) and the queue attributes a
// switch resets belong to the scheduler: when the scheduler is another
// writer's, they are left too. A record without Applied (written before
// it existed) reverts every knob, as it always did.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ErrOtherWriter is the kind of a *LeftError: a revert left some of a
// device's values as another writer set them after shadowtune's change.
// Not a failed revert: the values in effect are the other writer's.
var ErrOtherWriter = errors.New("changed by another writer")

// LeftError is a revert that restored what was shadowtune's on a device
// and left the values another writer changed since; the record is gone
// (or, with a *RecordError beside it, stays until it can be removed).
type LeftError struct {
	Device string
	// Left has one entry per knob left, e.g. "scheduler left at bfq:
	// changed by another writer since shadowtune set kyber".
	Left []string
}

func (e *LeftError) Error() string {
	return "actuate: " + e.Device + ": " + strings.Join(e.Left, "; ")
}

// Unwrap returns ErrOtherWriter.
func (e *LeftError) Unwrap() error { return ErrOtherWriter }

// leaveReadAhead in a State given to restore means: do not touch
// read_ahead_kb (another writer's value). Never recorded.
const leaveReadAhead = -1

// pending returns the target of the change in progress, or nil.
func (o *Original) pending() *Setting {
	if o.Interrupted == nil {
		return nil
	}
	return &o.Interrupted.Target
}

// schedMine reports whether scheduler s on the device is shadowtune's.
func (o *Original) schedMine(s string) bool {
	p := o.pending()
	return s == o.State.Scheduler || s == o.Applied.Scheduler || p != nil && p.Scheduler != "" && s == p.Scheduler
}

// raMine reports whether read_ahead_kb kib on the device is shadowtune's.
func (o *Original) raMine(kib int) bool {
	p := o.pending()
	return kib == o.State.ReadAheadKiB || kib == o.Applied.ReadAheadKiB || p != nil && p.ReadAheadKiB != 0 && kib == p.ReadAheadKiB
}

// tunablesByKnob reports whether the tunables of scheduler cur are judged
// one by one: only when cur is the original scheduler and shadowtune
// never switched away from it (else the instance on the device may be
// one shadowtune created, with kernel defaults recorded nowhere, and all
// its tunables are shadowtune's with the scheduler).
func (o *Original) tunablesByKnob(cur string) bool {
	p := o.pending()
	return cur == o.State.Scheduler && o.Applied.Scheduler == cur && (p == nil || p.Scheduler == "" || p.Scheduler == cur)
}

// tunableMine reports whether tunable k at v is shadowtune's (see
// tunablesByKnob for when the question is asked).
func (o *Original) tunableMine(k, v string) bool {
	if w, ok := o.State.Tunables[k]; ok && v == w {
		return true
	}
	if w, ok := o.Applied.Tunables[k]; ok && v == w {
		return true
	}
	if p := o.pending(); p != nil {
		if w, ok := p.Tunables[k]; ok && v == strconv.FormatInt(w, 10) {
			return true
		}
	}
	return false
}

// lastSet says what shadowtune last had a knob at, for messages: the
// applied value, "or" the pending one when it differs.
func (o *Original) lastSet(applied, orig, pending string) string {
	s := "set " + applied
	if applied == orig {
		s = "left it at its original " + orig
	}
	if pending != "" && pending != applied {
		s += " (or was setting " + pending + ")"
	}
	return s
}

// ownedState returns what a revert of dev (now in state cur) writes back:
// the record's original, without the knobs another writer changed, which
// left describes one line each. A record without Applied restores all.
func (o *Original) ownedState(cur State) (want State, left []string) {
	want = o.State.clone()
	if o.Applied == nil {
		return want, nil
	}
	p := o.pending()
	if p == nil {
		p = &Setting{}
	}
	leave := func(knob, now, last string) {
		left = append(left, fmt.Sprintf("%s left at %s: changed by another writer since shadowtune %s", knob, now, last))
	}
	switch {
	case cur.Scheduler != "" && !o.schedMine(cur.Scheduler):
		// Its tunables and the queue attributes it reset are the
		// writer's scheduler's.
		leave("scheduler", cur.Scheduler, o.lastSet(o.Applied.Scheduler, o.State.Scheduler, p.Scheduler))
		want.Scheduler, want.Tunables, want.Queue = "", nil, nil
	case o.tunablesByKnob(cur.Scheduler):
		for _, k := range slices.Sorted(maps.Keys(want.Tunables)) {
			v, ok := cur.Tunables[k]
			if !ok || o.tunableMine(k, v) {
				continue
			}
			var pv string
			if w, ok := p.Tunables[k]; ok {
				pv = strconv.FormatInt(w, 10)
			}
			leave(AttrIosched+"/"+k, v, o.lastSet(o.Applied.Tunables[k], o.State.Tunables[k], pv))
			delete(want.Tunables, k)
		}
	}
	if !o.raMine(cur.ReadAheadKiB) {
		var pv string
		if p.ReadAheadKiB != 0 {
			pv = strconv.Itoa(p.ReadAheadKiB)
		}
		leave("read_ahead_kb", strconv.Itoa(cur.ReadAheadKiB),
			o.lastSet(strconv.Itoa(o.Applied.ReadAheadKiB), strconv.Itoa(o.State.ReadAheadKiB), pv))
		want.ReadAheadKiB = leaveReadAhead
	}
	return want, left
}

// accepts reports whether the record as it is (without a journal for
// s) already holds every value applying s to before can leave on the
// device: then the change may be made even when its journal cannot be
// written, since a crash leaves nothing a revert would take for another
// writer's (a change back to the original on a full state file system).
func (o *Original) accepts(before State, s Setting) bool {
	if o.dirty || o.Interrupted != nil {
		return false // the file on disk is not this record
	}
	if o.Applied == nil {
		return true // a record of an older agent: a revert restores every knob
	}
	sched := before.Scheduler
	if s.Scheduler != "" && s.Scheduler != before.Scheduler {
		// A switch to a scheduler whose tunables are judged knob by
		// knob would leave kernel defaults that no record holds.
		if !o.schedMine(s.Scheduler) || o.tunablesByKnob(s.Scheduler) && len(o.State.Tunables) > 0 {
			return false
		}
		sched = s.Scheduler
	}
	if len(s.Tunables) > 0 {
		if !o.schedMine(sched) {
			return false
		}
		if o.tunablesByKnob(sched) {
			for k, v := range s.Tunables {
				if !o.tunableMine(k, strconv.FormatInt(v, 10)) {
					return false
				}
			}
		}
	}
	return s.ReadAheadKiB == 0 || o.raMine(s.ReadAheadKiB)
}

// noteApplied updates o.Applied after s was applied to a device that was
// in state before and is now in state after: the knobs s set (a switch
// sets every tunable: the new instance's are all shadowtune's) take the
// values read back; the others keep theirs.
func (o *Original) noteApplied(before State, s Setting, after State) {
	ap := o.Applied
	if ap == nil {
		ap = &State{Scheduler: before.Scheduler, Tunables: maps.Clone(before.Tunables), ReadAheadKiB: before.ReadAheadKiB}
	}
	if s.Scheduler != "" {
		if after.Scheduler != before.Scheduler || after.Scheduler != ap.Scheduler {
			ap.Tunables = maps.Clone(after.Tunables)
		}
		ap.Scheduler = after.Scheduler
	}
	for k := range s.Tunables {
		if ap.Tunables == nil {
			ap.Tunables = map[string]string{}
		}
		ap.Tunables[k] = after.Tunables[k]
	}
	if s.ReadAheadKiB != 0 {
		ap.ReadAheadKiB = after.ReadAheadKiB
	}
	o.Applied = ap
}

// expected checks the device's values before a change against what the
// caller last saw (Setting.Expect): a difference is another writer's
// change, and nothing is written (ErrOtherWriter).
func expected(dev string, before State, e *Expected) error {
	if e == nil {
		return nil
	}
	var diffs []string
	if e.Scheduler != "" && before.Scheduler != e.Scheduler {
		diffs = append(diffs, fmt.Sprintf("scheduler %s (expected %s)", before.Scheduler, e.Scheduler))
	}
	if e.ReadAheadKiB != 0 && before.ReadAheadKiB != e.ReadAheadKiB {
		diffs = append(diffs, fmt.Sprintf("read_ahead_kb %d (expected %d)", before.ReadAheadKiB, e.ReadAheadKiB))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("actuate: %s: %w since the last check: now %s; nothing written", dev, ErrOtherWriter, strings.Join(diffs, ", "))
}
