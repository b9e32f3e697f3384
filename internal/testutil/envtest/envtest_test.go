package envtest

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// TestStart runs the real API server with the generated CRDs: both kinds are
// served, the schema's defaults are applied, and its validation rejects a
// bad object naming the field.
func TestStart(t *testing.T) {
	cfg, c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dc.ServerVersion(); err != nil {
		t.Fatalf("server version: %v", err)
	} else {
		t.Logf("kube-apiserver %s", v.GitVersion)
	}
	resources, err := dc.ServerResourcesForGroupVersion(v1alpha1.APIVersion)
	if err != nil {
		t.Fatalf("discovery of %s: %v", v1alpha1.APIVersion, err)
	}
	served := map[string]bool{}
	for _, r := range resources.APIResources {
		served[r.Kind] = true
	}
	for _, kind := range []string{v1alpha1.KindStorageTuning, v1alpha1.KindNodeStorageState} {
		if !served[kind] {
			t.Errorf("%s is not served (have %v)", kind, served)
		}
	}

	// A minimal StorageTuning takes the schema's defaults.
	st := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: "minimal"}}
	if err := c.Create(ctx, st); err != nil {
		t.Fatalf("create StorageTuning: %v", err)
	}
	got := &v1alpha1.StorageTuning{}
	if err := c.Get(ctx, client.ObjectKey{Name: "minimal"}, got); err != nil {
		t.Fatalf("get StorageTuning: %v", err)
	}
	if got.Spec.Mode != v1alpha1.ModeObserve {
		t.Errorf("spec.mode = %q, want the default %q", got.Spec.Mode, v1alpha1.ModeObserve)
	}
	if len(got.Spec.Schedulers.Candidates) != 4 || got.Spec.Schedulers.Default != v1alpha1.SchedulerMQDeadline {
		t.Errorf("spec.schedulers = %+v, want the defaults (4 candidates, default mq-deadline)", got.Spec.Schedulers)
	}

	// A NodeStorageState round-trips too.
	ns := &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("create NodeStorageState: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-1"}, &v1alpha1.NodeStorageState{}); err != nil {
		t.Fatalf("get NodeStorageState: %v", err)
	}

	// cfq is no blk-mq scheduler: the schema's enum rejects it.
	bad := &v1alpha1.StorageTuning{
		ObjectMeta: metav1.ObjectMeta{Name: "cfq"},
		Spec: v1alpha1.StorageTuningSpec{
			Schedulers: v1alpha1.SchedulerPolicy{Candidates: []v1alpha1.SchedulerName{"cfq"}},
		},
	}
	err = c.Create(ctx, bad)
	if err == nil {
		t.Fatal("a StorageTuning with spec.schedulers.candidates [cfq] was accepted")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create with cfq: %v, want an Invalid error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "spec.schedulers.candidates") || !strings.Contains(msg, "cfq") {
		t.Errorf("the error does not name spec.schedulers.candidates and cfq: %s", msg)
	} else {
		t.Logf("rejected as expected: %s", msg)
	}
}
