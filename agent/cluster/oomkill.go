package cluster

// The agent's out-of-memory kills, as its own pod reports them: the
// kubelet records why the previous container of a restarted container
// ended in containerStatuses[].lastState.terminated (reason "OOMKilled"
// when the kernel's OOM killer ended it at the cgroup's limit). The agent
// reads its pod (POD_NAME and POD_NAMESPACE from the downward API, a get
// on pods in its namespace) after it starts, until the pod's status shows
// the current container running; what the status says of the previous
// container is then final for this run. Pure functions, table-tested.

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// DefaultContainerName is the agent's container in the chart's DaemonSet.
const DefaultContainerName = "agent"

// startSlack is how much earlier than the agent process's start the
// runtime may report its container started (the API's times are whole
// seconds). A previous container ended at least the kubelet's restart
// back-off (10 s) before the current one started, so its start time is
// never this close.
const startSlack = 5 * time.Second

// PodCheckFor is how long after its start the agent reads its pod waiting
// for the status to show the current container; it gives up after.
const PodCheckFor = 5 * time.Minute

// OOMKillOf reads the agent container's status in its pod: the container
// named container (the only container when there is one and none has that
// name). kill is the previous container's end when it was an OOM kill
// (nil otherwise); current reports whether the status already describes
// the container that started at started (so kill is final for this run).
func OOMKillOf(pod *corev1.Pod, container string, started time.Time) (kill *v1alpha1.AgentOOMKill, current bool) {
	if pod == nil {
		return nil, false
	}
	var cs *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == container {
			cs = &pod.Status.ContainerStatuses[i]
		}
	}
	if cs == nil && len(pod.Status.ContainerStatuses) == 1 {
		cs = &pod.Status.ContainerStatuses[0]
	}
	if cs == nil {
		return nil, false
	}
	if r := cs.State.Running; r != nil && !r.StartedAt.Time.Before(started.Add(-startSlack)) {
		current = true
	}
	t := cs.LastTerminationState.Terminated
	if t == nil || t.Reason != "OOMKilled" {
		return nil, current
	}
	at := t.FinishedAt
	if at.IsZero() {
		at = t.StartedAt
	}
	return &v1alpha1.AgentOOMKill{Pod: truncate(pod.Name, 253), RestartCount: max(cs.RestartCount, 0), Time: *at.DeepCopy()}, current
}

// latestOOMKill is the later of two kills (nil when both are); the status
// keeps the last kill it reported when the pod no longer shows it (a
// later restart for another reason, or a new pod).
func latestOOMKill(a, b *v1alpha1.AgentOOMKill) *v1alpha1.AgentOOMKill {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return b.DeepCopy()
	case b == nil || !b.Time.After(a.Time.Time):
		return a.DeepCopy()
	}
	return b.DeepCopy()
}

// recentOOMKill is k when it ended within v1alpha1.OOMKillDegradedFor of
// now, else nil.
func recentOOMKill(k *v1alpha1.AgentOOMKill, now time.Time) *v1alpha1.AgentOOMKill {
	if k == nil || now.Sub(k.Time.Time) >= v1alpha1.OOMKillDegradedFor {
		return nil
	}
	return k
}
