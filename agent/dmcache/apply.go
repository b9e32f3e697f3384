package dmcache

// The plan carried out (Provision), through the agent's actuator, which
// records each attach before it is made; and the notes of what the
// actuator recovered at start.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
)

// Recorder attaches and detaches caches, recording each attach before it
// is made and forgetting it after the detach: the agent's actuator
// (actuate.Actuator). Keys of AttachedCaches are "VG/LV".
type Recorder interface {
	AttachedCaches() map[string]actuate.AttachedCache
	AttachCache(vg, lv, fast string, sizeBytes int64) error
	DetachCache(vg, lv string) error
}

// Provision attaches and detaches the caches want asks for (Plan, want
// by "VG/LV" as Wanted returns it) through act, reading each volume
// wanted or recorded with volumes, and hands each step done, with its
// error or nil, to note (the agent puts it in its status notes and log).
// A "ram" cache on the brd RAM disk loads it first (EnsureBRD, under
// hostRoot; "" is "/"). With volumes nil (no LVM tools) nothing is done
// and, when a volume is wanted or recorded, note says so. Called by the
// agent at start and whenever the policies change.
func Provision(want map[string]Want, act Recorder, volumes actuate.CacheVolumes, hostRoot string, note func(msg string, err error)) {
	recs := act.AttachedCaches()
	if len(want) == 0 && len(recs) == 0 {
		return
	}
	if volumes == nil {
		note("spec.cache.provision is not acted on: no LVM tools (lvm, dmsetup) on this host", nil)
		return
	}
	facts := map[string]LVFacts{}
	for k := range want {
		facts[k] = lvFacts(k, recs, volumes)
	}
	for k := range recs {
		facts[k] = lvFacts(k, recs, volumes)
	}
	for _, s := range Plan(want, facts) {
		vg, lv, _ := strings.Cut(s.Key, "/")
		var err error
		switch s.Action {
		case "attach":
			if s.BRD {
				err = EnsureBRD(hostRoot, s.Size)
			}
			if err == nil {
				err = act.AttachCache(vg, lv, s.Fast, s.Size)
			}
		case "detach":
			err = act.DetachCache(vg, lv)
		case "keep":
			continue
		}
		msg := fmt.Sprintf("cache of %s: %s: %s", s.Key, s.Action, s.Note)
		if s.Action == "attach" {
			msg = fmt.Sprintf("cache of %s: attach %d bytes writethrough %s", s.Key, s.Size, s.Note)
		}
		note(msg, err)
	}
}

// lvFacts reads key's volume with volumes, and its record in recs.
func lvFacts(key string, recs map[string]actuate.AttachedCache, volumes actuate.CacheVolumes) LVFacts {
	var f LVFacts
	if r, ok := recs[key]; ok {
		f.Recorded = r.Fast
	}
	vg, lv, _ := strings.Cut(key, "/")
	st, err := volumes.Volume(vg, lv)
	switch {
	case errors.Is(err, actuate.ErrDeviceGone):
		f.Gone = true
	case err != nil:
		f.Err = err.Error()
	}
	f.State = st
	return f
}

// RecoveryNotes are the status notes of what the actuator recovered at
// start: caches of an earlier boot whose device (a RAM disk) was gone,
// dropped from their volume groups with no data lost (logged to log),
// and one note per volume that could not be recovered
// (actuate.Actuator.Recovered).
func RecoveryNotes(act *actuate.Actuator, log logr.Logger) []string {
	lvs, errs := act.Recovered()
	var notes []string
	if len(lvs) > 0 {
		log.Info("recovered volumes whose cache device was lost with the previous boot", "volumes", lvs)
		notes = append(notes, "recovered after a reboot (the cache's RAM disk was gone; writethrough, no data lost): "+strings.Join(lvs, ", "))
	}
	for _, err := range errs {
		notes = append(notes, "not recovered after a reboot: "+err.Error())
	}
	return notes
}
