//go:build linux

package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestDefaultsChangedLive: the agent runs on a loop device and stops;
// then the device's scheduler and read_ahead_kb are changed as an
// upgrade changes them, and the kernel release the agent recorded is
// made an older one. At its next start the agent reports DefaultsChanged
// with old → new and the kernel change, and its metric says which knobs;
// the start after that, on the same defaults, reports the same change, found then.
func TestDefaultsChangedLive(t *testing.T) {
	loopdev.NeedLoop(t, "creates loop devices, loads BPF programs and reads queue settings")
	dev := loopdev.NewForTest(t, 64<<20)
	name := dev.Name
	spec := v1alpha1.StorageTuningSpec{Mode: v1alpha1.ModeObserve, Devices: v1alpha1.DeviceSelector{Include: []string{name}},
		Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: time.Second}}}
	spec.Default()
	state := t.TempDir()
	run := func() agent.Status {
		t.Helper()
		a := startAgent(t, agent.Options{StateDir: state, Spec: spec, Tracer: tracer.KindAuto, Log: testr.New(t)})
		a.waitWindowAfter(t, time.Now())
		return a.stop(t)
	}
	if c := deviceIn(run(), name).DefaultsChanged; c != nil {
		t.Fatalf("first start: %+v", c)
	}
	sched, ra := readSetting(name)
	other := loopdev.OtherScheduler(t, name, "mq-deadline", "kyber", "none")
	writeQueue(t, name, "scheduler", other)
	writeQueue(t, name, "read_ahead_kb", strconv.Itoa(ra*2))
	t.Cleanup(func() {
		writeQueue(t, name, "scheduler", sched)
		writeQueue(t, name, "read_ahead_kb", strconv.Itoa(ra))
	})
	setRecordedKernel(t, filepath.Join(state, "memo", name+".json"), "6.16.0-before")

	st := run()
	c := deviceIn(st, name).DefaultsChanged
	want := []v1alpha1.KnobChange{{Knob: "scheduler", Old: sched, New: other}, {Knob: "read_ahead_kb", Old: strconv.Itoa(ra), New: strconv.Itoa(ra * 2)}}
	if c == nil || len(c.Knobs) < 2 || c.Knobs[0] != want[0] || c.Knobs[1] != want[1] || !strings.HasPrefix(c.With, "kernel 6.16.0-before → ") {
		t.Fatalf("after the change: %+v, want %+v with the kernel change", c, want)
	}
	t.Logf("found: %+v", c)
	if again := deviceIn(run(), name).DefaultsChanged; again == nil || !reflect.DeepEqual(again.Knobs, c.Knobs) || !again.DetectedTime.Equal(&c.DetectedTime) {
		t.Errorf("a start on the same defaults: %+v, want the change found before, %+v", again, c)
	}
}

func deviceIn(st agent.Status, name string) v1alpha1.DeviceState {
	for _, d := range st.Devices {
		if d.Name == name {
			return d
		}
	}
	return v1alpha1.DeviceState{}
}

func writeQueue(t *testing.T, name, attr, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", name, "queue", attr), []byte(value), 0); err != nil {
		t.Errorf("write %s of %s: %v", attr, name, err)
	}
}

// setRecordedKernel makes the kernel release in a device's memo kernel.
func setRecordedKernel(t *testing.T, path, kernel string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	memo, _ := f["memo"].(map[string]any)
	defaults, _ := memo["defaults"].(map[string]any)
	host, _ := defaults["host"].(map[string]any)
	if host == nil {
		t.Fatalf("no defaults recorded in %s: %s", path, b)
	}
	host["kernelRelease"] = kernel
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultsRestoreLive: an agent records a loop device's defaults
// (read_ahead_kb 128) and stops; an upgrade makes read_ahead_kb 2560 and
// changes the scheduler. In the readers' 256 MiB memory cgroup random
// mmap reads then thrash the page cache at 2560 KiB. An agent in Observe
// mode reports the change, judges the new read_ahead_kb default slower
// (its metric says so), and changes nothing. An agent in Apply mode with
// spec.sentinel.restorePreviousDefaults, started on the same memo, puts
// 128 KiB back (the road alone would cut to its competitive depth), and
// the next readers, at 128 KiB, verify it.
func TestDefaultsRestoreLive(t *testing.T) {
	fx := newRAFixture(t)
	fx.setRA(t, 128)
	name := fx.l.Name
	spec := fx.spec(t)
	spec.Mode = v1alpha1.ModeObserve
	a := startAgent(t, agent.Options{StateDir: fx.dir, Spec: spec, Tracer: tracer.KindAuto, Log: testr.New(t)})
	a.waitWindowAfter(t, time.Now())
	a.stop(t)
	sched, _ := readSetting(name)
	writeQueue(t, name, "scheduler", loopdev.OtherScheduler(t, name, "mq-deadline", "kyber", "none"))
	t.Cleanup(func() { writeQueue(t, name, "scheduler", sched) })
	fx.setRA(t, 2560)
	memo := filepath.Join(fx.dir, "memo", name+".json")
	setRecordedKernel(t, memo, "6.16.0-before")
	before, err := os.ReadFile(memo)
	if err != nil {
		t.Fatal(err)
	}

	a = fx.startWith(t, spec)
	a.waitWindowAfter(t, time.Now())
	start, _, _ := fx.load(t, "mmap", fx.mapped, 6)
	a.waitWindowAfter(t, start.Add(2*raWindowLen+raWindowLen/2))
	k := readAheadKnob(t, a.stop(t), name)
	t.Logf("Observe: %+v; changes %v", k, a.changeLog())
	if k.Old != "128" || k.New != "2560" || k.Verdict != v1alpha1.VerdictSlower || !strings.HasPrefix(k.ChangePercent, "+") {
		t.Fatalf("Observe: read_ahead_kb %+v, want 128 → 2560 judged Slower", k)
	}
	if got := a.metric(t, "shadowtune_agent_defaults_slower", name, "read_ahead_kb"); got != 1 {
		t.Errorf("defaults_slower{knob=read_ahead_kb} = %v, want 1", got)
	}
	if c := a.changeLog(); len(c) != 0 {
		t.Errorf("Observe mode changed the device: %v", c)
	}

	if err := os.WriteFile(memo, before, 0o600); err != nil {
		t.Fatal(err)
	}
	spec.Mode, spec.Sentinel.RestorePreviousDefaults = v1alpha1.ModeApply, ptr.To(true)
	a = fx.startWith(t, spec)
	a.waitWindowAfter(t, time.Now())
	start, _, slow := fx.load(t, "mmap", fx.mapped, 6)
	a.waitWindowAfter(t, start.Add(2*raWindowLen+raWindowLen/2))
	if c := a.changeLog(); len(c) == 0 || !strings.HasSuffix(c[0], "read_ahead_kb 2560 -> 128") {
		t.Fatalf("opted in: changes %v, want 2560 -> 128 first", c)
	}
	_, _, fast := fx.load(t, "mmap", fx.mapped, 6)
	a.waitWindowAfter(t, time.Now().Add(raWindowLen))
	v := a.lastVerification(name)
	t.Logf("restored: %.0f pages/s at 2560 KiB, %.0f at 128 KiB; verification %s; changes %v", slow, fast, v, a.changeLog())
	if !strings.Contains(v, "read_ahead_kb 2560 -> 128") || !strings.Contains(v, "Outcome:Verified") {
		t.Errorf("the restore's verification: %s, want read_ahead_kb 2560 -> 128 Verified", v)
	}
	a.stop(t)
	if _, ra := readSetting(name); ra != 2560 {
		t.Errorf("read_ahead_kb %d after the agent's exit, want the 2560 it found", ra)
	}
}

// readAheadKnob is the read_ahead_kb entry of the device's defaults
// change in st (zero when none).
func readAheadKnob(t *testing.T, st agent.Status, name string) v1alpha1.KnobChange {
	t.Helper()
	c := deviceIn(st, name).DefaultsChanged
	if c == nil {
		t.Fatalf("no defaults change reported for %s", name)
	}
	for _, k := range c.Knobs {
		if k.Knob == "read_ahead_kb" {
			return k
		}
	}
	return v1alpha1.KnobChange{}
}

// metric is the value of the gauge name's series of the device and knob
// in the agent's metrics; -1 when there is none.
func (a *runningAgent) metric(t *testing.T, name, device, knob string) float64 {
	t.Helper()
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["device"] == device && labels["knob"] == knob {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
