package charts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	kubeenv "github.com/shadowtune/shadowtune/internal/testutil/envtest"
)

// TestAdmissionOnAPIServer installs the chart's agent RBAC and admission
// policy in a real kube-apiserver and writes NodeStorageStates as the
// agent of one node (impersonating its service account with the node name
// a bound token carries): its own object's status may change; another
// node's object, its own spec (the grant) and other kinds may not; its
// Events only about its own NodeStorageState or in the release namespace.
func TestAdmissionOnAPIServer(t *testing.T) {
	env, agent := startAgentPolicy(t)
	admin := env.Client
	ctx := context.Background()
	agentA := agent("node-a")
	status := func(c client.Client, name string) error {
		nss := &v1alpha1.NodeStorageState{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, nss); err != nil {
			return err
		}
		nss.Status.LastHeartbeatTime = ptr.To(metav1.Now())
		return c.Status().Update(ctx, nss)
	}
	grant := func(c client.Client, name string) error {
		nss := &v1alpha1.NodeStorageState{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, nss); err != nil {
			return err
		}
		nss.Spec.Grant = &v1alpha1.RolloutGrant{Policy: "p", Generation: 1, Until: metav1.Now(), Devices: []string{"sda"}}
		return c.Update(ctx, nss)
	}

	// The policy takes effect once the API server has loaded it.
	deadline := time.Now().Add(30 * time.Second)
	for err := status(agentA, "node-b"); err == nil; err = status(agentA, "node-b") {
		if time.Now().After(deadline) {
			t.Fatal("the admission policy does not stop the agent of node-a from writing node-b's status")
		}
		time.Sleep(200 * time.Millisecond)
	}

	forbidden := func(what string, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: want a refusal, got %v", what, err)
			return
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refusal %q does not say %q", what, err, want)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: refused: %v", what, err)
		}
	}

	allowed("agent writes its own node's status", status(agentA, "node-a"))
	forbidden("agent writes another node's status", status(agentA, "node-b"),
		"the shadowtune agent on node 'node-a' may only update the NodeStorageState named 'node-a', not 'node-b'")
	// RBAC refuses the agent any update of the object itself (it updates
	// only the status); grant it that update here, to check that the
	// admission policy also keeps spec (the grant) out of its reach.
	forbidden("agent grants itself (RBAC)", grant(agentA, "node-a"), "cannot update resource")
	const extra = "test-agent-updates-nodestoragestates"
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: extra}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.Group}, Resources: []string{"nodestoragestates"}, Verbs: []string{"update"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: extra},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: extra},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: agentName, Namespace: testNS}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for err := grant(agentA, "node-a"); err != nil && strings.Contains(err.Error(), "cannot update resource"); err = grant(agentA, "node-a") {
		if time.Now().After(deadline) {
			t.Fatalf("the extra ClusterRole does not take effect: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	forbidden("agent grants itself", grant(agentA, "node-a"), "may not change spec of NodeStorageState 'node-a'")
	forbidden("agent creates another node's object",
		agentA.Create(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}),
		"may only create the NodeStorageState named 'node-a', not 'node-c'")
	forbidden("agent deletes another node's object",
		agentA.Delete(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}),
		"may only delete the NodeStorageState named 'node-a', not 'node-b'")
	forbidden("a token without a node", status(agent(""), "node-a"), "names no node")
	forbidden("agent changes a policy (RBAC)",
		agentA.Create(ctx, &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}), "cannot create resource")
	allowed("the operator (admin) grants", grant(admin, "node-b"))
	allowed("agent deletes its own object",
		agentA.Delete(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}))
	err := agentA.Create(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	allowed("agent creates its own object", err)
	withGrant := &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if err == nil {
		if err := admin.Delete(ctx, withGrant.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	withGrant.Spec.Grant = &v1alpha1.RolloutGrant{Policy: "p", Generation: 1, Until: metav1.Now()}
	forbidden("agent creates its own object with a grant", agentA.Create(ctx, withGrant),
		"may not create NodeStorageState 'node-a' with spec.grant")

	// Events: about its own NodeStorageState (in "default", where the
	// events of cluster-scoped objects go), or in the release namespace.
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	nssRef := func(node string) corev1.ObjectReference {
		return corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindNodeStorageState, Name: node}
	}
	n := 0
	emit := func(c client.Client, ns string, regarding corev1.ObjectReference, related *corev1.ObjectReference) error {
		n++
		e := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-event-%d", n), Namespace: ns},
			EventTime:  metav1.NowMicro(), ReportingController: "shadowtune-agent", ReportingInstance: "shadowtune-agent-node-a",
			Action: "Apply sda", Reason: "Applied", Type: corev1.EventTypeNormal, Note: "sda: none -> bfq",
			Regarding: regarding, Related: related,
		}
		if err := c.Create(ctx, e); err != nil {
			return err
		}
		// A repeat is a patch of the event's series.
		patch := client.MergeFrom(e.DeepCopy())
		e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NowMicro()}
		return c.Patch(ctx, e, patch)
	}
	allowed("agent records an Event about its own NodeStorageState", emit(agentA, metav1.NamespaceDefault, nssRef("node-a"), nil))
	allowed("agent records an Event in the release namespace",
		emit(agentA, testNS, corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: testNS, Name: "agent-xyz"}, nil))
	const eventRefused = "the shadowtune agent on node 'node-a' may only write Events about its NodeStorageState 'node-a' or in namespace '" + testNS + "'"
	forbidden("agent records an Event about another node's NodeStorageState",
		emit(agentA, metav1.NamespaceDefault, nssRef("node-b"), nil), eventRefused)
	forbidden("agent records an Event about a Pod elsewhere",
		emit(agentA, "kube-system", corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "kube-system", Name: "x"}, nil), eventRefused)
	related := nssRef("node-b")
	forbidden("agent records an Event about its object related to another",
		emit(agentA, metav1.NamespaceDefault, nssRef("node-a"), &related), eventRefused)
	forbidden("agent records a core/v1 Event (RBAC)", agentA.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "core-event", Namespace: metav1.NamespaceDefault},
		InvolvedObject: nssRef("node-a"), Reason: "Applied", Message: "m", Type: corev1.EventTypeNormal,
	}), "cannot create resource")
}

// startAgentPolicy starts a kube-apiserver with the chart's agent RBAC and
// admission policy (default values) and two nodes, node-a and node-b, each
// with its NodeStorageState; agent(node) is a client impersonating the
// agent's service account with a token bound to node ("" for none).
func startAgentPolicy(t *testing.T) (*kubeenv.Env, func(node string) client.Client) {
	t.Helper()
	env := kubeenv.StartEnv(t)
	admin := env.Client
	ctx := context.Background()
	// The agent's Role to read its own pod lives in the release namespace.
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range render(t, testRelease, testNS, "--show-only", policyFile, "--show-only", "templates/agent-rbac.yaml") {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(o.Raw); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", o.Kind, o.Name, err)
		}
	}
	for _, n := range []string{"node-a", "node-b"} {
		if err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}

	agent := func(node string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + testNS + ":" + agentName,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + testNS, "system:authenticated"},
		}
		if node != "" {
			cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
		}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return env, agent
}

// TestAgentIdentityOnAPIServer: with the default chart values, the agent's
// identity (its ServiceAccount, impersonated with a token bound to node-a)
// cannot write another node's NodeStorageState, cannot add a finalizer to
// its own (through the object RBAC refuses; through its status the API
// server drops the change), and cannot create core Events, or
// events.k8s.io Events about another node's object outside the release
// namespace.
func TestAgentIdentityOnAPIServer(t *testing.T) {
	env, agent := startAgentPolicy(t)
	ctx := context.Background()
	agentA := agent("node-a")
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want 403 Forbidden, got %v", what, err)
		}
	}
	get := func(name string) *v1alpha1.NodeStorageState {
		t.Helper()
		nss := &v1alpha1.NodeStorageState{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, nss); err != nil {
			t.Fatal(err)
		}
		return nss
	}

	// Another node's object: status, the object, a patch, a delete.
	other := get("node-b")
	other.Status.LastHeartbeatTime = ptr.To(metav1.Now())
	refused("status of node-b", agentA.Status().Update(ctx, other.DeepCopy()))
	refused("update of node-b", agentA.Update(ctx, other.DeepCopy()))
	refused("merge patch of node-b", agentA.Patch(ctx, other.DeepCopy(),
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`))))
	refused("delete of node-b", agentA.Delete(ctx, other.DeepCopy()))

	// A finalizer on its own object.
	const fin = "example.com/keep"
	own := get("node-a")
	own.Finalizers = append(own.Finalizers, fin)
	refused("finalizer through an update of node-a (RBAC)", agentA.Update(ctx, own.DeepCopy()))
	refused("finalizer through a patch of node-a (RBAC)", agentA.Patch(ctx, get("node-a"),
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+fin+`"]}}`))))
	// Through the status, the API server drops metadata changes (the
	// status strategy of a custom resource) before the admission policy
	// sees the object: the update may succeed, the finalizer must not stay.
	if err := agentA.Status().Update(ctx, own.DeepCopy()); err != nil && !apierrors.IsForbidden(err) {
		t.Errorf("finalizer through the status of node-a: want it dropped or refused, got %v", err)
	}
	if f := get("node-a").Finalizers; len(f) != 0 {
		t.Errorf("node-a has finalizers %v after the agent's attempts", f)
	}

	// Events: core ones nowhere (RBAC), events.k8s.io ones about another
	// node's object in another namespace neither. (Events about its own
	// NodeStorageState, and any in the release namespace, are allowed:
	// TestAdmissionOnAPIServer.)
	for _, ns := range []string{"default", "kube-system"} {
		ref := corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeStorageState", Name: "node-b"}
		refused("core Event in "+ns, agentA.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "shadowtune-", Namespace: ns}, InvolvedObject: ref,
			Reason: "Test", Message: "m", Type: corev1.EventTypeNormal}))
		refused("events.k8s.io Event in "+ns, agentA.Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "shadowtune-", Namespace: ns}, Regarding: ref,
			EventTime: metav1.NowMicro(), ReportingController: "shadowtune.io/agent", ReportingInstance: "node-a",
			Action: "Test", Reason: "Test", Note: "m", Type: corev1.EventTypeNormal}))
	}
	var evs corev1.EventList
	if err := env.Client.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == "Test" {
			t.Errorf("the agent created Event %s/%s", e.Namespace, e.Name)
		}
	}
}
