//go:build linux

package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// the start after that, on the same defaults, reports nothing.
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
	if c := deviceIn(run(), name).DefaultsChanged; c != nil {
		t.Errorf("a start on the same defaults: %+v", c)
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
