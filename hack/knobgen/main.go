// Command knobgen writes the CEL rules that the knob table (api/knob)
// decides into the +kubebuilder:validation:XValidation markers on
// TunableRange in api/v1alpha1/storagetuning_types.go, so that
// controller-gen puts them in the CRD. make generate runs it:
//
//	go run ./hack/knobgen api/v1alpha1/storagetuning_types.go
//
// Each marker is found by the start of its rule; the file is rewritten
// only when a marker changed. It exits non-zero, changing nothing, when a
// marker is missing or found more than once.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

const markerPrefix = "// +kubebuilder:validation:XValidation:"

// ruleStarts identify the markers TunableRuleMarkers returns, in its order.
var ruleStarts = []string{`rule="self.scheduler == `, `rule="!(self.name in [`, `rule="(self.name != `}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: knobgen FILE")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1], v1alpha1.TunableRuleMarkers()); err != nil {
		fmt.Fprintln(os.Stderr, "knobgen:", err)
		os.Exit(1)
	}
}

// rewrite replaces each marker line of file whose rule starts with
// ruleStarts[i] by markers[i].
func rewrite(file string, markers []string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := strings.Split(string(src), "\n")
	for i, start := range ruleStarts {
		found := 0
		for j, l := range lines {
			if strings.HasPrefix(l, markerPrefix+start) {
				lines[j] = markerPrefix + markers[i]
				found++
			}
		}
		if found != 1 {
			return fmt.Errorf("%s: %d markers with %s, want 1", file, found, start)
		}
	}
	out := []byte(strings.Join(lines, "\n"))
	if bytes.Equal(out, src) {
		return nil
	}
	return os.WriteFile(file, out, 0o644)
}
