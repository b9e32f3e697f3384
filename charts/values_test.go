package charts

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestComponentValues: the per-component values reach the pods.
func TestComponentValues(t *testing.T) {
	digest := "sha256:" + string(slices.Repeat([]byte("a"), 64))
	objs := renderDefault(t,
		"--set", "image.digest="+digest,
		"--set", "operator.logLevel=debug", "--set", "agent.logLevel=2",
		"--set", "operator.extraArgs[0]=--x=1", "--set", "agent.extraArgs[0]=--y=2",
		"--set", "operator.revisionHistoryLimit=3", "--set", "agent.revisionHistoryLimit=4",
		"--set", "operator.podSecurityContext.runAsUser=null", "--set", "operator.podSecurityContext.runAsGroup=null",
		"--set", "operator.securityContext.runAsUser=1000700000",
		"--set", "agent.livenessProbe.periodSeconds=99", "--set", "operator.readinessProbe.timeoutSeconds=7",
		"--set", "uninstallCleanup.resources.limits.memory=99Mi",
		"--set", "agent.securityContext.seccompProfile.type=Unconfined",
	)
	pods := podSpecs(t, objs)
	for name, want := range map[string][]string{"operator": {"--zap-log-level=debug", "--x=1"}, "agent": {"--zap-log-level=2", "--y=2"}} {
		c := pods[name].Containers[0]
		for _, w := range want {
			if !slices.Contains(c.Args, w) {
				t.Errorf("%s args %q lack %s", name, c.Args, w)
			}
		}
	}
	for name, p := range pods {
		if c := p.Containers[0]; c.Image != "ghcr.io/shadowtune/shadowtune@"+digest {
			t.Errorf("%s image %s", name, c.Image)
		}
	}
	op, ag, job := pods["operator"], pods["agent"], pods["cleanup"]
	for _, p := range []corev1.PodSpec{op, job} {
		if p.SecurityContext.RunAsUser != nil || p.SecurityContext.RunAsGroup != nil || p.SecurityContext.RunAsNonRoot == nil {
			t.Errorf("pod securityContext %+v: runAsUser/runAsGroup not removable", p.SecurityContext)
		}
		if u := p.Containers[0].SecurityContext.RunAsUser; u == nil || *u != 1000700000 {
			t.Errorf("container runAsUser %v", u)
		}
	}
	if p := ag.Containers[0].LivenessProbe; p == nil || p.PeriodSeconds != 99 || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("agent liveness %+v", p)
	}
	if p := op.Containers[0].ReadinessProbe; p == nil || p.TimeoutSeconds != 7 || p.HTTPGet.Path != "/readyz" {
		t.Errorf("operator readiness %+v", p)
	}
	if m := job.Containers[0].Resources.Limits.Memory().String(); m != "99Mi" {
		t.Errorf("cleanup memory limit %s", m)
	}
	if sc := ag.Containers[0].SecurityContext; sc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined || !*sc.Privileged {
		t.Errorf("agent securityContext %+v", sc)
	}
	if p := podSpecs(t, renderDefault(t))["agent"]; p.PriorityClassName != "system-node-critical" {
		t.Errorf("agent priorityClassName %q, want system-node-critical by default", p.PriorityClassName)
	}
	if job.Containers[0].Resources.Requests.Cpu().IsZero() {
		t.Error("cleanup Job without a CPU request")
	}
}
