package dmcache

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

func TestPlanProvision(t *testing.T) {
	ram := Want{Fast: v1alpha1.FastDeviceRAM, SizeBytes: 64 << 20}
	active := func(block int64) LVFacts { return LVFacts{State: actuate.VolumeState{Active: true, Block: block}} }
	ours := LVFacts{State: actuate.VolumeState{Cached: true, Ours: true, Active: true, Block: 512}, Recorded: "/dev/ram0"}
	for _, tc := range []struct {
		name  string
		want  map[string]Want
		facts map[string]LVFacts
		// "KEY ACTION FAST" per step, FAST only for attach
		steps []string
		note  string // in the last step's note
	}{
		{"4096-byte LV: zram", map[string]Want{"vg/a": ram}, map[string]LVFacts{"vg/a": active(4096)}, []string{"vg/a attach zram"}, "zram"},
		{"512-byte LV: brd", map[string]Want{"vg/a": ram}, map[string]LVFacts{"vg/a": active(512)}, []string{"vg/a attach /dev/ram0"}, "brd"},
		{"one brd only", map[string]Want{"vg/a": ram, "vg/b": ram, "vg/c": ram},
			map[string]LVFacts{"vg/a": active(512), "vg/b": active(512), "vg/c": active(4096)},
			[]string{"vg/a attach /dev/ram0", "vg/b skip", "vg/c attach zram"}, "zram"},
		{"brd kept for another", map[string]Want{"vg/a": ram, "vg/b": ram},
			map[string]LVFacts{"vg/a": active(512), "vg/b": ours}, []string{"vg/a skip", "vg/b keep"}, "cached on /dev/ram0"},
		{"a device path", map[string]Want{"vg/a": {Fast: "/dev/nvme0n1", SizeBytes: 1 << 30}},
			map[string]LVFacts{"vg/a": active(512)}, []string{"vg/a attach /dev/nvme0n1"}, "/dev/nvme0n1"},
		{"cached by another writer", map[string]Want{"vg/a": ram},
			map[string]LVFacts{"vg/a": {State: actuate.VolumeState{Cached: true, Active: true, Block: 512}}}, []string{"vg/a skip"}, "another writer"},
		{"tagged ours but not recorded here", map[string]Want{"vg/a": ram},
			map[string]LVFacts{"vg/a": {State: actuate.VolumeState{Cached: true, Ours: true, Active: true}}}, []string{"vg/a skip"}, "another writer"},
		{"gone", map[string]Want{"vg/a": ram}, map[string]LVFacts{"vg/a": {Gone: true}}, []string{"vg/a skip"}, "no such"},
		{"inactive", map[string]Want{"vg/a": ram}, map[string]LVFacts{"vg/a": {}}, []string{"vg/a skip"}, "inactive"},
		{"unreadable", map[string]Want{"vg/a": ram}, map[string]LVFacts{"vg/a": {Err: "lvs: exit 5"}}, []string{"vg/a skip"}, "exit 5"},
		{"no longer asked for", nil, map[string]LVFacts{"vg/a": ours}, []string{"vg/a detach"}, "no policy"},
		{"recorded, cache missing", map[string]Want{"vg/a": ram},
			map[string]LVFacts{"vg/a": {State: actuate.VolumeState{Cached: true, Ours: true, Missing: true}, Recorded: "/dev/ram0"}}, []string{"vg/a detach"}, "missing"},
		{"paused keeps", map[string]Want{"vg/a": {Fast: "ram", SizeBytes: 1, Paused: true}, "vg/b": {Fast: "ram", SizeBytes: 1, Paused: true}},
			map[string]LVFacts{"vg/a": ours, "vg/b": active(512)}, []string{"vg/a keep", "vg/b skip"}, "paused"},
		{"keep", map[string]Want{"vg/a": ram}, map[string]LVFacts{"vg/a": ours}, []string{"vg/a keep"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := Plan(tc.want, tc.facts)
			var got []string
			for _, s := range steps {
				g := s.Key + " " + s.Action
				if s.Action == "attach" {
					g += " " + s.Fast
				}
				got = append(got, g)
			}
			if strings.Join(got, "; ") != strings.Join(tc.steps, "; ") {
				t.Fatalf("steps %q, want %q (%+v)", got, tc.steps, steps)
			}
			if last := steps[len(steps)-1]; !strings.Contains(last.Note, tc.note) {
				t.Errorf("note %q lacks %q", last.Note, tc.note)
			}
		})
	}
}

// Only Apply-mode policies with the cache enabled provision; a volume two
// policies list is the higher priority's; memoryBudget is the size.
func TestWantedCaches(t *testing.T) {
	pol := func(name string, mode v1alpha1.TuningMode, enabled bool, prio int32, fast string, lvs ...string) *v1alpha1.StorageTuning {
		p := &v1alpha1.StorageTuning{}
		p.Name = name
		p.Spec.Mode, p.Spec.Priority = mode, prio
		p.Spec.Cache = v1alpha1.CachePolicy{Enabled: enabled, MemoryBudget: resource.NewQuantity(int64(prio+1)<<20, resource.BinarySI),
			Provision: &v1alpha1.CacheProvision{LogicalVolumes: lvs, FastDevice: fast}}
		return p
	}
	want := Wanted([]*v1alpha1.StorageTuning{
		pol("observe", v1alpha1.ModeObserve, true, 9, "ram", "vg/o"),
		pol("disabled", v1alpha1.ModeApply, false, 9, "ram", "vg/d"),
		pol("low", v1alpha1.ModeApply, true, 0, "", "vg/a", "vg/b"),
		pol("high", v1alpha1.ModeApply, true, 3, "/dev/sdz", "vg/b"),
	}, nil)
	if len(want) != 2 {
		t.Fatalf("wanted %v", want)
	}
	if w := want["vg/a"]; w.Fast != "ram" || w.SizeBytes != 1<<20 || w.Policy != "low" {
		t.Errorf("vg/a: %+v", w)
	}
	if w := want["vg/b"]; w.Fast != "/dev/sdz" || w.SizeBytes != 4<<20 || w.Policy != "high" {
		t.Errorf("vg/b: %+v", w)
	}
}
