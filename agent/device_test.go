package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/agent/host"
	"github.com/shadowtune/shadowtune/agent/otherwriter"
	"github.com/shadowtune/shadowtune/agent/selection"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/agent/window/windowtest"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// fakeHost copies the fake sysfs tree of package sysfs (sda, nvme0n1, vda,
// loop3, loop7, zram0, dm-0) into a temporary directory and returns it.
func fakeHost(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS("sysfs/testdata")); err != nil {
		t.Fatal(err)
	}
	return dst
}

// testTuning returns a defaulted policy.
func testTuning(name string, gen int64, mode v1alpha1.TuningMode, mutate func(*v1alpha1.StorageTuningSpec)) *v1alpha1.StorageTuning {
	st := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen, UID: types.UID("uid-" + name)}}
	st.Spec.Mode = mode
	if mutate != nil {
		mutate(&st.Spec)
	}
	st.Default()
	return st
}

func TestSpecPolicyIgnoresNodeSelector(t *testing.T) {
	spec := testTuning("x", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) {
		s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"no": "such"}}
		s.Devices.Include = []string{"sda"}
	}).Spec
	opt := Options{Spec: spec}
	a := New(opt)
	ps := a.initialPolicies().policies
	if a.cluster || len(ps) != 1 || ps[0].Spec.NodeSelector != nil {
		t.Fatalf("policies() = %+v, %v", ps, a.cluster)
	}
	if opt.Spec.NodeSelector == nil || a.opt.Spec.NodeSelector == nil {
		t.Fatal("policies() modified Options.Spec")
	}
	sel, _, err := selection.Select(fakeHost(t), ps, nil)
	if err != nil || len(sel) != 1 || sel[0].Device.Name != "sda" {
		t.Fatalf("selected %+v, %v", sel, err)
	}
	if w := selection.MinWindow(sel); w != 5*time.Second {
		t.Errorf("window %s", w)
	}
	if w := selection.MinWindow(nil); w != 5*time.Second {
		t.Errorf("window with no device %s", w)
	}
}

// gateEnv is one device of the fake host with a fake kernel behind the
// actuator.
type gateEnv struct {
	root string
	fake *actuatetest.Store
	act  *actuate.Actuator
	d    *device
	env  *windowEnv
	// asked records the grant's calls.
	asked []string
	allow bool
	seq   int
}

func newGateEnv(t *testing.T, dev string, p *v1alpha1.StorageTuning) *gateEnv {
	t.Helper()
	return newGateEnvOn(t, fakeHost(t), dev, p)
}

// newGateEnvOn is newGateEnv on the fake host at root.
func newGateEnvOn(t *testing.T, root, dev string, p *v1alpha1.StorageTuning) *gateEnv {
	t.Helper()
	e := &gateEnv{root: root}
	e.fake = actuatetest.New(e.root)
	var err error
	// Start from none (the fake sda has mq-deadline), so that the deep
	// random queue of gateEnv.window predicts a switch.
	if err := e.fake.Write(dev, actuate.AttrScheduler, "none"); err != nil {
		t.Fatal(err)
	}
	e.fake = actuatetest.New(e.root) // forget that write
	if e.act, err = actuate.NewWithStore(e.fake, filepath.Join(t.TempDir(), "state2")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.act.Close() })
	sd, err := sysfs.Read(e.root, dev)
	if err != nil {
		t.Fatal(err)
	}
	e.d, err = newDevice(selection.Governed{Device: sd, Policy: p}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.env = &windowEnv{act: e.act, log: testr.New(t), hostRoot: e.root, grant: func(name string, pol *v1alpha1.StorageTuning) bool {
		e.asked = append(e.asked, name+"/"+pol.Name)
		return e.allow
	}}
	return e
}

// window feeds one window of a deep random read queue (fifoWindow:
// mq-deadline or bfq predicted well ahead of none) to the device, scale
// times slower than the model when scale > 1.
func (e *gateEnv) window(t *testing.T, scale float64) v1alpha1.DeviceState {
	t.Helper()
	n := e.seq + 1
	return e.feed(t, windowtest.FIFOWindow(uint64(n), 2000, 4, 4, int64(n)*10e9, scale))
}

// confirmed runs two windows: the first must decide a switch and hold it
// for confirmation (confirmSwitch), writing nothing; the second's status
// is returned.
func (e *gateEnv) confirmed(t *testing.T, scale float64) v1alpha1.DeviceState {
	t.Helper()
	writes := len(e.fake.Writes())
	st := e.window(t, scale)
	if r := st.Recommendation; r == nil || r.Reason != window.ReasonAwaitingConfirmation || len(e.fake.Writes()) != writes {
		t.Fatalf("window %d: recommendation %+v, writes %v; want a switch held for confirmation", e.seq, r, e.fake.Writes()[writes:])
	}
	return e.window(t, scale)
}

// feed ends one window of the device after reqs arrived (a 5 s window,
// the seq-th) and returns its status.
func (e *gateEnv) feed(t *testing.T, reqs []trace.Request) v1alpha1.DeviceState {
	t.Helper()
	e.seq++
	var mu sync.Mutex
	e.d.pending = append(e.d.pending, reqs...)
	e.d.ingest(&mu)
	e.env.budget = host.NewCPUBudget(time.Hour, 100)
	e.d.window(time.Unix(1000, 0).Add(time.Duration(e.seq)*5*time.Second), e.env)
	if e.d.status.Window.Error != "" {
		t.Fatalf("window %d: %s", e.seq, e.d.status.Window.Error)
	}
	return e.d.status
}

func (e *gateEnv) schedulerWrites() []string {
	var out []string
	for _, w := range e.fake.Writes() {
		if strings.Contains(w, "scheduler=") {
			out = append(out, w)
		}
	}
	return out
}

func TestGrantGate(t *testing.T) {
	p := testTuning("fleet", 3, v1alpha1.ModeApply, nil)
	e := newGateEnv(t, "sda", p)

	// No grant: the recommendation is reported, nothing is written, and
	// the change the controller asked for is forgotten (also by the
	// thrash guard) so it is asked for again every window, once the
	// second window has confirmed it.
	for i := 0; i < 7; i++ {
		var st v1alpha1.DeviceState
		if i == 0 {
			st = e.confirmed(t, 1)
		} else {
			st = e.window(t, 1)
		}
		if len(e.fake.Writes()) != 0 {
			t.Fatalf("window %d: wrote %v without a grant", i, e.fake.Writes())
		}
		if st.Recommendation == nil || st.Recommendation.Scheduler == "none" || !st.Pending() || !st.AwaitingGrant {
			t.Fatalf("window %d: recommendation %+v pending %v awaiting %v; want a switch away from none, awaiting a grant",
				i, st.Recommendation, st.Pending(), st.AwaitingGrant)
		}
		if st.Current.Scheduler != "none" || st.Applied != nil || st.Original != nil {
			t.Fatalf("window %d: current %+v applied %+v original %+v", i, st.Current, st.Applied, st.Original)
		}
		if st.ThrashGuard.Pinned || st.ThrashGuard.Changes != 0 {
			t.Fatalf("window %d: a change that was not made counted towards the thrash guard: %+v", i, st.ThrashGuard)
		}
	}
	if len(e.asked) == 0 || e.asked[0] != "sda/fleet" {
		t.Fatalf("MayChange calls %v, want sda/fleet", e.asked)
	}

	// The grant arrives: the next window applies.
	e.allow = true
	st := e.window(t, 1)
	w := e.schedulerWrites()
	if len(w) != 1 {
		t.Fatalf("writes %v, want one scheduler switch", e.fake.Writes())
	}
	if st.Applied == nil || st.Applied.Scheduler != st.Current.Scheduler || st.Current.Scheduler == "none" {
		t.Fatalf("applied %+v, settings %+v", st.Applied, st.Current)
	}
	if st.Original == nil || st.Original.Scheduler != "none" {
		t.Fatalf("original %+v, want none", st.Original)
	}
	if st.Pending() || st.AwaitingGrant || st.VerifyingWindows != 2 || st.Changes != 1 {
		t.Fatalf("pending %v awaiting %v verifying %d changes %d", st.Pending(), st.AwaitingGrant, st.VerifyingWindows, st.Changes)
	}
	if len(st.Candidates) == 0 || len(st.Candidates) > v1alpha1.MaxDeviceCandidates {
		t.Fatalf("candidates %+v", st.Candidates)
	}

	// The grant is withdrawn, and the device turns out much slower than
	// expected of the previous setting (the verification's expectation is
	// scaled down to make it so): the regression revert needs no grant.
	e.allow = false
	if !e.d.ctrl.Verifying() {
		t.Fatal("no verification after the change")
	}
	e.d.ctrl.SetVerificationBias(0.01)
	for i := 0; i < 2; i++ {
		st = e.window(t, 1)
	}
	if got := e.schedulerWrites(); len(got) != 2 || !strings.HasSuffix(got[1], "scheduler=none") {
		t.Fatalf("scheduler writes %v, want the switch then its revert to none", got)
	}
	if st.Reverts != 1 || st.LastRevertTime == nil || st.Current.Scheduler != "none" || st.Recommendation.Reason != window.ReasonRegressionReverted {
		t.Fatalf("reverts %d at %v, settings %+v, recommendation %+v", st.Reverts, st.LastRevertTime, st.Current, st.Recommendation)
	}
}

func TestObserveAndPausedNeverChange(t *testing.T) {
	for _, c := range []struct {
		name string
		p    *v1alpha1.StorageTuning
	}{
		{"observe", testTuning("obs", 1, v1alpha1.ModeObserve, nil)},
		{"paused", testTuning("paused", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) { s.Paused = true })},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newGateEnv(t, "sda", c.p)
			e.allow = true
			var st v1alpha1.DeviceState
			for i := 0; i < 7; i++ {
				st = e.window(t, 1)
			}
			if len(e.fake.Writes()) != 0 {
				t.Fatalf("wrote %v", e.fake.Writes())
			}
			if !st.Pending() || st.AwaitingGrant || st.Recommendation == nil || st.Recommendation.Scheduler == "none" {
				t.Fatalf("pending %v awaiting %v recommendation %+v", st.Pending(), st.AwaitingGrant, st.Recommendation)
			}
			if st.ThrashGuard.Pinned {
				t.Fatalf("thrash guard pinned by changes never made: %+v (recommendation %+v)", st.ThrashGuard, st.Recommendation)
			}
			if st.Paused != (c.name == "paused") || st.Mode != c.p.Spec.Mode || st.GovernedBy != c.p.Name {
				t.Fatalf("paused %v mode %s policy %s", st.Paused, st.Mode, st.GovernedBy)
			}
			if c.name == "observe" && len(e.asked) != 0 {
				t.Fatalf("observe mode asked MayChange: %v", e.asked)
			}
		})
	}
}

// fakeActuator is an actuator over a fake host's sysfs (fakeHost), with
// its state in a temporary directory; it is closed at the test's end.
func fakeActuator(t *testing.T) (root string, fake *actuatetest.Store, act *actuate.Actuator) {
	t.Helper()
	root = fakeHost(t)
	fake = actuatetest.New(root)
	act, err := actuate.NewWithStore(fake, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { act.Close() })
	return root, fake, act
}

// TestPoliciesChangeKeepsDevices: new policies reach the running agent
// (configure) without losing what it learned about a device.
func TestPoliciesChangeKeepsDevices(t *testing.T) {
	root, _, act := fakeActuator(t)
	sda := func(s *v1alpha1.StorageTuningSpec) { s.Devices.Include = []string{"sda"} }
	p1 := testTuning("p", 1, v1alpha1.ModeApply, sda)
	a := New(Options{HostRoot: root, StateDir: t.TempDir(), Policies: []*v1alpha1.StorageTuning{p1}, Log: testr.New(t)})
	a.act = act
	if err := a.configure(a.initialPolicies()); err != nil {
		t.Fatal(err)
	}
	d := a.devs[0]
	d.ctrl.Memo.Backoff["bfq"] = time.Unix(5000, 0)
	d.ctrl.Learned()
	d.status.Reverts, d.status.Changes, d.status.EventsDropped = 2, 3, 7

	// Same policy generation, device unchanged: the same controller.
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{p1.DeepCopy()}}); err != nil {
		t.Fatal(err)
	}
	if a.devs[0] != d {
		t.Fatal("same policy: the controller was not reused")
	}

	// A new generation: a new controller with the model, back-off and
	// counters carried.
	p2 := p1.DeepCopy()
	p2.Generation = 2
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{p2}}); err != nil {
		t.Fatal(err)
	}
	n := a.devs[0]
	if n == d || n.ctrl == d.ctrl {
		t.Fatal("new generation: the controller was reused")
	}
	if n.ctrl.Model() != d.ctrl.Model() || !n.ctrl.Calibrated() || !n.ctrl.Memo.Backoff["bfq"].Equal(time.Unix(5000, 0)) {
		t.Errorf("model/calibration/back-off not carried: %v %v", n.ctrl.Calibrated(), n.ctrl.Memo.Backoff)
	}
	if n.status.Reverts != 2 || n.status.Changes != 3 || n.status.EventsDropped != 7 {
		t.Errorf("counters not carried: %+v", n.status)
	}

	// Changed behind the agent's back: same policy, but the controller no
	// longer knows the setting.
	n.ctrl.Current.Candidate.Scheduler = "kyber"
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{p2}}); err != nil {
		t.Fatal(err)
	}
	if a.devs[0] == n {
		t.Fatal("reused a controller whose device has another setting")
	}

	// No policy: the device is dropped.
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{}}); err != nil {
		t.Fatal(err)
	}
	if len(a.devs) != 0 {
		t.Fatalf("devices %v, want none", a.names())
	}

	// A different disk under the same name: nothing carried.
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{p2}}); err != nil {
		t.Fatal(err)
	}
	a.devs[0].ctrl.Memo.Backoff["bfq"] = time.Unix(5000, 0)
	a.devs[0].status.Reverts = 2
	old := a.devs[0]
	old.sys.DiskSeq++ // the agent knew another disk as sda
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{p2}}); err != nil {
		t.Fatal(err)
	}
	if a.devs[0] == old || a.devs[0].status.Reverts != 0 || len(a.devs[0].ctrl.Memo.Backoff) != 0 {
		t.Errorf("carried state to another disk: %+v", a.devs[0].status)
	}
}

// TestRestoredDeviceIsNoOtherWriter: a device restored because its
// policy turned to Observe starts from the restored setting, so the next
// window does not take the agent's own restore for another writer's
// change (seen in the e2e: "OtherWriter ... read_ahead_kb 512 -> 2560").
func TestRestoredDeviceIsNoOtherWriter(t *testing.T) {
	root, _, act := fakeActuator(t)
	sda := func(s *v1alpha1.StorageTuningSpec) { s.Devices.Include = []string{"sda"} }
	a := New(Options{HostRoot: root, StateDir: t.TempDir(), Policies: []*v1alpha1.StorageTuning{testTuning("p", 1, v1alpha1.ModeApply, sda)}, Log: testr.New(t)})
	a.act = act
	if err := a.configure(a.initialPolicies()); err != nil {
		t.Fatal(err)
	}
	was, err := act.Read("sda")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := act.Apply("sda", actuate.Setting{Scheduler: was.Scheduler, ReadAheadKiB: was.ReadAheadKiB / 4}); err != nil {
		t.Fatal(err)
	}
	a.devs[0].ctrl.Current.ReadAheadKiB = was.ReadAheadKiB / 4 // as the agent's own change leaves it
	if err := a.configure(policySet{policies: []*v1alpha1.StorageTuning{testTuning("p", 2, v1alpha1.ModeObserve, sda)}}); err != nil {
		t.Fatal(err)
	}
	now, err := act.Read("sda")
	if err != nil {
		t.Fatal(err)
	}
	if now.ReadAheadKiB != was.ReadAheadKiB {
		t.Fatalf("read_ahead_kb %d after the restore, want %d", now.ReadAheadKiB, was.ReadAheadKiB)
	}
	if change := otherwriter.Change(a.devs[0].ctrl.Current, now); change != "" {
		t.Errorf("the restored device's controller knows another setting: %s", change)
	}
}

func TestTopCandidates(t *testing.T) {
	var outs []engine.Outcome
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "cur"}
	for i, n := range names {
		outs = append(outs, engine.Outcome{Candidate: engine.Candidate{Scheduler: n}, Result: sim.Result{TotalServiceNs: int64(i+1) * 1000}})
	}
	r := &engine.Report{Current: "cur", Outcomes: outs}
	got := topCandidates(r, engine.RankService, 8)
	if len(got) != 8 || got[0].Name != "a" || got[6].Name != "g" || got[7].Name != "cur" {
		t.Fatalf("top %+v", got)
	}
	if got[0].PredictedServiceTimeMicros != 1 || got[0].PredictedGainPercent != "90.0" || got[7].PredictedGainPercent != "0.0" {
		t.Errorf("figures %+v", got)
	}
	// Current among the fastest: the first n.
	r.Current = "b"
	got = topCandidates(r, engine.RankService, 3)
	if len(got) != 3 || got[2].Name != "c" || got[1].PredictedGainPercent != "0.0" || got[2].PredictedGainPercent != "-50.0" {
		t.Errorf("top with current among them %+v", got)
	}
	// Ranked as the decision ranks: by what the application waits for,
	// with each scheduler's dispatch charge. "a" has the least service
	// time but the longest wait; "b" is charged twice its wait.
	outs = []engine.Outcome{
		{Candidate: engine.Candidate{Scheduler: "a"}, Result: sim.Result{TotalServiceNs: 1000, WaitNs: 9000}},
		{Candidate: engine.Candidate{Scheduler: "b"}, Result: sim.Result{TotalServiceNs: 2000, WaitNs: 3000}},
		{Candidate: engine.Candidate{Scheduler: "none"}, Result: sim.Result{TotalServiceNs: 3000, WaitNs: 4000}},
	}
	r = &engine.Report{Current: "none", Outcomes: outs, DispatchFactors: map[string]float64{"b": 2}}
	got = topCandidates(r, engine.RankWait, 3)
	if got[0].Name != "none" || got[1].Name != "b" || got[2].Name != "a" || got[1].PredictedGainPercent != "-50.0" ||
		got[2].PredictedGainPercent != "-125.0" || got[2].PredictedServiceTimeMicros != 1 {
		t.Errorf("ranked by the charged wait %+v", got)
	}
}

func TestCandidateSpec(t *testing.T) {
	for _, c := range []engine.Candidate{
		{Scheduler: "bfq"},
		{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}},
		{Scheduler: "mq-deadline", Tunables: sched.Tunables{"fifo_batch": 8, "read_expire": 100}, Cache: true},
		{Scheduler: "none", Cache: true},
	} {
		s := CandidateSpec(c)
		back, err := engine.ParseCandidate(s)
		if err != nil || back.Name() != c.Name() {
			t.Errorf("CandidateSpec(%s) = %q, parsed back as %s, %v", c.Name(), s, back.Name(), err)
		}
	}
	if s := CandidateSpec(engine.Candidate{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}}); s != "bfq:slice_idle=0" {
		t.Errorf("got %q", s)
	}
}

// TestMinDwell checks that a device keeps a setting for the policy's
// spec.rollout.minDwell after a change before another change is allowed,
// grant or not.
func TestMinDwell(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
		s.Rollout.MinDwell = &metav1.Duration{Duration: time.Minute}
	})
	e := newGateEnv(t, "sda", p)
	e.allow = true
	t0 := time.Unix(5000, 0)
	cases := []struct {
		name       string
		lastChange time.Time
		now        time.Time
		want       bool
	}{
		{"never changed", time.Time{}, t0, true},
		{"just changed", t0, t0.Add(time.Second), false},
		{"within the dwell", t0, t0.Add(59 * time.Second), false},
		{"dwell over", t0, t0.Add(time.Minute), true},
	}
	allowed := func(lastChange, now time.Time) bool {
		return e.d.gate(e.env).Hold(lastChange, now) == window.HoldNone
	}
	for _, c := range cases {
		if got := allowed(c.lastChange, c.now); got != c.want {
			t.Errorf("%s: allowed = %v, want %v", c.name, got, c.want)
		}
	}
	e.allow = false
	if allowed(time.Time{}, t0) {
		t.Error("allowed without a grant")
	}
}

// TestReportIsTheAPISchema: the host report's device entries (`shadowtune
// run -o json`) decode strictly into v1alpha1.DeviceState, the
// NodeStorageState's own schema, with nothing lost.
func TestReportIsTheAPISchema(t *testing.T) {
	e := newGateEnv(t, "sda", testTuning("fleet", 3, v1alpha1.ModeApply, nil))
	e.allow = true
	for range 3 {
		e.window(t, 1)
	}
	b, err := MarshalStatus(Status{Mode: "Apply", Tracer: "ebpf", Windows: 3, Devices: []v1alpha1.DeviceState{e.d.status}})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Devices []json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Devices) != 1 {
		t.Fatalf("report %s: %v", b, err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Devices[0]))
	dec.DisallowUnknownFields()
	var got v1alpha1.DeviceState
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("device entry does not decode strictly into v1alpha1.DeviceState: %v\n%s", err, doc.Devices[0])
	}
	if got.Name != "sda" || got.Window == nil || got.Window.Requests != 2000 || got.Changes != 1 || got.Applied == nil ||
		len(got.Candidates) == 0 || got.Recommendation == nil {
		t.Errorf("decoded entry lost figures: %s", doc.Devices[0])
	}
}

// TestOtherWriterYields: another writer changes the scheduler the agent
// set; the agent notices before the next window, reports OtherWriter,
// simulates from the new setting and, under the default policy (Yield),
// changes the device no more and leaves the other writer's value at exit.
// Under Reclaim it keeps governing.
func TestOtherWriterYields(t *testing.T) {
	for _, policy := range []v1alpha1.OtherWritersPolicy{v1alpha1.OtherWritersYield, v1alpha1.OtherWritersReclaim} {
		t.Run(string(policy), func(t *testing.T) {
			p := testTuning("fleet", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
				s.OtherWriters = policy
				s.Rollout.MinDwell = &metav1.Duration{}
			})
			e := newGateEnv(t, "sda", p)
			e.allow = true
			st := e.confirmed(t, 1)
			if st.Applied == nil || st.Current.Scheduler == "none" {
				t.Fatalf("no change to start from: %+v", st.Current)
			}
			agentSet := st.Current.Scheduler
			other := "kyber"
			if agentSet == other {
				other = "bfq"
			}
			if err := e.fake.Write("sda", actuate.AttrScheduler, other); err != nil {
				t.Fatal(err)
			}
			writes := len(e.schedulerWrites())
			st = e.window(t, 1)
			ow := st.OtherWriter
			if ow == nil || ow.Change != "scheduler "+agentSet+" -> "+other || ow.Yielded != (policy == v1alpha1.OtherWritersYield) {
				t.Fatalf("otherWriter %+v, want scheduler %s -> %s", ow, agentSet, other)
			}
			if policy == v1alpha1.OtherWritersReclaim {
				// The window went on from the other writer's setting and
				// took the device back.
				if got := e.schedulerWrites(); len(got) != writes+1 || !strings.HasSuffix(got[writes], "scheduler="+agentSet) {
					t.Errorf("scheduler writes after the other writer %v, want one back to %s", got[writes:], agentSet)
				}
				return
			}
			// The record is dropped as soon as the agent yields: an agent
			// killed now leaves nothing for `run --revert` to put back over
			// the other writer's value.
			if _, ok := e.act.Original("sda"); ok {
				t.Errorf("the record of sda is kept after yielding to another writer")
			}
			if e.d.ctrl.Current.Candidate.Scheduler != other {
				t.Errorf("the controller simulates from %s, want the other writer's %s", e.d.ctrl.Current.Candidate.Name(), other)
			}
			for range 4 {
				st = e.window(t, 1)
			}
			if got := e.schedulerWrites(); len(got) != writes {
				t.Errorf("scheduler writes after the other writer: %v", got[writes:])
			}
			if st.Current.Scheduler != other || st.AwaitingGrant {
				t.Errorf("current %s awaiting %v, want %s left alone", st.Current.Scheduler, st.AwaitingGrant, other)
			}
			a := &Agent{act: e.act, devs: []*device{e.d}, opt: Options{Log: testr.New(t)}}
			if left := a.leaveToOtherWriters(); len(left) != 0 {
				t.Fatalf("left %v at exit, want none (forgotten when the agent yielded)", left)
			}
			if _, err := e.act.RevertAll(); err != nil {
				t.Fatal(err)
			}
			if s, _ := e.act.Read("sda"); s.Scheduler != other {
				t.Errorf("at exit the scheduler is %s, want the other writer's %s kept", s.Scheduler, other)
			}
		})
	}
}

// TestOtherWriterYieldHandsBack: under Yield, when another writer changes
// the scheduler, the agent puts back at once what is still its own (here
// its read_ahead_kb), leaves the writer's scheduler and drops the record,
// so that an agent killed right after leaves neither (make test-faults,
// the writer scenario).
func TestOtherWriterYieldHandsBack(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
		s.Rollout.MinDwell = &metav1.Duration{}
	})
	e := newGateEnv(t, "sda", p)
	e.allow = true
	before, err := e.act.Read("sda")
	if err != nil {
		t.Fatal(err)
	}
	st := e.confirmed(t, 1)
	if st.Applied == nil {
		t.Fatalf("no change to start from: %+v", st.Current)
	}
	ra := before.ReadAheadKiB * 2
	if _, err := e.act.Apply("sda", actuate.Setting{ReadAheadKiB: ra}); err != nil {
		t.Fatal(err)
	}
	cur := e.d.ctrl.Current
	cur.ReadAheadKiB = ra
	e.d.ctrl.Resync(cur)
	other := "kyber"
	if st.Current.Scheduler == other {
		other = "bfq"
	}
	if err := e.fake.Write("sda", actuate.AttrScheduler, other); err != nil {
		t.Fatal(err)
	}
	st = e.window(t, 1)
	if ow := st.OtherWriter; ow == nil || !ow.Yielded {
		t.Fatalf("otherWriter %+v, want a yield", ow)
	}
	now, err := e.act.Read("sda")
	if err != nil {
		t.Fatal(err)
	}
	if now.Scheduler != other || now.ReadAheadKiB != before.ReadAheadKiB {
		t.Errorf("after the yield: scheduler %s, read_ahead_kb %d; want the writer's %s and the original %d",
			now.Scheduler, now.ReadAheadKiB, other, before.ReadAheadKiB)
	}
	if _, ok := e.act.Original("sda"); ok {
		t.Error("the record is kept after the yield")
	}
	if e.d.ctrl.Current.ReadAheadKiB != before.ReadAheadKiB {
		t.Errorf("the controller goes on from read_ahead_kb %d, want the restored %d", e.d.ctrl.Current.ReadAheadKiB, before.ReadAheadKiB)
	}
}

// TestSecondAgentRefused: a second agent with another state directory
// that selects a device the first one governs is refused, with an error
// naming the first one's state directory and pid (issue 16, finding 1).
func TestSecondAgentRefused(t *testing.T) {
	root := fakeHost(t)
	spec := testTuning("", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) { s.Devices.Include = []string{"sda"} }).Spec
	start := func(stateDir string) (*Agent, error) {
		act, err := actuate.NewWithStore(actuatetest.New(root), stateDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { act.Close() })
		a := New(Options{HostRoot: root, StateDir: stateDir, Spec: spec, Log: testr.New(t)})
		a.act = act
		return a, a.configure(a.initialPolicies())
	}
	first := t.TempDir()
	if _, err := start(first); err != nil {
		t.Fatal(err)
	}
	_, err := start(t.TempDir())
	if !errors.Is(err, actuate.ErrOwned) || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second agent: %v; want ErrOwned naming %s and pid %d", err, first, os.Getpid())
	}
}

// restarted is the env's device as a restarted agent builds it under
// policy p: a new device over the same disk, its memo read back.
func (e *gateEnv) restarted(t *testing.T, p *v1alpha1.StorageTuning) *device {
	t.Helper()
	return e.restartedOn(t, p, nil)
}

// restartedOn is restarted, given the defaults the start read (host;
// none read when host is nil).
func (e *gateEnv) restartedOn(t *testing.T, p *v1alpha1.StorageTuning, host *startHost) *device {
	t.Helper()
	sd, err := sysfs.Read(e.root, "sda")
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDevice(selection.Governed{Device: sd, Policy: p}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var cur *sentinel.Seen
	if host != nil {
		seen := d.readDefaults(e.act, host.Host, host.at)
		cur = &seen
	}
	d.remember(e.act, cur, testr.New(t))
	return d
}

// startHost is what a start reads of its host, and when.
type startHost struct {
	sentinel.Host
	at time.Time
}

// TestMinDwellAcrossRestarts: the time of a device's last change is kept
// in the state directory, so a restarted agent still keeps the setting
// for spec.rollout.minDwell (issue 16, finding 7).
func TestMinDwellAcrossRestarts(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, nil)
	e := newGateEnv(t, "sda", p)
	e.allow = true
	if st := e.confirmed(t, 1); st.Changes != 1 {
		t.Fatalf("no change to start from: %+v", st)
	}
	changed := e.d.ctrl.Memo.LastChange
	d := e.restarted(t, p)
	if !d.ctrl.Memo.LastChange.Equal(changed) || d.gate(e.env).Hold(d.ctrl.Memo.LastChange, changed.Add(time.Minute)) != window.HoldDwell {
		t.Fatalf("restarted device: last change %v (want %v), not dwelling", d.ctrl.Memo.LastChange, changed)
	}
}

// TestSampleMissedTheWork: a sampled window whose traced part (its last
// tenth) held far fewer of the requests the device's stat file counted
// than its share predicts nothing, says why, and brings the next window
// back whole; one whose traced part holds its share is evaluated.
func TestSampleMissedTheWork(t *testing.T) {
	e := newGateEnv(t, "sda", testTuning("fleet", 1, v1alpha1.ModeObserve, nil))
	completed := uint64(0)
	stat := func(add uint64) {
		completed += add
		line := fmt.Sprintf("%d 0 %d 0 0 0 0 0 0 0 0\n", completed, 8*completed)
		if err := os.WriteFile(filepath.Join(e.root, "sys", "block", "sda", "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(0)
	e.window(t, 1) // whole: the window's start count is known from here on
	e.env.readScale = 10
	sampled := func(before, during uint64) v1alpha1.DeviceState {
		t.Helper()
		e.d.sampled = true
		e.d.ctrl.SetSettled(window.SettleWindows)
		stat(before)
		e.d.ios.MarkSample(e.root, e.d.sys.Name)
		stat(during)
		return e.window(t, 1)
	}
	st := sampled(80_000, 2000) // 82,000 in the window, a tenth of which is 8,200
	if !strings.Contains(st.Window.Skipped, "held 2000 of the 82000 requests") || st.Window.Best != "" {
		t.Fatalf("a sample that missed the work: window %+v; want it skipped, nothing predicted", st.Window)
	}
	if e.d.ctrl.Settled() >= window.SettleWindows {
		t.Fatalf("settled %d after a missed sample: the next window would be sampled", e.d.ctrl.Settled())
	}
	if st := sampled(18_000, 2000); st.Window.Skipped != "" || st.Window.Best == "" {
		t.Fatalf("a sample that holds its share: window %+v", st.Window)
	}
	// A window not sampled is never judged so.
	e.d.sampled = false
	stat(80_000)
	e.d.ios.MarkSample(e.root, e.d.sys.Name)
	stat(10)
	if st := e.window(t, 1); st.Window.Skipped != "" {
		t.Fatalf("a whole window: skipped %q", st.Window.Skipped)
	}
}

// TestCounterfactualAcrossRestarts: a device's counterfactual error is
// kept in its memo, so a restarted agent's device holds switches back as
// before; an unsound record read back is dropped, not trusted.
func TestCounterfactualAcrossRestarts(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, nil)
	e := newGateEnv(t, "sda", p)
	e.allow = true
	if st := e.confirmed(t, 1); st.Changes != 1 {
		t.Fatalf("no change to start from: %+v", st)
	}
	at := e.d.ctrl.Memo.LastChange
	rec := counterfactual.Record{Checks: 1, SumErrorPoints: 40, WrongSigns: 1, Last: counterfactual.Check{Predicted: 0.8, Measured: 1.2}, At: at}
	restart := func(r counterfactual.Record) *device {
		t.Helper()
		e.d.ctrl.Memo.Counterfactual = r
		e.d.memorize(e.act, testr.New(t))
		return e.restarted(t, p)
	}
	d := restart(rec)
	got := d.ctrl.Memo.Counterfactual
	if !got.At.Equal(rec.At) || got.Checks != 1 || got.SumErrorPoints != 40 || got.WrongSigns != 1 || got.Last != rec.Last || got.Holding(at.Add(time.Minute), d.ctrl.Policy.Backoff, d.ctrl.Policy.Decide.MarginPct) != 40 {
		t.Fatalf("restarted device: %+v, want %+v holding", got, rec)
	}
	rec.SumErrorPoints = -5
	if d := restart(rec); d.ctrl.Memo.Counterfactual.Checks != 0 {
		t.Fatalf("an unsound record was trusted: %+v", d.ctrl.Memo.Counterfactual)
	}
}

// Issue 16's race: another writer changes the scheduler after the
// window's check (here: while the grant is asked, after watchWriters) and
// before the agent's write. The agent's Apply expects what it saw and
// writes nothing; the other writer's value stays.
func TestOtherWriterBetweenCheckAndApply(t *testing.T) {
	p := testTuning("fleet", 3, v1alpha1.ModeApply, nil)
	e := newGateEnv(t, "sda", p)
	// A first window decides the switch and holds it for confirmation.
	if st := e.feed(t, windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1)); st.Recommendation == nil ||
		st.Recommendation.Reason != window.ReasonAwaitingConfirmation {
		t.Fatalf("first window: recommendation %+v, want a switch held for confirmation", st.Recommendation)
	}
	raced := false
	e.env.grant = func(string, *v1alpha1.StorageTuning) bool {
		if !raced {
			raced = true
			if err := e.fake.Write("sda", actuate.AttrScheduler, "bfq"); err != nil {
				t.Fatal(err)
			}
		}
		return true
	}
	// Not feed: the window's error is the refused Apply, which it checks.
	var mu sync.Mutex
	e.d.pending = append(e.d.pending, windowtest.FIFOWindow(2, 2000, 4, 4, 10e9, 1)...)
	e.d.ingest(&mu)
	e.env.budget = host.NewCPUBudget(time.Hour, 100)
	e.d.window(time.Unix(1010, 0), e.env)
	st := e.d.status
	if !raced || !strings.Contains(st.Window.ApplyError, "changed by another writer") {
		t.Fatalf("raced %v; apply error %q, want the other writer's change refused", raced, st.Window.ApplyError)
	}
	if got := e.schedulerWrites(); len(got) != 1 || got[0] != "sda queue/scheduler=bfq" {
		t.Errorf("scheduler writes %v, want only the other writer's bfq", got)
	}
	if st.Applied != nil || st.Changes != 0 {
		t.Errorf("applied %+v, changes %d", st.Applied, st.Changes)
	}
}

// TestWindowShowsDispatchCharges: a window that charged the schedulers'
// CPU costs shows the factor of each but none in its status; one that
// charged nothing shows none.
func TestWindowShowsDispatchCharges(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeObserve, nil)
	e := newGateEnv(t, "sda", p)
	if st := e.window(t, 1); len(st.Window.DispatchCharges) != 0 {
		t.Fatalf("no costs, charges %+v", st.Window.DispatchCharges)
	}
	// Costs in ms, so that the disk's few hundred requests a second give
	// factors well above 1.
	e.d.ctrl.Policy.Engine.DispatchCostNs = map[string]float64{"none": 0, "mq-deadline": 3e6, "bfq": 4.4e6}
	e.d.ctrl.Policy.Engine.CPUs = 2
	st := e.window(t, 1)
	got := st.Window.DispatchCharges
	if len(got) != 2 || got[0].Scheduler != "bfq" || got[1].Scheduler != "mq-deadline" {
		t.Fatalf("charges %+v, want bfq and mq-deadline", got)
	}
	bfq, _ := strconv.ParseFloat(got[0].Factor, 64)
	dl, _ := strconv.ParseFloat(got[1].Factor, 64)
	// One rate for both: the factors' excesses are as the costs, 4.4:3.
	if dl <= 1.01 || math.Abs((bfq-1)/(dl-1)-4.4/3) > 0.05 {
		t.Errorf("factors bfq %s, mq-deadline %s; want both above 1, their excesses as 4.4 to 3", got[0].Factor, got[1].Factor)
	}
}

// TestUnverifiedChangeRestoredAtStart (issue 44, an agent killed during
// a roll-out): the memo says a change is unverified from just before it
// is written until its verification ends, and a start that finds it so
// puts the device's original back exactly; a verified change is kept.
func TestUnverifiedChangeRestoredAtStart(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
		s.Rollout.MinDwell = &metav1.Duration{}
	})
	unverified := func(e *gateEnv) bool {
		t.Helper()
		m, ok, err := e.act.LoadDeviceState("sda")
		if err != nil || !ok {
			t.Fatalf("memo: %v, %v", ok, err)
		}
		return m.Unverified
	}
	for _, verified := range []bool{false, true} {
		t.Run(fmt.Sprintf("verified=%v", verified), func(t *testing.T) {
			e := newGateEnv(t, "sda", p)
			e.allow = true
			before, err := e.fake.Snapshot("sda")
			if err != nil {
				t.Fatal(err)
			}
			st := e.confirmed(t, 1)
			if st.Applied == nil || st.VerifyingWindows == 0 {
				t.Fatalf("want a change under verification: applied %+v, verifying %d", st.Applied, st.VerifyingWindows)
			}
			if !unverified(e) {
				t.Fatal("the memo does not say the change under verification is unverified")
			}
			changed, err := e.fake.Snapshot("sda")
			if err != nil {
				t.Fatal(err)
			}
			if verified {
				for e.d.ctrl.Verifying() {
					if st = e.window(t, 1); st.Reverts != 0 {
						t.Fatalf("the change reverted: %+v", st.LastVerification)
					}
				}
				if unverified(e) {
					t.Fatal("the memo still says unverified after the verification")
				}
			}
			// The agent ends here (SIGKILL: nothing else runs); the next
			// start reads the memo.
			notes := restoreUnverified(e.act, testr.New(t))
			now, err := e.fake.Snapshot("sda")
			if err != nil {
				t.Fatal(err)
			}
			want := before
			if verified {
				want = changed
			}
			if !maps.Equal(now, want) {
				t.Errorf("after the start: %v, want %v (notes %q)", now, want, notes)
			}
			if _, ok := e.act.Original("sda"); ok == !verified {
				t.Errorf("record kept: %v, want %v", ok, verified)
			}
		})
	}
}

// TestDiskAppearsSelected: a disk that appears in /sys/block after the
// policies were taken (hot-plugged; a loop device attached for a volume)
// is governed once the window ends, without a policy change; the devices
// already governed keep their controllers.
func TestDiskAppearsSelected(t *testing.T) {
	root, _, act := fakeActuator(t)
	away := filepath.Join(t.TempDir(), "vda")
	if err := os.Rename(filepath.Join(root, "sys/block/vda"), away); err != nil {
		t.Fatal(err)
	}
	p := testTuning("p", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) { s.Devices.Include = []string{"sda", "vda"} })
	a := New(Options{HostRoot: root, StateDir: t.TempDir(), Policies: []*v1alpha1.StorageTuning{p}, Log: testr.New(t)})
	a.act = act
	if err := a.configure(a.initialPolicies()); err != nil {
		t.Fatal(err)
	}
	if a.disksAppeared() {
		t.Fatal("the first look reports a new disk")
	}
	sda := a.devs[0]
	if got := a.names(); !slices.Equal(got, []string{"sda"}) {
		t.Fatalf("governed %v, want [sda]", got)
	}
	if a.disksAppeared() {
		t.Fatal("nothing changed, yet a disk appeared")
	}
	if err := os.Rename(away, filepath.Join(root, "sys/block/vda")); err != nil {
		t.Fatal(err)
	}
	if !a.disksAppeared() {
		t.Fatal("vda appeared, not seen")
	}
	a.requeue()
	if !a.reconfigure() {
		t.Fatal("the policies were not taken again")
	}
	if got := a.names(); !slices.Equal(got, []string{"sda", "vda"}) {
		t.Fatalf("governed %v, want [sda vda]", got)
	}
	if a.devs[0] != sda {
		t.Error("sda's controller was replaced")
	}
	if a.disksAppeared() {
		t.Error("vda reported again")
	}
}
