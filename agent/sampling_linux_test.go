//go:build linux

package agent_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"gonum.org/v1/gonum/stat/distuv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestAgentSamplesSettledDevice runs the agent on a loop device under
// steady random reads, with the device's own scheduler as the only
// candidate, so that every window keeps the setting: after
// window.SettleWindows whole windows the windows are sampled, traced for
// their last second of three only, and the pauses and resumes lose
// nothing. The tracer misses about 1e-4 of this load's completions
// whether or not a disk is paused (whole tracing lost 1–16 of 36,000
// requests on 6.18, all counted missed, with libaio and with psync
// alike), so the sampled run is judged against a control: the same
// reads traced whole, before it, in the same test. The sampled run fails
// when it lost more than 2 and more than the control's rate explains: an
// exact conditional test of two Poisson rates (given the lost requests of
// both runs, the sampled run's share is binomial with its share of the
// traced requests) rejecting at 1 %. Pauses that lost a request each of
// the ~4 in flight at each of their 5 resumes would be rejected at
// p < 1e-6.
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
	run := func(sample time.Duration) (windows []agent.Status, final agent.Status) {
		t.Helper()
		a := startAgent(t, agent.Options{StateDir: t.TempDir(), Spec: spec, Tracer: tracer.KindEBPF, Log: testr.New(t),
			TraceSample: sample})
		out, err := exec.Command(fio, "--name=steady", "--filename=/dev/"+name, "--direct=1", "--rw=randread", "--bs=4k",
			"--ioengine=libaio", "--iodepth=4", "--rate_iops=2000", "--time_based", "--runtime=22", "--output-format=terse").CombinedOutput()
		if err != nil {
			a.stop(t)
			t.Fatalf("fio: %v\n%s", err, out)
		}
		final = a.stop(t)
		return a.windows(), final
	}
	ctlWindows, ctlFinal := run(-1) // the control: every window whole
	windows, final := run(time.Second)
	var whole, sampled []float64
	var log []string
	traced := func(ws []agent.Status) (n float64) {
		for _, s := range ws {
			if d, ok := deviceStatus(s, name); ok {
				n += float64(d.Requests)
			}
		}
		return n
	}
	for i, s := range windows {
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
	cd, _ := deviceStatus(ctlFinal, name)
	ctlTraced, sampledTraced := traced(ctlWindows), traced(windows)
	t.Logf("windows: %v; lost %d, dropped %d of %.0f traced; the control traced %.0f whole and lost %d, dropped %d",
		log, fd.EventsLost, fd.EventsDropped, sampledTraced, ctlTraced, cd.EventsLost, cd.EventsDropped)
	if len(sampled) < 2 || len(whole) == 0 {
		t.Fatalf("%d sampled and %d whole windows of fio: want at least 2 sampled after %d whole", len(sampled), len(whole), window.SettleWindows)
	}
	// At 2,000 reads a second a whole window has ~6,000 requests; a
	// sample of its last second ~2,000 (a third), less what the tracer
	// had not delivered when the window ended.
	ratio := medianOf(sampled) / medianOf(whole)
	if ratio < 0.15 || ratio > 0.55 {
		t.Errorf("sampled windows traced %.2f of a whole window's requests, want about a third", ratio)
	}
	if ctlTraced <= 0 {
		t.Fatal("the control traced nothing")
	}
	lost, all := int(fd.EventsLost), int(fd.EventsLost+cd.EventsLost)
	// P(X ≥ lost), X ~ Binomial(all, the sampled run's share of the traced requests).
	pv := distuv.Binomial{N: float64(all), P: sampledTraced / (sampledTraced + ctlTraced)}.Survival(float64(lost - 1))
	if (lost > 2 && pv < 0.01) || fd.EventsDropped != 0 {
		t.Errorf("lost %d, dropped %d requests of %.0f traced; whole tracing lost %d of %.0f: the pauses lost requests (p = %.2g)",
			fd.EventsLost, fd.EventsDropped, sampledTraced, cd.EventsLost, ctlTraced, pv)
	}
}

// TestAgentSampleMissedLive: on a loop device under steady random reads
// the agent's sampled windows hold their share of the device's requests
// and are evaluated. Then each window's reads come in a burst right after
// the window before ended, so that the window's traced last second holds
// none of them: each such sampled window says its sample missed the work
// (the device's stat file counted the burst), predicts nothing, and the
// next window is traced whole.
func TestAgentSampleMissedLive(t *testing.T) {
	fio := loopdev.NeedHeavyIO(t, "creates loop devices and loads BPF programs")
	dev := loopdev.NewForTest(t, 256<<20)
	name := dev.Name
	spec := v1alpha1.StorageTuningSpec{
		Mode:       v1alpha1.ModeObserve,
		Devices:    v1alpha1.DeviceSelector{Include: []string{name}},
		Schedulers: v1alpha1.SchedulerPolicy{Candidates: []v1alpha1.SchedulerName{v1alpha1.SchedulerName(loopdev.Current(dev.Queue["scheduler"]))}},
		ReadAhead:  v1alpha1.ReadAheadPolicy{Enabled: ptr.To(false)},
		Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: 3 * time.Second}, CPUBudgetPercent: ptr.To[int32](50)},
	}
	spec.Default()
	a := startAgent(t, agent.Options{StateDir: t.TempDir(), Spec: spec, Tracer: tracer.KindEBPF, Log: testr.New(t), TraceSample: time.Second})
	reads := func(args ...string) {
		t.Helper()
		base := []string{"--name=reads", "--filename=/dev/" + name, "--direct=1", "--rw=randread", "--bs=4k", "--output-format=terse"}
		if out, err := exec.Command(fio, append(base, args...)...).CombinedOutput(); err != nil {
			a.stop(t)
			t.Fatalf("fio: %v\n%s", err, out)
		}
	}
	reads("--ioengine=libaio", "--iodepth=4", "--rate_iops=2000", "--time_based", "--runtime=16")
	steady := len(a.windows())
	// A burst of 3,000 reads at the start of each window: well within its
	// first two seconds, before its traced last second.
	for range 8 {
		a.waitWindowAfter(t, time.Now())
		reads("--ioengine=psync", "--number_ios=3000", "--size=200m")
	}
	a.waitWindowAfter(t, time.Now())
	wins := a.windows()
	a.stop(t)
	var log []string
	steadySampled, missed := 0, 0
	for i, s := range wins {
		d, ok := deviceStatus(s, name)
		if !ok || i == 0 {
			continue
		}
		isMissed := strings.Contains(d.Skipped, "its work came before the sample")
		log = append(log, fmt.Sprintf("w%d %d%s%s", s.Windows, d.Requests, map[bool]string{true: " sampled"}[d.Sampled], map[bool]string{true: " MISSED"}[isMissed]))
		switch {
		case i < steady && isMissed:
			t.Errorf("w%d: a sample of steady reads was judged to miss the work: %s", s.Windows, d.Skipped)
		case i < steady && d.Sampled && d.Skipped == "":
			steadySampled++
		case isMissed && !d.Sampled:
			t.Errorf("w%d: a whole window was judged to miss the work", s.Windows)
		case isMissed:
			missed++
			if d.Best != "" {
				t.Errorf("w%d: a sample that missed the work predicted %s", s.Windows, d.Best)
			}
			if i+1 < len(wins) {
				if n, ok := deviceStatus(wins[i+1], name); ok && n.Sampled {
					t.Errorf("w%d: the window after a missed sample was sampled", wins[i+1].Windows)
				}
			}
		}
	}
	t.Logf("windows (steady until w%d): %v", steady, log)
	if steadySampled == 0 {
		t.Errorf("no sampled window of the steady reads was evaluated")
	}
	if missed < 2 {
		t.Errorf("%d sampled windows said their sample missed the bursts, want 2 or more", missed)
	}
}
