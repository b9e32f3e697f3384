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
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
)

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

// host is the kernel release and image of the node this run started on,
// read once (the loop's goroutine only).
func (a *Agent) host() sentinel.Host {
	if a.hostSeen == nil {
		h := sentinel.ReadHost(a.opt.HostRoot)
		a.hostSeen = &h
	}
	return *a.hostSeen
}

// judgeDefaults judges each changed knob of the device that the window
// prices (window.Controller.DefaultCosts) by the policy's margin
// (sentinel.JudgeKnobs), and exports the verdicts; a knob the window does
// not price keeps its last verdict.
func (d *device) judgeDefaults(r *engine.Report, m *metrics.Metrics) {
	dc := d.status.DefaultsChanged
	if dc == nil {
		return
	}
	costs := func(k v1alpha1.KnobChange) (newNs, oldNs float64) { return d.ctrl.DefaultCosts(k, r) }
	judged := sentinel.JudgeKnobs(dc, costs, d.ctrl.Policy.Decide.MarginPct)
	if m != nil {
		m.SetDefaultsSlower(d.sys.Name, judged)
	}
}
