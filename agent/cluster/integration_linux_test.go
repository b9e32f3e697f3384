//go:build linux

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/agent/cluster"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/envtest"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestClusterAgent runs the cluster agent in-process against a real API
// server (envtest) on a loop device the test creates, under a fio load,
// through the life of a policy:
//
//  1. StorageTuning in Observe mode: the NodeStorageState appears (owned by
//     the Node, labelled), with the device, its candidates and a
//     recommendation; the device is not changed.
//  2. The policy turns to Apply, no grant: still no change; the device is
//     pending and the node reports Applied=False AwaitingGrant.
//  3. A grant in the NodeStorageState's spec (as the operator writes it):
//     the device changes; status reports it applied, with its original.
//  4. The policy is deleted: the device is restored exactly (every file of
//     its queue/), and at shutdown the NodeStorageState is deleted.
//
// The policy bounds read-ahead to one depth (1024 KiB, not the loop
// device's), so that a change is recommended whatever the simulation says
// of the schedulers.
func TestClusterAgent(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device, loads BPF programs and changes queue settings")
	fio := loopdev.NeedFio(t)
	cfg, c := envtest.Start(t)
	loopdev.LockHeavyIO(t)
	start := time.Now()
	ld := loopdev.NewForTest(t, 256<<20)
	dev, orig := ld.Name, ld.Queue
	if ra := strings.TrimSpace(orig["read_ahead_kb"]); ra == "1024" {
		t.Fatalf("%s already has read_ahead_kb 1024: the test needs another depth", dev)
	}
	stateDir := t.TempDir()
	ctx := context.Background()

	const nodeName = "node-a"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"shadowtune-test": "yes"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	// Another node's NodeStorageState, which the agent must not see.
	if err := c.Create(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}); err != nil {
		t.Fatal(err)
	}

	st := &v1alpha1.StorageTuning{
		ObjectMeta: metav1.ObjectMeta{Name: "loop-policy"},
		Spec: v1alpha1.StorageTuningSpec{
			Mode:         v1alpha1.ModeObserve,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"shadowtune-test": "yes"}},
			Devices:      v1alpha1.DeviceSelector{Include: []string{dev}},
			Schedulers: v1alpha1.SchedulerPolicy{
				Candidates: []v1alpha1.SchedulerName{v1alpha1.SchedulerName(loopdev.Current(orig["scheduler"])), "mq-deadline"},
				Default:    v1alpha1.SchedulerName(loopdev.Current(orig["scheduler"])),
			},
			ReadAhead: v1alpha1.ReadAheadPolicy{MinKiB: ptr.To[int32](1024), MaxKiB: ptr.To[int32](1024)},
			Evaluation: v1alpha1.EvaluationPolicy{
				Window:           &metav1.Duration{Duration: time.Second},
				CPUBudgetPercent: ptr.To[int32](50),
			},
		},
	}
	if st.Spec.Schedulers.Default == "mq-deadline" {
		st.Spec.Schedulers.Candidates = []v1alpha1.SchedulerName{"mq-deadline", "none"}
	}
	if err := c.Create(ctx, st); err != nil {
		t.Fatal(err)
	}

	stopFio := startFio(t, fio, dev)
	defer stopFio()

	mgr, err := cluster.NewManager(cfg, cluster.ManagerOptions{NodeName: nodeName, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var wmu sync.Mutex
	writes := 0
	if _, err := cluster.Setup(mgr, cluster.Options{
		NodeName: nodeName, StateDir: stateDir, Tracer: tracer.KindAuto, Metrics: m, Log: testr.New(t),
		OnStatus: func(v1alpha1.NodeStorageStateStatus) { wmu.Lock(); writes++; wmu.Unlock() },
	}); err != nil {
		t.Fatal(err)
	}
	mctx, stopMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stopMgr()
		select {
		case err := <-mgrDone:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(90 * time.Second):
			t.Error("the manager did not stop within 90 s")
		}
	}
	defer stop()

	// 1. Observe.
	nss := waitNSS(t, c, nodeName, "the device with candidates and a recommendation (Observe)", func(n *v1alpha1.NodeStorageState) bool {
		d := device(n, dev)
		return d != nil && len(d.Candidates) > 0 && d.Recommendation != nil && d.GovernedBy == st.Name
	})
	if n := nss.Labels[v1alpha1.NodeLabel]; n != nodeName {
		t.Errorf("label %s = %q, want %s", v1alpha1.NodeLabel, n, nodeName)
	}
	if refs := nss.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].APIVersion != "v1" || refs[0].Name != nodeName ||
		refs[0].UID != node.UID {
		t.Errorf("owner references %+v, want the Node %s (%s)", refs, nodeName, node.UID)
	}
	d := device(nss, dev)
	t.Logf("observe: %s current %+v, recommendation %+v, candidates %+v, model error %s", dev, d.Current, d.Recommendation,
		d.Candidates, d.ModelErrorPercent)
	if d.Tracer != v1alpha1.TracerEBPF && d.Tracer != v1alpha1.TracerTracefs {
		t.Errorf("tracer %q", d.Tracer)
	}
	if c := meta.FindStatusCondition(nss.Status.Conditions, v1alpha1.NodeConditionTracingActive); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("TracingActive %+v", c)
	}
	if c := meta.FindStatusCondition(nss.Status.Conditions, v1alpha1.NodeConditionApplied); c == nil || c.Reason != v1alpha1.ReasonObserveOnly {
		t.Errorf("Applied %+v, want ObserveOnly", c)
	}
	if nss.Status.GovernedDevices != 1 || nss.Status.LastHeartbeatTime == nil {
		t.Errorf("governed %d heartbeat %v", nss.Status.GovernedDevices, nss.Status.LastHeartbeatTime)
	}
	if diff := loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)); diff != "" {
		t.Fatalf("Observe mode changed %s:\n%s", dev, diff)
	}

	// 2. Apply without a grant.
	setMode(t, c, st.Name, v1alpha1.ModeApply)
	nss = waitNSS(t, c, nodeName, "Applied=False AwaitingGrant", func(n *v1alpha1.NodeStorageState) bool {
		cd := meta.FindStatusCondition(n.Status.Conditions, v1alpha1.NodeConditionApplied)
		return cd != nil && cd.Reason == v1alpha1.ReasonAwaitingGrant && n.Status.PendingDevices == 1
	})
	d = device(nss, dev)
	if !d.Pending() {
		t.Errorf("device not pending: current %+v, recommendation %+v", d.Current, d.Recommendation)
	}
	t.Logf("awaiting a grant: current %+v, recommendation %+v", d.Current, d.Recommendation)
	// A few more windows: still nothing changes.
	time.Sleep(3 * time.Second)
	if diff := loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)); diff != "" {
		t.Fatalf("Apply mode without a grant changed %s:\n%s", dev, diff)
	}
	if recs, _ := filepath.Glob(filepath.Join(stateDir, "*.json")); len(recs) != 0 {
		t.Fatalf("records of originals without a grant: %v", recs)
	}

	// 3. The grant.
	cur := &v1alpha1.StorageTuning{}
	if err := c.Get(ctx, client.ObjectKey{Name: st.Name}, cur); err != nil {
		t.Fatal(err)
	}
	grant := &v1alpha1.RolloutGrant{Devices: []string{dev}, Until: metav1.NewTime(time.Now().Add(2 * time.Minute).Truncate(time.Second)),
		Policy: st.Name, Generation: cur.Generation}
	writeGrant(t, c, nodeName, grant)
	nss = waitNSS(t, c, nodeName, "the change applied", func(n *v1alpha1.NodeStorageState) bool {
		d := device(n, dev)
		return d != nil && d.Applied != nil && d.Original != nil && d.Current.ReadAheadKiB == 1024 && n.Status.AppliedDevices == 1
	})
	d = device(nss, dev)
	t.Logf("granted: current %+v, original %+v, applied %+v", d.Current, *d.Original, *d.Applied)
	if ra := strings.TrimSpace(loopdev.SnapshotQueue(t, dev)["read_ahead_kb"]); ra != "1024" {
		t.Errorf("read_ahead_kb %s after the grant, want 1024", ra)
	}
	if want := strings.TrimSpace(orig["read_ahead_kb"]); fmt.Sprint(d.Original.ReadAheadKiB) != want || d.Original.Scheduler != loopdev.Current(orig["scheduler"]) {
		t.Errorf("original %+v, want %s read_ahead_kb %s", *d.Original, loopdev.Current(orig["scheduler"]), want)
	}
	if nss.Status.ObservedGeneration != nss.Generation {
		t.Errorf("observedGeneration %d, generation %d", nss.Status.ObservedGeneration, nss.Generation)
	}
	waitEvent(t, c, nodeName, cluster.EventApplied, dev+": ")

	// 4. The policy goes away: the device is restored exactly.
	if err := c.Delete(ctx, &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: st.Name}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("%s not restored 30 s after the policy was deleted:\n%s", dev, loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitNSS(t, c, nodeName, "the device no longer governed", func(n *v1alpha1.NodeStorageState) bool {
		return device(n, dev) == nil && n.Status.GovernedDevices == 0
	})
	waitEvent(t, c, nodeName, cluster.EventReverted, dev+": no longer governed, original setting put back")
	stop()
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, &v1alpha1.NodeStorageState{}); !apierrors.IsNotFound(err) {
		t.Errorf("NodeStorageState %s after shutdown with no policy: %v, want it deleted", nodeName, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-b"}, &v1alpha1.NodeStorageState{}); err != nil {
		t.Errorf("another node's NodeStorageState: %v", err)
	}
	if diff := loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)); diff != "" {
		t.Errorf("%s after shutdown differs from before:\n%s", dev, diff)
	}
	if recs, _ := filepath.Glob(filepath.Join(stateDir, "*.json")); len(recs) != 0 {
		t.Errorf("records of originals left: %v", recs)
	}
	wmu.Lock()
	t.Logf("%d status writes in %.1f s", writes, time.Since(start).Seconds())
	wmu.Unlock()
}

// TestClusterAgentRestoresAtShutdown stops the agent while a policy in
// Apply mode still selects the node and a granted change is in effect: the
// device is restored exactly, the NodeStorageState stays (a policy selects
// the node) with a final status, and only ungoverned disks that are not
// virtual are listed besides the governed one.
func TestClusterAgentRestoresAtShutdown(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device, loads BPF programs and changes queue settings")
	fio := loopdev.NeedFio(t)
	cfg, c := envtest.Start(t)
	loopdev.LockHeavyIO(t)
	ld := loopdev.NewForTest(t, 256<<20)
	dev, orig := ld.Name, ld.Queue
	if ra := strings.TrimSpace(orig["read_ahead_kb"]); ra == "512" {
		t.Fatalf("%s already has read_ahead_kb 512: the test needs another depth", dev)
	}
	ctx := context.Background()
	const nodeName = "node-k"
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		t.Fatal(err)
	}
	sched := v1alpha1.SchedulerName(loopdev.Current(orig["scheduler"]))
	st := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: "apply-ra"},
		Spec: v1alpha1.StorageTuningSpec{
			Mode:       v1alpha1.ModeApply,
			Devices:    v1alpha1.DeviceSelector{Include: []string{dev}},
			Schedulers: v1alpha1.SchedulerPolicy{Candidates: []v1alpha1.SchedulerName{sched}, Default: sched},
			ReadAhead:  v1alpha1.ReadAheadPolicy{MinKiB: ptr.To[int32](512), MaxKiB: ptr.To[int32](512)},
			Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: time.Second}, CPUBudgetPercent: ptr.To[int32](50)},
		}}
	if err := c.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	// The grant is there before the agent: it creates no NodeStorageState
	// then, and uses this one.
	if err := c.Create(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: v1alpha1.NodeStorageStateSpec{Grant: &v1alpha1.RolloutGrant{Devices: []string{dev},
			Until: metav1.NewTime(time.Now().Add(5 * time.Minute)), Policy: st.Name, Generation: 1}}}); err != nil {
		t.Fatal(err)
	}
	startFio(t, fio, dev)

	mgr, err := cluster.NewManager(cfg, cluster.ManagerOptions{NodeName: nodeName, MetricsBindAddress: "0", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Setup(mgr, cluster.Options{NodeName: nodeName, StateDir: t.TempDir(), Log: testr.New(t)}); err != nil {
		t.Fatal(err)
	}
	mctx, stopMgr := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stopMgr()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	nss := waitNSS(t, c, nodeName, "the granted change applied", func(n *v1alpha1.NodeStorageState) bool {
		d := device(n, dev)
		return d != nil && d.Applied != nil && d.Current.ReadAheadKiB == 512
	})
	for _, d := range nss.Status.Devices {
		if d.Name != dev && (strings.HasPrefix(d.Name, "loop") || d.GovernedBy != "") {
			t.Errorf("device %+v listed: want only %s and ungoverned disks that are not virtual", d, dev)
		}
	}
	if cd := meta.FindStatusCondition(nss.Status.Conditions, v1alpha1.NodeConditionApplied); cd == nil || cd.Status == metav1.ConditionFalse {
		t.Errorf("Applied %+v after the granted change", cd)
	}

	stopMgr()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred stop
	if diff := loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)); diff != "" {
		t.Errorf("%s not restored at shutdown:\n%s", dev, diff)
	}
	n := &v1alpha1.NodeStorageState{}
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, n); err != nil {
		t.Fatalf("NodeStorageState deleted though a policy still selects the node: %v", err)
	}
	if cd := meta.FindStatusCondition(n.Status.Conditions, v1alpha1.NodeConditionTracingActive); cd == nil || cd.Status != metav1.ConditionFalse {
		t.Errorf("final TracingActive %+v, want False (stopped)", cd)
	}
	d := device(n, dev)
	if d == nil || d.Original != nil || d.Applied != nil || fmt.Sprint(d.Current.ReadAheadKiB) != strings.TrimSpace(orig["read_ahead_kb"]) ||
		n.Status.AppliedDevices != 0 {
		t.Errorf("final status of %s: %+v (applied devices %d), want its original setting", dev, d, n.Status.AppliedDevices)
	}
	if n.Spec.Grant == nil || n.Spec.Grant.Policy != st.Name {
		t.Errorf("the agent changed the spec: %+v", n.Spec)
	}
}

func device(n *v1alpha1.NodeStorageState, name string) *v1alpha1.DeviceState {
	for i := range n.Status.Devices {
		if n.Status.Devices[i].Name == name {
			return &n.Status.Devices[i]
		}
	}
	return nil
}

// waitNSS polls the node's NodeStorageState until cond holds (60 s).
func waitNSS(t *testing.T, c client.Client, name, what string, cond func(*v1alpha1.NodeStorageState) bool) *v1alpha1.NodeStorageState {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	n := &v1alpha1.NodeStorageState{}
	var last string
	for {
		err := c.Get(context.Background(), client.ObjectKey{Name: name}, n)
		if err == nil && cond(n) {
			return n
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("status %+v", n.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not after 60 s; last: %s", what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func setMode(t *testing.T, c client.Client, name string, mode v1alpha1.TuningMode) {
	t.Helper()
	for range 5 {
		st := &v1alpha1.StorageTuning{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, st); err != nil {
			t.Fatal(err)
		}
		st.Spec.Mode = mode
		err := c.Update(context.Background(), st)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("could not update the StorageTuning")
}

// writeGrant sets the NodeStorageState's spec.grant, as the operator does.
func writeGrant(t *testing.T, c client.Client, name string, g *v1alpha1.RolloutGrant) {
	t.Helper()
	for range 10 {
		n := &v1alpha1.NodeStorageState{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		n.Spec.Grant = g
		err := c.Update(context.Background(), n)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("could not write the grant")
}

// startFio runs random 4 KiB reads on the device until the returned
// function is called (at most two minutes).
func startFio(t *testing.T, fio, dev string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, fio, "--name=cluster-agent", "--filename=/dev/"+dev, "--direct=1", "--rw=randread", "--bs=4k",
		"--ioengine=libaio", "--iodepth=8", "--numjobs=2", "--time_based", "--runtime=120", "--group_reporting", "--output-format=terse")
	// fio stops its job processes on SIGINT; killing only the parent would
	// leave them running.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("fio: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitEvent waits up to 30 s for an events.k8s.io Event about the node's
// NodeStorageState (in "default", the namespace of a cluster-scoped
// object's events) with the reason and a note containing note.
func waitEvent(t *testing.T, c client.Client, node, reason, note string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var seen []string
	for time.Now().Before(deadline) {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		seen = seen[:0]
		for _, e := range list.Items {
			r := e.Regarding
			seen = append(seen, fmt.Sprintf("%s %s/%s %s: %s", e.Type, r.Kind, r.Name, e.Reason, e.Note))
			if r.Kind == v1alpha1.KindNodeStorageState && r.Name == node && r.UID != "" && e.Reason == reason &&
				strings.Contains(e.Note, note) && e.ReportingController == cluster.FieldOwner {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("no %s event on NodeStorageState %s with %q; events: %q", reason, node, note, seen)
}
