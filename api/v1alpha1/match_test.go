package v1alpha1

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shadowtune/shadowtune/api/knob"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/sched"
)

func TestDeviceSelectorMatches(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	sda := DeviceInfo{Name: "sda", Rotational: true, SizeBytes: 4 << 40}
	nvme := DeviceInfo{Name: "nvme0n1", SizeBytes: 1 << 40}
	loop := DeviceInfo{Name: "loop7", SizeBytes: 100 << 20}
	unknownSize := DeviceInfo{Name: "sdz", Rotational: true}
	cases := []struct {
		name string
		sel  DeviceSelector
		dev  DeviceInfo
		want bool
	}{
		{"empty selects all", DeviceSelector{}, loop, true},
		{"include match", DeviceSelector{Include: []string{"sd*"}}, sda, true},
		{"include miss", DeviceSelector{Include: []string{"sd*"}}, nvme, false},
		{"any include", DeviceSelector{Include: []string{"sd*", "nvme*n1"}}, nvme, true},
		{"include is whole-name", DeviceSelector{Include: []string{"nvme*"}}, DeviceInfo{Name: "nvme0n1p2"}, true},
		{"glob anchored", DeviceSelector{Include: []string{"nvme*n1"}}, DeviceInfo{Name: "nvme0n1p1"}, false},
		{"class", DeviceSelector{Include: []string{"loop[0-9]*"}}, loop, true},
		{"negated class", DeviceSelector{Include: []string{"sd[^a]"}}, sda, false},
		{"exclude", DeviceSelector{Exclude: []string{"loop*"}}, loop, false},
		{"exclude wins over include", DeviceSelector{Include: []string{"sd*"}, Exclude: []string{"sda"}}, sda, false},
		{"exclude wins over include-all", DeviceSelector{Include: []string{"*"}, Exclude: []string{"*"}}, sda, false},
		{"exclude miss", DeviceSelector{Exclude: []string{"loop*"}}, sda, true},
		{"rotational only", DeviceSelector{Rotational: ptr.To(true)}, nvme, false},
		{"rotational only hdd", DeviceSelector{Rotational: ptr.To(true)}, sda, true},
		{"non-rotational only", DeviceSelector{Rotational: ptr.To(false)}, sda, false},
		{"min size", DeviceSelector{MinSizeBytes: q("2Ti")}, nvme, false},
		{"min size equal", DeviceSelector{MinSizeBytes: q("1Ti")}, nvme, true},
		{"min size decimal", DeviceSelector{MinSizeBytes: q("1T")}, nvme, true},
		{"min size unknown", DeviceSelector{MinSizeBytes: q("1")}, unknownSize, false},
		{"min size zero", DeviceSelector{MinSizeBytes: q("0")}, unknownSize, true},
		{"all conditions", DeviceSelector{Include: []string{"sd?"}, Rotational: ptr.To(true), MinSizeBytes: q("1Ti")}, sda, true},
		{"malformed include matches nothing", DeviceSelector{Include: []string{"sd[a"}}, sda, false},
		{"malformed exclude excludes nothing", DeviceSelector{Exclude: []string{"sd[a"}}, sda, true},
	}
	for _, tc := range cases {
		if got := tc.sel.Matches(tc.dev); got != tc.want {
			t.Errorf("%s: Matches(%+v) = %v, want %v", tc.name, tc.dev, got, tc.want)
		}
		spec := StorageTuningSpec{Devices: tc.sel}
		if got := spec.Matches(tc.dev); got != tc.want {
			t.Errorf("%s: spec.Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMatchesNode(t *testing.T) {
	hdd := map[string]string{"disktype": "hdd", "zone": "a"}
	cases := []struct {
		name    string
		sel     *metav1.LabelSelector
		want    bool
		wantErr bool
	}{
		{"unset", nil, true, false},
		{"empty", &metav1.LabelSelector{}, true, false},
		{"labels", &metav1.LabelSelector{MatchLabels: map[string]string{"disktype": "hdd"}}, true, false},
		{"labels miss", &metav1.LabelSelector{MatchLabels: map[string]string{"disktype": "ssd"}}, false, false},
		{"expression", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}, true, false},
		{"malformed", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: "Like"}}}, false, true},
	}
	for _, tc := range cases {
		s := StorageTuningSpec{NodeSelector: tc.sel}
		got, err := s.MatchesNode(hdd)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: MatchesNode = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestTunableRangeValues(t *testing.T) {
	r := func(lo, hi int64, steps int32) TunableRange {
		return TunableRange{Scheduler: "bfq", Name: "slice_idle", Min: lo, Max: &hi, Steps: &steps}
	}
	cases := []struct {
		tr   TunableRange
		want []int64
	}{
		{r(0, 8, 3), []int64{0, 4, 8}},
		{r(0, 8, 2), []int64{0, 8}},
		{r(0, 10, 4), []int64{0, 3, 6, 10}},
		{r(5, 5, 4), []int64{5}},
		{r(0, 1, 3), []int64{0, 1}},
		{r(0, 1, 4), []int64{0, 1}},
		{r(1, 3, 4), []int64{1, 1, 2, 3}[1:]},
		{r(0, math.MaxInt64, 3), []int64{0, math.MaxInt64 / 2, math.MaxInt64}},
		{r(1, math.MaxInt64, 4), []int64{1, 1 + (math.MaxInt64-1)/3, 1 + 2*((math.MaxInt64-1)/3), math.MaxInt64}},
		{TunableRange{Min: 0, Max: ptr.To[int64](8)}, []int64{0, 4, 8}}, // default steps
		{TunableRange{Min: 9, Max: ptr.To[int64](8)}, nil},
		{TunableRange{Min: 0}, nil},
		{r(0, 8, 1), nil},
	}
	for _, tc := range cases {
		got := tc.tr.Values()
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Values(min %d max %v steps %v) = %v, want %v", tc.tr.Min, ptrStr(tc.tr.Max), ptrStr(tc.tr.Steps), got, tc.want)
		}
		if !slices.IsSorted(got) {
			t.Errorf("Values not ascending: %v", got)
		}
	}
}

func ptrStr[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func TestTunableCandidates(t *testing.T) {
	st, err := goVerdict(doc(`schedulers: {candidates: [none, mq-deadline, bfq]}
tunables:
- {scheduler: bfq, name: slice_idle, max: 8}
- {scheduler: mq-deadline, name: fifo_batch, min: 8, max: 16, steps: 2}
- {scheduler: bfq, name: low_latency, max: 1}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &st.Spec
	bfq := s.TunableCandidates(SchedulerBFQ)
	want := []map[string]int64{
		{"slice_idle": 0, "low_latency": 0}, {"slice_idle": 0, "low_latency": 1},
		{"slice_idle": 4, "low_latency": 0}, {"slice_idle": 4, "low_latency": 1},
		{"slice_idle": 8, "low_latency": 0}, {"slice_idle": 8, "low_latency": 1},
	}
	if !reflect.DeepEqual(bfq, want) {
		t.Errorf("bfq candidates %v, want %v", bfq, want)
	}
	if got := s.TunableCandidates(SchedulerMQDeadline); !reflect.DeepEqual(got, []map[string]int64{{"fifo_batch": 8}, {"fifo_batch": 16}}) {
		t.Errorf("mq-deadline candidates %v", got)
	}
	if got := s.TunableCandidates(SchedulerNone); !reflect.DeepEqual(got, []map[string]int64{{}}) {
		t.Errorf("none candidates %v, want one empty setting", got)
	}
	if got := s.TunableCandidates(SchedulerKyber); got != nil {
		t.Errorf("kyber is not a candidate, got %v", got)
	}
	// Every candidate builds in the simulator.
	for _, name := range s.Schedulers.Candidates {
		for _, tun := range s.TunableCandidates(name) {
			if _, err := sched.New(string(name), sched.Tunables(tun), sched.DefaultDevice); err != nil {
				t.Errorf("%s %v: %v", name, tun, err)
			}
		}
	}
}

// TestKnownTunablesMatchSimulator keeps the API's tunable names, and so the
// CEL rule that lists them, in step with internal/sched: the knob table's
// scheduler tunables are the elevator models', and its tuned queue
// attributes are modelled by the simulator within their bounds.
func TestKnownTunablesMatchSimulator(t *testing.T) {
	simNames := sched.Names()
	var apiNames []string
	for _, n := range SchedulerNames() {
		apiNames = append(apiNames, string(n))
	}
	if !reflect.DeepEqual(simNames, apiNames) {
		t.Errorf("simulator schedulers %v, API %v", simNames, apiNames)
	}
	for _, n := range SchedulerNames() {
		def, err := sched.Defaults(string(n), sched.DefaultDevice)
		if err != nil {
			t.Fatal(err)
		}
		var sim []string
		for k := range def {
			sim = append(sim, k)
		}
		api := knob.Tunables(string(n))
		slices.Sort(sim)
		slices.Sort(api)
		if !slices.Equal(sim, api) {
			t.Errorf("%s: simulator tunables %v, API %v", n, sim, api)
		}
		for _, b := range api {
			if IsBooleanTunable(b) {
				// A boolean tunable must accept 0 and 1 and reject 2.
				for v, ok := range map[int64]bool{0: true, 1: true, 2: false} {
					_, err := sched.New(string(n), sched.Tunables{b: v}, sched.DefaultDevice)
					if (err == nil) != ok {
						t.Errorf("%s %s=%d: error %v", n, b, v, err)
					}
				}
			}
		}
	}
	for _, name := range knob.Queue(knob.Tuned) {
		row, _ := knob.Lookup("", name)
		for v, ok := range map[int64]bool{row.Min: true, row.Max: true, row.Min - 1: false, row.Max + 1: false} {
			err := engine.CheckCandidate(engine.Candidate{Scheduler: "mq-deadline", Tunables: engine.Tunables{name: v}})
			if (err == nil) != ok {
				t.Errorf("mq-deadline with %s=%d: error %v", name, v, err)
			}
		}
		if !slices.Contains(KnownTunables(SchedulerKyber), name) {
			t.Errorf("a TunableRange of kyber may not name %s", name)
		}
	}
}

func TestFormatPercent(t *testing.T) {
	for v, want := range map[float64]string{
		7.5: "7.5", 7.46: "7.5", -56.3: "-56.3", 0: "0.0", 100: "100.0",
		math.NaN(): "0.0", math.Inf(1): "999999.0", math.Inf(-1): "-999999.0", 1e300: "999999.0",
	} {
		got := FormatPercent(v)
		if got != want {
			t.Errorf("FormatPercent(%v) = %q, want %q", v, got, want)
		}
		if !ValidPercent(got) {
			t.Errorf("FormatPercent(%v) = %q does not fit the schema", v, got)
		}
		back, err := ParsePercent(got)
		if err != nil || FormatPercent(back) != got {
			t.Errorf("ParsePercent(%q) = %v, %v", got, back, err)
		}
	}
	for _, bad := range []string{"", "7.5%", "1e3", "+1", ".5", "NaN", "12345678901234567"} {
		if _, err := ParsePercent(bad); err == nil {
			t.Errorf("ParsePercent(%q) accepted", bad)
		}
	}
}
