// Package scheme builds the runtime.Scheme every shadowtune client and
// manager uses (the operator, the node agent, the cleanup hook, tests):
// client-go's built-in kinds and the shadowtune API (api/v1alpha1).
//
// It is a package of its own, not part of api/v1alpha1, so the API package
// keeps depending on apimachinery only.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// AddToScheme adds client-go's built-in kinds and the shadowtune v1alpha1
// kinds to a scheme.
var AddToScheme = builder.AddToScheme

var builder = runtime.NewSchemeBuilder(clientgoscheme.AddToScheme, v1alpha1.AddToScheme)

// New returns a new scheme holding the kinds AddToScheme adds.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
