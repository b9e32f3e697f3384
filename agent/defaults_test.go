package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// A device's queue defaults are kept at each start; a start that finds
// them changed (here read_ahead_kb, as a kernel upgrade changes it)
// reports the change in the device's status, with the kernels of both
// starts; the start after that, on the same defaults, reports it again
// as found then; defaults set back are a change of their own.
func TestDefaultsChangedAcrossStarts(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, nil)
	e := newGateEnv(t, "sda", p)
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	start := func(kernel string, at time.Time) *device {
		t.Helper()
		return e.restartedOn(t, p, &startHost{sentinel.Host{KernelRelease: kernel, Image: "Debian 12"}, at})
	}
	if d := start("6.16.1", t0); d.status.DefaultsChanged != nil {
		t.Fatalf("first start: %+v", d.status.DefaultsChanged)
	}
	ra := filepath.Join(e.root, "sys/block/sda/queue/read_ahead_kb")
	if err := os.WriteFile(ra, []byte("4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start("6.17.2", t0.Add(time.Hour))
	dc := d.status.DefaultsChanged
	if dc == nil || len(dc.Knobs) != 1 || dc.Knobs[0] != (v1alpha1.KnobChange{Knob: "read_ahead_kb", Old: "128", New: "4096"}) ||
		dc.With != "kernel 6.16.1 → 6.17.2" || !dc.Since.Time.Equal(t0) || !dc.DetectedTime.Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after the upgrade: %+v", dc)
	}
	// A restart on the same defaults reports the change still in force,
	// found when it was found (no new event).
	if again := start("6.17.2", t0.Add(2*time.Hour)).status.DefaultsChanged; again == nil || !reflect.DeepEqual(*again, *dc) {
		t.Errorf("a start on the same defaults: %+v, want %+v again", again, dc)
	}
	if err := os.WriteFile(ra, []byte("128\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	back := start("6.17.2", t0.Add(3*time.Hour)).status.DefaultsChanged
	if back == nil || back.Knobs[0] != (v1alpha1.KnobChange{Knob: "read_ahead_kb", Old: "4096", New: "128"}) || !back.DetectedTime.Time.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("defaults set back: %+v, want the change 4096 → 128 found now", back)
	}
}

// A device the agent changed and did not put back (a run killed after a
// change) is compared by its recorded original, not by the agent's own
// value, and without nr_requests (a scheduler switch resets it).
func TestDefaultsOfAChangedDevice(t *testing.T) {
	p := testTuning("fleet", 1, v1alpha1.ModeApply, nil)
	e := newGateEnv(t, "sda", p)
	e.allow = true
	before := e.d.readDefaults(e.act, sentinel.Host{}, time.Now())
	e.confirmed(t, 1)
	if _, ok := e.act.Original("sda"); !ok {
		t.Fatal("no change recorded")
	}
	sd, err := sysfs.Read(e.root, "sda") // as the next start reads it
	if err != nil {
		t.Fatal(err)
	}
	if sd.Scheduler == before.Knobs["scheduler"] {
		t.Fatalf("the change left the scheduler at %s", sd.Scheduler)
	}
	after := (&device{sys: sd}).readDefaults(e.act, sentinel.Host{}, time.Now())
	if after.Knobs["scheduler"] != before.Knobs["scheduler"] || after.Knobs["read_ahead_kb"] != before.Knobs["read_ahead_kb"] {
		t.Errorf("defaults of the changed device %v, want the original's %v", after.Knobs, before.Knobs)
	}
	if _, has := after.Knobs["nr_requests"]; has {
		t.Errorf("nr_requests compared on a changed device: %v", after.Knobs)
	}
}
