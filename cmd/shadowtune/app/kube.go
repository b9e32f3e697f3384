package app

import (
	goflag "flag"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

// addKubeconfigFlag adds controller-runtime's --kubeconfig flag (registered
// on the standard flag set by its config package) to a cobra command's
// flags, so ctrl.GetConfig honours it: --kubeconfig, else $KUBECONFIG, else
// the in-cluster configuration, else ~/.kube/config.
func addKubeconfigFlag(fs *pflag.FlagSet) {
	config.RegisterFlags(goflag.CommandLine)
	if f := goflag.CommandLine.Lookup("kubeconfig"); f != nil && fs.Lookup("kubeconfig") == nil {
		fs.AddGoFlag(f)
	}
}
