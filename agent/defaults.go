package agent

// The regression sentinel's part in the agent (agent/sentinel): at a
// device's first adoption in a run, its queue defaults are compared with
// those kept at the previous start on the same disk, a change goes to the
// device's status (and from there to an Event and a metric), and the new
// defaults are kept in the device's memo.

import (
	"maps"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// readDefaults returns the device's queue defaults now: its knobs as
// sysfs showed them when the device was selected, except that a device
// the agent changed in an earlier run and has not put back (its
// actuator record, after an unclean end) has its recorded original
// scheduler and read-ahead, and no nr_requests (a scheduler switch resets
// it to the new scheduler's).
func (d *device) readDefaults(act *actuate.Actuator, host sentinel.Host, now time.Time) sentinel.Seen {
	knobs := sentinel.Of(d.sys)
	if o, ok := act.Original(d.sys.Name); ok {
		if o.State.Scheduler != "" {
			knobs["scheduler"] = o.State.Scheduler
		}
		if o.State.ReadAheadKiB > 0 {
			knobs["read_ahead_kb"] = strconv.Itoa(o.State.ReadAheadKiB)
		}
		delete(knobs, "nr_requests")
	}
	return sentinel.Seen{Knobs: knobs, Host: host, At: now.UTC().Truncate(time.Second)}
}

// checkDefaults compares the device's defaults now (cur) with those its
// memo kept (prev, nil when none), reports a change in the status and
// the log, and keeps cur for the memo.
func (d *device) checkDefaults(prev *sentinel.Seen, cur sentinel.Seen, log logr.Logger) {
	d.defaults = &cur
	if prev == nil {
		return
	}
	f, changed := sentinel.Compare(*prev, cur)
	if !changed {
		return
	}
	dc := &v1alpha1.DefaultsChange{With: f.With(), Since: metav1.NewTime(f.Since), DetectedTime: metav1.NewTime(cur.At)}
	for _, c := range f.Changes {
		dc.Knobs = append(dc.Knobs, v1alpha1.KnobChange{Knob: c.Knob, Old: c.Old, New: c.New})
	}
	d.status.DefaultsChanged = dc
	log.Info("the device's defaults changed since the agent's previous start", "device", d.sys.Name, "change", f.String())
}

// cloneSeen copies s for the memo.
func cloneSeen(s *sentinel.Seen) *sentinel.Seen {
	if s == nil {
		return nil
	}
	c := *s
	c.Knobs = maps.Clone(s.Knobs)
	return &c
}

// host is the kernel release and image of the node this run started on,
// read once (the loop's goroutine only).
func (a *Agent) host() sentinel.Host {
	if a.hostSeen == nil {
		h := sentinel.ReadHost(a.opt.HostRoot)
		a.hostSeen = &h
	}
	return *a.hostSeen
}

// knobNames lists the knobs of a defaults change.
func knobNames(dc *v1alpha1.DefaultsChange) []string {
	out := make([]string, len(dc.Knobs))
	for i, k := range dc.Knobs {
		out[i] = k.Knob
	}
	return out
}
