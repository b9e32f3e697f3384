package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/agent/cluster"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/envtest"
)

// TestAgentReportsOOMKill runs the cluster agent against a real API server
// with its own pod (as the downward API names it) showing its previous
// container OOMKilled: before any window (no policy selects the node, no
// device), the NodeStorageState reports Degraded, reason AgentOOMKilled,
// naming the pod, the node and the restart count, and status.agentOOMKill.
// No device is touched: the host root is an empty directory.
func TestAgentReportsOOMKill(t *testing.T) {
	cfg, c := envtest.Start(t)
	ctx := context.Background()
	const nodeName, ns, podName = "node-oom", "shadowtune-system", "shadowtune-agent-7xk2q"
	for _, o := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "agent", Image: "shadowtune:test"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now().Add(-20 * time.Second).Truncate(time.Second)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "agent", Image: "shadowtune:test", RestartCount: 3, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Truncate(time.Second))}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "OOMKilled", ExitCode: 137, StartedAt: metav1.NewTime(killedAt.Add(-time.Minute)), FinishedAt: metav1.NewTime(killedAt)}},
	}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	mgr, err := cluster.NewManager(cfg, cluster.ManagerOptions{NodeName: nodeName, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Setup(mgr, cluster.Options{NodeName: nodeName, HostRoot: t.TempDir(), StateDir: t.TempDir(),
		Tracer: "tracefs", Log: testr.New(t), PodName: podName, PodNamespace: ns}); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		err := func() error {
			nss := &v1alpha1.NodeStorageState{}
			if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, nss); err != nil {
				return err
			}
			d := meta.FindStatusCondition(nss.Status.Conditions, v1alpha1.NodeConditionDegraded)
			if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonAgentOOMKilled {
				return fmt.Errorf("Degraded = %+v", d)
			}
			for _, w := range []string{podName, nodeName, "restart count 3", killedAt.UTC().Format(time.RFC3339)} {
				if !strings.Contains(d.Message, w) {
					return fmt.Errorf("message %q does not say %q", d.Message, w)
				}
			}
			k := nss.Status.AgentOOMKill
			if k == nil || k.Pod != podName || k.RestartCount != 3 || !k.Time.Time.Equal(killedAt) {
				return fmt.Errorf("agentOOMKill %+v", k)
			}
			return nil
		}()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(errors.Join(errors.New("the agent did not report the OOM kill"), err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
