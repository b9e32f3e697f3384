package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/operator/metrics"
)

// NodeStorageStateReconciler deletes the NodeStorageState of a node that no
// longer exists. The Node owner reference lets Kubernetes' garbage
// collector do the same; this covers clusters where it is late or an
// object lost its owner reference.
type NodeStorageStateReconciler struct {
	Client client.Client
	// APIReader reads from the API server directly (mgr.GetAPIReader()).
	APIReader client.Reader
	Metrics   *metrics.Metrics
}

// SetupWithManager runs the reconciler for every NodeStorageState created
// and for every deleted node (mapped to the state of the same name).
func (r *NodeStorageStateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodestoragestate-gc").
		For(&v1alpha1.NodeStorageState{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Watches(node, sameName, builder.OnlyMetadata, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Complete(r)
}

// Reconcile deletes the named NodeStorageState when its node is gone. The
// node is read from the API server, not the cache, so a node the cache has
// not seen yet is never taken for deleted.
func (r *NodeStorageStateReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nss := &v1alpha1.NodeStorageState{}
	if err := r.Client.Get(ctx, req.NamespacedName, nss); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !nss.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	err := r.APIReader.Get(ctx, req.NamespacedName, node)
	switch {
	case err == nil:
		return reconcile.Result{}, nil
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	}
	uid := nss.UID
	if err := r.Client.Delete(ctx, nss, client.Preconditions{UID: &uid}); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.Metrics.Collected()
	log.FromContext(ctx).Info("deleted the NodeStorageState of a node that no longer exists", "node", req.Name)
	return reconcile.Result{}, nil
}
