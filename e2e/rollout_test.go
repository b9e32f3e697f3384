//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
	"github.com/shadowtune/shadowtune/operator/rollout"
)

// rolloutWindow is the policies' evaluation window here; a grant lasts
// rollout.GrantDuration of it.
const rolloutWindow = 2 * time.Second

// TestRolloutMultiNode (issue 44): the operator gates real agents on
// three kubelets (SHADOWTUNE_E2E_NODES=3 e2e/cluster up), each agent
// governing its own loop device. The gated change is the policy's
// read-ahead bound (readAhead.maxKiB 512 below the devices' 2560 KiB),
// which the agent makes only under a grant (agent Gate.hold):
//
//   - staged roll-out with maxUnavailable 1: one node at a time, in name
//     order, each grant lasting what the policy's window says, the next
//     issued only once the previous one has expired;
//   - the agent pod of the second node deleted right after its change:
//     it puts the device back as it exits, its grant is not renewed and
//     holds the budget until it expires, and the roll-out then completes;
//   - a measured regression on the first node halts the roll-out: its
//     agent cuts read-ahead on a thrash (a change made without a grant,
//     then verified), the device is made slower during the verification
//     (blk-throttle on the loop device under it), the agent reverts
//     exactly, and no other node is granted its pending change;
//   - an agent SIGKILLed while it verifies a change: the restarted agent
//     puts the unverified change back (agent restoreUnverified);
//   - helm uninstall puts every node's devices back exactly.
func TestRolloutMultiNode(t *testing.T) {
	need.Root(t, "loop devices, fio, blk-throttle and the cluster's privileged agents")
	k := newCluster(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	defer k.finish(time.Now())
	nodes := k.nodeNames(ctx)
	if len(nodes) != 3 {
		t.Fatalf("want three nodes (SHADOWTUNE_E2E_NODES=3 e2e/cluster up), have %q", nodes)
	}
	k.record("nodes", nodes)
	k.install(ctx, nodes)
	uninstalled := false
	defer func() {
		if !uninstalled {
			k.saveLogs("failed")
			// The policies first (helm keeps the CRDs, and so them): the
			// agents put their devices back as they stop governing them.
			_, _ = k.run("kubectl", "delete", "storagetunings", "--all", "--wait", "--timeout=1m")
			_, _ = k.run(k.helm, "uninstall", release, "-n", namespace, "--wait")
			_, _ = k.run("kubectl", "delete", "namespace", namespace, "--wait", "--timeout=2m")
		}
	}()
	w := &grantWatch{k: k}
	go w.run(ctx)
	fio := loopdev.NeedFio(t)
	before := map[string]map[string]string{}
	// The thrash's memory cgroup (one per test process: loopdev names it
	// by pid), for the two loads that thrash, one after the other.
	mem := loopdev.MemCgroup(t, 64<<20)

	t0 := time.Now()
	k.stagedRollout(w, fio, nodes, before)
	k.record("stagedSeconds", time.Since(t0).Seconds())
	t0 = time.Now()
	k.haltedRollout(w, fio, mem, nodes, before)
	k.record("haltSeconds", time.Since(t0).Seconds())
	t0 = time.Now()
	k.killedMidVerification(fio, mem, nodes[0], before)
	k.record("killSeconds", time.Since(t0).Seconds())
	if v := w.overlaps(); len(v) > 0 {
		k.errorf("maxUnavailable 1: more than one node held a grant of a policy at once: %q", v)
	}
	k.record("grants", w.list())

	k.saveLogs("before-uninstall")
	if out, err := k.run(k.helm, "uninstall", release, "-n", namespace, "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	uninstalled = true
	for dev, snap := range before {
		if diff := loopdev.Diff(snap, loopdev.SnapshotQueue(t, dev)); diff != "" {
			k.errorf("%s after uninstall:\n%s", dev, diff)
		}
	}
	for _, n := range nodes {
		if recs, _ := filepath.Glob(filepath.Join(nodeStateDir(n), "*.json")); len(recs) > 0 {
			k.errorf("%s: records of originals left: %v", n, recs)
		}
	}
	k.kubectl("delete", "namespace", namespace, "--wait", "--timeout=2m")
}

// stagedRollout runs the staged roll-out, with the agent pod of the second
// node deleted as soon as it has made its change.
func (k *cluster) stagedRollout(w *grantWatch, fio string, nodes []string, before map[string]map[string]string) {
	t := k.t
	var loads []func()
	defer func() { stopAll(loads) }()
	devs := k.nodeDevices(nodes, before, func(n string) (*loopdev.Dev, []string) {
		d := loopdev.NewForTest(t, 512<<20)
		loads = append(loads, directReads(t, fio, d))
		return d, nil
	})
	k.startPolicy("e2e-stage", devs, nodes)
	// The second node's agent pod: deleted as soon as it has written its
	// change, while its grant is in force.
	victim, vdev := nodes[1], devs[nodes[1]]
	changedAt := awaitChange(t, 5*time.Minute, vdev, before[vdev])
	changed := loopdev.SnapshotQueue(t, vdev)
	restored := watchRestore(t, vdev, before[vdev])
	k.deleteAgent(victim)
	deletedAt := time.Now()
	n, err := k.nss(victim)
	if err != nil || n.Spec.Grant == nil || n.Spec.Grant.Policy != "e2e-stage" {
		t.Fatalf("%s changed %s at %s without a grant of e2e-stage: %+v, %v", victim, vdev, changedAt, n.Spec.Grant, err)
	}
	grant := *n.Spec.Grant
	k.record("deleted", map[string]any{"node": victim, "changedAt": changedAt, "deletedAt": deletedAt, "grantUntil": grant.Until.Time,
		"changed": loopdev.Diff(before[vdev], changed)})
	eventually(t, 6*time.Minute, "every node's device changed (the roll-out completes)", func() error {
		for _, n := range nodes {
			s, err := k.nss(n)
			if err != nil {
				return err
			}
			if d := findDevice(s, devs[n]); d == nil || d.Applied == nil || d.Original == nil {
				return fmt.Errorf("%s/%s: %+v", n, devs[n], d)
			}
		}
		return nil
	})
	at, ok := restored()
	k.record("restoredAfterDelete", at)
	if !ok {
		k.errorf("%s/%s: not put back when its agent pod was deleted", victim, vdev)
	}
	gs := w.of("e2e-stage")
	k.checkStages(gs, nodes)
	for _, g := range gs {
		switch {
		case g.node == victim && g.until.Equal(grant.Until.Time) && g.last.After(grant.Until.Add(15*time.Second)):
			k.errorf("the deleted agent's grant, until %s, was still there at %s", g.until, g.last)
		case g.node != victim && g.first.After(deletedAt) && g.first.Before(grant.Until.Add(-time.Second)):
			k.errorf("%s granted at %s, before the deleted agent's grant expired (%s)", g.node, g.first, grant.Until)
		}
	}
	k.show("staged", "get", "events", "--field-selector", "involvedObject.name=e2e-stage", "--sort-by=.lastTimestamp")
	k.deletePolicy("e2e-stage", devs, before)
}

// checkStages checks the grants of one policy against maxUnavailable 1:
// first grants in name order, each lasting GrantDuration, each issued at
// or after the previous one's expiry.
func (k *cluster) checkStages(gs []grantSeen, nodes []string) {
	var firsts []string
	for i, g := range gs {
		if !slices.Contains(firsts, g.node) {
			firsts = append(firsts, g.node)
		}
		if d := g.until.Sub(g.first); d > rollout.GrantDuration(rolloutWindow)+2*time.Second || d < rollout.GrantDuration(rolloutWindow)-10*time.Second {
			k.errorf("%s: grant seen at %s until %s (%v); the policy's grants last %v", g.node, g.first, g.until, d, rollout.GrantDuration(rolloutWindow))
		}
		if i > 0 && g.first.Before(gs[i-1].until.Add(-time.Second)) {
			k.errorf("%s granted at %s, before %s's grant expired (%s)", g.node, g.first, gs[i-1].node, gs[i-1].until)
		}
	}
	if !slices.Equal(firsts, nodes) {
		k.errorf("nodes first granted in the order %q, want %q", firsts, nodes)
	}
}

// haltedRollout makes a change on the first node regress, in fact. Its
// device is a loop device over a file on ext4 on a second loop device;
// on it, random mmap reads of a 512 MiB file, in a 64 MiB memory cgroup,
// one short process after another (each opens the file at the device's
// read-ahead then: file_ra_state_init), waste nearly all of the
// read-around at 512 KiB, so the agent cuts read-ahead. Once the cut is
// written, the load's blk-throttle cgroup caps its reads of the second
// device at 100 a second: each request of the first device waits there,
// and the verification measures the device's time per used page far
// above what it was before the cut. The other nodes' devices have their
// bound move pending all along.
func (k *cluster) haltedRollout(w *grantWatch, fio, mem string, nodes []string, before map[string]map[string]string) {
	t := k.t
	first := nodes[0]
	var lower *loopdev.Dev
	var cg string
	var loads []func()
	defer func() { stopAll(loads) }()
	devs := k.nodeDevices(nodes, before, func(n string) (*loopdev.Dev, []string) {
		if n != first {
			d := loopdev.NewForTest(t, 512<<20)
			loads = append(loads, directReads(t, fio, d))
			return d, nil
		}
		lower = loopdev.NewForTest(t, 1536<<20)
		img := filepath.Join(lower.MountExt4(t), "disk.img")
		loopdev.WriteRandom(t, img, 1<<30)
		d := loopdev.Over(t, img)
		mapped := filepath.Join(d.MountExt4(t), "mapped")
		loopdev.WriteRandom(t, mapped, 512<<20)
		// Within the policy's bounds: its only change is the agent's own.
		setQueue(t, d.Name, "read_ahead_kb", "512")
		var capped string
		cg, capped = loopdev.ThrottleCgroup(t, lower.MajMin(t), 0, 0)
		procs := []string{mem, capped}
		loads = append(loads, mmapThrash(t, fio, mapped, procs))
		return d, procs
	})
	k.startPolicy("e2e-halt", devs, nodes)
	fdev := devs[first]
	changedAt := awaitChange(t, 4*time.Minute, fdev, before[fdev])
	loopdev.CapReads(t, cg, lower.MajMin(t), 100, 0)
	capped := time.Now()
	defer loopdev.CapReads(t, cg, lower.MajMin(t), 0, 0)
	var revertedAt time.Time
	eventually(t, 2*time.Minute, first+" reverts the change that regressed", func() error {
		n, err := k.nss(first)
		if err != nil {
			return err
		}
		d := findDevice(n, fdev)
		if d == nil || d.Reverts == 0 || d.LastRevertTime == nil {
			return fmt.Errorf("device %+v", d)
		}
		revertedAt = d.LastRevertTime.Time
		return nil
	})
	k.record("halt", map[string]any{"node": first, "device": fdev, "changedAt": changedAt, "cappedAt": capped, "revertedAt": revertedAt,
		"verification": k.lastVerification(first, fdev)})
	if diff := loopdev.Diff(before[fdev], loopdev.SnapshotQueue(t, fdev)); diff != "" {
		k.errorf("%s/%s not reverted exactly:\n%s", first, fdev, diff)
	}
	eventually(t, time.Minute, "e2e-halt halted: Degraded RegressionReverted, a RolloutHalted event", func() error {
		c := meta.FindStatusCondition(k.policy("e2e-halt").Status.Conditions, v1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRegressionReverted {
			return fmt.Errorf("Degraded %+v", c)
		}
		if ev := k.kubectl("get", "events", "--field-selector", "involvedObject.name=e2e-halt,reason=RolloutHalted"); !strings.Contains(ev, "RolloutHalted") {
			return fmt.Errorf("no RolloutHalted event")
		}
		return nil
	})
	// Longer than a grant: had the roll-out gone on, the next node's
	// grant would have come by now.
	hold := rollout.GrantDuration(rolloutWindow) + 15*time.Second
	t.Logf("holding %v: no node may be granted", hold)
	time.Sleep(hold)
	halted := 0
	for _, g := range w.of("e2e-halt") {
		if !g.first.Before(revertedAt) {
			k.errorf("%s granted at %s, after %s's change regressed (reverted at %s)", g.node, g.first, first, revertedAt)
		}
	}
	for _, n := range nodes[1:] {
		s, err := k.nss(n)
		if err != nil {
			t.Fatal(err)
		}
		if d := findDevice(s, devs[n]); d != nil && d.Pending() && d.Applied == nil {
			halted++
		}
	}
	k.record("haltedNodes", halted)
	if halted == 0 {
		k.errorf("no other node was left with its change pending: the halt held nothing back")
	}
	k.show("halt", "get", "storagetuning", "e2e-halt")
	k.show("halt", "get", "events", "--field-selector", "involvedObject.name=e2e-halt", "--sort-by=.lastTimestamp")
	k.deletePolicy("e2e-halt", devs, before)
}

// killedMidVerification SIGKILLs the agent on node as soon as it has cut
// read-ahead on a thrash (mmapThrash), so during the cut's verification:
// its container restarts in the same pod, and the new agent must put the
// device's original back, the change being unverified.
func (k *cluster) killedMidVerification(fio, mem, node string, before map[string]map[string]string) {
	t := k.t
	d := loopdev.NewForTest(t, 1<<30)
	mapped := filepath.Join(d.MountExt4(t), "mapped")
	loopdev.WriteRandom(t, mapped, 512<<20)
	setQueue(t, d.Name, "read_ahead_kb", "512")
	before[d.Name] = loopdev.SnapshotQueue(t, d.Name)
	k.clusterCmd("attach", node, d.Name)
	defer mmapThrash(t, fio, mapped, []string{mem})()
	k.startPolicy("e2e-kill", map[string]string{node: d.Name}, []string{node})
	changedAt := awaitChange(t, 4*time.Minute, d.Name, before[d.Name])
	changed := loopdev.SnapshotQueue(t, d.Name)
	restored := watchRestore(t, d.Name, before[d.Name])
	pod := k.killAgent(node)
	killedAt := time.Now()
	eventually(t, 2*time.Minute, "the restarted agent puts the unverified change back", func() error {
		if _, ok := restored(); !ok {
			return fmt.Errorf("%s still %s", d.Name, loopdev.Diff(before[d.Name], loopdev.SnapshotQueue(t, d.Name)))
		}
		return nil
	})
	at, _ := restored()
	k.record("killedMidVerification", map[string]any{"node": node, "device": d.Name, "changedAt": changedAt, "killedAt": killedAt,
		"restoredAt": at, "changed": loopdev.Diff(before[d.Name], changed)})
	eventually(t, time.Minute, "the restarted agent's log says why it restored", func() error {
		out, err := k.run("kubectl", "-n", namespace, "logs", pod, "-c", "agent")
		if err != nil {
			return fmt.Errorf("kubectl logs %s: %w", pod, err)
		}
		if !strings.Contains(out, "restored devices whose last change the previous run did not verify") || !strings.Contains(out, `"`+d.Name+`"`) {
			return fmt.Errorf("not in the log of %s", pod)
		}
		return nil
	})
	k.deletePolicy("e2e-kill", map[string]string{node: d.Name}, before)
}

// mmapThrash runs random mmap reads of the file mapped, in the cgroups
// whose cgroup.procs files are procs, one short fio process after
// another (each opens the file at the device's read-ahead of the moment:
// file_ra_state_init), until stopped. fio's madvise hint is off, so each
// fault reads around as the kernel's default does.
func mmapThrash(t *testing.T, fio, mapped string, procs []string) func() {
	return startLoad(t, procs, "sh", "-c", `while :; do "$0" --name=mmap --filename="$1" --ioengine=mmap --fadvise_hint=0 --rw=randread --bs=4k --time_based --runtime=1 --output=/dev/null || exit; done`, fio, mapped)
}

// nodeDevices gives each node the loop device mk makes (with its load),
// shown to that node only, with its queue settings kept in before.
func (k *cluster) nodeDevices(nodes []string, before map[string]map[string]string, mk func(string) (*loopdev.Dev, []string)) map[string]string {
	t := k.t
	devs := map[string]string{}
	for _, n := range nodes {
		d, _ := mk(n)
		devs[n] = d.Name
		before[d.Name] = loopdev.SnapshotQueue(t, d.Name)
		k.clusterCmd("attach", n, d.Name)
	}
	k.record("devices-"+strings.Join(slices.Sorted(maps.Values(devs)), ","), devs)
	return devs
}

func setQueue(t *testing.T, dev, attr, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", dev, "queue", attr), []byte(v), 0); err != nil {
		t.Fatal(err)
	}
}

// startPolicy applies a policy over devs' devices with maxUnavailable 1
// in Observe mode, waits until every node recommends a change, so that
// the roll-out's order is the nodes' names, then switches it to Apply.
func (k *cluster) startPolicy(name string, devs map[string]string, nodes []string) {
	doc := fmt.Sprintf(`apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: %s
spec:
  mode: Observe
  devices:
    include: [%s]
  readAhead: {minKiB: 64, maxKiB: 512}
  evaluation: {window: %s, cpuBudgetPercent: 50}
  rollout: {maxUnavailable: 1, minDwell: 1m}
`, name, strings.Join(slices.Sorted(maps.Values(devs)), ", "), rolloutWindow)
	if out, err := k.apply(doc); err != nil {
		k.t.Fatalf("kubectl apply %s: %v\n%s", name, err, out)
	}
	eventually(k.t, 3*time.Minute, name+": every node recommends a change", func() error {
		for _, n := range nodes {
			s, err := k.nss(n)
			if err != nil {
				return err
			}
			if d := findDevice(s, devs[n]); d == nil || !d.Pending() {
				return fmt.Errorf("%s/%s: %+v", n, devs[n], d)
			}
		}
		return nil
	})
	k.kubectl("patch", "storagetuning", name, "--type=merge", "-p", `{"spec":{"mode":"Apply"}}`)
}

// awaitChange polls dev's queue settings until they differ from before
// and returns when they did.
func awaitChange(t *testing.T, timeout time.Duration, dev string, before map[string]string) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if diff := loopdev.Diff(before, loopdev.SnapshotQueue(t, dev)); diff != "" {
			t.Logf("%s changed: %s", dev, strings.ReplaceAll(diff, "\n", "; "))
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not changed within %v", dev, timeout)
	return time.Time{}
}

// deletePolicy deletes the policy and waits until its devices are back
// as they were.
func (k *cluster) deletePolicy(name string, devs map[string]string, before map[string]map[string]string) {
	k.kubectl("delete", "storagetuning", name)
	eventually(k.t, 2*time.Minute, name+" deleted: its devices back as they were", func() error {
		for _, d := range devs {
			if diff := loopdev.Diff(before[d], loopdev.SnapshotQueue(k.t, d)); diff != "" {
				return fmt.Errorf("%s:\n%s", d, diff)
			}
		}
		return nil
	})
}

// install runs the README's install and waits for an agent's
// NodeStorageState on every node.
func (k *cluster) install(ctx context.Context, nodes []string) {
	t := k.t
	start := metav1.NewTime(time.Now().Truncate(time.Second)) // heartbeats have whole seconds
	k.installREADME()
	k.show("install", "-n", namespace, "get", "pods", "-o", "wide")
	eventually(t, 2*time.Minute, "every node's agent reports", func() error {
		for _, n := range nodes {
			s, err := k.nss(n)
			if err != nil {
				return err
			}
			if hb := s.Status.LastHeartbeatTime; hb == nil || hb.Before(&start) {
				return fmt.Errorf("%s: no heartbeat of this install yet (%v)", n, hb)
			}
		}
		return nil
	})
}

func (k *cluster) nodeNames(ctx context.Context) []string {
	var nl corev1.NodeList
	if err := k.c.List(ctx, &nl); err != nil {
		k.t.Fatal(err)
	}
	var names []string
	for _, n := range nl.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names
}

// agentPod returns the agent pod on node; the test fails without one.
func (k *cluster) agentPod(node string) corev1.Pod {
	t := k.t
	var pods corev1.PodList
	if err := k.c.List(context.Background(), &pods, client.InNamespace(namespace),
		client.MatchingLabels{"app.kubernetes.io/component": "agent"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			return p
		}
	}
	t.Fatalf("no agent pod on %s", node)
	return corev1.Pod{}
}

// deleteAgent deletes the agent pod on node (SIGTERM, its grace period),
// without waiting; the DaemonSet makes a new one.
func (k *cluster) deleteAgent(node string) {
	p := k.agentPod(node)
	k.kubectl("-n", namespace, "delete", "pod", p.Name, "--wait=false")
	k.t.Logf("deleted the agent pod on %s (%s)", node, p.Name)
}

// killAgent SIGKILLs the agent container on node through its containerd
// (as the kernel's OOM killer would): no SIGTERM, no restore at exit; the
// kubelet restarts it in the same pod.
func (k *cluster) killAgent(node string) (pod string) {
	t := k.t
	p := k.agentPod(node)
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("the agent pod on %s (%s) has no container yet", node, p.Name)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	k.clusterCmd("ctr", node, "tasks", "kill", "-s", "SIGKILL", id)
	t.Logf("SIGKILLed the agent on %s (pod %s)", node, p.Name)
	return p.Name
}

// clusterCmd runs e2e/cluster with args; the test fails if it does.
func (k *cluster) clusterCmd(args ...string) {
	k.t.Helper()
	if out, err := k.run(filepath.Join(k.root, "e2e", "cluster"), args...); err != nil {
		k.t.Fatalf("e2e/cluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (k *cluster) lastVerification(node, dev string) any {
	n, err := k.nss(node)
	if err != nil {
		return err.Error()
	}
	if d := findDevice(n, dev); d != nil {
		return d.LastVerification
	}
	return nil
}

// nodeStateDir is node's agent state directory on the host (e2e/cluster:
// nodes/NAME/agent-state).
func nodeStateDir(node string) string { return filepath.Join(stateDir(), "nodes", node, "agent-state") }

// directReads keeps d busy with fio's direct random reads (no page cache:
// no read-ahead evidence) until stopped.
func directReads(t *testing.T, fio string, d *loopdev.Dev) func() {
	return startLoad(t, nil, fio, "--filename="+d.Path, "--direct=1", "--ioengine=libaio", "--rw=randread", "--bs=4k",
		"--numjobs=2", "--iodepth=8", "--time_based", "--runtime=3600")
}

func stopAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// startLoad runs argv (fio, or a shell looping over it) until the test
// ends or stop is called, in every cgroup whose cgroup.procs file is in
// procs.
func startLoad(t *testing.T, procs []string, argv ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if argv[0] != "sh" {
		argv = append(argv, "--name=e2e", "--output-format=terse")
	}
	if len(procs) > 0 {
		// The shell moves itself into the cgroups, then becomes the load.
		argv = append([]string{"sh", "-c", `for p in $0; do echo $$ >"$p" || exit; done; exec "$@"`, strings.Join(procs, " ")}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// fio stops its jobs on SIGINT; a shell loop and its fio go with the group.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%s: %v", argv[0], err)
	}
	stop = sync.OnceFunc(func() {
		cancel()
		_ = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	t.Cleanup(stop)
	return stop
}

// watchRestore polls dev's queue settings until the test ends; the
// function it returns says when they were first seen equal to want.
func watchRestore(t *testing.T, dev string, want map[string]string) func() (time.Time, bool) {
	var mu sync.Mutex
	var at time.Time
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if loopdev.Diff(want, loopdev.SnapshotQueue(t, dev)) == "" {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		return at, !at.IsZero()
	}
}

// grantSeen is one grant as the watcher saw it: first and last seen.
type grantSeen struct {
	node, policy string
	until        time.Time
	first, last  time.Time
}

func (g grantSeen) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"node": g.node, "policy": g.policy, "until": g.until, "first": g.first, "last": g.last})
}

// grantWatch reads every NodeStorageState's grant twice a second.
type grantWatch struct {
	k      *cluster
	mu     sync.Mutex
	grants []*grantSeen
	multi  []string // polls that saw two unexpired grants of one policy
}

func (w *grantWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		var l v1alpha1.NodeStorageStateList
		if err := w.k.c.List(ctx, &l); err == nil {
			w.poll(l.Items, time.Now())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (w *grantWatch) poll(items []v1alpha1.NodeStorageState, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	holding := map[string][]string{}
	for _, n := range items {
		g := n.Spec.Grant
		if g == nil {
			continue
		}
		if g.Until.After(now) {
			holding[g.Policy] = append(holding[g.Policy], n.Name)
		}
		i := slices.IndexFunc(w.grants, func(s *grantSeen) bool {
			return s.node == n.Name && s.policy == g.Policy && s.until.Equal(g.Until.Time)
		})
		if i < 0 {
			w.grants = append(w.grants, &grantSeen{node: n.Name, policy: g.Policy, until: g.Until.Time, first: now, last: now})
			continue
		}
		w.grants[i].last = now
	}
	for p, ns := range holding {
		if len(ns) > 1 {
			w.multi = append(w.multi, fmt.Sprintf("%s: %s at %s", p, strings.Join(ns, ", "), now.Format(time.RFC3339)))
		}
	}
}

// of returns the grants of policy in the order first seen.
func (w *grantWatch) of(policy string) []grantSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []grantSeen
	for _, g := range w.grants {
		if g.policy == policy {
			out = append(out, *g)
		}
	}
	return out
}

func (w *grantWatch) list() []grantSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]grantSeen, len(w.grants))
	for i, g := range w.grants {
		out[i] = *g
	}
	return out
}

func (w *grantWatch) overlaps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.multi)
}
