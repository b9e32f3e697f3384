package selection

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// fakeHost copies the fake sysfs tree of package sysfs (sda, nvme0n1, vda,
// loop3, loop7, zram0, dm-0) into a temporary directory and returns it.
func fakeHost(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS("../sysfs/testdata")); err != nil {
		t.Fatal(err)
	}
	return dst
}

// testTuning returns a defaulted policy.
func testTuning(name string, gen int64, mode v1alpha1.TuningMode, mutate func(*v1alpha1.StorageTuningSpec)) *v1alpha1.StorageTuning {
	st := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen, UID: types.UID("uid-" + name)}}
	st.Spec.Mode = mode
	if mutate != nil {
		mutate(&st.Spec)
	}
	st.Default()
	return st
}

// fakeActuator is an actuator over a fake host's sysfs (fakeHost), with
// its state in a temporary directory; it is closed at the test's end.
func fakeActuator(t *testing.T) (root string, fake *actuatetest.Store, act *actuate.Actuator) {
	t.Helper()
	root = fakeHost(t)
	fake = actuatetest.New(root)
	act, err := actuate.NewWithStore(fake, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { act.Close() })
	return root, fake, act
}

func TestSelectDevicesPerPolicy(t *testing.T) {
	root := fakeHost(t)
	sdOnly := testTuning("sd-apply", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
		s.Devices.Include = []string{"sd*"}
		s.Priority = 10
	})
	all := testTuning("all-observe", 1, v1alpha1.ModeObserve, nil)
	loops := testTuning("loops", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) {
		s.Devices.Include = []string{"loop3"}
		s.Priority = 5
	})
	zoned := testTuning("zone-a", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
		s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
		s.Priority = 100
	})
	// Same priority as all-observe, earlier name: wins the tie.
	aFirst := testTuning("a-first", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) {
		s.Devices.Include = []string{"vda"}
	})
	deleting := testTuning("deleting", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) { s.Priority = 1000 })
	deleting.DeletionTimestamp = ptr.To(metav1.Now())

	cases := []struct {
		name     string
		policies []*v1alpha1.StorageTuning
		labels   map[string]string
		want     map[string]string // device → governing policy
		others   []string
	}{
		{"none", nil, nil, map[string]string{}, []string{"nvme0n1", "sda", "vda"}},
		{"priority then name", []*v1alpha1.StorageTuning{all, sdOnly, loops, aFirst, zoned, deleting}, map[string]string{"zone": "b"},
			map[string]string{"sda": "sd-apply", "nvme0n1": "all-observe", "vda": "a-first", "loop3": "loops"}, nil},
		{"node selector", []*v1alpha1.StorageTuning{all, sdOnly, loops, zoned}, map[string]string{"zone": "a"},
			// zone-a governs every device (priority 100), but with no
			// include glob it never selects a loop device: loop3 is
			// left ungoverned, as the operator's rule says zone-a
			// governs it.
			map[string]string{"sda": "zone-a", "nvme0n1": "zone-a", "vda": "zone-a"}, nil},
		{"only sd", []*v1alpha1.StorageTuning{sdOnly}, nil, map[string]string{"sda": "sd-apply"}, []string{"nvme0n1", "vda"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel, others, err := Select(root, c.policies, c.labels)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, s := range sel {
				got[s.Device.Name] = s.Policy.Name
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("governing %v, want %v", got, c.want)
			}
			var on []string
			for _, o := range others {
				on = append(on, o.Name)
			}
			if !slices.Equal(on, c.others) {
				t.Errorf("others %v, want %v", on, c.others)
			}
		})
	}
}

func TestMinWindowAndBudget(t *testing.T) {
	a := testTuning("a", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) {
		s.Evaluation.Window = &metav1.Duration{Duration: 3 * time.Second}
		s.Evaluation.CPUBudgetPercent = ptr.To[int32](20)
	})
	b := testTuning("b", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) {
		s.Evaluation.Window = &metav1.Duration{Duration: time.Second}
	})
	sel := []Governed{{Policy: a}, {Policy: b}}
	if w := MinWindow(sel); w != time.Second {
		t.Errorf("window %s, want 1s", w)
	}
	if p := CPUBudgetPct(sel); p != 20 {
		t.Errorf("budget %d%%, want 20", p)
	}
}

func TestRestoreUngoverned(t *testing.T) {
	root, fake, act := fakeActuator(t)
	before := map[string]map[string]string{}
	var err error
	for _, dev := range []string{"sda", "nvme0n1", "vda"} {
		if before[dev], err = fake.Snapshot(dev); err != nil {
			t.Fatal(err)
		}
		if _, err := act.Apply(dev, actuate.Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 64}); err != nil {
			t.Fatal(err)
		}
	}
	apply := testTuning("apply", 1, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) { s.Devices.Include = []string{"sda"} })
	observe := testTuning("observe", 1, v1alpha1.ModeObserve, func(s *v1alpha1.StorageTuningSpec) { s.Devices.Include = []string{"nvme0n1"} })
	sel, _, err := Select(root, []*v1alpha1.StorageTuning{apply, observe}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreUngoverned(act, sel, nil, testr.New(t)); err != nil {
		t.Fatal(err)
	}
	// sda stays as applied (still governed in Apply mode); nvme0n1
	// (Observe) and vda (no policy) are back exactly as they were.
	recs := act.Originals()
	if _, ok := recs["sda"]; !ok || len(recs) != 1 {
		t.Fatalf("records %v, want only sda", recs)
	}
	for _, dev := range []string{"nvme0n1", "vda"} {
		now, err := fake.Snapshot(dev)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(now, before[dev]) {
			t.Errorf("%s not restored exactly: %v, want %v", dev, now, before[dev])
		}
	}
	if s, _ := act.Read("sda"); s.Scheduler != "bfq" {
		t.Errorf("sda scheduler %q, want bfq kept", s.Scheduler)
	}
}
