//go:build e2e

// Package e2e is the end-to-end tests on real Kubernetes clusters built
// here (e2e/cluster up). On one node, TestEndToEnd: helm install,
// StorageTuning in Observe then Apply on loop devices under real fio
// load, bad input, overlap, faults, clean uninstall. On three,
// TestRolloutMultiNode: the roll-out across nodes. Run them with `make
// e2e` (as root); they print the kubectl views they saw and save logs and
// a JSON summary under the artifacts directory
// ($SHADOWTUNE_E2E_ARTIFACTS, default bin/e2e-artifacts).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	kubeenv "github.com/shadowtune/shadowtune/internal/testutil/envtest"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

const (
	namespace = "shadowtune-system"
	release   = "shadowtune"
)

// cluster is the running e2e cluster.
type cluster struct {
	t       *testing.T
	root    string // repository
	kubecfg string
	helm    string
	// scrapeToken is the token agentMetrics scrapes with, once made.
	scrapeToken string
	c           client.Client
	artifacts   string
	summary     map[string]any
	failures    []string // what k.errorf reported, repeated at the test's end
	mu          sync.Mutex
}

// errorf fails the test as t.Errorf does, and keeps the message: the
// test's end repeats every failure, so that the last lines of a long log
// (all a CI summary may show) say what failed.
func (k *cluster) errorf(format string, args ...any) {
	k.t.Helper()
	msg := fmt.Sprintf(format, args...)
	k.mu.Lock()
	k.failures = append(k.failures, msg)
	k.mu.Unlock()
	k.t.Error(msg)
}

// stateDir is the e2e cluster's state directory (e2e/cluster:
// SHADOWTUNE_E2E_DIR, default /var/tmp/shadowtune-e2e).
func stateDir() string {
	if s := os.Getenv("SHADOWTUNE_E2E_DIR"); s != "" {
		return s
	}
	return "/var/tmp/shadowtune-e2e"
}

func newCluster(t *testing.T) *cluster {
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(stateDir(), "kubeconfig")
	if _, err := os.Stat(kc); err != nil {
		t.Fatalf("no cluster: %v (run e2e/cluster up, or make e2e)", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	art := os.Getenv("SHADOWTUNE_E2E_ARTIFACTS")
	if art == "" {
		art = filepath.Join(root, "bin", "e2e-artifacts")
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(art, "kubectl.txt")) // this run's views only
	helm := os.Getenv("HELM")
	if helm == "" {
		helm = filepath.Join(root, "bin", "helm")
	}
	return &cluster{t: t, root: root, kubecfg: kc, helm: helm, c: c, artifacts: art, summary: map[string]any{}}
}

// run runs a command with the cluster's kubeconfig and returns its
// combined output and error.
func (k *cluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = k.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubecfg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (k *cluster) kubectl(args ...string) string {
	k.t.Helper()
	out, err := k.run("kubectl", args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// show runs kubectl, prints what it shows and saves it as an artifact.
func (k *cluster) show(step string, args ...string) string {
	k.t.Helper()
	out := k.kubectl(args...)
	k.t.Logf("[%s] $ kubectl %s\n%s", step, strings.Join(args, " "), out)
	f, err := os.OpenFile(filepath.Join(k.artifacts, "kubectl.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "### [%s] $ kubectl %s\n%s\n", step, strings.Join(args, " "), out)
		f.Close()
	}
	return out
}

func (k *cluster) record(key string, v any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.summary[key] = v
}

// apply applies a YAML document with kubectl.
func (k *cluster) apply(doc string) (string, error) {
	cmd := exec.Command("kubectl", "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubecfg)
	cmd.Stdin = strings.NewReader(doc)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	for {
		err := f()
		if err == nil {
			t.Logf("%s: after %v", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

func (k *cluster) policy(name string) *v1alpha1.StorageTuning {
	p := &v1alpha1.StorageTuning{}
	if err := k.c.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		k.t.Fatal(err)
	}
	return p
}

func (k *cluster) nss(node string) (*v1alpha1.NodeStorageState, error) {
	n := &v1alpha1.NodeStorageState{}
	err := k.c.Get(context.Background(), client.ObjectKey{Name: node}, n)
	return n, err
}

func findDevice(n *v1alpha1.NodeStorageState, name string) *v1alpha1.DeviceState {
	for i := range n.Status.Devices {
		if n.Status.Devices[i].Name == name {
			return &n.Status.Devices[i]
		}
	}
	return nil
}

// saveLogs keeps the pods' logs and the cluster's state for the record.
func (k *cluster) saveLogs(tag string) {
	for _, sel := range []string{"app.kubernetes.io/component=agent", "app.kubernetes.io/component=operator"} {
		out, _ := k.run("kubectl", "-n", namespace, "logs", "-l", sel, "--tail", "-1", "--prefix", "--all-containers")
		name := strings.TrimPrefix(sel, "app.kubernetes.io/component=")
		_ = os.WriteFile(filepath.Join(k.artifacts, tag+"-"+name+".log"), []byte(out), 0o644)
	}
	out, _ := k.run("kubectl", "get", "events", "-A", "--sort-by=.lastTimestamp")
	_ = os.WriteFile(filepath.Join(k.artifacts, tag+"-events.txt"), []byte(out), 0o644)
}

// fio runs a workload on a device until the test ends.
func startFio(t *testing.T, fio, dev string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	all := append([]string{"--name=e2e-" + dev, "--filename=/dev/" + dev, "--direct=1", "--ioengine=libaio",
		"--time_based", "--runtime=3600", "--group_reporting", "--output-format=terse"}, args...)
	cmd := exec.CommandContext(ctx, fio, all...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // fio stops its jobs on SIGINT
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("fio: %v", err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
}

func TestEndToEnd(t *testing.T) {
	need.Root(t, "loop devices, fio, and the cluster's privileged agent")
	k := newCluster(t)
	ctx := context.Background()
	defer k.finish(time.Now())

	var nodes corev1.NodeList
	if err := k.c.List(ctx, &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want one node: %d, %v", len(nodes.Items), err)
	}
	node := nodes.Items[0].Name

	// 1. helm install, exactly as the README's walkthrough says (its
	// namespace created and labelled privileged first), on a cluster
	// whose Pod Security admission enforces baseline on new namespaces
	// (e2e/cluster's AdmissionConfiguration).
	t0 := time.Now()
	k.installREADME()
	uninstalled := false
	defer func() {
		if !uninstalled {
			k.saveLogs("failed")
			_, _ = k.run(k.helm, "uninstall", release, "-n", namespace, "--wait")
		}
	}()
	k.record("helmInstallSeconds", time.Since(t0).Seconds())
	k.show("install", "-n", namespace, "get", "pods", "-o", "wide")
	k.show("install", "get", "namespace", namespace, "--show-labels")
	k.podSecurity(ctx)
	k.noRestarts("after install")
	k.show("install", "get", "crds", "-l", "!nonexistent")
	eventually(t, 2*time.Minute, "the agent's NodeStorageState", func() error {
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		if n.Status.LastHeartbeatTime == nil {
			return fmt.Errorf("no status yet")
		}
		return nil
	})

	// 2. Loop devices and load.
	fio := loopdev.NeedFio(t)
	devs := make([]string, 4)
	for i := range devs {
		devs[i] = loopdev.New(t, 512<<20)
	}
	selected, spare := devs[:3], devs[3]
	before := map[string]map[string]string{}
	for _, d := range devs {
		before[d] = loopdev.SnapshotQueue(t, d)
	}
	k.record("devices", map[string]any{"selected": selected, "unselected": spare})
	startFio(t, fio, selected[0], "--rw=randread", "--bs=4k", "--numjobs=4", "--iodepth=8")
	startFio(t, fio, selected[1], "--rw=read", "--bs=64k", "--numjobs=4", "--iodepth=2", "--offset_increment=128m", "--size=128m")
	startFio(t, fio, selected[2], "--rw=randrw", "--rwmixread=70", "--bs=16k", "--numjobs=2", "--iodepth=4")
	unchanged := func(what string, ds ...string) {
		t.Helper()
		for _, d := range ds {
			if diff := loopdev.Diff(before[d], loopdev.SnapshotQueue(t, d)); diff != "" {
				k.errorf("%s: %s changed:\n%s", what, d, diff)
			}
		}
	}

	// 3. Observe.
	policy := fmt.Sprintf(`apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: e2e-loops
spec:
  mode: %%s
  devices:
    include: [%s]
  readAhead: {minKiB: 64, maxKiB: 512}
  evaluation: {window: 2s, cpuBudgetPercent: 50}
  rollout: {maxUnavailable: 1, minDwell: 1m}
`, strings.Join(selected, ", "))
	if out, err := k.apply(fmt.Sprintf(policy, "Observe")); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	eventually(t, 3*time.Minute, "Observe: status shows the node and the three devices with predictions", func() error {
		p := k.policy("e2e-loops")
		if p.Status.MatchedNodes != 1 || p.Status.MatchedDevices != 3 {
			return fmt.Errorf("status %+v", p.Status)
		}
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		for _, d := range selected {
			ds := findDevice(n, d)
			if ds == nil || len(ds.Candidates) == 0 || ds.Recommendation == nil || ds.GovernedBy != "e2e-loops" {
				return fmt.Errorf("%s: %+v", d, ds)
			}
		}
		return nil
	})
	k.show("observe", "get", "storagetunings")
	k.show("observe", "get", "nodestoragestates")
	k.show("observe", "describe", "storagetuning", "e2e-loops")
	unchanged("Observe mode", devs...)
	k.checkDefaultsChanged(t, node, "e2e-loops", selected[0])

	// 4. Apply.
	k.kubectl("patch", "storagetuning", "e2e-loops", "--type=merge", "-p", `{"spec":{"mode":"Apply"}}`)
	var applied []string
	eventually(t, 5*time.Minute, "Apply: the agent changes devices under the operator's grant", func() error {
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		applied = applied[:0]
		for _, d := range selected {
			if ds := findDevice(n, d); ds != nil && ds.Applied != nil && ds.Original != nil {
				applied = append(applied, d)
			}
		}
		if len(applied) == 0 {
			return fmt.Errorf("nothing applied yet; grant %+v", n.Spec.Grant)
		}
		return nil
	})
	k.record("applied", applied)
	// The status is written at each window's end: within a few windows it
	// shows what sysfs has. One read of each may straddle a change.
	eventually(t, 30*time.Second, "the status shows each device's scheduler and read_ahead_kb as sysfs has them", func() error {
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		for _, d := range selected {
			ds := findDevice(n, d)
			if ds == nil {
				return fmt.Errorf("%s: no status", d)
			}
			snap := loopdev.SnapshotQueue(t, d)
			if sched := loopdev.Current(snap["scheduler"]); ds.Current.Scheduler != sched {
				return fmt.Errorf("%s: status says scheduler %s, sysfs %s", d, ds.Current.Scheduler, sched)
			}
			if ra := strings.TrimSpace(snap["read_ahead_kb"]); strconv.Itoa(int(ds.Current.ReadAheadKiB)) != ra {
				return fmt.Errorf("%s: status says read_ahead_kb %d, sysfs %s", d, ds.Current.ReadAheadKiB, ra)
			}
		}
		return nil
	})
	unchanged("Apply mode, unselected device", spare)
	eventually(t, 30*time.Second, "Granted and Changed events for the policy", func() error {
		events := k.kubectl("get", "events", "--field-selector", "involvedObject.name=e2e-loops")
		for _, r := range []string{"Granted", "Changed"} {
			if !strings.Contains(events, r) {
				return fmt.Errorf("no %s event", r)
			}
		}
		return nil
	})
	k.show("apply", "get", "events", "--field-selector", "involvedObject.name=e2e-loops")
	k.show("apply", "get", "storagetunings")
	k.show("apply", "get", "nodestoragestates")
	k.show("apply", "get", "nodestoragestate", node, "-o", "yaml")

	// 5. Bad input, and overlap.
	badInput := map[string]struct{ spec, want string }{
		"unknown scheduler": {"schedulers: {candidates: [cfq]}", `Unsupported value: "cfq"`},
		"min above max":     {"readAhead: {minKiB: 1024, maxKiB: 64}", "maxKiB must be greater than or equal to minKiB"},
		"bad selector": {"nodeSelector: {matchExpressions: [{key: disk, operator: Near, values: [x]}]}",
			"matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist"},
	}
	t.Run("bad input", func(t *testing.T) {
		for name, c := range badInput {
			doc := "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata: {name: bad}\nspec:\n  " + c.spec + "\n"
			out, err := k.apply(doc)
			if err == nil {
				t.Errorf("%s: kubectl apply accepted it", name)
				continue
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("%s: refusal %q does not say %q", name, strings.TrimSpace(out), c.want)
			}
			t.Logf("%s: %s", name, strings.TrimSpace(out))
		}
	})
	overlap := fmt.Sprintf(`apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: e2e-overlap
spec:
  priority: 10
  devices: {include: [%s]}
`, selected[0])
	if out, err := k.apply(overlap); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	eventually(t, time.Minute, "Conflict on both policies, e2e-overlap governing "+selected[0], func() error {
		for name, reason := range map[string]string{"e2e-loops": v1alpha1.ReasonOverridden, "e2e-overlap": v1alpha1.ReasonOverrides} {
			c := meta.FindStatusCondition(k.policy(name).Status.Conditions, v1alpha1.ConditionConflict)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
				return fmt.Errorf("%s Conflict %+v", name, c)
			}
		}
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		if d := findDevice(n, selected[0]); d == nil || d.GovernedBy != "e2e-overlap" {
			return fmt.Errorf("%s governed by %+v", selected[0], d)
		}
		return nil
	})
	k.show("overlap", "get", "storagetunings")
	k.show("overlap", "describe", "storagetuning", "e2e-loops")
	k.kubectl("delete", "storagetuning", "e2e-overlap")

	// No container restarted before the deliberate kills below (an
	// OOM kill, a crash, a failed probe would show here).
	k.noRestarts("before the faults")

	// 6. Faults: the agent pod dies mid-Apply; the operator restarts.
	recs, _ := filepath.Glob(filepath.Join(agentStateDir(), "*.json"))
	k.record("originalRecordsBeforeKill", len(recs))
	k.saveLogs("before-kill") // the killed pod's logs go with it
	pods := k.kubectl("-n", namespace, "get", "pods", "-l", "app.kubernetes.io/component=agent", "-o", "name")
	k.kubectl("-n", namespace, "delete", strings.TrimSpace(pods), "--grace-period=0", "--force")
	hb := time.Now()
	eventually(t, 3*time.Minute, "a new agent pod reports", func() error {
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		if n.Status.LastHeartbeatTime == nil || n.Status.LastHeartbeatTime.Time.Before(hb.Add(time.Second)) {
			return fmt.Errorf("heartbeat %v", n.Status.LastHeartbeatTime)
		}
		for _, d := range selected[1:] {
			if ds := findDevice(n, d); ds == nil || ds.GovernedBy != "e2e-loops" {
				return fmt.Errorf("%s: %+v", d, ds)
			}
		}
		return nil
	})
	k.show("agent-restart", "-n", namespace, "get", "pods", "-o", "wide")
	n, _ := k.nss(node)
	grantBefore := n.Spec.Grant.DeepCopy()
	ops := k.kubectl("-n", namespace, "get", "pods", "-l", "app.kubernetes.io/component=operator", "-o", "name")
	k.kubectl("-n", namespace, "delete", strings.TrimSpace(ops), "--wait=false")
	k.kubectl("-n", namespace, "rollout", "status", "deployment/"+release+"-operator", "--timeout=3m")
	n, _ = k.nss(node)
	// Consistent grants: a grant in force before the restart is kept as it
	// was (not re-issued), or revoked for a reason the operator reports
	// (e.g. a regression measured meanwhile halts the roll-out).
	if grantBefore != nil && time.Now().Before(grantBefore.Until.Time) {
		switch g := n.Spec.Grant; {
		case g == nil:
			if ev := k.kubectl("get", "events", "--field-selector", "involvedObject.name=e2e-loops,reason=GrantRevoked"); !strings.Contains(ev, "GrantRevoked") {
				k.errorf("grant %+v gone over an operator restart without a GrantRevoked event", grantBefore)
			}
		case g.Policy != grantBefore.Policy || g.Generation != grantBefore.Generation || !g.Until.Equal(&grantBefore.Until):
			k.errorf("grant re-issued over an operator restart: %+v → %+v", grantBefore, g)
		}
	}
	k.record("grantAfterOperatorRestart", n.Spec.Grant)
	k.show("operator-restart", "get", "storagetunings")

	// 7. Delete the policy, uninstall: everything as it was.
	k.kubectl("delete", "storagetuning", "e2e-loops")
	eventually(t, 2*time.Minute, "every device back to its original settings", func() error {
		for _, d := range devs {
			if diff := loopdev.Diff(before[d], loopdev.SnapshotQueue(t, d)); diff != "" {
				return fmt.Errorf("%s:\n%s", d, diff)
			}
		}
		return nil
	})
	// The pods deleted on purpose are new pods, whose restart counts
	// started at 0: any restart now is a fault.
	k.noRestarts("before uninstall")
	// Nothing but the agent wrote the devices' settings: an OtherWriter
	// event would be the agent taking its own write (a restore when a
	// policy stops governing a device) for another writer's.
	if ev := k.kubectl("get", "events", "-A", "--field-selector", "reason=OtherWriter", "-o", "name"); strings.TrimSpace(ev) != "" {
		k.errorf("OtherWriter events where only the agent wrote:\n%s", ev)
	}
	k.saveLogs("before-uninstall")
	if out, err := k.run(k.helm, "uninstall", release, "-n", namespace, "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	uninstalled = true
	k.kubectl("delete", "namespace", namespace, "--wait", "--timeout=2m")
	eventually(t, 2*time.Minute, "no project object left", func() error {
		var ns v1alpha1.NodeStorageStateList
		if err := k.c.List(ctx, &ns); err != nil {
			return err
		}
		var st v1alpha1.StorageTuningList
		if err := k.c.List(ctx, &st); err != nil {
			return err
		}
		if len(ns.Items)+len(st.Items) > 0 {
			return fmt.Errorf("%d NodeStorageStates, %d StorageTunings", len(ns.Items), len(st.Items))
		}
		err := k.c.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (get: %w)", namespace, err)
		}
		return nil
	})
	out, _ := k.run("kubectl", "get", "validatingadmissionpolicies,clusterroles,clusterrolebindings", "-o", "name")
	if strings.Contains(out, "shadowtune") {
		k.errorf("left behind:\n%s", out)
	}
	for _, d := range devs {
		if diff := loopdev.Diff(before[d], loopdev.SnapshotQueue(t, d)); diff != "" {
			k.errorf("%s after uninstall:\n%s", d, diff)
		}
	}
	recs, _ = filepath.Glob(filepath.Join(agentStateDir(), "*.json"))
	if len(recs) > 0 {
		k.errorf("records of originals left on the host: %v", recs)
	}
}

// agentStateDir is the agent's state directory on the host
// (e2e/values-local.yaml agent.stateHostPath).
func agentStateDir() string { return filepath.Join(stateDir(), "agent-state") }

// finish, deferred by a test with the time it started, saves the logs
// and the JSON summary, and repeats every failed check at the end.
func (k *cluster) finish(started time.Time) {
	t := k.t
	k.saveLogs("final")
	k.record("passed", !t.Failed())
	k.record("seconds", time.Since(started).Seconds())
	b, _ := json.MarshalIndent(k.summary, "", "  ")
	_ = os.WriteFile(filepath.Join(k.artifacts, "summary.json"), b, 0o644)
	t.Logf("artifacts in %s", k.artifacts)
	if len(k.failures) > 0 {
		t.Logf("%d failed check(s), in order:\n  %s", len(k.failures), strings.Join(k.failures, "\n  "))
	}
}

// installREADME runs the README walkthrough's install, as written (its
// namespace created and labelled privileged, then bin/helm install).
func (k *cluster) installREADME() {
	t := k.t
	for _, args := range readmeInstall(t, k.root) {
		name := args[0]
		if name == "bin/helm" {
			name = k.helm
		}
		t.Logf("[install, README] $ %s", strings.Join(args, " "))
		if out, err := k.run(name, args[1:]...); err != nil {
			k.saveLogs("install")
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
