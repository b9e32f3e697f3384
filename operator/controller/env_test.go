package controller_test

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubeenv "github.com/shadowtune/shadowtune/internal/testutil/envtest"
)

func scheme(*testing.T) *runtime.Scheme { return kubeenv.Scheme() }

// startAPIServer starts etcd and kube-apiserver with the CRDs installed.
// Controller logs go to stderr with -v.
func startAPIServer(t *testing.T) (*rest.Config, client.Client) {
	if testing.Verbose() {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	}
	return kubeenv.Start(t)
}
