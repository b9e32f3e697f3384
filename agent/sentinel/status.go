package sentinel

// A device's defaults at a start against those its memo kept, and the
// change in force as the device's status reports it
// (v1alpha1.DefaultsChange): its knobs, each judged by the window.

import (
	"fmt"
	"maps"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// Original is a device's setting before a change of the agent's own that
// was not put back (the actuator's record of it, after an unclean end):
// the scheduler by name and the read-ahead depth, KiB; "" and 0 when not
// recorded.
type Original struct {
	Scheduler    string
	ReadAheadKiB int
}

// Current returns the device's queue defaults now, read at now (kept to
// the second, UTC) on host: d's knobs (Of) as sysfs showed them when the
// device was selected, except that a device the agent changed in an
// earlier run and has not put back (orig not nil) has its recorded
// original scheduler and read-ahead, and no nr_requests (a scheduler
// switch resets it to the new scheduler's, block/elevator.c). It is pure.
func Current(d sysfs.Device, orig *Original, host Host, now time.Time) Seen {
	knobs := Of(d)
	if orig != nil {
		if orig.Scheduler != "" {
			knobs["scheduler"] = orig.Scheduler
		}
		if orig.ReadAheadKiB > 0 {
			knobs["read_ahead_kb"] = strconv.Itoa(orig.ReadAheadKiB)
		}
		delete(knobs, "nr_requests")
	}
	return Seen{Knobs: knobs, Host: host, At: now.UTC().Truncate(time.Second)}
}

// Checked is what Check found.
type Checked struct {
	// Keep are the defaults to keep in the memo: cur, with the time its
	// values were first read.
	Keep Seen
	// Previous are the defaults before the change in force, kept in the
	// memo too; nil when no change is in force.
	Previous *Seen
	// Change is the change in force, as the device's status reports it
	// (detected at Keep.At); nil when none.
	Change *v1alpha1.DefaultsChange
	// Finding is the change in force (when Change is not nil).
	Finding Finding
	// New is true when the change is found now, against the defaults of
	// the previous start; false when it was found at an earlier start and
	// is still in force.
	New bool
}

// Check compares the device's defaults now (cur) with those its memo
// kept: last, read at the previous start (nil when none), and before,
// those before a change an earlier start found (nil when none). When cur
// differs from last, the change is new: it is found now, against last.
// When cur is last's values, a change found earlier and still in force
// (cur differs from before) is reported again, with the time it was
// found. It is pure.
func Check(last, before *Seen, cur Seen) Checked {
	base, found := last, true
	if last != nil {
		if _, changed := Compare(*last, cur); !changed {
			base, found, cur.At = before, false, last.At
		}
	}
	c := Checked{Keep: cur}
	if base == nil {
		return c
	}
	f, changed := Compare(*base, cur)
	if !changed {
		return c
	}
	c.Previous, c.Finding, c.New = Clone(base), f, found
	c.Change = &v1alpha1.DefaultsChange{With: f.With(), Since: metav1.NewTime(f.Since), DetectedTime: metav1.NewTime(cur.At)}
	for _, k := range f.Changes {
		c.Change.Knobs = append(c.Change.Knobs, v1alpha1.KnobChange{Knob: k.Knob, Old: k.Old, New: k.New})
	}
	return c
}

// Clone copies s (its knobs too) for the memo; nil when s is nil.
func Clone(s *Seen) *Seen {
	if s == nil {
		return nil
	}
	c := *s
	c.Knobs = maps.Clone(s.Knobs)
	return &c
}

// KnobNames lists the knobs of a defaults change, in its order.
func KnobNames(dc *v1alpha1.DefaultsChange) []string {
	out := make([]string, len(dc.Knobs))
	for i, k := range dc.Knobs {
		out[i] = k.Knob
	}
	return out
}

// PreviousReadAhead is the read_ahead_kb (KiB) a defaults change
// replaced, 0 when it did not change read_ahead_kb.
func PreviousReadAhead(dc *v1alpha1.DefaultsChange) int {
	for _, k := range dc.Knobs {
		if k.Knob == "read_ahead_kb" {
			if n, err := strconv.Atoi(k.Old); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// JudgeKnobs judges each changed knob of dc that costs prices by
// marginPct percent (Judge): costs returns the predicted device time of
// the same work at the knob's new and old values, ns, and a time that is
// not positive or not finite leaves the knob's last verdict. It sets each
// judged knob's Verdict and ChangePercent ("+12.3", percent) and returns,
// for every knob with a verdict, whether it is Slower.
func JudgeKnobs(dc *v1alpha1.DefaultsChange, costs func(v1alpha1.KnobChange) (newNs, oldNs float64), marginPct float64) map[string]bool {
	for i := range dc.Knobs {
		k := &dc.Knobs[i]
		newNs, oldNs := costs(*k)
		if v, ok := Judge(newNs, oldNs, marginPct); ok {
			k.Verdict, k.ChangePercent = v1alpha1.VerdictNotSlower, fmt.Sprintf("%+.1f", v.ChangePct)
			if v.Slower {
				k.Verdict = v1alpha1.VerdictSlower
			}
		}
	}
	judged := map[string]bool{}
	for _, k := range dc.Knobs {
		if k.Verdict != "" {
			judged[k.Knob] = k.Verdict == v1alpha1.VerdictSlower
		}
	}
	return judged
}
