package charts

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// rbacMarker finds a +kubebuilder:rbac marker's groups, resources and verbs.
var rbacMarker = regexp.MustCompile(`(?m)^\s*//\s*\+kubebuilder:rbac:groups=("[^"]*"|[^,]*),resources=([^,]*),verbs=(\S*)\s*$`)

// markerPermissions collects "group resource" → sorted verbs from the
// +kubebuilder:rbac markers of the Go files under dir.
func markerPermissions(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range rbacMarker.FindAllStringSubmatch(string(src), -1) {
			for _, g := range strings.Split(strings.Trim(m[1], `"`), ";") {
				for _, r := range strings.Split(m[2], ";") {
					out[g+" "+r] = append(out[g+" "+r], strings.Split(m[3], ";")...)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range out {
		slices.Sort(v)
		out[k] = slices.Compact(v)
	}
	return out
}

// rulePermissions is markerPermissions for rules.
func rulePermissions(rules []rbacv1.PolicyRule) map[string][]string {
	out := map[string][]string{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out[g+" "+res] = append(out[g+" "+res], r.Verbs...)
			}
		}
	}
	for k, v := range out {
		slices.Sort(v)
		out[k] = slices.Compact(v)
	}
	return out
}

// TestGeneratedRBACMatchesMarkers fails when the +kubebuilder:rbac markers
// changed without regenerating files/rbac (make manifests).
func TestGeneratedRBACMatchesMarkers(t *testing.T) {
	for file, dir := range map[string]string{
		"agent-role.yaml":    filepath.Join("..", "agent"),
		"operator-role.yaml": filepath.Join("..", "operator"),
	} {
		markers := markerPermissions(t, dir)
		if len(markers) < 4 {
			t.Errorf("%s: only %d permissions in the markers", dir, len(markers))
		}
		got := rulePermissions(generatedRules(t, file))
		if !maps.EqualFunc(markers, got, slices.Equal[[]string]) {
			t.Errorf("%s differs from the markers in %s: run make manifests\nfile:    %v\nmarkers: %v", file, dir, got, markers)
		}
	}
}
