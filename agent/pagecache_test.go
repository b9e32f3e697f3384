package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// TestPageCacheDevs: the probe counts the disk and its partitions of each
// device whose policy governs read-ahead, and nothing of a device whose
// read-ahead is not governed, that is gone or whose tracing is paused.
func TestPageCacheDevs(t *testing.T) {
	root := t.TempDir()
	part := filepath.Join(sysfs.Dir(root, "block"), "sda", "sda1")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"partition": "1\n", "dev": "8:1\n"} {
		if err := os.WriteFile(filepath.Join(part, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev := func(name string, num uint32, ra bool, gone string) *device {
		d := &device{sys: sysfs.Device{Name: name, Dev: num}, ctrl: &deviceController{policy: Policy{ReadAhead: ra}}}
		d.status.Gone = gone
		return d
	}
	byName, all := pageCacheDevs(root, []*device{
		dev("sda", 8<<20, true, ""),        // governed, one partition
		dev("sdb", 8<<20|16, false, ""),    // read-ahead not governed
		dev("vdc", 254<<20|32, true, ""),   // governed, no sysfs entry: the disk alone
		dev("sdd", 8<<20|48, true, "gone"), // gone
		dev("sde", 8<<20|64, true, ""),     // paused
	}, []uint32{8<<20 | 64})
	if want := []uint32{8 << 20, 8<<20 | 1, 254<<20 | 32}; !slices.Equal(all, want) {
		t.Errorf("tracked %v, want %v", all, want)
	}
	if len(byName) != 2 || len(byName["sda"]) != 2 || len(byName["vdc"]) != 1 {
		t.Errorf("by device %v, want sda (disk and sda1) and vdc (disk)", byName)
	}
}
