// Package otherwriter finds and names other writers of the settings the
// agent governs: a setting that something else changed (a udev rule,
// TuneD, a cloud guest agent, an administrator). Before every window the
// device's setting in sysfs is compared with the one its controller
// knows: the last the agent wrote, or found (Check). A difference is
// another writer's change. The controller goes on from the new setting;
// under spec.otherWriters Yield (the default) the agent hands the device
// back at once: it puts back what is still its own (a knob the other
// writer did not touch, actuate's per-knob revert), leaves the other
// writer's values in place, drops the record and changes the device no
// more (HandBack at exit, when that failed); under Reclaim it keeps
// governing.
package otherwriter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// Namer names the process that last wrote a queue setting of a device (an
// eBPF probe on the sysfs store path; see tracer.WriterProbe).
type Namer interface {
	// Writer returns the last other process that wrote one of the
	// device's queue settings by now ("bash (pid 4242, cgroup 1234)"),
	// or "" when it saw none.
	Writer(device string, now time.Time) string
}

// Probe names writers with the tracer's eBPF probe on the sysfs store
// paths.
type Probe struct{ P *tracer.WriterProbe }

// Writer is the probe's last writer of device, "" when none.
func (w Probe) Writer(device string, _ time.Time) string {
	if wr, ok := w.P.Last(device); ok {
		return wr.String()
	}
	return ""
}

// Found is another writer's change of a device's setting.
type Found struct {
	// Change says what changed ("scheduler kyber -> bfq").
	Change string
	// Writer names the writer; "" when no Namer runs or it saw none.
	Writer string
	// Now is the device's setting after the check (after the hand-back
	// when it yielded).
	Now window.Setting
}

// Check compares device dev's setting in sysfs (through act) with the one
// its controller knows (known) at now. On a difference it hands the device
// back when yield (the agent's own values put back, the other writer's
// left, the record dropped; a failure is logged and retried at exit) and
// names the writer with names (nil: none). It reports whether another
// writer changed the device; a device it cannot read is not.
func Check(act *actuate.Actuator, dev string, known window.Setting, yield bool, names Namer, now time.Time, log logr.Logger) (Found, bool) {
	s, err := act.Read(dev)
	if err != nil {
		return Found{}, false // the window reports a device it cannot read
	}
	change := Change(known, s)
	if change == "" {
		return Found{}, false
	}
	if yield {
		// Hand the device back now, not only at exit: an agent killed
		// after this point must leave neither its own values on the knobs
		// the other writer did not touch, nor a record that `run
		// --revert` would put back over the other writer's (make
		// test-faults).
		if err := act.Revert(dev); err != nil && !errors.Is(err, actuate.ErrOtherWriter) {
			log.Error(err, "put back the agent's own values on a device left to another writer (retried at exit)", "device", dev)
		}
		if after, err := act.Read(dev); err == nil {
			s = after
		}
	}
	f := Found{Change: change, Now: window.Setting{Candidate: engine.Candidate{Scheduler: s.Scheduler}, ReadAheadKiB: s.ReadAheadKiB}}
	if names != nil {
		f.Writer = names.Writer(dev, now)
	}
	return f, true
}

// Change says what differs between the setting the controller knows and
// the device's state in sysfs ("scheduler kyber -> bfq, read_ahead_kb 128
// -> 512"): the scheduler, the tunables the controller set (while the
// scheduler is the same) and read-ahead; "" when nothing does.
func Change(known window.Setting, s actuate.State) string {
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

// HandBack hands back the devices (yielded to another writer) whose
// records act still holds (the revert at the yield failed): it puts back
// what is still the agent's own and leaves the other writer's values, so
// that neither this exit nor a later revert puts back an original over
// them; it returns those devices.
func HandBack(act *actuate.Actuator, yielded []string, log logr.Logger) []string {
	var left []string
	for _, dev := range yielded {
		if _, ok := act.Original(dev); !ok {
			continue
		}
		if err := act.Revert(dev); err != nil && !errors.Is(err, actuate.ErrOtherWriter) {
			log.Error(err, "put back the agent's own values on a device left to another writer", "device", dev)
			continue
		}
		left = append(left, dev)
	}
	if len(left) > 0 {
		log.Info("OtherWriter: handed back, the other writer's values left in place", "devices", left)
	}
	return left
}
