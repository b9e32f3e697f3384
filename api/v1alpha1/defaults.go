package v1alpha1

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/shadowtune/shadowtune/crds"
)

// Default fills every unset field of the spec with the default of the CRD
// schema (the +kubebuilder:default markers, generated into crds/), applied
// with the API server's own structural defaulting, so a StorageTuning read
// from a file behaves as one read from the API server. Unset means absent
// from the object's JSON form: a nil pointer, slice or map, or the zero value
// of an omitempty field. An explicit empty list (candidates: []) is kept, as
// the API server keeps it, and Validate rejects it, as the API server does.
// After Default every pointer field that has a schema default is non-nil.
func (st *StorageTuning) Default() { st.Spec.Default() }

// Default fills the unset fields of s with their schema defaults; see
// StorageTuning.Default.
func (s *StorageTuningSpec) Default() {
	js, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("v1alpha1: encode StorageTuningSpec: %v", err))
	}
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &obj); err != nil {
		panic(fmt.Sprintf("v1alpha1: decode StorageTuningSpec: %v", err))
	}
	// What the API server does to a decoded request body.
	schema := specSchema()
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, schema)
	structuraldefaulting.Default(obj, schema)
	if js, err = json.Marshal(obj); err != nil {
		panic(fmt.Sprintf("v1alpha1: encode the defaulted spec: %v", err))
	}
	var out StorageTuningSpec
	if err := json.Unmarshal(js, &out); err != nil {
		// A default that does not fit its Go field: a marker is wrong
		// (TestDefault catches it).
		panic(fmt.Sprintf("v1alpha1: the CRD's defaults do not decode: %v", err))
	}
	keepEmpty(reflect.ValueOf(s).Elem(), reflect.ValueOf(&out).Elem())
	*s = out
}

// keepEmpty puts back in out the empty but non-nil slices and maps of in:
// omitempty drops them from the JSON form, which the defaulting would then
// treat as unset, whereas the API server receives them and keeps them.
func keepEmpty(in, out reflect.Value) {
	switch in.Kind() {
	case reflect.Struct:
		for i := range in.NumField() {
			if in.Type().Field(i).IsExported() {
				keepEmpty(in.Field(i), out.Field(i))
			}
		}
	case reflect.Pointer:
		if !in.IsNil() && !out.IsNil() {
			keepEmpty(in.Elem(), out.Elem())
		}
	case reflect.Slice:
		switch {
		case in.IsNil():
		case in.Len() == 0:
			out.Set(reflect.MakeSlice(in.Type(), 0, 0))
		case in.Len() == out.Len():
			for i := range in.Len() {
				keepEmpty(in.Index(i), out.Index(i))
			}
		}
	case reflect.Map:
		if !in.IsNil() && in.Len() == 0 {
			out.Set(reflect.MakeMap(in.Type()))
		}
	}
}

// specSchema is the structural schema of spec in the StorageTuning CRD.
var specSchema = sync.OnceValue(func() *structuralschema.Structural {
	ss, err := crdSchema()
	if err != nil {
		// The CRD is generated and embedded at build time; tests load it.
		panic(fmt.Sprintf("v1alpha1: the embedded StorageTuning CRD: %v", err))
	}
	spec, ok := ss.Properties["spec"]
	if !ok {
		panic("v1alpha1: the embedded StorageTuning CRD has no spec")
	}
	return &spec
})

// crdSchema parses the embedded StorageTuning CRD into the structural schema
// of its one version, as the API server does.
func crdSchema() (*structuralschema.Structural, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crds.StorageTuning(), crd); err != nil {
		return nil, fmt.Errorf("decode %s: %w", crds.StorageTuningFile, err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		return nil, fmt.Errorf("%s: want one version with a schema", crds.StorageTuningFile)
	}
	var props apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &props, nil); err != nil {
		return nil, fmt.Errorf("convert %s: %w", crds.StorageTuningFile, err)
	}
	ss, err := structuralschema.NewStructural(&props)
	if err != nil {
		return nil, fmt.Errorf("%s: structural schema: %w", crds.StorageTuningFile, err)
	}
	return ss, nil
}

// tunableStepsDefault is the schema default of spec.tunables[].steps.
var tunableStepsDefault = sync.OnceValue(func() int64 {
	steps, ok := specSchema().Properties["tunables"].Items.Properties["steps"].Default.Object.(int64)
	if !ok {
		panic("v1alpha1: spec.tunables[].steps has no integer default in the CRD")
	}
	return steps
})
