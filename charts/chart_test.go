package charts

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

const (
	chartDir     = "shadowtune"
	localValues  = "shadowtune/ci/local-cluster-values.yaml"
	testRelease  = "shadowtune"
	testNS       = "shadowtune-system"
	operatorName = "shadowtune-operator"
	agentName    = "shadowtune-agent"
	policyName   = "shadowtune-agent-node-scope"
	policyFile   = "templates/admission-policy.yaml"
)

// helmBinary returns $HELM, else the repository's bin/helm (make helm). It
// skips the test when neither exists, or fails it when CI=true (package
// need).
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		need.Have(t, "helm")
		return h
	}
	h, err := filepath.Abs(filepath.Join("..", "bin", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h); err == nil {
		need.Have(t, "helm")
		return h
	}
	need.Missing(t, "helm", "helm not found at %s and $HELM is unset: run make helm to test the chart", h)
	return ""
}

// helmTemplate runs helm template on the chart with the given release,
// namespace and extra arguments, and returns its standard output.
func helmTemplate(t *testing.T, release, namespace string, args ...string) (string, error) {
	t.Helper()
	cmdArgs := append([]string{"template", release, chartDir, "--namespace", namespace}, args...)
	cmd := exec.Command(helmBinary(t), cmdArgs...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.New(strings.TrimSpace(stderr.String()) + ": " + err.Error())
	}
	return stdout.String(), nil
}

// object is one rendered document.
type object struct {
	Kind string
	Name string
	Raw  []byte // JSON
}

// render runs helm template and splits the output into objects.
func render(t *testing.T, release, namespace string, args ...string) []object {
	t.Helper()
	out, err := helmTemplate(t, release, namespace, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	var objs []object
	r := kyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(j, &meta); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, object{Kind: meta.Kind, Name: meta.Metadata.Name, Raw: j})
	}
	return objs
}

// renderDefault renders the chart with its default values.
func renderDefault(t *testing.T, args ...string) []object {
	return render(t, testRelease, testNS, args...)
}

// get decodes the object of that kind and name strictly (unknown fields are
// errors) into into.
func get(t *testing.T, objs []object, kind, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			if err := yaml.UnmarshalStrict(o.Raw, into); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
}

func count(objs []object) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		m[o.Kind]++
	}
	return m
}

// typed returns an empty typed object of kind, nil for kinds without a Go
// type here.
func typed(kind string) any {
	switch kind {
	case "ServiceAccount":
		return &corev1.ServiceAccount{}
	case "Service":
		return &corev1.Service{}
	case "ClusterRole":
		return &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "Role":
		return &rbacv1.Role{}
	case "RoleBinding":
		return &rbacv1.RoleBinding{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "DaemonSet":
		return &appsv1.DaemonSet{}
	case "Job":
		return &batchv1.Job{}
	case "ValidatingAdmissionPolicy":
		return &admissionregistrationv1.ValidatingAdmissionPolicy{}
	case "ValidatingAdmissionPolicyBinding":
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	case "NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	}
	return nil
}

func TestRenderedObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want map[string]int
	}{
		// The uninstall-cleanup hook adds a ServiceAccount, a ClusterRole
		// and binding, a Role and binding, and a Job; the agent has a Role
		// and binding to read its own pod; metrics.secure the
		// metrics-reader ClusterRole.
		// The CRDs are templates (crds.enabled); view and edit get
		// aggregated ClusterRoles (rbac.aggregateToDefaultRoles).
		{"defaults", nil, map[string]int{
			"CustomResourceDefinition": 2,
			"ServiceAccount":           3, "ClusterRole": 6, "ClusterRoleBinding": 3, "Role": 3, "RoleBinding": 3,
			"Deployment": 1, "DaemonSet": 1, "Service": 2, "Job": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
		}},
		{"local cluster", []string{"--values", localValues}, map[string]int{
			"CustomResourceDefinition": 2,
			"ServiceAccount":           3, "ClusterRole": 6, "ClusterRoleBinding": 3, "Role": 3, "RoleBinding": 3,
			"Deployment": 1, "DaemonSet": 1, "Service": 2, "ServiceMonitor": 2, "Job": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
		}},
		{"minimal", []string{"--set", "admissionPolicy.enabled=false", "--set", "admissionPolicy.iUnderstandTheRisk=true",
			"--set", "metrics.secure=false", "--set", "crds.enabled=false", "--set", "rbac.aggregateToDefaultRoles=false",
			"--set", "operator.service.enabled=false",
			"--set", "agent.service.enabled=false", "--set", "operator.serviceAccount.create=false",
			"--set", "operator.serviceAccount.name=existing", "--set", "uninstallCleanup.enabled=false"}, map[string]int{
			"ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2,
			"Deployment": 1, "DaemonSet": 1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderDefault(t, tc.args...)
			if got := count(objs); !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("kinds rendered:\n got %v\nwant %v", got, tc.want)
			}
			// Every object decodes strictly into its Kubernetes type: no
			// misspelt or misplaced field.
			for _, o := range objs {
				if into := typed(o.Kind); into != nil {
					if err := yaml.UnmarshalStrict(o.Raw, into); err != nil {
						t.Errorf("%s %s: %v", o.Kind, o.Name, err)
					}
				}
				if o.Name == "" {
					t.Errorf("%s without a name", o.Kind)
				}
			}
		})
	}
}

func TestOperatorPod(t *testing.T) {
	var d appsv1.Deployment
	get(t, renderDefault(t), "Deployment", operatorName, &d)
	if d.Namespace != testNS || d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("namespace %q replicas %v", d.Namespace, d.Spec.Replicas)
	}
	p := d.Spec.Template.Spec
	if p.ServiceAccountName != operatorName {
		t.Errorf("serviceAccountName %q", p.ServiceAccountName)
	}
	if p.HostNetwork || p.HostPID || p.HostIPC {
		t.Error("operator pod shares a host namespace")
	}
	if p.SecurityContext == nil || p.SecurityContext.RunAsNonRoot == nil || !*p.SecurityContext.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	for _, v := range p.Volumes {
		if v.HostPath != nil {
			t.Errorf("operator pod mounts hostPath %s", v.HostPath.Path)
		}
	}
	if len(p.Containers) != 1 {
		t.Fatalf("%d containers", len(p.Containers))
	}
	c := p.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("operator container is privileged")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container runAsNonRoot is not true")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop ALL", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("seccomp profile is not RuntimeDefault")
	}
	wantArgs := []string{"operator", "--metrics-bind-address=:8080", "--metrics-secure=true", "--health-probe-bind-address=:8081",
		"--leader-elect=true", "--leader-election-namespace=$(POD_NAMESPACE)", "--zap-log-level=info"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if env := envVar(c, "POD_NAMESPACE"); env == nil || env.ValueFrom == nil || env.ValueFrom.FieldRef == nil ||
		env.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE %+v", env)
	}
	checkProbes(t, c, "health")
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("no memory limit")
	}
}

func TestAgentPod(t *testing.T) {
	var ds appsv1.DaemonSet
	get(t, renderDefault(t), "DaemonSet", agentName, &ds)
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		t.Errorf("updateStrategy %q", ds.Spec.UpdateStrategy.Type)
	}
	p := ds.Spec.Template.Spec
	if p.ServiceAccountName != agentName {
		t.Errorf("serviceAccountName %q", p.ServiceAccountName)
	}
	if p.HostPID || p.HostIPC || p.HostNetwork {
		t.Errorf("hostPID %v hostIPC %v hostNetwork %v, want all false", p.HostPID, p.HostIPC, p.HostNetwork)
	}
	if p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds < 30 {
		t.Errorf("terminationGracePeriodSeconds %v: the agent restores devices on SIGTERM", p.TerminationGracePeriodSeconds)
	}
	if len(p.Tolerations) != 1 || p.Tolerations[0].Operator != corev1.TolerationOpExists || p.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v, want one tolerating everything", p.Tolerations)
	}
	// Exactly these host paths, nothing else of the host.
	hostPaths := map[string]string{}
	volumes := map[string]corev1.Volume{}
	for _, v := range p.Volumes {
		volumes[v.Name] = v
	}
	if len(p.Containers) != 1 {
		t.Fatalf("%d containers", len(p.Containers))
	}
	c := p.Containers[0]
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		if v.HostPath == nil {
			continue
		}
		typ := corev1.HostPathUnset
		if v.HostPath.Type != nil {
			typ = *v.HostPath.Type
		}
		hostPaths[v.HostPath.Path] = m.MountPath + " " + string(typ)
		if m.ReadOnly {
			hostPaths[v.HostPath.Path] += " ro"
		}
	}
	// /sys read-only, /sys/devices (the queue attributes) read-write on top.
	wantHostPaths := map[string]string{
		"/sys":                "/host/sys Directory ro",
		"/sys/devices":        "/host/sys/devices Directory",
		"/var/lib/shadowtune": "/var/lib/shadowtune DirectoryOrCreate",
		"/run/shadowtune":     "/host/run/shadowtune DirectoryOrCreate",
	}
	if !equality.Semantic.DeepEqual(hostPaths, wantHostPaths) {
		t.Errorf("host paths (path: mount type):\n got %v\nwant %v", hostPaths, wantHostPaths)
	}
	for _, v := range p.Volumes {
		if v.HostPath != nil && hostPaths[v.HostPath.Path] == "" {
			t.Errorf("hostPath volume %s is not mounted", v.HostPath.Path)
		}
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.Privileged == nil || !*sc.Privileged:
		t.Error("agent is not privileged")
	case sc.RunAsUser == nil || *sc.RunAsUser != 0:
		t.Error("agent does not run as root")
	case sc.RunAsNonRoot != nil && *sc.RunAsNonRoot:
		t.Error("agent has runAsNonRoot")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("agent's root filesystem is writable")
	}
	wantArgs := []string{"agent", "--node-name=$(NODE_NAME)", "--host-root=/host", "--state-dir=/var/lib/shadowtune",
		"--metrics-bind-address=:9464", "--metrics-secure=true", "--health-probe-bind-address=:9465", "--tracer=auto", "--follow-open-files=false", "--zap-log-level=info"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if env := envVar(c, "NODE_NAME"); env == nil || env.ValueFrom == nil || env.ValueFrom.FieldRef == nil ||
		env.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME %+v", env)
	}
	checkProbes(t, c, "health")
	if m := c.Resources.Limits.Memory(); m.IsZero() || m.Value() > 512<<20 {
		t.Errorf("memory limit %v", m)
	}
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func checkProbes(t *testing.T, c corev1.Container, port string) {
	t.Helper()
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != port {
			t.Errorf("%s: probe for %s missing or wrong: %+v", c.Name, p.path, p.probe)
		}
	}
}

func TestLocalClusterValues(t *testing.T) {
	objs := renderDefault(t, "--values", localValues)
	var d appsv1.Deployment
	var ds appsv1.DaemonSet
	get(t, objs, "Deployment", operatorName, &d)
	get(t, objs, "DaemonSet", agentName, &ds)
	for _, p := range []corev1.PodSpec{d.Spec.Template.Spec, ds.Spec.Template.Spec} {
		c := p.Containers[0]
		if !p.HostNetwork || p.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("%s: hostNetwork %v dnsPolicy %q", c.Name, p.HostNetwork, p.DNSPolicy)
		}
		if e := envVar(c, "KUBERNETES_SERVICE_HOST"); e == nil || e.Value != "127.0.0.1" {
			t.Errorf("%s: KUBERNETES_SERVICE_HOST %+v", c.Name, e)
		}
		if c.Image != "localhost/shadowtune:dev" || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: image %s %s", c.Name, c.Image, c.ImagePullPolicy)
		}
	}
	if c := ds.Spec.Template.Spec.Containers[0]; !slices.Contains(c.Args, "--tracer=tracefs") {
		t.Errorf("agent args %q", c.Args)
	}
	if ds.Spec.Template.Spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q", ds.Spec.Template.Spec.PriorityClassName)
	}
}

// rules are the expected RBAC rules, as "group resource: verbs".
func ruleStrings(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out = append(out, g+" "+res+": "+strings.Join(r.Verbs, ","))
			}
		}
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			out = append(out, "unexpected resourceNames or nonResourceURLs")
		}
	}
	slices.Sort(out)
	return out
}

// generatedRules reads the rules controller-gen generated from the
// +kubebuilder:rbac markers (make manifests) into files/rbac of the chart.
func generatedRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "rbac", file))
	if err != nil {
		t.Fatalf("generated RBAC (make manifests): %v", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("%s: no rules", file)
	}
	return role.Rules
}

// TestRBAC checks the rendered roles: the ClusterRoles carry exactly the
// rules generated from the markers, the leader-election Role its own, and
// each is bound to its service account.
func TestRBAC(t *testing.T) {
	objs := renderDefault(t)
	for _, tc := range []struct {
		kind, name, subject string
		want                []string
	}{
		{"ClusterRole", operatorName, operatorName, ruleStrings(generatedRules(t, "operator-role.yaml"))},
		{"Role", operatorName + "-leader-election", operatorName, []string{
			" events: create,patch",
			"coordination.k8s.io leases: get,list,watch,create,update,patch,delete",
			"events.k8s.io events: create,patch",
		}},
		{"ClusterRole", agentName, agentName, ruleStrings(generatedRules(t, "agent-role.yaml"))},
		// Its own pod, for an OOM kill of its previous container.
		{"Role", agentName + "-own-pod", agentName, []string{" pods: get"}},
	} {
		var rules []rbacv1.PolicyRule
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		if tc.kind == "ClusterRole" {
			var r rbacv1.ClusterRole
			var b rbacv1.ClusterRoleBinding
			get(t, objs, "ClusterRole", tc.name, &r)
			get(t, objs, "ClusterRoleBinding", tc.name, &b)
			rules, ref, subjects = r.Rules, b.RoleRef, b.Subjects
		} else {
			var r rbacv1.Role
			var b rbacv1.RoleBinding
			get(t, objs, "Role", tc.name, &r)
			get(t, objs, "RoleBinding", tc.name, &b)
			if r.Namespace != testNS || b.Namespace != testNS {
				t.Errorf("Role in %q, RoleBinding in %q", r.Namespace, b.Namespace)
			}
			rules, ref, subjects = r.Rules, b.RoleRef, b.Subjects
		}
		if got := ruleStrings(rules); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s rules:\n got %q\nwant %q", tc.kind, tc.name, got, tc.want)
		}
		if ref.Kind != tc.kind || ref.Name != tc.name {
			t.Errorf("%s %s binding refers to %s %s", tc.kind, tc.name, ref.Kind, ref.Name)
		}
		wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: tc.subject, Namespace: testNS}}
		if !equality.Semantic.DeepEqual(subjects, wantSubjects) {
			t.Errorf("%s %s subjects %+v", tc.kind, tc.name, subjects)
		}
	}
}

// TestAdmissionPolicyMatchesAgent checks that the policy's match condition
// names the DaemonSet's service account, in whatever namespace, release and
// service-account name.
func TestAdmissionPolicyMatchesAgent(t *testing.T) {
	for _, tc := range []struct {
		release, namespace, policy, sa string
		args                           []string
	}{
		{testRelease, testNS, policyName, agentName, nil},
		{"tune", "storage", "tune-shadowtune-agent-node-scope", "tune-shadowtune-agent", nil},
		{"x", "kube-system", "st-agent-node-scope", "node-tuner",
			[]string{"--set", "fullnameOverride=st", "--set", "agent.serviceAccount.name=node-tuner"}},
	} {
		t.Run(tc.release, func(t *testing.T) {
			objs := render(t, tc.release, tc.namespace, tc.args...)
			var ds appsv1.DaemonSet
			var sa corev1.ServiceAccount
			var vap admissionregistrationv1.ValidatingAdmissionPolicy
			var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
			for _, o := range objs {
				if o.Kind == "DaemonSet" {
					get(t, objs, o.Kind, o.Name, &ds)
				}
			}
			get(t, objs, "ServiceAccount", ds.Spec.Template.Spec.ServiceAccountName, &sa)
			get(t, objs, "ValidatingAdmissionPolicy", tc.policy, &vap)
			get(t, objs, "ValidatingAdmissionPolicyBinding", tc.policy, &binding)
			if sa.Name != tc.sa || sa.Namespace != tc.namespace {
				t.Errorf("agent service account %s/%s", sa.Namespace, sa.Name)
			}
			want := "request.userInfo.username == 'system:serviceaccount:" + tc.namespace + ":" + sa.Name + "'"
			if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != want {
				t.Errorf("match conditions %+v, want one: %s", vap.Spec.MatchConditions, want)
			}
			if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
				t.Error("failurePolicy is not Fail")
			}
			if binding.Spec.PolicyName != vap.Name ||
				!slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
				t.Errorf("binding %+v", binding.Spec)
			}
		})
	}
}

// TestAdmissionPolicyRendersAlone checks the command a controller test uses
// to render the policy.
func TestAdmissionPolicyRendersAlone(t *testing.T) {
	objs := render(t, "envtest", "e2e", "--set", "agent.serviceAccount.name=agent", "--show-only", policyFile)
	if got := count(objs); !equality.Semantic.DeepEqual(got, map[string]int{
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}) {
		t.Errorf("rendered %v", got)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	get(t, objs, "ValidatingAdmissionPolicy", "envtest-shadowtune-agent-node-scope", &vap)
	if !strings.Contains(vap.Spec.MatchConditions[0].Expression, "'system:serviceaccount:e2e:agent'") {
		t.Errorf("match condition %s", vap.Spec.MatchConditions[0].Expression)
	}
}

// compilePolicy compiles the policy as the API server's
// ValidatingAdmissionPolicy plugin does (k8s.io/apiserver, validating
// compilePolicy), in the environment of compatVersion, and fails on any
// compilation error.
func compilePolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, compat *version.Version, envType environment.Type) validating.Validator {
	t.Helper()
	opts := celplugin.OptionalVariableDeclarations{}
	compiler, err := celplugin.NewCompositedCompiler(environment.MustBaseEnvSet(compat))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range p.Spec.Variables {
		if res := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, envType); res.Error != nil {
			t.Fatalf("Kubernetes %v, variable %s: %v", compat, v.Name, res.Error)
		}
	}
	var matchers, validations, messages []celplugin.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		matchers = append(matchers, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	for _, v := range p.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		var m celplugin.ExpressionAccessor
		if v.MessageExpression != "" {
			m = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		messages = append(messages, m)
	}
	matchEval := compiler.CompileCondition(matchers, opts, envType)
	validationEval := compiler.CompileCondition(validations, opts, envType)
	messageEval := compiler.CompileCondition(messages, opts, envType)
	auditEval := compiler.CompileCondition(nil, opts, envType)
	for _, e := range [][]error{matchEval.CompilationErrors(), validationEval.CompilationErrors(), messageEval.CompilationErrors()} {
		if len(e) > 0 {
			t.Fatalf("Kubernetes %v: %v", compat, e)
		}
	}
	for _, v := range p.Spec.Validations {
		if strings.ContainsAny(v.Message, "\n") {
			t.Errorf("message with a line break: %q", v.Message)
		}
	}
	matcher := matchconditions.NewMatcher(matchEval, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	return validating.NewValidator(validationEval, matcher, auditEval, messageEval, p.Spec.FailurePolicy, nil)
}

// nss returns a NodeStorageState named name; grant, when not empty, is the
// policy named in spec.grant; spec "absent" leaves spec out.
func nss(name, grant string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       v1alpha1.KindNodeStorageState,
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"deviceCount": int64(1)},
	}}
	switch grant {
	case "absent":
	case "":
		u.Object["spec"] = map[string]any{}
	default:
		u.Object["spec"] = map[string]any{"grant": map[string]any{
			"policy": grant, "generation": int64(1), "until": "2030-01-01T00:00:00Z", "devices": []any{"sda"},
		}}
	}
	return u
}

// ownedBy appends an owner reference to u and returns it.
func ownedBy(u *unstructured.Unstructured, apiVersion, kind, name string) *unstructured.Unstructured {
	refs, _, _ := unstructured.NestedSlice(u.Object, "metadata", "ownerReferences")
	refs = append(refs, map[string]any{"apiVersion": apiVersion, "kind": kind, "name": name, "uid": "u-" + name})
	_ = unstructured.SetNestedSlice(u.Object, refs, "metadata", "ownerReferences")
	return u
}

// finalized appends a finalizer to u and returns it.
func finalized(u *unstructured.Unstructured, f string) *unstructured.Unstructured {
	u.SetFinalizers(append(u.GetFinalizers(), f))
	return u
}

// TestAdmissionPolicyDecisions evaluates the rendered policy in process with
// the API server's own CEL admission code, for the requests the agent makes
// and those it must not.
func TestAdmissionPolicyDecisions(t *testing.T) {
	objs := renderDefault(t, "--show-only", policyFile)
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	get(t, objs, "ValidatingAdmissionPolicy", policyName, &vap)
	// New expressions must compile on the oldest supported API server.
	compilePolicy(t, &vap, version.MajorMinor(1, 30), environment.NewExpressions)
	v := compilePolicy(t, &vap, environment.DefaultCompatibilityVersion(), environment.StoredExpressions)

	agent := "system:serviceaccount:" + testNS + ":" + agentName
	nodeExtra := map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}}
	gvk := v1alpha1.GroupVersion.WithKind(v1alpha1.KindNodeStorageState)
	gvr := v1alpha1.GroupVersion.WithResource("nodestoragestates")
	for _, tc := range []struct {
		name        string
		user        string
		extra       map[string][]string
		op          admission.Operation
		subresource string
		obj, old    *unstructured.Unstructured
		deny        string // substring of the denial message; "" = allowed
	}{
		{"create own", agent, nodeExtra, admission.Create, "", nss("node-a", ""), nil, ""},
		{"create own without spec", agent, nodeExtra, admission.Create, "", nss("node-a", "absent"), nil, ""},
		{"create other", agent, nodeExtra, admission.Create, "", nss("node-b", ""), nil,
			"the shadowtune agent on node 'node-a' may only create the NodeStorageState named 'node-a', not 'node-b'"},
		{"create own with grant", agent, nodeExtra, admission.Create, "", nss("node-a", "p"), nil,
			"may not create NodeStorageState 'node-a' with spec.grant"},
		{"update own, spec kept", agent, nodeExtra, admission.Update, "", nss("node-a", "p"), nss("node-a", "p"), ""},
		{"update own, empty spec for none", agent, nodeExtra, admission.Update, "", nss("node-a", ""), nss("node-a", "absent"), ""},
		{"update own, grant added", agent, nodeExtra, admission.Update, "", nss("node-a", "p"), nss("node-a", ""),
			"may not change spec of NodeStorageState 'node-a'"},
		{"update own, grant changed", agent, nodeExtra, admission.Update, "", nss("node-a", "q"), nss("node-a", "p"),
			"may not change spec"},
		{"update own, grant dropped", agent, nodeExtra, admission.Update, "", nss("node-a", "absent"), nss("node-a", "p"),
			"may not change spec"},
		{"update own status", agent, nodeExtra, admission.Update, "status", nss("node-a", "p"), nss("node-a", "p"), ""},
		{"update other status", agent, nodeExtra, admission.Update, "status", nss("node-b", ""), nss("node-b", ""),
			"may only update the NodeStorageState named 'node-a', not 'node-b'"},
		{"update other", agent, nodeExtra, admission.Update, "", nss("node-b", ""), nss("node-b", ""),
			"may only update the NodeStorageState named 'node-a', not 'node-b'"},
		{"delete own", agent, nodeExtra, admission.Delete, "", nil, nss("node-a", "p"), ""},
		{"delete other", agent, nodeExtra, admission.Delete, "", nil, nss("node-b", ""),
			"may only delete the NodeStorageState named 'node-a', not 'node-b'"},
		{"create own, owned by its Node", agent, nodeExtra, admission.Create, "", ownedBy(nss("node-a", ""), "v1", "Node", "node-a"), nil, ""},
		{"create own, owned by another Node", agent, nodeExtra, admission.Create, "", ownedBy(nss("node-a", ""), "v1", "Node", "node-b"), nil,
			"may not create NodeStorageState 'node-a' with an owner other than its Node 'node-a'"},
		{"create own, owned by a Deployment", agent, nodeExtra, admission.Create, "",
			ownedBy(ownedBy(nss("node-a", ""), "v1", "Node", "node-a"), "apps/v1", "Deployment", "node-a"), nil, "with an owner other than its Node"},
		{"create own with a finalizer", agent, nodeExtra, admission.Create, "", finalized(nss("node-a", ""), "x.io/keep"), nil,
			"may not create NodeStorageState 'node-a' with finalizers"},
		{"update own, finalizer added", agent, nodeExtra, admission.Update, "", finalized(nss("node-a", ""), "x.io/keep"), nss("node-a", ""),
			"may not change the finalizers or owner references of NodeStorageState 'node-a'"},
		{"update own status, finalizer added", agent, nodeExtra, admission.Update, "status", finalized(nss("node-a", ""), "x.io/keep"), nss("node-a", ""),
			"may not change the finalizers or owner references"},
		{"update own, owner added", agent, nodeExtra, admission.Update, "", ownedBy(nss("node-a", ""), "v1", "Node", "node-a"), nss("node-a", ""),
			"may not change the finalizers or owner references"},
		{"update own, finalizer and owner kept", agent, nodeExtra, admission.Update, "status",
			finalized(ownedBy(nss("node-a", ""), "v1", "Node", "node-a"), "x.io/keep"),
			finalized(ownedBy(nss("node-a", ""), "v1", "Node", "node-a"), "x.io/keep"), ""},
		{"delete own with a finalizer", agent, nodeExtra, admission.Delete, "", nil, finalized(nss("node-a", ""), "x.io/keep"), ""},
		{"operator adds a finalizer", "system:serviceaccount:" + testNS + ":" + operatorName, nil, admission.Update, "",
			finalized(nss("node-b", ""), "x.io/keep"), nss("node-b", ""), ""},
		{"token without node", agent, nil, admission.Create, "", nss("node-a", ""), nil,
			"service-account token names no node"},
		{"operator grants", "system:serviceaccount:" + testNS + ":" + operatorName, nil, admission.Update, "",
			nss("node-b", "p"), nss("node-b", ""), ""},
		{"agent of another release", "system:serviceaccount:other:" + agentName, nodeExtra, admission.Update, "",
			nss("node-b", "p"), nss("node-b", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := ""
			var obj, old = tc.obj, tc.old
			for _, o := range []*unstructured.Unstructured{obj, old} {
				if o != nil {
					name = o.GetName()
				}
			}
			// A nil *Unstructured must reach the attributes as a nil interface.
			var attrs admission.Attributes
			u := &user.DefaultInfo{Name: tc.user, Extra: tc.extra}
			switch {
			case obj == nil:
				attrs = admission.NewAttributesRecord(nil, old, gvk, "", name, gvr, tc.subresource, tc.op, nil, false, u)
			case old == nil:
				attrs = admission.NewAttributesRecord(obj, nil, gvk, "", name, gvr, tc.subresource, tc.op, nil, false, u)
			default:
				attrs = admission.NewAttributesRecord(obj, old, gvk, "", name, gvr, tc.subresource, tc.op, nil, false, u)
			}
			va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk}
			if obj != nil {
				va.VersionedObject = admission.NewLazyObject(obj)
			}
			if old != nil {
				va.VersionedOldObject = admission.NewLazyObject(old)
			}
			res := v.Validate(context.Background(), gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
			var denials []string
			for _, d := range res.Decisions {
				if d.Evaluation == validating.EvalError {
					t.Fatalf("evaluation error: %s", d.Message)
				}
				if d.Action == validating.ActionDeny {
					denials = append(denials, d.Message)
				}
			}
			switch {
			case tc.deny == "" && len(denials) > 0:
				t.Errorf("denied: %q", denials)
			case tc.deny != "" && len(denials) == 0:
				t.Errorf("allowed, want denied with %q", tc.deny)
			case tc.deny != "" && !strings.Contains(strings.Join(denials, "\n"), tc.deny):
				t.Errorf("denied with %q, want %q", denials, tc.deny)
			}
		})
	}
}

func TestValuesSchemaRejects(t *testing.T) {
	for _, set := range []string{
		"agent.hostNetwork=maybe",
		"operator.hostNetwork=1",
		"agent.tracer=bpf",
		"image.pullPolicy=Sometimes",
		"bogus=1",
		"operator.bogus=1",
		"agent.bogus=1",
		"image.bogus=1",
		"admissionPolicy.bogus=1",
		"serviceMonitor.bogus=1",
		"agent.metricsPort=0",
		"operator.replicas=-1",
		"agent.maxUnavailable=0",
		"agent.stateHostPath=relative",
		"agent.extraEnv[0].value=x",
		"serviceMonitor.interval=soon",
		"agent.hostTools.enabled=yes",
		"agent.hostTools.bogus=1",
	} {
		t.Run(set, func(t *testing.T) {
			_, err := helmTemplate(t, testRelease, testNS, "--set", set)
			if err == nil {
				t.Fatalf("--set %s rendered", set)
			}
			if !strings.Contains(err.Error(), "schema") {
				t.Errorf("--set %s failed, but not by the values schema: %v", set, err)
			}
		})
	}
	// And accepts these.
	for _, set := range []string{"agent.hostNetwork=true", "agent.maxUnavailable=25%", "operator.replicas=2",
		"agent.extraEnv[0].name=A", "serviceMonitor.interval=1m30s",
		"agent.hostTools.enabled=true"} {
		if _, err := helmTemplate(t, testRelease, testNS, "--set", set); err != nil {
			t.Errorf("--set %s: %v", set, err)
		}
	}
}

// TestChartCRDs checks that the chart's templates/crds/ are the generated
// crds/ (make manifests, hack/chart-crds.sh): each the same bytes inside the
// crds.enabled condition and with the crds.keep annotation; and that they
// render as such.
func TestChartCRDs(t *testing.T) {
	want, err := filepath.Glob(filepath.Join("..", "crds", "*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs in crds/: %v", err)
	}
	got, err := filepath.Glob(filepath.Join(chartDir, "templates", "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("chart CRDs %v, want %v (make manifests)", names(got), names(want))
	}
	wrapper := []string{"{{- if .Values.crds.enabled }}", "    {{- if .Values.crds.keep }}", "    helm.sh/resource-policy: keep", "    {{- end }}", "{{- end }}"}
	for _, w := range want {
		a, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(chartDir, "templates", "crds", filepath.Base(w)))
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.Split(string(b), "\n") {
			if !slices.Contains(wrapper, line) {
				kept = append(kept, line)
			}
		}
		if strings.Join(kept, "\n") != string(a) {
			t.Errorf("%s differs from crds/: run make manifests", filepath.Base(w))
		}
	}
	for _, tc := range []struct {
		args []string
		n    int
		keep bool
	}{{nil, len(want), true}, {[]string{"--set", "crds.keep=false"}, len(want), false}, {[]string{"--set", "crds.enabled=false"}, 0, false}} {
		objs := renderDefault(t, tc.args...)
		n := 0
		for _, o := range objs {
			if o.Kind != "CustomResourceDefinition" {
				continue
			}
			n++
			var crd struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(o.Raw, &crd); err != nil {
				t.Fatal(err)
			}
			if keep := crd.Metadata.Annotations["helm.sh/resource-policy"] == "keep"; keep != tc.keep {
				t.Errorf("%v: %s resource-policy keep %v", tc.args, o.Name, keep)
			}
		}
		if n != tc.n {
			t.Errorf("%v: %d CRDs rendered, want %d", tc.args, n, tc.n)
		}
	}
}

// TestExamples loads the examples as the agent does (strict decoding,
// defaults, the CRD's validation rules in Go).
func TestExamples(t *testing.T) {
	for file, mode := range map[string]v1alpha1.TuningMode{
		"storagetuning-observe.yaml": v1alpha1.ModeObserve,
		"storagetuning-apply.yaml":   v1alpha1.ModeApply,
	} {
		st, err := v1alpha1.LoadStorageTuningFile(filepath.Join("..", "examples", file))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if st.Spec.Mode != mode {
			t.Errorf("%s: mode %s, want %s", file, st.Spec.Mode, mode)
		}
	}
}

// TestUninstallCleanupHook checks the pre-delete hook: a Job of the
// operator's image, unprivileged, that stops the chart's own agent
// DaemonSet, with its objects deleted once it succeeds.
func TestUninstallCleanupHook(t *testing.T) {
	objs := renderDefault(t)
	var job batchv1.Job
	get(t, objs, "Job", "shadowtune-uninstall-cleanup", &job)
	if job.Annotations["helm.sh/hook"] != "pre-delete" || !strings.Contains(job.Annotations["helm.sh/hook-delete-policy"], "hook-succeeded") {
		t.Errorf("hook annotations %v", job.Annotations)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("cleanup pod security: pod %+v, container %+v", pod.SecurityContext, c.SecurityContext)
	}
	var ds appsv1.DaemonSet
	get(t, objs, "DaemonSet", agentName, &ds)
	if !slices.Contains(c.Args, "--agent-daemonset="+ds.Name) || !slices.Contains(c.Args, "--namespace="+testNS) {
		t.Errorf("cleanup args %v do not name DaemonSet %s/%s", c.Args, testNS, ds.Name)
	}
	if pod.ServiceAccountName != "shadowtune-uninstall-cleanup" {
		t.Errorf("service account %q", pod.ServiceAccountName)
	}
}
