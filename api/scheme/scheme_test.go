package scheme

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

func TestNew(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{
		&v1alpha1.StorageTuning{}, &v1alpha1.StorageTuningList{},
		&v1alpha1.NodeStorageState{}, &v1alpha1.NodeStorageStateList{},
		&corev1.Node{}, &corev1.Pod{}, &appsv1.DaemonSet{},
	} {
		if gvks, _, err := s.ObjectKinds(obj); err != nil || len(gvks) != 1 {
			t.Errorf("%T: %v %v", obj, gvks, err)
		}
	}
}
