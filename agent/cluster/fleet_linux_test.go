//go:build linux

package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/shadowtune/shadowtune/agent/cluster"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/envtest"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/operator/controller"
	opmetrics "github.com/shadowtune/shadowtune/operator/metrics"
)

// TestOperatorAndAgent runs the operator and the agent together against a
// real API server, on a loop device under a fio load: a StorageTuning in
// Apply mode gets its grant from the operator, the agent applies the change
// under it, and the policy's status counts the changed device; the host's
// sysfs value is the one status reports. Deleting the policy restores the
// device exactly. With -v the test prints what kubectl shows meanwhile
// (docs/cluster.md's figures come from here).
func TestOperatorAndAgent(t *testing.T) {
	loopdev.NeedLoop(t, "creates a loop device, loads BPF programs and changes queue settings")
	fio := loopdev.NeedFio(t)
	ctrl.SetLogger(testr.New(t))
	env := envtest.StartEnv(t)
	c := env.Client
	loopdev.LockHeavyIO(t)
	ld := loopdev.NewForTest(t, 256<<20)
	dev, orig := ld.Name, ld.Queue
	if ra, _ := strconv.Atoi(strings.TrimSpace(orig["read_ahead_kb"])); ra < 512 {
		t.Fatalf("%s has read_ahead_kb %d: the test needs one at least 2× 256 KiB (the agent leaves depths within 1.5× alone)", dev, ra)
	}
	ctx := context.Background()
	host, _ := os.Hostname()
	nodeName := strings.ToLower(host)
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"storage": "loop"}}}); err != nil {
		t.Fatal(err)
	}
	sched := v1alpha1.SchedulerName(loopdev.Current(orig["scheduler"]))
	st := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: "loop-disks"},
		Spec: v1alpha1.StorageTuningSpec{
			Mode:         v1alpha1.ModeApply,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"storage": "loop"}},
			Devices:      v1alpha1.DeviceSelector{Include: []string{dev}},
			Schedulers:   v1alpha1.SchedulerPolicy{Candidates: []v1alpha1.SchedulerName{sched}, Default: sched},
			// One depth, not the device's: a change is recommended whatever
			// the simulation says of the schedulers.
			ReadAhead:  v1alpha1.ReadAheadPolicy{MinKiB: ptr.To[int32](256), MaxKiB: ptr.To[int32](256)},
			Evaluation: v1alpha1.EvaluationPolicy{Window: &metav1.Duration{Duration: time.Second}, CPUBudgetPercent: ptr.To[int32](50)},
			Rollout:    v1alpha1.RolloutPolicy{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MinDwell: &metav1.Duration{}},
		}}
	if err := c.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	startFio(t, fio, dev)

	// The operator.
	opMgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(opMgr, controller.Options{Metrics: opmetrics.New(prometheus.NewRegistry())}); err != nil {
		t.Fatal(err)
	}
	// The agent.
	agMgr, err := cluster.NewManager(env.Config, cluster.ManagerOptions{NodeName: nodeName, MetricsBindAddress: "0",
		HealthProbeBindAddress: "0", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Setup(agMgr, cluster.Options{NodeName: nodeName, StateDir: t.TempDir(), Log: testr.New(t)}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []ctrl.Manager{opMgr, agMgr} {
		mctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Start(mctx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}

	kubectl := kubectlFor(t, env.Environment.KubeConfig)
	nss := waitNSS(t, c, nodeName, "the change applied under the operator's grant", func(n *v1alpha1.NodeStorageState) bool {
		d := device(n, dev)
		return d != nil && d.Applied != nil && d.Current.ReadAheadKiB == 256
	})
	if ra := strings.TrimSpace(loopdev.SnapshotQueue(t, dev)["read_ahead_kb"]); ra != "256" {
		t.Errorf("sysfs read_ahead_kb %s, status says 256", ra)
	}
	if g := nss.Spec.Grant; g == nil || g.Policy != st.Name || len(g.Devices) != 1 || g.Devices[0] != dev {
		t.Errorf("grant %+v, want one from %s for %s", g, st.Name, dev)
	}
	eventually(t, 30*time.Second, "the policy's status counts the change", func() bool {
		cur := &v1alpha1.StorageTuning{}
		if err := c.Get(ctx, client.ObjectKey{Name: st.Name}, cur); err != nil {
			t.Fatal(err)
		}
		return cur.Status.ChangedDevices == 1 && cur.Status.MatchedNodes == 1 && cur.Status.MatchedDevices == 1 &&
			cur.Status.LastChangeTime != nil && meta.IsStatusConditionTrue(cur.Status.Conditions, v1alpha1.ConditionReady)
	})
	time.Sleep(3 * time.Second) // a few more windows of status
	t.Logf("$ kubectl get storagetunings\n%s", kubectl("get", "storagetunings"))
	t.Logf("$ kubectl get nodestoragestates\n%s", kubectl("get", "nodestoragestates"))
	t.Logf("$ kubectl describe storagetuning %s\n%s", st.Name, kubectl("describe", "storagetuning", st.Name))
	t.Logf("$ kubectl get nodestoragestate %s -o yaml\n%s", nodeName, kubectl("get", "nodestoragestate", nodeName, "-o", "yaml"))

	if err := c.Delete(ctx, &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: st.Name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the device restored after the policy's deletion", func() bool {
		return loopdev.Diff(orig, loopdev.SnapshotQueue(t, dev)) == ""
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubectlFor returns a function running kubectl (from the envtest assets
// directory, else $PATH) against the test's API server.
func kubectlFor(t *testing.T, kubeconfig []byte) func(args ...string) string {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(envtest.AssetsDir(t), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		bin = "kubectl"
	}
	return func(args ...string) string {
		out, err := exec.Command(bin, append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
}
