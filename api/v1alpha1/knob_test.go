package v1alpha1

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/shadowtune/shadowtune/api/knob"
)

// TestCRDRulesFromKnobTable: the generated CRD carries the CEL rules the
// knob table decides (hack/knobgen wrote them into the markers), and the
// API's schedulers are the table's.
func TestCRDRulesFromKnobTable(t *testing.T) {
	var api []string
	for _, s := range SchedulerNames() {
		api = append(api, string(s))
	}
	if !slices.Equal(api, knob.Schedulers()) {
		t.Errorf("SchedulerNames %v, knob table %v", api, knob.Schedulers())
	}
	crd := readCRD(t, storageTuningCRDFile)
	var got []celRule
	var walk func(p apiextensionsv1.JSONSchemaProps)
	walk = func(p apiextensionsv1.JSONSchemaProps) {
		for _, v := range p.XValidations {
			got = append(got, celRule{v.Rule, v.Message, v.FieldPath})
		}
		for _, c := range p.Properties {
			walk(c)
		}
		if p.Items != nil && p.Items.Schema != nil {
			walk(*p.Items.Schema)
		}
	}
	walk(*crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	for _, want := range tunableRules() {
		if n := count(got, want); n != 1 {
			t.Errorf("the CRD has %d rules %+v, want 1 (make generate manifests)", n, want)
		}
	}
}

func count(rules []celRule, r celRule) int {
	n := 0
	for _, x := range rules {
		if x == r {
			n++
		}
	}
	return n
}

// TestTunableRulesFollowTheTable: a tunable added to the table reaches
// the rules, and a boolean one the max rule.
func TestTunableRulesFollowTheTable(t *testing.T) {
	r := tunableRules()
	for _, k := range knob.All() {
		if k.Scheduler == "" || k.Role != knob.Tuned {
			continue
		}
		if !strings.Contains(r[0].rule, "'"+k.Name+"'") {
			t.Errorf("%s/%s is not in the name rule %q", k.Scheduler, k.Name, r[0].rule)
		}
		if strings.Contains(r[1].rule, "'"+k.Name+"'") != k.Boolean() {
			t.Errorf("%s/%s (unit %s): in the boolean rule %q is %v", k.Scheduler, k.Name, k.Unit, r[1].rule, !k.Boolean())
		}
	}
}
