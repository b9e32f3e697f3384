package agent

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestThrottledClassFromWindow: a recording on the VM lab's virtio disk,
// which QEMU throttles to 3,000 IOPS and 125 MiB/s (e2e/vm
// TestThrottleClass; five fio phases: 4 KiB random reads at depths 2, 8
// and 32, 64 KiB random reads at depth 16, 256 KiB sequential reads at
// depth 4). The device reports rotational=1. Its first window re-models
// it as an SSD (calibrate) and then as throttled, with both caps within
// 10 % and the window learned on the new model; a later window at one
// depth, which cannot show a cap, keeps them; a window that runs well
// above caps set too low re-models it as an SSD.
func TestThrottledClassFromWindow(t *testing.T) {
	reqs := readTrace(t, "native", "testdata/virtio-throttled-phases.st.gz")
	c := newTestController(t, false)
	c.policy.MaxSimulated = len(reqs)
	c.calibrate(reqs)
	if c.model.Class() != model.SSD {
		t.Fatalf("calibrated as %v (%s), want ssd", c.model.Class(), c.note)
	}
	// While a change is verified the model stays.
	c.verify = &verification{left: 2}
	if c.checkThrottle(reqs) || c.model.Class() != model.SSD {
		t.Fatalf("during a verification the model became %v", c.model.Class())
	}
	c.verify = nil
	now := time.Unix(1000, 0)
	rep, err := step(c, reqs, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.model.Class() != model.Throttled {
		t.Fatalf("class %v, want throttled (%s)", c.model.Class(), c.note)
	}
	th := c.model.Throttle()
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"IOPS", th.IOPS, 3000}, {"bytes/s", th.BytesPerSec, 131072000}} {
		if math.Abs(x.got-x.want) > 0.1*x.want {
			t.Errorf("%s cap %.0f, QEMU's is %.0f: want within 10 %%", x.name, x.got, x.want)
		}
	}
	if !strings.HasPrefix(c.note, "modelled as throttled: ") || !strings.Contains(c.note, "IOPS") {
		t.Errorf("note %q does not give the caps", c.note)
	}
	if rep.RealServiceNs == 0 || rep.ModelErrorPct > 50 {
		t.Errorf("the window learned on the throttled model: real %d ns, error %.1f %%", rep.RealServiceNs, rep.ModelErrorPct)
	}
	t.Logf("%s; k %d; model error %.1f %%", c.note, c.model.Servers(), rep.ModelErrorPct)

	// The depth-2 phase again: one depth, no evidence; the caps stay.
	var one []trace.Request
	for _, q := range reqs {
		if q.Sectors == 8 && len(one) < 3000 {
			one = append(one, q)
		}
	}
	shift := reqs[len(reqs)-1].Complete + 1e9 - one[0].Arrival
	for i := range one {
		one[i].Arrival += shift
		one[i].Dispatch += shift
		one[i].Complete += shift
	}
	if _, err := step(c, one, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c.model.Class() != model.Throttled || c.model.Throttle() != th {
		t.Errorf("after a window at one depth: class %v, caps %v; want throttled, %v", c.model.Class(), c.model.Throttle(), th)
	}

	// Caps a third of the real ones: the depth-32 phase runs well above
	// them, and the device is an SSD again.
	if err := c.model.SetThrottle(model.Throttle{IOPS: 1000}); err != nil {
		t.Fatal(err)
	}
	var deep []trace.Request
	for _, q := range reqs {
		if q.Sectors == 8 {
			deep = append(deep, q)
		}
	}
	deep = deep[6000:9000]
	shift = one[len(one)-1].Complete + 1e9 - deep[0].Arrival
	for i := range deep {
		deep[i].Arrival += shift
		deep[i].Dispatch += shift
		deep[i].Complete += shift
	}
	if _, err := step(c, deep, now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c.model.Class() != model.SSD || !strings.Contains(c.note, "above the caps") {
		t.Errorf("after a window above the caps: class %v (%s); want ssd", c.model.Class(), c.note)
	}
}

// TestReplaceModelForgetsBias: a model replaced after the first window
// starts a new real ÷ simulated bias; the old model's would scale the
// next verifications by its error.
func TestReplaceModelForgetsBias(t *testing.T) {
	c := newTestController(t, false)
	c.bias, c.biasKnown = 11.5, true
	m, err := model.NewThrottled(1<<20, model.Throttle{IOPS: 3000})
	if err != nil {
		t.Fatal(err)
	}
	c.replaceModel(m, "modelled as throttled: test")
	if c.model != m || c.disk.Model() != m || c.biasKnown || c.bias != 1 || c.note != "modelled as throttled: test" {
		t.Errorf("after replaceModel: model %v, bias %.2f known %v, note %q", c.model.Class(), c.bias, c.biasKnown, c.note)
	}
}
