package v1alpha1

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// leafDefaults collects the defaults of the spec schema that are not
// objects, by dotted path ("[]" for list items).
func leafDefaults(s *structuralschema.Structural, path string, out map[string]any) {
	if s == nil {
		return
	}
	if d := s.Default.Object; d != nil {
		if _, obj := d.(map[string]any); !obj {
			out[path] = d
		}
	}
	for k, p := range s.Properties {
		leafDefaults(&p, strings.TrimPrefix(path+"."+k, "."), out)
	}
	if s.Items != nil {
		leafDefaults(s.Items, path+".[]", out)
	}
}

// baseTunable is the list item a row setting spec.tunables.[].X starts from.
func baseTunable() map[string]any {
	return map[string]any{"scheduler": "bfq", "name": "slice_idle", "max": int64(10)}
}

// setPath sets a dotted path of obj, making the objects (and a list of one
// baseTunable) on the way.
func setPath(obj map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for i, k := range parts[:len(parts)-1] {
		if parts[i+1] == "[]" {
			item := baseTunable()
			obj[k] = []any{item}
			setPath(item, strings.Join(parts[i+2:], "."), v)
			return
		}
		next, ok := obj[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[k] = next
		}
		obj = next
	}
	obj[parts[len(parts)-1]] = v
}

// getPath reads a dotted path of obj (the first list item for "[]").
func getPath(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, k := range strings.Split(path, ".") {
		if k == "[]" {
			l, ok := cur.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			cur = l[0]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// toUnstructured is the JSON form of v as the API server decodes it.
func toUnstructured(t *testing.T, v any) map[string]any {
	t.Helper()
	return decodeJSON(t, []byte(mustJSON(t, v)))
}

// TestDefaultIsTheSchema checks that Default yields exactly what the API
// server's defaulting of the generated CRD yields: for an empty spec, and
// with each defaulted field set to another value, which Default keeps.
func TestDefaultIsTheSchema(t *testing.T) {
	srv := newCRDServer(t, storageTuningCRDFile)
	specSchema := srv.structural.Properties["spec"]
	schemaDefaults := map[string]any{}
	leafDefaults(&specSchema, "", schemaDefaults)

	// A value other than the default for every defaulted field.
	others := map[string]any{
		"mode":                               "Apply",
		"schedulers.candidates":              []any{"bfq", "none"},
		"schedulers.default":                 "bfq",
		"tunables.[].min":                    int64(2),
		"tunables.[].steps":                  int64(2),
		"readAhead.enabled":                  false,
		"readAhead.minKiB":                   int64(4),
		"readAhead.maxKiB":                   int64(8),
		"cache.memoryBudget":                 "1Mi",
		"cache.provision.fastDevice":         "/dev/sdb",
		"evaluation.window":                  "1s",
		"evaluation.marginPercent":           int64(0),
		"evaluation.thrashGuard.changes":     int64(1),
		"evaluation.thrashGuard.quietChecks": int64(1000),
		"evaluation.cpuBudgetPercent":        int64(1),
		"rollout.maxUnavailable":             "50%",
		"rollout.minDwell":                   "0s",
		"rollout.toleratedRegressionPercent": int64(0),
		"priority":                           int64(7),
		"otherWriters":                       "Reclaim",
		"sentinel.restorePreviousDefaults":   true,
	}
	var paths, rows []string
	for p := range schemaDefaults {
		paths = append(paths, p)
	}
	for p := range others {
		rows = append(rows, p)
	}
	slices.Sort(paths)
	slices.Sort(rows)
	if !slices.Equal(paths, rows) {
		t.Fatalf("the schema's defaulted fields and this table differ: add a row\nschema: %v\ntable:  %v", paths, rows)
	}

	// The API server's result for a spec (an unstructured object).
	apiServer := func(obj map[string]any) map[string]any {
		obj = runtime.DeepCopyJSON(obj)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, &specSchema)
		structuraldefaulting.Default(obj, &specSchema)
		return obj
	}
	// norm is the JSON form of an object's Go form: the Go types write
	// some values in their own way ("10m" as "10m0s") and omit zeros.
	norm := func(t *testing.T, obj map[string]any) map[string]any {
		t.Helper()
		spec := &StorageTuningSpec{}
		toTyped(t, obj, spec)
		return toUnstructured(t, spec)
	}
	// at is a value as it reads at path p of an object's Go form.
	at := func(t *testing.T, p string, v any) any {
		t.Helper()
		obj := map[string]any{}
		setPath(obj, p, v)
		got, _ := getPath(norm(t, obj), p)
		return got
	}
	check := func(t *testing.T, in map[string]any) map[string]any {
		t.Helper()
		spec := &StorageTuningSpec{}
		toTyped(t, in, spec)
		spec.Default()
		crd := &StorageTuningSpec{}
		toTyped(t, apiServer(in), crd)
		if !equality.Semantic.DeepEqual(spec, crd) {
			t.Errorf("Default\n got %s\nwant %s (the CRD's defaulting)", mustJSON(t, spec), mustJSON(t, crd))
		}
		return toUnstructured(t, spec)
	}

	t.Run("empty", func(t *testing.T) {
		got := check(t, map[string]any{})
		for _, p := range paths {
			if strings.Contains(p, "[]") || strings.HasPrefix(p, "cache.provision.") {
				continue // no list item or optional object to default
			}
			if v, _ := getPath(got, p); !reflect.DeepEqual(v, at(t, p, schemaDefaults[p])) {
				t.Errorf("%s = %#v, schema default %#v", p, v, schemaDefaults[p])
			}
		}
	})
	for _, p := range rows {
		t.Run(p, func(t *testing.T) {
			in := map[string]any{}
			setPath(in, p, others[p])
			got := check(t, in)
			if v, _ := getPath(got, p); !reflect.DeepEqual(v, at(t, p, others[p])) {
				t.Errorf("%s = %#v after Default, set %#v", p, v, others[p])
			}
			// The other fields of the list item are defaulted.
			for q, d := range schemaDefaults {
				if strings.HasPrefix(p, "tunables.") && strings.HasPrefix(q, "tunables.") && q != p {
					if v, _ := getPath(got, q); !reflect.DeepEqual(v, at(t, q, d)) {
						t.Errorf("%s = %#v, schema default %#v", q, v, d)
					}
				}
			}
		})
	}
}

// TestDefaultSetsEveryPointer checks the promise of StorageTuningSpec's doc:
// after Default only nodeSelector, devices.rotational, devices.minSizeBytes
// (and a tunable's required max) may be nil.
func TestDefaultSetsEveryPointer(t *testing.T) {
	s := &StorageTuningSpec{Tunables: []TunableRange{{Scheduler: "bfq", Name: "slice_idle"}}}
	s.Default()
	mayBeNil := []string{"NodeSelector", "Devices.Rotational", "Devices.MinSizeBytes", "Tunables[].Max", "Cache.Provision"}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() && !slices.Contains(mayBeNil, path) {
				t.Errorf("%s is nil after Default", path)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(strings.TrimPrefix(path+"."+v.Type().Field(i).Name, "."), v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(path+"[]", v.Index(i))
			}
		}
	}
	walk("", reflect.ValueOf(s).Elem())
}

// TestDefaultKeepsEmptyLists checks that explicit empty lists and maps
// survive Default, as they survive the API server's defaulting.
func TestDefaultKeepsEmptyLists(t *testing.T) {
	in := `{"schedulers": {"candidates": []}, "devices": {"include": []},
		"nodeSelector": {"matchLabels": {}, "matchExpressions": [{"key": "k", "operator": "Exists", "values": []}]}}`
	spec := &StorageTuningSpec{}
	if err := json.Unmarshal([]byte(in), spec); err != nil {
		t.Fatal(err)
	}
	spec.Default()
	if c := spec.Schedulers.Candidates; c == nil || len(c) != 0 {
		t.Errorf("candidates %v, want []", c)
	}
	if i := spec.Devices.Include; i == nil || len(i) != 0 {
		t.Errorf("include %v, want []", i)
	}
	if m := spec.NodeSelector.MatchLabels; m == nil || len(m) != 0 {
		t.Errorf("matchLabels %v, want {}", m)
	}
	if v := spec.NodeSelector.MatchExpressions[0].Values; v == nil || len(v) != 0 {
		t.Errorf("values %v, want []", v)
	}
}
