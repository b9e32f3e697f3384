//go:build linux

package agent_test

import (
	"fmt"
	"os/exec"
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

// TestAgentSamplesSettledDevice runs the agent on a loop device under
// steady random reads, with the device's own scheduler as the only
// candidate, so that every window keeps the setting: after
// agent.SettleWindows whole windows the windows are sampled, traced for
// their last second of three only, and the tracer loses nothing at the
// pauses and resumes.
func TestAgentSamplesSettledDevice(t *testing.T) {
	fio := loopdev.NeedHeavyIO(t, "creates loop devices and loads BPF programs")
	dev := loopdev.NewForTest(t, 256<<20)
	name := dev.Name
	sched := loopdev.Current(dev.Queue["scheduler"])
	spec := v1alpha1.StorageTuningSpec{
		Mode:       v1alpha1.ModeObserve,
		Devices:    v1alpha1.DeviceSelector{Include: []string{name}},
		Schedulers: v1alpha1.SchedulerPolicy{Candidates: []v1alpha1.SchedulerName{v1alpha1.SchedulerName(sched)}},
		ReadAhead:  v1alpha1.ReadAheadPolicy{Enabled: ptr.To(false)},
		Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: 3 * time.Second}, CPUBudgetPercent: ptr.To[int32](50)},
	}
	spec.Default()
	a := startAgent(t, agent.Options{StateDir: t.TempDir(), Spec: spec, Tracer: tracer.KindEBPF, Log: testr.New(t),
		TraceSample: time.Second})
	out, err := exec.Command(fio, "--name=steady", "--filename=/dev/"+name, "--direct=1", "--rw=randread", "--bs=4k",
		"--ioengine=libaio", "--iodepth=4", "--rate_iops=2000", "--time_based", "--runtime=22", "--output-format=terse").CombinedOutput()
	if err != nil {
		a.stop(t)
		t.Fatalf("fio: %v\n%s", err, out)
	}
	final := a.stop(t)
	var whole, sampled []float64
	var log []string
	for i, s := range a.windows() {
		d, ok := deviceStatus(s, name)
		if !ok || d.Skipped != "" || i == 0 {
			continue // the first window began before fio
		}
		log = append(log, fmt.Sprintf("w%d %d%s", s.Windows, d.Requests, map[bool]string{true: " sampled"}[d.Sampled]))
		if d.Sampled {
			sampled = append(sampled, float64(d.Requests))
		} else {
			whole = append(whole, float64(d.Requests))
		}
	}
	fd, _ := deviceStatus(final, name)
	t.Logf("windows: %v; lost %d, dropped %d", log, fd.EventsLost, fd.EventsDropped)
	if len(sampled) < 2 || len(whole) == 0 {
		t.Fatalf("%d sampled and %d whole windows of fio: want at least 2 sampled after %d whole", len(sampled), len(whole), agent.SettleWindows)
	}
	// At 2,000 reads a second a whole window has ~6,000 requests; a
	// sample of its last second ~2,000 (a third), less what the tracer
	// had not delivered when the window ended.
	ratio := medianOf(sampled) / medianOf(whole)
	if ratio < 0.15 || ratio > 0.55 {
		t.Errorf("sampled windows traced %.2f of a whole window's requests, want about a third", ratio)
	}
	if fd.EventsLost > 2 || fd.EventsDropped != 0 {
		t.Errorf("lost %d, dropped %d requests: the pauses lost requests", fd.EventsLost, fd.EventsDropped)
	}
}
