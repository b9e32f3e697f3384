// Package controller holds the operator's reconcilers. They read the
// cluster, call the pure decisions of operator/rollout and write the
// results back: a StorageTuning's status and events, and the roll-out
// grants in NodeStorageState specs; NodeStorageStates of deleted nodes are
// garbage-collected.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/operator/metrics"
	"github.com/shadowtune/shadowtune/operator/rollout"
)

// Name is the controllers' reporting name (events, field manager).
const Name = "shadowtune-operator"

// RBAC the operator's controllers need, generated into the Helm chart's
// ClusterRole (charts/shadowtune/files/rbac/operator-role.yaml, make
// manifests): the policies (cache) and their status (update); the
// NodeStorageStates (cache, update of spec.grant, delete of a departed
// node's); the nodes (metadata cache, direct get); events about the policies
// (events.k8s.io/v1, cluster-scoped objects' events go to "default"). Leader
// election's Lease and events are the chart's namespaced Role.
// +kubebuilder:rbac:groups=storage.shadowtune.io,resources=storagetunings,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.shadowtune.io,resources=storagetunings/status,verbs=update
// +kubebuilder:rbac:groups=storage.shadowtune.io,resources=nodestoragestates,verbs=get;list;watch;update;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// StorageTuningReconciler keeps each StorageTuning's status current from
// the NodeStorageStates of the nodes it selects, and writes its roll-out
// grants into them.
type StorageTuningReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the reconciler: it runs on changes of any
// StorageTuning's spec (generation; policies overlap), of any
// NodeStorageState (coalesced over stateCoalesce) and of any node's
// labels, each mapped to every policy (any of them may select the node),
// and when the plan asks for it (grant expiry, dwell end).
func (r *StorageTuningReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allPolicies)
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return ctrl.NewControllerManagedBy(mgr).
		Named("storagetuning").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&v1alpha1.StorageTuning{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.StorageTuning{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.NodeStorageState{}, r.coalesced(stateCoalesce)).
		Watches(node, all, builder.OnlyMetadata, builder.WithPredicates(predicate.Or(
			predicate.LabelChangedPredicate{}, deletedOrCreated()))).
		Complete(r)
}

// stateCoalesce is how long the policies' reconciles wait after a
// NodeStorageState changes, so that the changes within it make one
// reconcile of each policy. A thousand agents write every 10 s, about 100
// changes a second: reconciling every policy for each (35 ms each over a
// thousand nodes) took 1.6 of a 2-core machine's CPUs in TestScale, and
// starved the API server until a node's change took 6–14 s to show.
const stateCoalesce = 200 * time.Millisecond

// coalesced enqueues every policy delay after an event. The work queue
// keeps an item's earliest pending time, so the events that come while
// one is pending join it (client-go's delaying queue).
func (r *StorageTuningReconciler) coalesced(delay time.Duration) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.allPolicies(ctx, nil) {
			q.AddAfter(req, delay)
		}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc:  func(ctx context.Context, _ event.CreateEvent, q queue) { add(ctx, q) },
		UpdateFunc:  func(ctx context.Context, _ event.UpdateEvent, q queue) { add(ctx, q) },
		DeleteFunc:  func(ctx context.Context, _ event.DeleteEvent, q queue) { add(ctx, q) },
		GenericFunc: func(ctx context.Context, _ event.GenericEvent, q queue) { add(ctx, q) },
	}
}

// deletedOrCreated passes only create and delete events.
func deletedOrCreated() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

func (r *StorageTuningReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.StorageTuningList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "list StorageTunings")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}

func (r *StorageTuningReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile fetches the policy, defers one status write, then evaluates the
// fleet and applies the plan's grants and events.
func (r *StorageTuningReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	st := &v1alpha1.StorageTuning{}
	if err := r.Client.Get(ctx, req.NamespacedName, st); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.Forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	before := st.DeepCopy()
	defer func() {
		if !st.DeletionTimestamp.IsZero() || equality.Semantic.DeepEqual(before.Status, st.Status) {
			return // no no-op writes
		}
		// An update, not a merge patch: a patch leaves out counts that are
		// zero before and after, and kubectl would print them blank.
		if err := r.Client.Status().Update(ctx, st); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("update status: %w", err))
		}
	}()

	in, err := r.inputs(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	plan := rollout.Evaluate(st, in.policies, in.nodes, r.now())
	st.Status = plan.Status
	r.Metrics.SetStatus(st.Name, &st.Status, meta.IsStatusConditionTrue(st.Status.Conditions, v1alpha1.ConditionReady))

	grantErr := r.writeGrants(ctx, st, plan, in.states)
	for _, e := range plan.Events {
		if grantErr != nil && (e.Reason == rollout.EventGranted || e.Reason == rollout.EventGrantRevoked) {
			continue // retried with the whole reconcile
		}
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		var related runtime.Object
		if e.Node != "" {
			related = nodeStateRef(e.Node)
		}
		r.Recorder.Eventf(st, related, typ, e.Reason, e.Reason, "%s", e.Message)
	}
	if grantErr != nil {
		return reconcile.Result{}, grantErr
	}
	return reconcile.Result{RequeueAfter: plan.RequeueAfter}, nil
}

// nodeStateRef is a reference to a node's NodeStorageState, for an
// event's related object.
func nodeStateRef(node string) *v1alpha1.NodeStorageState {
	nss := &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: node}}
	nss.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.KindNodeStorageState))
	return nss
}

// inputs is what Evaluate needs, read from the manager's cache.
type inputs struct {
	policies []*v1alpha1.StorageTuning
	nodes    []rollout.Node
	states   map[string]*v1alpha1.NodeStorageState
}

func (r *StorageTuningReconciler) inputs(ctx context.Context) (inputs, error) {
	var in inputs
	var pl v1alpha1.StorageTuningList
	// The cache's objects are read without copies (Evaluate does not modify
	// its inputs; writeGrants copies what it changes): with a thousand
	// NodeStorageStates, copying them was most of a reconcile's time.
	if err := r.Client.List(ctx, &pl, client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list StorageTunings: %w", err)
	}
	in.policies = make([]*v1alpha1.StorageTuning, len(pl.Items))
	for i := range pl.Items {
		in.policies[i] = &pl.Items[i]
	}
	var sl v1alpha1.NodeStorageStateList
	if err := r.Client.List(ctx, &sl, client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list NodeStorageStates: %w", err)
	}
	in.states = make(map[string]*v1alpha1.NodeStorageState, len(sl.Items))
	for i := range sl.Items {
		in.states[sl.Items[i].Name] = &sl.Items[i]
	}
	nl := &metav1.PartialObjectMetadataList{}
	nl.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Client.List(ctx, nl, client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list Nodes: %w", err)
	}
	in.nodes = make([]rollout.Node, len(nl.Items))
	for i := range nl.Items {
		n := &nl.Items[i]
		in.nodes[i] = rollout.Node{Name: n.Name, Labels: n.Labels, State: in.states[n.Name]}
	}
	return in, nil
}

// writeGrants puts the plan's grants into the NodeStorageStates' spec and
// removes the revoked ones. Each write is an update with the object's
// resourceVersion, so a concurrent change (another policy's grant, the
// agent) makes it fail and the reconcile is retried on fresh data.
func (r *StorageTuningReconciler) writeGrants(ctx context.Context, st *v1alpha1.StorageTuning, plan rollout.Plan, states map[string]*v1alpha1.NodeStorageState) error {
	var errs []error
	granted, revoked := 0, 0
	write := func(name string, g *v1alpha1.RolloutGrant) {
		nss := states[name].DeepCopy()
		nss.Spec.Grant = g
		if err := r.Client.Update(ctx, nss); err != nil {
			errs = append(errs, fmt.Errorf("NodeStorageState %s: write grant: %w", name, err))
			return
		}
		if g != nil {
			granted++
		} else {
			revoked++
		}
	}
	for name, g := range plan.Grants {
		write(name, g)
	}
	for _, name := range plan.Revoke {
		if _, regranted := plan.Grants[name]; !regranted {
			write(name, nil)
		}
	}
	r.Metrics.Granted(st.Name, granted)
	r.Metrics.Revoked(st.Name, revoked)
	return errors.Join(errs...)
}
