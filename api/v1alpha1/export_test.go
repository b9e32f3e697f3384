package v1alpha1

import "testing"

// Test tables shared with the external test package (apiserver_test.go),
// which runs them against a real API server.

// InvalidDoc is an invalid StorageTuning document and where the API server
// must report it.
type InvalidDoc struct {
	Name, Doc, Path, Detail string
}

// InvalidDocsForAPIServer returns the invalid cases the API server checks.
func InvalidDocsForAPIServer() []InvalidDoc {
	var out []InvalidDoc
	for _, tc := range invalidCases {
		if tc.goOnly {
			continue
		}
		p := tc.crdPath
		if p == "" {
			p = tc.path
		}
		out = append(out, InvalidDoc{Name: tc.name, Doc: doc(tc.spec), Path: p, Detail: tc.detail})
	}
	return append(out, missingSpecDocs...)
}

// ValidDocs returns the valid documents by name.
func ValidDocs() map[string]string {
	out := map[string]string{}
	for name, spec := range validSpecs {
		out[name] = doc(spec)
	}
	return out
}

// CRDVerdict returns the errors the in-process CRD harness reports for a
// document, as "field: detail" pairs, for comparison with a real API
// server.
func CRDVerdict(t *testing.T, d string) [][2]string {
	srv := newCRDServer(t, storageTuningCRDFile)
	var out [][2]string
	for _, e := range srv.create(yamlObject(t, d)) {
		out = append(out, [2]string{e.Field, e.Detail})
	}
	return out
}

// GoVerdict decodes, defaults and validates a document as
// LoadStorageTuningFile does.
func GoVerdict(d string) (*StorageTuning, error) { return goVerdict(d) }
