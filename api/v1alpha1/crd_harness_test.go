package v1alpha1

// An in-process stand-in for the API server's handling of a custom
// resource: the generated CRD is validated as the API server validates a
// CRD on create (structural schema, defaults, CEL compilation and cost), and
// objects are defaulted and validated with the same apiextensions code the
// API server runs (OpenAPI schema, list types, CEL rules).

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	storageTuningCRDFile    = "storage.shadowtune.io_storagetunings.yaml"
	nodeStorageStateCRDFile = "storage.shadowtune.io_nodestoragestates.yaml"
)

// crdDir is the repository's crds/ directory.
func crdDir() string { return filepath.Join("..", "..", "crds") }

// readCRD parses a generated CRD file.
func readCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdDir(), name))
	if err != nil {
		t.Fatalf("read CRD (run `make generate`): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return crd
}

// crdServer validates objects of one CRD version as the API server does.
type crdServer struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func newCRDServer(t *testing.T, name string) *crdServer {
	t.Helper()
	crd := readCRD(t, name)
	// The API server records the stored version itself.
	crd.Status.StoredVersions = []string{crd.Spec.Versions[0].Name}
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatalf("convert %s: %v", name, err)
	}
	// What the API server checks when the CRD is created: structural
	// schema, valid defaults, CEL rules that compile within the cost
	// budget, list-type keys, printer columns.
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		for _, e := range errs {
			t.Errorf("%s: the API server would reject the CRD: %v", name, e)
		}
		t.FailNow()
	}
	// The internal form keeps a schema shared by all versions at the top.
	if len(internal.Spec.Versions) != 1 || internal.Spec.Validation == nil {
		t.Fatalf("%s: want one version with a schema", name)
	}
	props := internal.Spec.Validation.OpenAPIV3Schema
	ss, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatalf("%s: structural schema: %v", name, err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatalf("%s: schema validator: %v", name, err)
	}
	return &crdServer{structural: ss, schema: sv, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}
}

// decodeJSON decodes JSON the way the API server does (ints kept as int64).
func decodeJSON(t *testing.T, js []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &obj); err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	return obj
}

// yamlObject converts a YAML document to an unstructured object, as kubectl
// sends it.
func yamlObject(t *testing.T, doc string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("YAML: %v\n%s", err, doc)
	}
	return decodeJSON(t, js)
}

// defaultObject applies the schema's defaults in place, as the API server
// does when it decodes a request.
func (s *crdServer) defaultObject(obj map[string]any) {
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s.structural)
	structuraldefaulting.Default(obj, s.structural)
}

// validate runs the create-time validation of the API server's custom
// resource strategy on a defaulted object.
func (s *crdServer) validate(obj map[string]any) field.ErrorList {
	errs := apiservervalidation.ValidateCustomResource(nil, obj, s.schema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			// The API server skips CEL after these ("some validation rules
			// were not checked").
			return errs
		}
	}
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// create defaults and validates obj as a create request would.
func (s *crdServer) create(obj map[string]any) field.ErrorList {
	s.defaultObject(obj)
	return s.validate(obj)
}

// toTyped decodes an unstructured object into a typed one, strictly.
func toTyped(t *testing.T, obj map[string]any, into any) {
	t.Helper()
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := kjson.UnmarshalStrict(js, into)
	if err != nil || len(strict) > 0 {
		t.Fatalf("decode %s: %v %v", js, err, strict)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}
