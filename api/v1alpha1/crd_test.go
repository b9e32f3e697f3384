package v1alpha1

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// The generated CRDs install: newCRDServer runs the API server's CRD
// validation (structural schema, defaults, CEL compilation and cost).
func TestCRDsInstall(t *testing.T) {
	newCRDServer(t, storageTuningCRDFile)
	newCRDServer(t, nodeStorageStateCRDFile)
}

func TestCRDShape(t *testing.T) {
	// Priority 1 columns show only with -o wide.
	type column struct {
		Name, Type, JSONPath string
		Priority             int32
	}
	cases := []struct {
		file, kind, plural, short string
		columns                   []column
	}{
		{storageTuningCRDFile, KindStorageTuning, "storagetunings", "stune", []column{
			{"Mode", "string", ".spec.mode", 0},
			{"Nodes", "integer", ".status.matchedNodes", 0},
			{"Devices", "integer", ".status.matchedDevices", 0},
			{"Changed", "integer", ".status.changedDevices", 0},
			{"Gain", "string", ".status.predictedGainPercent", 0},
			{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
			{"Degraded", "string", `.status.conditions[?(@.type=="Degraded")].status`, 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
			{"Message", "string", `.status.conditions[?(@.type=="Ready")].message`, 0},
			{"Conflict", "string", `.status.conditions[?(@.type=="Conflict")].status`, 1},
			{"Paused", "boolean", ".spec.paused", 1},
		}},
		{nodeStorageStateCRDFile, KindNodeStorageState, "nodestoragestates", "nss", []column{
			{"Devices", "integer", ".status.deviceCount", 0},
			{"Governed", "integer", ".status.governedDevices", 0},
			{"Pending", "integer", ".status.pendingDevices", 0},
			{"Applied", "integer", ".status.appliedDevices", 0},
			{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
			{"Degraded", "string", `.status.conditions[?(@.type=="Degraded")].status`, 0},
			{"Heartbeat", "date", ".status.lastHeartbeatTime", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
			{"Message", "string", `.status.conditions[?(@.type=="Degraded")].message`, 1},
		}},
	}
	for _, tc := range cases {
		crd := readCRD(t, tc.file)
		s := crd.Spec
		if s.Group != Group || s.Scope != apiextensionsv1.ClusterScoped || s.Names.Kind != tc.kind ||
			s.Names.Plural != tc.plural || !slices.Contains(s.Names.ShortNames, tc.short) ||
			crd.Name != tc.plural+"."+Group {
			t.Errorf("%s: group %q scope %q names %+v", tc.file, s.Group, s.Scope, s.Names)
		}
		if len(s.Versions) != 1 {
			t.Fatalf("%s: %d versions", tc.file, len(s.Versions))
		}
		v := s.Versions[0]
		if v.Name != Version || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s: version %q served %v storage %v subresources %+v", tc.file, v.Name, v.Served, v.Storage, v.Subresources)
		}
		var got []column
		for _, c := range v.AdditionalPrinterColumns {
			got = append(got, column{c.Name, c.Type, c.JSONPath, c.Priority})
		}
		if !reflect.DeepEqual(got, tc.columns) {
			t.Errorf("%s: printer columns\n got %v\nwant %v", tc.file, got, tc.columns)
		}
		// Every printer column's status path is a field of the schema.
		for _, c := range got {
			p := strings.Split(strings.TrimPrefix(c.JSONPath, "."), ".")
			if p[0] == "metadata" || strings.Contains(c.JSONPath, "[") {
				continue
			}
			props := v.Schema.OpenAPIV3Schema
			for _, k := range p {
				next, ok := props.Properties[k]
				if !ok {
					t.Errorf("%s: column %s: no field %s", tc.file, c.Name, c.JSONPath)
					break
				}
				props = &next
			}
		}
	}
}

// markerRule finds the CEL rules in the XValidation markers of the source.
var markerRule = regexp.MustCompile(`\+kubebuilder:validation:XValidation:rule=("(?:[^"\\]|\\.)*")`)

// TestCRDRulesMatchMarkers fails when a CEL rule in a marker is not in the
// generated CRD or the CRD carries a rule no marker has: the CRDs were not
// regenerated (make generate).
func TestCRDRulesMatchMarkers(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var markers []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markerRule.FindAllStringSubmatch(string(src), -1) {
			rule, err := strconv.Unquote(m[1])
			if err != nil {
				t.Fatalf("%s: marker %s: %v", f, m[1], err)
			}
			markers = append(markers, rule)
		}
	}
	var crdRules []string
	for _, f := range []string{storageTuningCRDFile, nodeStorageStateCRDFile} {
		crd := readCRD(t, f)
		walkSchema(*crd.Spec.Versions[0].Schema.OpenAPIV3Schema, func(s apiextensionsv1.JSONSchemaProps) {
			for _, r := range s.XValidations {
				crdRules = append(crdRules, r.Rule)
				if r.Message == "" && r.MessageExpression == "" {
					t.Errorf("rule %q has no message", r.Rule)
				}
			}
		})
	}
	slices.Sort(markers)
	slices.Sort(crdRules)
	if !slices.Equal(markers, crdRules) {
		t.Errorf("CEL rules in markers and CRDs differ: regenerate the CRDs (make generate)\nmarkers: %q\nCRDs:    %q", markers, crdRules)
	}
	if len(markers) < 12 {
		t.Errorf("only %d CEL rules found", len(markers))
	}
}

func walkSchema(s apiextensionsv1.JSONSchemaProps, fn func(apiextensionsv1.JSONSchemaProps)) {
	fn(s)
	for _, p := range s.Properties {
		walkSchema(p, fn)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(*s.Items.Schema, fn)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(*s.AdditionalProperties.Schema, fn)
	}
}

// leafTypes are types whose schema comes from elsewhere (apimachinery).
var leafTypes = map[reflect.Type]bool{
	reflect.TypeFor[metav1.ObjectMeta]():    true,
	reflect.TypeFor[metav1.ListMeta]():      true,
	reflect.TypeFor[metav1.Time]():          true,
	reflect.TypeFor[metav1.Duration]():      true,
	reflect.TypeFor[metav1.LabelSelector](): true,
	reflect.TypeFor[metav1.Condition]():     true,
	reflect.TypeFor[resource.Quantity]():    true,
	reflect.TypeFor[intstr.IntOrString]():   true,
}

// TestCRDFieldsMatchGoTypes fails when a Go field and the CRD schema
// disagree: a field added, renamed or removed without regenerating.
func TestCRDFieldsMatchGoTypes(t *testing.T) {
	for file, typ := range map[string]reflect.Type{
		storageTuningCRDFile:    reflect.TypeFor[StorageTuning](),
		nodeStorageStateCRDFile: reflect.TypeFor[NodeStorageState](),
	} {
		crd := readCRD(t, file)
		compareSchema(t, file, *crd.Spec.Versions[0].Schema.OpenAPIV3Schema, typ)
	}
}

func compareSchema(t *testing.T, path string, s apiextensionsv1.JSONSchemaProps, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if leafTypes[typ] {
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		fields := map[string]reflect.Type{}
		jsonFields(typ, fields)
		var goNames, crdNames []string
		for n := range fields {
			goNames = append(goNames, n)
		}
		for n := range s.Properties {
			crdNames = append(crdNames, n)
		}
		slices.Sort(goNames)
		slices.Sort(crdNames)
		if !slices.Equal(goNames, crdNames) {
			t.Errorf("%s: Go fields %v, CRD fields %v: regenerate the CRDs (make generate)", path, goNames, crdNames)
			return
		}
		for n, ft := range fields {
			compareSchema(t, path+"."+n, s.Properties[n], ft)
		}
	case reflect.Slice:
		if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
			t.Errorf("%s: Go slice, CRD type %q", path, s.Type)
			return
		}
		compareSchema(t, path+"[]", *s.Items.Schema, typ.Elem())
	case reflect.Map:
		if s.Type != "object" || s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			t.Errorf("%s: Go map, CRD type %q", path, s.Type)
			return
		}
		compareSchema(t, path+"{}", *s.AdditionalProperties.Schema, typ.Elem())
	default:
		want := map[reflect.Kind]string{
			reflect.String: "string", reflect.Bool: "boolean",
			reflect.Int32: "integer", reflect.Int64: "integer",
		}[typ.Kind()]
		if want == "" || s.Type != want {
			t.Errorf("%s: Go %s, CRD type %q", path, typ, s.Type)
		}
	}
}

// jsonFields collects the JSON names of typ's fields, inline ones included.
func jsonFields(typ reflect.Type, out map[string]reflect.Type) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" && strings.Contains(","+opts, ",inline") {
			jsonFields(f.Type, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// schemaAt returns the schema at a dotted path ("spec.evaluation.window";
// "[]" steps into list items).
func schemaAt(t *testing.T, file, dotted string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := *readCRD(t, file).Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, k := range strings.Split(dotted, ".") {
		if k == "[]" {
			s = *s.Items.Schema
			continue
		}
		next, ok := s.Properties[k]
		if !ok {
			t.Fatalf("%s: no %s", file, dotted)
		}
		s = next
	}
	return s
}

// TestCRDPatterns checks the schema's patterns against the Go code that
// enforces the same rule.
func TestCRDPatterns(t *testing.T) {
	for _, p := range []string{"spec.devices.include.[]", "spec.devices.exclude.[]"} {
		if got := schemaAt(t, storageTuningCRDFile, p).Pattern; got != globPattern.String() {
			t.Errorf("%s pattern %q, Go %q", p, got, globPattern.String())
		}
	}
	for p, re := range map[string]*regexp.Regexp{
		"spec.cache.provision.logicalVolumes.[]": logicalVolumePattern,
		"spec.cache.provision.fastDevice":        fastDevicePattern,
	} {
		if got := schemaAt(t, storageTuningCRDFile, p).Pattern; got != re.String() {
			t.Errorf("%s pattern %q, Go %q", p, got, re.String())
		}
	}
	if got := schemaAt(t, storageTuningCRDFile, "status.predictedGainPercent").Pattern; got != percentPattern.String() {
		t.Errorf("predictedGainPercent pattern %q, Go %q", got, percentPattern.String())
	}
	// The duration pattern accepts what time.ParseDuration (which both
	// metav1.Duration and CEL's duration() use) accepts.
	for _, p := range []string{"spec.evaluation.window", "spec.rollout.minDwell"} {
		re := regexp.MustCompile(schemaAt(t, storageTuningCRDFile, p).Pattern)
		for _, d := range []string{"5s", "1m30s", "1.5h", "500ms", "10us", "10µs", "10μs", "3ns", "0", "-0", "+5s", "-1s",
			".5s", "5.s", "1h2m3s4ms5us6ns", "", "5", "s", "five", "5 s", "1d", "5S", ".s", "--1s", "1e3s"} {
			_, err := time.ParseDuration(d)
			if re.MatchString(d) != (err == nil) {
				t.Errorf("%s: pattern says %v for %q, time.ParseDuration %v", p, re.MatchString(d), d, err)
			}
		}
	}
}

// TestNodeStorageStateFits validates a large, realistic agent status with
// the CRD and checks it stays well under etcd's 1.5 MiB object limit.
func TestNodeStorageStateFits(t *testing.T) {
	srv := newCRDServer(t, nodeStorageStateCRDFile)
	bfqTunables := map[string]string{}
	for _, n := range KnownTunables(SchedulerBFQ) {
		bfqTunables[n] = "125000"
	}
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	nss := &NodeStorageState{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: KindNodeStorageState},
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1.example.internal"},
		Spec: NodeStorageStateSpec{Grant: &RolloutGrant{
			Devices: []string{"sda", "sdb"}, Until: now, Policy: "observe-all-disks", Generation: 3}},
	}
	st := &nss.Status
	st.ObservedGeneration = 3
	st.Conditions = []metav1.Condition{
		{Type: NodeConditionReady, Status: metav1.ConditionTrue, Reason: ReasonAgentReady, LastTransitionTime: now},
		{Type: NodeConditionTracingActive, Status: metav1.ConditionTrue, Reason: ReasonTracingEBPF, LastTransitionTime: now},
		{Type: NodeConditionModelReady, Status: metav1.ConditionTrue, Reason: ReasonModelTrained, LastTransitionTime: now},
		{Type: NodeConditionApplied, Status: metav1.ConditionFalse, Reason: ReasonAwaitingGrant, LastTransitionTime: now},
		{Type: NodeConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, LastTransitionTime: now},
	}
	for i := range MaxNodeDevices {
		d := DeviceState{
			Name: fmt.Sprintf("sd%c%c", 'a'+i/26, 'a'+i%26), MajorMinor: fmt.Sprintf("65:%d", i*16),
			Model: "ST18000NM000J-2TV103 with a long model name", Serial: "ZR5A1B2C3D4E5F6G", WWN: "0x5000c500a1b2c3d4",
			SizeBytes: 18 << 40, Rotational: true, Class: DeviceClassHDD,
			Current:           DeviceSettings{Scheduler: "bfq", Tunables: bfqTunables, ReadAheadKiB: 4096},
			Original:          &DeviceSettings{Scheduler: "mq-deadline", Tunables: bfqTunables, ReadAheadKiB: 128},
			GovernedBy:        "observe-all-disks-with-a-long-policy-name",
			Recommendation:    &Recommendation{Scheduler: "bfq", Tunables: bfqTunables, ReadAheadKiB: 512, Redcap: true, GainPercent: "12.5", Reason: "Switch"},
			Applied:           &AppliedSetting{Scheduler: "bfq", Tunables: bfqTunables, ReadAheadKiB: 512, At: now},
			ModelErrorPercent: "8.3", ThrashGuard: ThrashGuardState{Changes: 2, QuietChecks: 1},
			Tracer: TracerEBPF, EventsDropped: 123456,
		}
		for c := range MaxDeviceCandidates {
			d.Candidates = append(d.Candidates, CandidateResult{
				Name:                       fmt.Sprintf("mq-deadline:fifo_batch=%d,read_expire=500,write_expire=5000+redcap", c),
				PredictedServiceTimeMicros: 1318415320, PredictedGainPercent: "-56.3",
			})
		}
		st.Devices = append(st.Devices, d)
	}
	st.DeviceCount, st.GovernedDevices, st.PendingDevices, st.AppliedDevices = MaxNodeDevices, MaxNodeDevices, 3, 200

	js := mustJSON(t, nss)
	obj := decodeJSON(t, []byte(js))
	if errs := srv.create(obj); len(errs) > 0 {
		t.Fatalf("the API server would reject the agent's status: %v", errs)
	}
	back := &NodeStorageState{}
	toTyped(t, obj, back)
	if !equality.Semantic.DeepEqual(back, nss) {
		t.Errorf("status does not survive a round trip through the schema")
	}
	t.Logf("%d devices × %d candidates: %d KiB", MaxNodeDevices, MaxDeviceCandidates, len(js)/1024)
	if len(js) > 1<<20 {
		t.Errorf("a full NodeStorageState is %d KiB; keep it under 1 MiB", len(js)/1024)
	}

	// Too many devices is refused.
	obj["status"].(map[string]any)["devices"] = append(obj["status"].(map[string]any)["devices"].([]any), map[string]any{"name": "extra"})
	if errs := srv.validate(obj); !hasPath(errs, "status.devices") {
		t.Errorf("257 devices accepted: %v", errs)
	}
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{&StorageTuning{}, &StorageTuningList{}, &NodeStorageState{}, &NodeStorageStateList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != GroupVersion {
			t.Errorf("%T: %v %v", obj, gvks, err)
		}
	}
	if GroupVersion.String() != APIVersion {
		t.Errorf("APIVersion %q, GroupVersion %q", APIVersion, GroupVersion)
	}
}

// TestDeepCopy fills every field with random values and checks DeepCopy
// returns an equal object that shares no memory with the original, so a
// field added without regenerating zz_generated.deepcopy.go is caught.
func TestDeepCopy(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0).NumElements(1, 2).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
		},
		func(v *intstr.IntOrString, c randfill.Continue) { *v = intstr.FromInt32(c.Int31()) },
		func(v *metav1.Time, c randfill.Continue) { *v = metav1.Unix(c.Int63n(1<<32), 0) },
		func(v *runtime.RawExtension, c randfill.Continue) { v.Raw = []byte(`{}`) },
	)
	for _, obj := range []runtime.Object{&StorageTuning{}, &StorageTuningList{}, &NodeStorageState{}, &NodeStorageStateList{}} {
		for range 20 {
			f.Fill(obj)
			cp := obj.DeepCopyObject()
			if !reflect.DeepEqual(obj, cp) {
				t.Fatalf("%T: copy differs", obj)
			}
			checkNoAlias(t, fmt.Sprintf("%T", obj), reflect.ValueOf(obj), reflect.ValueOf(cp), true)
		}
	}
	// A nil pointer copies to nil.
	var nilST *StorageTuning
	if nilST.DeepCopy() != nil {
		t.Error("nil DeepCopy not nil")
	}
}

func checkNoAlias(t *testing.T, path string, a, b reflect.Value, root bool) {
	t.Helper()
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return
		}
		if !root && a.Pointer() == b.Pointer() {
			t.Errorf("%s: pointer shared by the copy", path)
			return
		}
		checkNoAlias(t, path, a.Elem(), b.Elem(), false)
	case reflect.Slice:
		if a.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: slice shared by the copy", path)
			return
		}
		for i := range a.Len() {
			checkNoAlias(t, fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), false)
		}
	case reflect.Map:
		if a.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: map shared by the copy", path)
			return
		}
		for _, k := range a.MapKeys() {
			checkNoAlias(t, fmt.Sprintf("%s[%v]", path, k), a.MapIndex(k), b.MapIndex(k), false)
		}
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return // immutable; its *Location is shared by design
		}
		for i := range a.NumField() {
			checkNoAlias(t, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i), false)
		}
	case reflect.Interface:
		if !a.IsNil() {
			checkNoAlias(t, path, a.Elem(), b.Elem(), false)
		}
	}
}

// TestExampleIsValidForTheAPIServer checks the example against the CRD
// once more, as kubectl apply would send it (strict field validation).
func TestExampleIsValidForTheAPIServer(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := newCRDServer(t, storageTuningCRDFile)
	obj := yamlObject(t, string(data))
	before, _ := json.Marshal(obj)
	if errs := srv.create(obj); len(errs) > 0 {
		t.Fatal(errs)
	}
	after, _ := json.Marshal(obj)
	if string(before) != string(after) {
		t.Errorf("the example omits defaults it claims to show\nbefore %s\nafter  %s", before, after)
	}
}
