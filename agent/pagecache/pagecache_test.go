package pagecache

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

// TestTracked: the probe counts the disk and its partitions of each
// device whose policy governs read-ahead, and nothing of a device whose
// read-ahead is not governed, that is gone or whose tracing is paused.
func TestTracked(t *testing.T) {
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
	dev := func(name string, num uint32, ra bool, gone string) Device {
		return Device{Name: name, Dev: num, ReadAhead: ra, Gone: gone != ""}
	}
	byName, all, light := tracked(root, []Device{
		dev("sda", 8<<20, true, ""),        // governed, one partition
		dev("sdb", 8<<20|16, false, ""),    // read-ahead not governed
		dev("vdc", 254<<20|32, true, ""),   // governed, no sysfs entry: the disk alone
		dev("sdd", 8<<20|48, true, "gone"), // gone
		dev("sde", 8<<20|64, true, ""),     // paused
	}, []uint32{8<<20 | 64})
	if want := []uint32{8 << 20, 8<<20 | 1, 254<<20 | 32, 8<<20 | 64}; !slices.Equal(all, want) {
		t.Errorf("tracked %v, want %v", all, want)
	}
	if want := []uint32{8<<20 | 64}; !slices.Equal(light, want) {
		t.Errorf("counted lightly %v, want %v (the paused device)", light, want)
	}
	if len(byName) != 3 || len(byName["sda"]) != 2 || len(byName["vdc"]) != 1 || len(byName["sde"]) != 1 {
		t.Errorf("by device %v, want sda (disk and sda1), vdc (disk) and sde (disk)", byName)
	}
}

// TestWatchFirstWindow: a device's counts start from zero when it
// is tracked, so its first window, the agent's first included, is
// measured, and a device tracked again (its read-ahead governed again, or
// back after it was gone) counts from zero again. (A paused device stays
// tracked, lightly, and its counts go on: tracked.)
func TestWatchFirstWindow(t *testing.T) {
	w := &Watch{}
	w.zeroNew(map[string][]uint32{"sda": {8 << 20, 8<<20 | 1}})
	w.advance(map[uint32]tracer.PageCacheStats{8 << 20: {UsedPages: 10, WastedPages: 990}, 8<<20 | 1: {UsedPages: 5}})
	if got := w.Window("sda"); !got.Measured || got.Used != 15 || got.Wasted != 990 {
		t.Errorf("first window = %+v, want measured, 15 used and 990 wasted", got)
	}
	w.zeroNew(map[string][]uint32{}) // no longer governed
	if got := w.Window("sda"); got.Measured {
		t.Errorf("a device not tracked: %+v, want not measured", got)
	}
	w.zeroNew(map[string][]uint32{"sda": {8 << 20}}) // governed again: the probe restarts from zero
	w.advance(map[uint32]tracer.PageCacheStats{8 << 20: {UsedPages: 7, WastedPages: 3}})
	if got := w.Window("sda"); !got.Measured || got.Used != 7 || got.Wasted != 3 {
		t.Errorf("the window after it was tracked again = %+v, want 7 used and 3 wasted", got)
	}
}
