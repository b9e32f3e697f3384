package cluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// agentPod is the agent's pod with one container status: running since
// startedAt, restarted restarts times, the previous container ended for
// lastReason at lastEnd ("" reason: no previous container).
func agentPod(name string, startedAt time.Time, restarts int32, lastReason string, lastEnd time.Time) *corev1.Pod {
	cs := corev1.ContainerStatus{Name: DefaultContainerName, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt.Truncate(time.Second))}}}
	if lastReason != "" {
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: lastReason, ExitCode: 137,
			StartedAt: metav1.NewTime(lastEnd.Add(-time.Minute)), FinishedAt: metav1.NewTime(lastEnd)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shadowtune-system"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
}

func TestOOMKillOf(t *testing.T) {
	started := now // the agent process's start
	end := now.Add(-15 * time.Second)
	other := agentPod("p", started, 2, "OOMKilled", end)
	other.Status.ContainerStatuses[0].Name = "sidecar"
	other.Status.ContainerStatuses = append(other.Status.ContainerStatuses, corev1.ContainerStatus{Name: "agent"})
	for _, c := range []struct {
		name        string
		pod         *corev1.Pod
		wantKill    bool
		wantCurrent bool
	}{
		{"no pod", nil, false, false},
		{"first start", agentPod("p", started.Add(-300*time.Millisecond), 0, "", time.Time{}), false, true},
		{"restarted after an OOM kill", agentPod("p", started.Add(-time.Second), 2, "OOMKilled", end), true, true},
		{"restarted after another end", agentPod("p", started, 1, "Error", end), false, true},
		// The kubelet has not yet reported the current container: the
		// status still shows the previous one running (it started before
		// the restart back-off).
		{"status not current yet", agentPod("p", started.Add(-40*time.Second), 1, "OOMKilled", started.Add(-2*time.Minute)), true, false},
		{"not running (waiting)", func() *corev1.Pod {
			p := agentPod("p", started, 3, "OOMKilled", end)
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			return p
		}(), true, false},
		{"the agent container among others", other, false, false},
		{"no container statuses", &corev1.Pod{}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			kill, current := OOMKillOf(c.pod, DefaultContainerName, started)
			if (kill != nil) != c.wantKill || current != c.wantCurrent {
				t.Fatalf("kill %+v current %v, want kill %v current %v", kill, current, c.wantKill, c.wantCurrent)
			}
			if kill != nil {
				cs := c.pod.Status.ContainerStatuses[0]
				if kill.Pod != "p" || kill.RestartCount != cs.RestartCount || !kill.Time.Equal(&cs.LastTerminationState.Terminated.FinishedAt) {
					t.Errorf("kill %+v", kill)
				}
			}
		})
	}
}

func TestLatestOOMKill(t *testing.T) {
	older := &v1alpha1.AgentOOMKill{Pod: "a", RestartCount: 1, Time: metav1.NewTime(now.Add(-time.Hour))}
	newer := &v1alpha1.AgentOOMKill{Pod: "b", RestartCount: 3, Time: metav1.NewTime(now.Add(-time.Minute))}
	for _, c := range []struct {
		name string
		a, b *v1alpha1.AgentOOMKill
		want *v1alpha1.AgentOOMKill
	}{
		{"none", nil, nil, nil},
		{"reported only", older, nil, older},
		{"pod only", nil, newer, newer},
		{"a newer kill", older, newer, newer},
		{"the pod shows an older one", newer, older, newer},
	} {
		if got := latestOOMKill(c.a, c.b); (got == nil) != (c.want == nil) || (got != nil && got.Pod != c.want.Pod) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestOOMKillDegraded: an OOM kill of the agent makes the node Degraded,
// reason AgentOOMKilled, naming the pod, the node, the restart count and
// the time, for v1alpha1.OOMKillDegradedFor; it is named before an unclean
// restart (which the same kill also causes) and kept in the status when
// the pod no longer shows it.
func TestOOMKillDegraded(t *testing.T) {
	kill := func(ago time.Duration) *v1alpha1.AgentOOMKill {
		return &v1alpha1.AgentOOMKill{Pod: "shadowtune-agent-x7k2p", RestartCount: 2, Time: metav1.NewTime(now.Add(-ago))}
	}
	devs := []v1alpha1.DeviceState{dev("sda", "obs", v1alpha1.ModeObserve, nil)}
	unclean := &metav1.Time{Time: now.Add(-time.Minute)}
	for _, c := range []struct {
		name   string
		in     StatusInput
		reason string
		keep   bool // status.agentOOMKill set
	}{
		{"no kill", StatusInput{Agent: agent.Status{Tracer: "ebpf", Devices: devs}}, v1alpha1.ReasonAgentReady, false},
		{"killed a minute ago", StatusInput{OOMKill: kill(time.Minute), Agent: agent.Status{Tracer: "ebpf", Devices: devs}},
			v1alpha1.ReasonAgentOOMKilled, true},
		{"killed, before the first window", StatusInput{OOMKill: kill(time.Minute)}, v1alpha1.ReasonAgentOOMKilled, true},
		{"killed, also an unclean restart", StatusInput{OOMKill: kill(time.Minute), Agent: agent.Status{Tracer: "ebpf", Devices: devs, UncleanRestart: unclean}},
			v1alpha1.ReasonAgentOOMKilled, true},
		{"reported before, the pod shows another end now", StatusInput{LastOOMKill: kill(3 * time.Minute), Agent: agent.Status{Tracer: "ebpf", Devices: devs}},
			v1alpha1.ReasonAgentOOMKilled, true},
		{"quiet period over", StatusInput{OOMKill: kill(v1alpha1.OOMKillDegradedFor), Agent: agent.Status{Tracer: "ebpf", Devices: devs}},
			v1alpha1.ReasonAgentReady, true},
		{"quiet period over, unclean restart still recent", StatusInput{LastOOMKill: kill(v1alpha1.OOMKillDegradedFor + time.Second),
			Agent: agent.Status{Tracer: "ebpf", Devices: devs, UncleanRestart: unclean}}, v1alpha1.ReasonUncleanRestart, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now, c.in.Node = now, "node-1"
			st := BuildStatus(c.in)
			d := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeConditionDegraded)
			if d.Reason != c.reason || (d.Status == metav1.ConditionTrue) != (c.reason != v1alpha1.ReasonAgentReady) {
				t.Fatalf("Degraded = %s/%s %q, want %s", d.Status, d.Reason, d.Message, c.reason)
			}
			if (st.AgentOOMKill != nil) != c.keep {
				t.Errorf("agentOOMKill %+v, want set %v", st.AgentOOMKill, c.keep)
			}
			if c.reason == v1alpha1.ReasonAgentOOMKilled {
				for _, w := range []string{"shadowtune-agent-x7k2p", "node-1", "restart count 2", "OOMKilled", st.AgentOOMKill.Time.UTC().Format(time.RFC3339)} {
					if !strings.Contains(d.Message, w) {
						t.Errorf("message %q does not say %q", d.Message, w)
					}
				}
				if r := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeConditionReady); r.Status != metav1.ConditionFalse {
					t.Errorf("Ready = %+v", r)
				}
			}
		})
	}
}
