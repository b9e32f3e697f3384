package agent

// The regression sentinel's part in the agent (agent/sentinel): at a
// device's first adoption in a run, its queue defaults are compared with
// those kept at the previous start on the same disk, a change goes to the
// device's status (and from there to an Event and a metric), and the new
// defaults are kept in the device's memo. Each window then judges the
// changed knobs it can price (judgeDefaults), and a read_ahead_kb default
// judged slower is put back through the read-ahead road when the policy
// asks for it (readahead.Input.RestorePrevious).

import (
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
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
// memo kept: last, read at the previous start, and before, those before a
// change an earlier start found (nil when none). When cur differs from
// last, the change is new: it is found now, against last. When cur is
// last's values, a change found earlier and still in force (cur differs
// from before) is reported again, with the time it was found. Either goes
// to the status and the log; cur, with the time its values were first
// read, and the defaults before a change in force are kept for the memo.
func (d *device) checkDefaults(last, before *sentinel.Seen, cur sentinel.Seen, log logr.Logger) {
	base, found := last, true
	if last != nil {
		if _, changed := sentinel.Compare(*last, cur); !changed {
			base, found, cur.At = before, false, last.At
		}
	}
	d.defaults, d.previousDefaults = &cur, nil
	if base == nil {
		return
	}
	f, changed := sentinel.Compare(*base, cur)
	if !changed {
		return
	}
	d.previousDefaults = cloneSeen(base)
	dc := &v1alpha1.DefaultsChange{With: f.With(), Since: metav1.NewTime(f.Since), DetectedTime: metav1.NewTime(cur.At)}
	for _, c := range f.Changes {
		dc.Knobs = append(dc.Knobs, v1alpha1.KnobChange{Knob: c.Knob, Old: c.Old, New: c.New})
	}
	d.status.DefaultsChanged = dc
	d.ctrl.SetPreviousReadAhead(previousReadAhead(dc))
	msg := "the device's defaults changed since the agent's previous start"
	if !found {
		msg = "the device's defaults still differ from those before a change found earlier"
	}
	log.Info(msg, "device", d.sys.Name, "change", f.String())
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

// previousReadAhead is the read_ahead_kb (KiB) a defaults change
// replaced, 0 when it did not change read_ahead_kb.
func previousReadAhead(dc *v1alpha1.DefaultsChange) int {
	for _, k := range dc.Knobs {
		if k.Knob == "read_ahead_kb" {
			if n, err := strconv.Atoi(k.Old); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// judgeDefaults judges each changed knob of the device that the window
// prices (window.Controller.DefaultCosts) by the policy's margin
// (sentinel.Judge), and exports the verdicts; a knob the window does not
// price keeps its last verdict.
func (d *device) judgeDefaults(r *engine.Report, m *metrics.Metrics) {
	dc := d.status.DefaultsChanged
	if dc == nil {
		return
	}
	for i := range dc.Knobs {
		k := &dc.Knobs[i]
		newNs, oldNs := d.ctrl.DefaultCosts(*k, r)
		if v, ok := sentinel.Judge(newNs, oldNs, d.ctrl.Policy.Decide.MarginPct); ok {
			k.Verdict, k.ChangePercent = v1alpha1.VerdictNotSlower, fmt.Sprintf("%+.1f", v.ChangePct)
			if v.Slower {
				k.Verdict = v1alpha1.VerdictSlower
			}
		}
	}
	if m != nil {
		judged := map[string]bool{}
		for _, k := range dc.Knobs {
			if k.Verdict != "" {
				judged[k.Knob] = k.Verdict == v1alpha1.VerdictSlower
			}
		}
		m.SetDefaultsSlower(d.sys.Name, judged)
	}
}
