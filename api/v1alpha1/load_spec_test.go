package v1alpha1

import (
	"strings"
	"testing"
)

// TestLoadRefusesEmptySpec (issue 44, F9): a policy whose spec is missing,
// null or empty would select every disk of the host, its root disk
// included; it is refused with one line naming spec.
func TestLoadRefusesEmptySpec(t *testing.T) {
	const head = "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\n"
	for name, content := range map[string]string{
		"no spec":       head,
		"spec: null":    head + "spec: null\n",
		"spec: ~":       head + "spec: ~\n",
		"spec:":         head + "spec:\n",
		"spec: {}":      head + "spec: {}\n",
		"JSON null":     `{"apiVersion": "storage.shadowtune.io/v1alpha1", "kind": "StorageTuning", "spec": null}`,
		"only a status": head + "status: {matchedNodes: 3}\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, "st.yaml", content)
			st, err := LoadStorageTuningFile(p)
			if err == nil {
				t.Fatalf("accepted, selecting %+v", st.Spec.Devices)
			}
			want := p + ": spec: Required value: an empty spec would select every disk of every node, the root disk included"
			if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error\n  %v\nwant one line starting\n  %s", err, want)
			}
		})
	}
}

// missingSpecDocs are the documents without a spec, or with a null one,
// which both Go and the API server refuse (issue 44, F9).
var missingSpecDocs = []InvalidDoc{
	{Name: "no spec", Doc: "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\n",
		Path: "spec", Detail: "Required value"},
	{Name: "null spec", Doc: "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\nspec: null\n",
		Path: "spec", Detail: "Required value"},
}

// TestMissingSpecRefused: the CRD, run as the API server runs it, refuses
// a missing or null spec (it used to default it to {}: every disk of
// every node), as the Go loader does.
func TestMissingSpecRefused(t *testing.T) {
	srv := newCRDServer(t, storageTuningCRDFile)
	for _, d := range missingSpecDocs {
		t.Run(d.Name, func(t *testing.T) {
			if _, err := goVerdict(d.Doc); err == nil || !strings.Contains(err.Error(), ": spec: Required value") {
				t.Errorf("Go: %v, want spec: Required value", err)
			}
			errs := srv.create(yamlObject(t, d.Doc))
			if !hasPath(errs, "spec") {
				t.Errorf("API server errors %v, want one at spec", errs)
			}
		})
	}
}
