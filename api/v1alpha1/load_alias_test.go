package v1alpha1

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestLoadRefusesAliasBomb (issue 44, F8): a config of 110 KB whose
// 2,000 aliases repeat a 100 KB string (200 MB expanded; the probe's
// 127 KB config with 9,000 aliases took more than 4.3 GB) is refused with
// one line naming the file, the line and the limit, before the aliases
// are expanded: loading it allocates less than 64 MiB.
func TestLoadRefusesAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\n  annotations:\n    a: &a \"")
	b.WriteString(strings.Repeat("x", 100<<10))
	b.WriteString("\"\nspec:\n  devices:\n    include: [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*a")
	}
	b.WriteString("]\n")
	p := writeFile(t, "bomb.yaml", b.String())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := LoadStorageTuningFile(p)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of YAML; loading allocated %d MiB: %v", b.Len(), alloc>>20, err)
	want := fmt.Sprintf("%s:9: YAML aliases expand the document past %d bytes (2 MiB), the limit", p, MaxExpandedYAMLBytes)
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v\nwant one line starting %q", err, want)
	}
	if !errors.Is(err, ErrYAMLExpansion) {
		t.Errorf("error %v does not wrap ErrYAMLExpansion", err)
	}
	if alloc > 64<<20 {
		t.Errorf("loading the bomb allocated %d MiB, want < 64 MiB", alloc>>20)
	}
}

// TestLoadAcceptsModestAliases: aliases that expand the document within the
// limit are fine.
func TestLoadAcceptsModestAliases(t *testing.T) {
	content := "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\n" +
		"spec:\n  devices: &d\n    include: [loop9]\n  schedulers: {candidates: &c [none, mq-deadline], default: none}\n"
	st, err := LoadStorageTuningFile(writeFile(t, "ok.yaml", content))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Spec.Devices.Include) != 1 {
		t.Errorf("devices %+v", st.Spec.Devices)
	}
}
