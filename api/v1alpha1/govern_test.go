package v1alpha1

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSelectingPolicies(t *testing.T) {
	pol := func(name string, prio int32, include string, nodeSel map[string]string) *StorageTuning {
		st := &StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: name}}
		st.Spec.Priority = prio
		if include != "" {
			st.Spec.Devices.Include = []string{include}
		}
		if nodeSel != nil {
			st.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: nodeSel}
		}
		return st
	}
	deleted := pol("deleted", 100, "", nil)
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	badSel := pol("bad-selector", 100, "", nil)
	badSel.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	paused := pol("paused", 50, "", nil)
	paused.Spec.Paused = true

	node := map[string]string{"disk": "hdd"}
	sda := DeviceInfo{Name: "sda", Rotational: true}
	cases := []struct {
		name     string
		policies []*StorageTuning
		labels   map[string]string
		want     []string
	}{
		{"none", nil, node, nil},
		{"one", []*StorageTuning{pol("a", 0, "sd*", nil)}, node, []string{"a"}},
		{"device not selected", []*StorageTuning{pol("a", 0, "nvme*", nil)}, node, nil},
		{"node not selected", []*StorageTuning{pol("a", 0, "", map[string]string{"disk": "ssd"})}, node, nil},
		{"node selected", []*StorageTuning{pol("a", 0, "", map[string]string{"disk": "hdd"})}, node, []string{"a"}},
		{"priority wins", []*StorageTuning{pol("a", 1, "", nil), pol("b", 5, "", nil)}, node, []string{"b", "a"}},
		{"same priority: name", []*StorageTuning{pol("zeta", 3, "", nil), pol("alpha", 3, "", nil)}, node, []string{"alpha", "zeta"}},
		{"negative priority last", []*StorageTuning{pol("a", -1, "", nil), pol("b", 0, "", nil)}, node, []string{"b", "a"}},
		{"deleted governs nothing", []*StorageTuning{deleted, pol("a", 0, "", nil)}, node, []string{"a"}},
		{"malformed selector selects nothing", []*StorageTuning{badSel}, node, nil},
		{"paused still governs", []*StorageTuning{paused, pol("a", 0, "", nil)}, node, []string{"paused", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.policies)
			got := SelectingPolicies(c.policies, c.labels, sda)
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, c.want) {
				t.Errorf("SelectingPolicies = %v, want %v", names, c.want)
			}
			if !slices.Equal(in, c.policies) {
				t.Error("input slice was reordered")
			}
			g := Governing(c.policies, c.labels, sda)
			if (g == nil) != (len(c.want) == 0) || (g != nil && g.Name != c.want[0]) {
				t.Errorf("Governing = %v, want first of %v", g, c.want)
			}
		})
	}
}

func TestDeviceStatePending(t *testing.T) {
	cur := DeviceSettings{Scheduler: "mq-deadline", Tunables: map[string]string{"fifo_batch": "16"}, ReadAheadKiB: 128}
	cases := []struct {
		name string
		rec  *Recommendation
		want bool
	}{
		{"no recommendation", nil, false},
		{"same scheduler", &Recommendation{Scheduler: "mq-deadline"}, false},
		{"other scheduler", &Recommendation{Scheduler: "bfq"}, true},
		{"same tunable", &Recommendation{Scheduler: "mq-deadline", Tunables: map[string]string{"fifo_batch": "16"}}, false},
		{"other tunable value", &Recommendation{Scheduler: "mq-deadline", Tunables: map[string]string{"fifo_batch": "8"}}, true},
		{"tunable not set now", &Recommendation{Scheduler: "mq-deadline", Tunables: map[string]string{"writes_starved": "2"}}, true},
		{"read-ahead not tuned", &Recommendation{Scheduler: "mq-deadline", ReadAheadKiB: 0}, false},
		{"same read-ahead", &Recommendation{ReadAheadKiB: 128}, false},
		{"other read-ahead", &Recommendation{ReadAheadKiB: 512}, true},
	}
	for _, c := range cases {
		d := DeviceState{Name: "sda", Current: cur, Recommendation: c.rec}
		if got := d.Pending(); got != c.want {
			t.Errorf("%s: Pending = %v, want %v", c.name, got, c.want)
		}
	}
}
