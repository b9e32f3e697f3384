package window

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestThrottledClassFromWindow: a recording on the VM lab's virtio disk,
// which QEMU throttles to 3,000 IOPS and 125 MiB/s (e2e/vm
// TestThrottleClass; five fio phases: 4 KiB random reads at depths 2, 8
// and 32, 64 KiB random reads at depth 16, 256 KiB sequential reads at
// depth 4). The device reports rotational=1 and is calibrated as an SSD.
// Nothing changes during a verification, nor on one window of evidence;
// the second window in a row re-models it as throttled, with both caps
// within 10 % and the window learned on the new model; a window at one
// depth, which cannot show a cap, keeps them; caps set too low are
// refuted by two windows well above them, not by one. Evidence that
// awaits its second window keeps that window whole (capsPending), and
// each window's evidence is logged once (LogThrottle).
func TestThrottledClassFromWindow(t *testing.T) {
	reqs := readTrace(t, "native", "../testdata/virtio-throttled-phases.st.gz")
	c := newTestController(t, false)
	c.Policy.MaxSimulated = len(reqs)
	c.learn.calibrate(reqs, c.Policy.MinRequests)
	if c.learn.model.Class() != model.SSD {
		t.Fatalf("calibrated as %v (%s), want ssd", c.learn.model.Class(), c.learn.note)
	}
	c.verify = &verification{left: 2}
	for i := range 2 { // two windows of evidence
		if c.learn.checkThrottle(reqs, c.verify != nil) || c.learn.model.Class() != model.SSD {
			t.Fatalf("window %d during a verification: the model became %v", i+1, c.learn.model.Class())
		}
	}
	c.verify = nil

	now := time.Unix(1000, 0)
	var last int64
	window := func(w []trace.Request) Report {
		t.Helper()
		w = shifted(w, last+1e9)
		last = w[len(w)-1].Complete
		now = now.Add(time.Minute)
		rep, err := step(c, w, now)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	pending := func(when string, want bool) {
		t.Helper()
		if got := c.learn.capsPending(); got != want {
			t.Errorf("%s: capsPending %v, want %v", when, got, want)
		}
	}
	pending("before any window", false)
	window(reqs)
	if c.learn.model.Class() != model.SSD {
		t.Fatalf("one window of evidence made the device %v (%s)", c.learn.model.Class(), c.learn.note)
	}
	pending("after one window of evidence", true)
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{Verbosity: 1})
	c.LogThrottle(log, "vdb")
	c.LogThrottle(log, "vdb") // the window is logged once
	if len(logged) != 1 || !strings.Contains(logged[0], `"class"="ssd"`) || !strings.Contains(logged[0], "IOPS") {
		t.Errorf("LogThrottle after one window of evidence logged %q, want one line with the class and the caps", logged)
	}
	rep := window(reqs)
	if c.learn.model.Class() != model.Throttled {
		t.Fatalf("class %v after two windows, want throttled (%s)", c.learn.model.Class(), c.learn.note)
	}
	pending("once throttled with the caps shown", false)
	th := c.learn.model.Throttle()
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"IOPS", th.IOPS, 3000}, {"bytes/s", th.BytesPerSec, 131072000}} {
		if math.Abs(x.got-x.want) > 0.1*x.want {
			t.Errorf("%s cap %.0f, QEMU's is %.0f: want within 10 %%", x.name, x.got, x.want)
		}
	}
	if !strings.HasPrefix(c.learn.note, "modelled as throttled: ") || !strings.Contains(c.learn.note, "IOPS") {
		t.Errorf("note %q does not give the caps", c.learn.note)
	}
	if rep.RealServiceNs == 0 || rep.ModelErrorPct > 50 {
		t.Errorf("the window learned on the throttled model: real %d ns, error %.1f %%", rep.RealServiceNs, rep.ModelErrorPct)
	}
	t.Logf("%s; k %d; model error %.1f %%", c.learn.note, c.learn.model.Servers(), rep.ModelErrorPct)

	// The 4 KiB phases: the depth-2 one cannot show a cap, the depth-32
	// one ran well above caps of 1,000 IOPS.
	var small []trace.Request
	for _, q := range reqs {
		if q.Sectors == 8 {
			small = append(small, q)
		}
	}
	window(small[:3000])
	if c.learn.model.Class() != model.Throttled || c.learn.model.Throttle() != th {
		t.Errorf("after a window at one depth: class %v, caps %v; want throttled, %v", c.learn.model.Class(), c.learn.model.Throttle(), th)
	}
	if err := c.learn.model.SetThrottle(model.Throttle{IOPS: 1000}); err != nil {
		t.Fatal(err)
	}
	window(small[6000:9000])
	if c.learn.model.Class() != model.Throttled {
		t.Errorf("one window above the caps made the device %v", c.learn.model.Class())
	}
	pending("after one window above the caps", true)
	window(small[6000:9000])
	if c.learn.model.Class() != model.SSD || !strings.Contains(c.learn.note, "above the caps") {
		t.Errorf("after two windows above the caps: class %v (%s); want ssd", c.learn.model.Class(), c.learn.note)
	}
	pending("once an ssd again", false)
}

// shifted returns a copy of reqs moved in time to start at ns.
func shifted(reqs []trace.Request, at int64) []trace.Request {
	out := make([]trace.Request, len(reqs))
	d := at - reqs[0].Arrival
	for i, q := range reqs {
		q.Arrival += d
		q.Dispatch += d
		q.Complete += d
		out[i] = q
	}
	return out
}

// TestReplaceModelForgetsBias: a model replaced after the first window
// starts a new real ÷ simulated bias; the old model's would scale the
// next verifications by its error.
func TestReplaceModelForgetsBias(t *testing.T) {
	c := newTestController(t, false)
	c.learn.bias, c.learn.biasKnown = 11.5, true
	m, err := model.NewThrottled(1<<20, model.Throttle{IOPS: 3000})
	if err != nil {
		t.Fatal(err)
	}
	c.learn.replaceModel(m, "modelled as throttled: test")
	if c.learn.model != m || c.learn.disk.Model() != m || c.learn.biasKnown || c.learn.bias != 1 || c.learn.note != "modelled as throttled: test" {
		t.Errorf("after replaceModel: model %v, bias %.2f known %v, note %q", c.learn.model.Class(), c.learn.bias, c.learn.biasKnown, c.learn.note)
	}
}
