//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readmeInstall returns the README walkthrough's install commands, in
// order: the namespace's creation and Pod Security label, and the helm
// install (bin/helm). They are run as written (cmd/shadowtune/app's
// TestReadmeInstall checks that every install in the README labels the
// namespace first).
func readmeInstall(t *testing.T, root string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Walkthrough on the local cluster"
			continue
		case !in:
			continue
		}
		for _, prefix := range []string{"kubectl create namespace ", "kubectl label namespace ", "bin/helm install "} {
			if strings.HasPrefix(line, prefix) {
				cmd, _, _ := strings.Cut(line, "#")
				cmds = append(cmds, strings.Fields(cmd))
			}
		}
	}
	if len(cmds) != 3 || cmds[2][0] != "bin/helm" {
		t.Fatalf("README's walkthrough: want a namespace created, labelled, then bin/helm install; found %q", cmds)
	}
	return cmds
}

// podSecurity checks what Pod Security admission makes of the agent: its
// pods run in the release namespace (labelled enforce=privileged), and the
// same pod is refused in a new namespace without that label, which gets
// the cluster's default, baseline (server-side dry runs, nothing created).
func (k *cluster) podSecurity(ctx context.Context) {
	t := k.t
	t.Helper()
	ns := &corev1.Namespace{}
	if err := k.c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		k.errorf("namespace %s: pod-security.kubernetes.io/enforce=%q, want privileged", namespace, got)
	}
	ds := &appsv1.DaemonSet{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-agent"}, ds); err != nil {
		t.Fatal(err)
	}
	if ds.Status.NumberReady != ds.Status.DesiredNumberScheduled || ds.Status.NumberReady == 0 {
		k.errorf("agent DaemonSet: %d of %d ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
	}
	pod := func(ns string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "psa-check", Namespace: ns, Labels: ds.Spec.Template.Labels},
			Spec: *ds.Spec.Template.Spec.DeepCopy()}
		// The namespace's default account (the agent's exists only in the
		// release namespace): admission of the pod's security only.
		p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "", ""
		return p
	}
	if err := k.c.Create(ctx, pod(namespace), client.DryRunAll); err != nil {
		k.errorf("the agent's pod, dry run in %s: %v", namespace, err)
	}
	fresh := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-psa-unlabelled"}}
	if err := k.c.Create(ctx, fresh); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	defer func() { _ = k.c.Delete(ctx, fresh) }()
	// Without its default ServiceAccount the pod would be refused for that.
	eventually(t, time.Minute, "the default ServiceAccount of "+fresh.Name, func() error {
		return k.c.Get(ctx, client.ObjectKey{Namespace: fresh.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	err := k.c.Create(ctx, pod(fresh.Name), client.DryRunAll)
	switch {
	case err == nil:
		k.errorf("the agent's pod was admitted in namespace %s without the privileged label", fresh.Name)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "baseline`):
		k.errorf("the agent's pod in %s: refused, but not by Pod Security baseline: %v", fresh.Name, err)
	default:
		t.Logf("[install] the agent's pod in an unlabelled namespace is refused: %v", err)
		k.record("podSecurityUnlabelled", err.Error())
	}
}

// noRestarts fails the test for every container of the agent and operator
// pods that restarted, with why its last run ended. Pods deleted on
// purpose come back as new pods (restart count 0).
func (k *cluster) noRestarts(when string) {
	t := k.t
	t.Helper()
	var pods corev1.PodList
	if err := k.c.List(context.Background(), &pods, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var restarts []string
	n := 0
	for _, p := range pods.Items {
		switch p.Labels["app.kubernetes.io/component"] {
		case "agent", "operator":
		default:
			continue
		}
		n++
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.RestartCount == 0 {
				continue
			}
			why := "no last state"
			if tm := cs.LastTerminationState.Terminated; tm != nil {
				why = fmt.Sprintf("last ended %s, exit code %d, signal %d, at %s: %s", tm.Reason, tm.ExitCode, tm.Signal,
					tm.FinishedAt.UTC().Format("15:04:05"), strings.TrimSpace(tm.Message))
			}
			restarts = append(restarts, fmt.Sprintf("%s/%s: %d restart(s), %s", p.Name, cs.Name, cs.RestartCount, why))
		}
	}
	k.record("restarts "+when, restarts)
	if n == 0 {
		k.errorf("%s: no agent or operator pod", when)
	}
	if len(restarts) > 0 {
		k.saveLogs("restarts")
		k.errorf("%s: containers restarted:\n  %s", when, strings.Join(restarts, "\n  "))
	}
}
