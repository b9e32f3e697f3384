package charts

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestAdmissionPolicyOffNeedsConsent: without the policy every agent may
// write any node's NodeStorageState and grant, so switching it off alone
// fails to render; with the explicit consent it renders without the policy.
func TestAdmissionPolicyOffNeedsConsent(t *testing.T) {
	_, err := helmTemplate(t, testRelease, testNS, "--set", "admissionPolicy.enabled=false")
	if err == nil || !strings.Contains(err.Error(), "admissionPolicy.iUnderstandTheRisk=true") {
		t.Fatalf("admissionPolicy.enabled=false alone: err %v, want a failure naming iUnderstandTheRisk", err)
	}
	objs := renderDefault(t, "--set", "admissionPolicy.enabled=false", "--set", "admissionPolicy.iUnderstandTheRisk=true")
	if n := count(objs)["ValidatingAdmissionPolicy"]; n != 0 {
		t.Errorf("%d policies rendered with the policy off", n)
	}
	// The policy is on by default.
	if n := count(renderDefault(t))["ValidatingAdmissionPolicy"]; n != 1 {
		t.Errorf("%d policies rendered by default", n)
	}
}

// podSpecs returns the operator's, the agent's and the cleanup Job's pods.
func podSpecs(t *testing.T, objs []object) map[string]corev1.PodSpec {
	t.Helper()
	var d appsv1.Deployment
	var ds appsv1.DaemonSet
	var job batchv1.Job
	get(t, objs, "Deployment", operatorName, &d)
	get(t, objs, "DaemonSet", agentName, &ds)
	get(t, objs, "Job", "shadowtune-uninstall-cleanup", &job)
	return map[string]corev1.PodSpec{"operator": d.Spec.Template.Spec, "agent": ds.Spec.Template.Spec, "cleanup": job.Spec.Template.Spec}
}

// TestPodHardening: RuntimeDefault seccomp on every pod and container, no
// privilege escalation except where the API server requires it (a
// privileged container implies it: allowPrivilegeEscalation false with
// privileged true is rejected), and only the agent privileged.
func TestPodHardening(t *testing.T) {
	for name, p := range podSpecs(t, renderDefault(t)) {
		if p.SecurityContext == nil || p.SecurityContext.SeccompProfile == nil ||
			p.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccompProfile is not RuntimeDefault: %+v", name, p.SecurityContext)
		}
		for _, c := range p.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: container seccompProfile is not RuntimeDefault", name)
				continue
			}
			privileged := sc.Privileged != nil && *sc.Privileged
			if privileged != (name == "agent") {
				t.Errorf("%s: privileged %v", name, privileged)
			}
			switch {
			case privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation:
				t.Errorf("%s: privileged with allowPrivilegeEscalation false: the API server rejects it", name)
			case !privileged && (sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation):
				t.Errorf("%s: allowPrivilegeEscalation is not false", name)
			}
		}
	}
}

// TestAgentSysMounts: /sys read-only and /sys/devices read-write on top, or
// all of /sys read-write with agent.sysReadOnly=false.
func TestAgentSysMounts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]bool // mount path → read-only
	}{
		{nil, map[string]bool{"/host/sys": true, "/host/sys/devices": false}},
		{[]string{"--set", "agent.sysReadOnly=false"}, map[string]bool{"/host/sys": false}},
	} {
		p := podSpecs(t, renderDefault(t, tc.args...))["agent"]
		hostPath := map[string]string{}
		for _, v := range p.Volumes {
			if v.HostPath != nil {
				hostPath[v.Name] = v.HostPath.Path
			}
		}
		got := map[string]bool{}
		for _, m := range p.Containers[0].VolumeMounts {
			if path := hostPath[m.Name]; strings.HasPrefix(path, "/sys") {
				got[m.MountPath] = m.ReadOnly
				if m.MountPath != "/host"+path {
					t.Errorf("%s mounted at %s", path, m.MountPath)
				}
			}
		}
		if !slices.Equal(sortedKeys(got), sortedKeys(tc.want)) || !maps.Equal(got, tc.want) {
			t.Errorf("%v: sysfs mounts (path: read-only) %v, want %v", tc.args, got, tc.want)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// TestNetworkPolicy: off by default; on, each component's pods admit the
// metrics port only from the configured peers and the health port from
// anywhere; an empty peer list fails to render.
func TestNetworkPolicy(t *testing.T) {
	if n := count(renderDefault(t))["NetworkPolicy"]; n != 0 {
		t.Errorf("%d NetworkPolicies by default", n)
	}
	objs := renderDefault(t, "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs")
	for _, tc := range []struct {
		name           string
		metrics, probe int
		component      string
	}{{operatorName, 8080, 8081, "operator"}, {agentName, 9464, 9465, "agent"}} {
		var np networkingv1.NetworkPolicy
		get(t, objs, "NetworkPolicy", tc.name, &np)
		if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != tc.component ||
			!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: selector %v policyTypes %v", tc.name, np.Spec.PodSelector, np.Spec.PolicyTypes)
		}
		if len(np.Spec.Ingress) != 2 {
			t.Fatalf("%s: %d ingress rules", tc.name, len(np.Spec.Ingress))
		}
		m, h := np.Spec.Ingress[0], np.Spec.Ingress[1]
		if len(m.Ports) != 1 || *m.Ports[0].Port != intstr.FromInt32(int32(tc.metrics)) || len(m.From) != 1 ||
			m.From[0].NamespaceSelector == nil || m.From[0].NamespaceSelector.MatchLabels["team"] != "obs" {
			t.Errorf("%s: metrics rule %+v", tc.name, m)
		}
		if len(h.Ports) != 1 || *h.Ports[0].Port != intstr.FromInt32(int32(tc.probe)) || len(h.From) != 0 {
			t.Errorf("%s: health rule %+v", tc.name, h)
		}
	}
	if _, err := helmTemplate(t, testRelease, testNS, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.metricsFrom=null"); err == nil {
		t.Error("networkPolicy with no metricsFrom rendered")
	}
}

// TestMetricsSecure: by default both binaries serve /metrics over HTTPS
// behind the authn/authz filter, the ServiceMonitors scrape with a token,
// and a metrics-reader ClusterRole exists (bound to metrics.readers);
// metrics.secure=false is plain HTTP without the role.
func TestMetricsSecure(t *testing.T) {
	for _, secure := range []bool{true, false} {
		args := []string{"--values", localValues}
		if !secure {
			args = append(args, "--set", "metrics.secure=false")
		} else {
			args = append(args, "--set", "metrics.readers[0].kind=ServiceAccount", "--set", "metrics.readers[0].name=prometheus",
				"--set", "metrics.readers[0].namespace=monitoring")
		}
		objs := renderDefault(t, args...)
		flag := "--metrics-secure=" + map[bool]string{true: "true", false: "false"}[secure]
		for name, p := range podSpecs(t, objs) {
			if name != "cleanup" && !slices.Contains(p.Containers[0].Args, flag) {
				t.Errorf("secure %v: %s args %q lack %s", secure, name, p.Containers[0].Args, flag)
			}
		}
		for _, o := range objs {
			if o.Kind != "ServiceMonitor" {
				continue
			}
			var sm struct {
				Spec struct {
					Endpoints []map[string]any `json:"endpoints"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(o.Raw, &sm); err != nil {
				t.Fatal(err)
			}
			ep := sm.Spec.Endpoints[0]
			wantScheme := map[bool]string{true: "https", false: "http"}[secure]
			if ep["scheme"] != wantScheme || (secure && ep["bearerTokenFile"] == nil) {
				t.Errorf("secure %v: ServiceMonitor %s endpoint %v", secure, o.Name, ep)
			}
		}
		var reader rbacv1.ClusterRole
		var binding rbacv1.ClusterRoleBinding
		found := false
		for _, o := range objs {
			if o.Kind == "ClusterRole" && o.Name == "shadowtune-metrics-reader" {
				found = true
			}
		}
		if found != secure {
			t.Errorf("secure %v: metrics-reader ClusterRole rendered %v", secure, found)
		}
		if secure {
			get(t, objs, "ClusterRole", "shadowtune-metrics-reader", &reader)
			get(t, objs, "ClusterRoleBinding", "shadowtune-metrics-reader", &binding)
			if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) ||
				!slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
				t.Errorf("metrics-reader rules %+v", reader.Rules)
			}
			if len(binding.Subjects) != 1 || binding.Subjects[0].Name != "prometheus" || binding.RoleRef.Name != reader.Name {
				t.Errorf("metrics-reader binding %+v", binding)
			}
		}
	}
	// Both components may review their scrapers' tokens and access.
	for _, file := range []string{"agent-role.yaml", "operator-role.yaml"} {
		got := ruleStrings(generatedRules(t, file))
		for _, want := range []string{"authentication.k8s.io tokenreviews: create", "authorization.k8s.io subjectaccessreviews: create"} {
			if !slices.Contains(got, want) {
				t.Errorf("%s lacks %q", file, want)
			}
		}
	}
}

// TestOperatorAntiAffinity: by default the operator prefers nodes without
// an agent and replicas on distinct nodes, never requires it; a given
// affinity replaces that.
func TestOperatorAntiAffinity(t *testing.T) {
	p := podSpecs(t, renderDefault(t))["operator"]
	if p.Affinity == nil || p.Affinity.PodAntiAffinity == nil ||
		len(p.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Fatalf("affinity %+v", p.Affinity)
	}
	components := map[string]bool{}
	for _, w := range p.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if w.PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("topologyKey %q", w.PodAffinityTerm.TopologyKey)
		}
		components[w.PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/component"]] = true
	}
	if !components["agent"] || !components["operator"] {
		t.Errorf("anti-affinity terms for %v, want agent and operator", components)
	}
	p = podSpecs(t, renderDefault(t, "--set", "operator.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=a",
		"--set", "operator.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"))["operator"]
	if p.Affinity == nil || p.Affinity.PodAntiAffinity != nil || p.Affinity.NodeAffinity == nil {
		t.Errorf("operator.affinity not used verbatim: %+v", p.Affinity)
	}
	if p := podSpecs(t, renderDefault(t, "--set", "operator.defaultAntiAffinity=false"))["operator"]; p.Affinity != nil {
		t.Errorf("defaultAntiAffinity=false: affinity %+v", p.Affinity)
	}
}

// TestAggregatedRoles: view reads both kinds, edit writes the policies only.
func TestAggregatedRoles(t *testing.T) {
	objs := renderDefault(t)
	var view, edit rbacv1.ClusterRole
	get(t, objs, "ClusterRole", "shadowtune-view", &view)
	get(t, objs, "ClusterRole", "shadowtune-edit", &edit)
	if view.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" || edit.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" {
		t.Errorf("labels view %v edit %v", view.Labels, edit.Labels)
	}
	wantView := []string{
		"storage.shadowtune.io nodestoragestates/status: get,list,watch", "storage.shadowtune.io nodestoragestates: get,list,watch",
		"storage.shadowtune.io storagetunings/status: get,list,watch", "storage.shadowtune.io storagetunings: get,list,watch",
	}
	if got := ruleStrings(view.Rules); !slices.Equal(got, wantView) {
		t.Errorf("view rules %q, want %q", got, wantView)
	}
	if got := ruleStrings(edit.Rules); !slices.Equal(got, []string{"storage.shadowtune.io storagetunings: create,update,patch,delete,deletecollection"}) {
		t.Errorf("edit rules %q", got)
	}
}

// hostMounts returns the agent's hostPath mounts: host path → "mount
// path[ ro][ propagation]".
func hostMounts(p corev1.PodSpec) map[string]string {
	hostPath := map[string]string{}
	for _, v := range p.Volumes {
		if v.HostPath != nil {
			hostPath[v.Name] = v.HostPath.Path
		}
	}
	got := map[string]string{}
	for _, m := range p.Containers[0].VolumeMounts {
		path, ok := hostPath[m.Name]
		if !ok {
			continue
		}
		got[path] = m.MountPath
		if m.ReadOnly {
			got[path] += " ro"
		}
		if m.MountPropagation != nil {
			got[path] += " " + string(*m.MountPropagation)
		}
	}
	return got
}

// TestAgentHostTools: by default the agent has no host tools: no extra
// host path, no hostIPC, no --host-tools-root. agent.hostTools.enabled
// adds exactly the node's / read-only at /host, /dev, /run and /etc/lvm
// read-write on top (all but /etc/lvm following the node's mounts),
// hostIPC and --host-tools-root=/host; nothing else changes (no hostPID).
func TestAgentHostTools(t *testing.T) {
	def := podSpecs(t, renderDefault(t))["agent"]
	on := podSpecs(t, renderDefault(t, "--set", "agent.hostTools.enabled=true"))["agent"]
	defMounts, onMounts := hostMounts(def), hostMounts(on)
	for _, p := range []string{"/", "/dev", "/run", "/etc/lvm"} {
		if m, ok := defMounts[p]; ok {
			t.Errorf("default: host path %s mounted at %s", p, m)
		}
	}
	if def.HostIPC || def.HostPID || slices.ContainsFunc(def.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--host-tools-root") }) {
		t.Errorf("default: hostIPC %v hostPID %v args %q, want no host tools", def.HostIPC, def.HostPID, def.Containers[0].Args)
	}
	added := map[string]string{}
	for p, m := range onMounts {
		if d, ok := defMounts[p]; !ok {
			added[p] = m
		} else if d != m {
			t.Errorf("enabled: host path %s mounted as %q, by default %q", p, m, d)
		}
	}
	want := map[string]string{
		"/":        "/host ro HostToContainer",
		"/dev":     "/host/dev HostToContainer",
		"/run":     "/host/run HostToContainer",
		"/etc/lvm": "/host/etc/lvm",
	}
	if !maps.Equal(added, want) || len(onMounts) != len(defMounts)+len(want) {
		t.Errorf("enabled: host paths added %v, want exactly %v", added, want)
	}
	if !on.HostIPC || on.HostPID || on.HostNetwork {
		t.Errorf("enabled: hostIPC %v hostPID %v hostNetwork %v, want only hostIPC", on.HostIPC, on.HostPID, on.HostNetwork)
	}
	wantArgs := slices.Insert(slices.Clone(def.Containers[0].Args), slices.Index(def.Containers[0].Args, "--host-root=/host")+1, "--host-tools-root=/host")
	if !slices.Equal(on.Containers[0].Args, wantArgs) {
		t.Errorf("enabled: args %q, want %q", on.Containers[0].Args, wantArgs)
	}
	if len(on.Volumes) != len(def.Volumes)+len(want) || len(on.Containers[0].VolumeMounts) != len(def.Containers[0].VolumeMounts)+len(want) {
		t.Errorf("enabled: %d volumes and %d mounts, by default %d and %d: want %d more of each",
			len(on.Volumes), len(on.Containers[0].VolumeMounts), len(def.Volumes), len(def.Containers[0].VolumeMounts), len(want))
	}
}

// TestTerminationMessageFromLogs: the agent and the operator say why a
// run ended: with FallbackToLogsOnError, a container that exits with an
// error gets its last log lines as its termination message, which
// `kubectl describe pod` and the e2e restart check show after the restart.
func TestTerminationMessageFromLogs(t *testing.T) {
	for name, p := range podSpecs(t, renderDefault(t)) {
		if name == "cleanup" {
			continue
		}
		if got := p.Containers[0].TerminationMessagePolicy; got != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("%s: terminationMessagePolicy %q, want %s", name, got, corev1.TerminationMessageFallbackToLogsOnError)
		}
	}
}
