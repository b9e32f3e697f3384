package agent

// Other writers: a setting the agent governs that something else changed
// (a udev rule, TuneD, a cloud guest agent, an administrator). Before
// every window the device's setting in sysfs is compared with the one the
// controller knows: the last the agent wrote, or found. A difference is
// another writer's change. The controller goes on from the new setting;
// under spec.otherWriters Yield (the default) the agent hands the device
// back at once: it puts back what is still its own (a knob the other
// writer did not touch, actuate's per-knob revert), leaves the other
// writer's values in place, drops the record and changes the device no
// more; under Reclaim it keeps governing.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// watchWriters looks for another writer's change of the device's setting
// at now and, when it finds one, reports it (status, metrics, log) and
// takes the new setting as the controller's current one.
func (d *device) watchWriters(now time.Time, e *windowEnv) {
	s, err := e.act.Read(d.sys.Name)
	if err != nil {
		return // the window reports a device it cannot read
	}
	change := settingChange(d.ctrl.Current, s)
	if change == "" {
		return
	}
	if d.policy.Spec.OtherWriters != v1alpha1.OtherWritersReclaim {
		d.yielded = true
		// Hand the device back now, not only at exit: an agent killed
		// after this point must leave neither its own values on the knobs
		// the other writer did not touch, nor a record that `run
		// --revert` would put back over the other writer's (make
		// test-faults).
		if err := e.act.Revert(d.sys.Name); err != nil && !errors.Is(err, actuate.ErrOtherWriter) {
			e.log.Error(err, "put back the agent's own values on a device left to another writer (retried at exit)", "device", d.sys.Name)
		}
		if after, err := e.act.Read(d.sys.Name); err == nil {
			s = after
		}
	}
	d.ctrl.Resync(window.Setting{Candidate: engine.Candidate{Scheduler: s.Scheduler}, ReadAheadKiB: s.ReadAheadKiB})
	writer := ""
	if e.writers != nil {
		writer = e.writers.Writer(d.sys.Name, now)
	}
	d.status.OtherWriter = &v1alpha1.OtherWriterState{Time: metav1.NewTime(now), Change: change, Writer: writer, Yielded: d.yielded}
	if e.metrics != nil {
		e.metrics.IncOtherWriter(d.sys.Name)
	}
	e.log.Info("OtherWriter: another writer changed a setting the agent governs", "device", d.sys.Name,
		"change", change, "writer", writer, "yielded", d.yielded)
}

// settingChange says what differs between the setting the controller
// knows and the device's state in sysfs ("scheduler kyber -> bfq,
// read_ahead_kb 128 -> 512"): the scheduler, the tunables the controller
// set (while the scheduler is the same) and read-ahead; "" when nothing
// does.
func settingChange(known window.Setting, s actuate.State) string {
	var parts []string
	k := known.Candidate
	if s.Scheduler != k.Scheduler {
		parts = append(parts, fmt.Sprintf("scheduler %s -> %s", k.Scheduler, s.Scheduler))
	} else {
		for name, v := range k.Tunables {
			if got, want := s.Value(name), strconv.FormatInt(v, 10); got != want {
				parts = append(parts, fmt.Sprintf("%s %s -> %s", name, want, got))
			}
		}
	}
	if s.ReadAheadKiB != known.ReadAheadKiB {
		parts = append(parts, fmt.Sprintf("read_ahead_kb %d -> %d", known.ReadAheadKiB, s.ReadAheadKiB))
	}
	return strings.Join(parts, ", ")
}

// WriterWatcher names the process that last wrote a queue setting of a
// device (an eBPF probe on the sysfs store path; see tracer.WriterProbe).
type WriterWatcher interface {
	// Writer returns the last other process that wrote one of the
	// device's queue settings by now ("bash (pid 4242, cgroup 1234)"),
	// or "" when it saw none.
	Writer(device string, now time.Time) string
}

// probeWriters names writers with the tracer's eBPF probe on the sysfs
// store paths.
type probeWriters struct{ p *tracer.WriterProbe }

// Writer is the probe's last writer of device, "" when none.
func (w probeWriters) Writer(device string, _ time.Time) string {
	if wr, ok := w.p.Last(device); ok {
		return wr.String()
	}
	return ""
}

// leaveToOtherWriters hands back the devices the agent yielded to another
// writer whose records are still there (the revert at the yield failed):
// it puts back what is still the agent's own and leaves the other
// writer's values, so that neither this exit nor a later revert puts back
// an original over them; it returns those devices.
func (a *Agent) leaveToOtherWriters() []string {
	var left []string
	for _, d := range a.devs {
		if !d.yielded {
			continue
		}
		if _, ok := a.act.Original(d.sys.Name); !ok {
			continue
		}
		if err := a.act.Revert(d.sys.Name); err != nil && !errors.Is(err, actuate.ErrOtherWriter) {
			a.opt.Log.Error(err, "put back the agent's own values on a device left to another writer", "device", d.sys.Name)
			continue
		}
		left = append(left, d.sys.Name)
	}
	if len(left) > 0 {
		a.opt.Log.Info("OtherWriter: handed back, the other writer's values left in place", "devices", left)
	}
	return left
}
