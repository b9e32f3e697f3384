package v1alpha1

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// forbiddenInDocs are what `kubectl explain` must not show: Go
// identifiers, package paths, function calls and internal documents.
var forbiddenInDocs = []*regexp.Regexp{
	regexp.MustCompile(`internal/|operator/|agent/|api/v1alpha1|\.go\b`),
	regexp.MustCompile(`FormatPercent|TunableCandidates|HeartbeatInterval|ComparePrecedence|MaxNodeDevices|DeviceState|Validate\b|\b[A-Z][a-z]+\.[A-Z]`),
	regexp.MustCompile(`\b[A-Za-z]+\(`),                     // a call: len(devices), Pending()
	regexp.MustCompile(`\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*`), // CamelCase: a Go name (kinds and quoted values allowed below)
	regexp.MustCompile(`DESIGN §|DADS|\bADA\b`),             // documents of the repository, not of the API
}

// allowedCamel are CamelCase words a user sees in the API itself: kinds,
// condition types and reasons, enum values.
var allowedCamel = []string{"StorageTuning", "NodeStorageState", "CamelCase", "LabelSelector",
	"TracingActive", "ModelReady", "NotIn", "DoesNotExist", "TuneD", "KiB", "NotVerified", "NotSlower"}

// quoted matches a double-quoted example value ("BelowMargin"), which may be
// CamelCase.
var quoted = regexp.MustCompile(`"[^"]*"`)

// TestCRDFieldDocs walks the generated CRDs' schemas: every property's
// description (what `kubectl explain` prints) starts with the property's
// JSON name and carries no Go identifiers or internal references.
func TestCRDFieldDocs(t *testing.T) {
	for _, file := range []string{storageTuningCRDFile, nodeStorageStateCRDFile} {
		crd := readCRD(t, file)
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		walkDocs(t, file, "", root)
	}
}

func walkDocs(t *testing.T, file, path string, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.Properties {
			if !yield(k) {
				return
			}
		}
	}) {
		p := s.Properties[name]
		at := strings.TrimPrefix(path+"."+name, ".")
		if path == "" && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue // Kubernetes' own documentation
		}
		checkDoc(t, file, at, name, p.Description)
		walkDocs(t, file, at, &p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkDocs(t, file, path+"[]", s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkDocs(t, file, path+"{}", s.AdditionalProperties.Schema)
	}
}

func checkDoc(t *testing.T, file, at, name, doc string) {
	t.Helper()
	if doc == "" {
		t.Errorf("%s: %s has no description", file, at)
		return
	}
	// "name is …", "name, when set, …".
	if first, _, _ := strings.Cut(doc, " "); strings.TrimSuffix(first, ",") != name {
		t.Errorf("%s: %s: the description starts with %q, not the field's name %q: %q", file, at, first, name, short(doc))
	}
	text := quoted.ReplaceAllString(doc, `""`)
	for _, w := range allowedCamel {
		text = strings.ReplaceAll(text, w, "Kind")
	}
	for _, re := range forbiddenInDocs {
		if m := re.FindString(text); m != "" {
			t.Errorf("%s: %s: the description names %q (%s): %q", file, at, m, re, short(doc))
		}
	}
}

func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
