package dmcache

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shadowtune/shadowtune/agent/actuate"
)

// multiCacheTool is several dm-caches by name; Info of any other name is
// "not a cache", as ErrNotCache is for a dm-linear device.
type multiCacheTool map[string]CacheInfo

func (m multiCacheTool) Info(name string) (CacheInfo, error) {
	if c, ok := m[name]; ok {
		return c, nil
	}
	return CacheInfo{}, fmt.Errorf("%s: not a cache", name)
}
func (m multiCacheTool) Mode(string) (string, uint64, error) { return "", 0, actuate.ErrDeviceGone }
func (m multiCacheTool) SetMode(string, string) error        { return nil }

// fakeDM makes HOSTROOT/sys/block/DM a device-mapper device named name,
// MAJOR:MINOR mm, on slaves (each gets DM as a holder).
func fakeDM(t *testing.T, root, dm, name, mm string, slaves ...string) {
	t.Helper()
	for _, f := range []struct{ path, text string }{{"dm/name", name}, {"dev", mm}} {
		p := filepath.Join(root, "sys/block", dm, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range slaves {
		for _, d := range []string{filepath.Join(dm, "slaves", s), filepath.Join(s, "holders", dm)} {
			if err := os.MkdirAll(filepath.Join(root, "sys/block", d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// An LVM cached LV on a cachevol (lvconvert --type cache --cachevol): the
// PV's holder is the LV's _corig sub-LV (dm-linear on the PV), whose
// holder is the cache; the cache's own sub-LVs are on the fast device.
// Find climbs through the _corig to the cache, but not through a
// device-mapper device that spans another disk too, and not to a cache
// whose origin is not the device it climbed from.
func TestFindCacheThroughLVMOrigin(t *testing.T) {
	root := t.TempDir()
	fakeDM(t, root, "dm-0", "pvg-fast_cvol", "254:0", "ram0")
	fakeDM(t, root, "dm-1", "pvg-fast_cvol-cdata", "254:1", "dm-0")
	fakeDM(t, root, "dm-2", "pvg-fast_cvol-cmeta", "254:2", "dm-0")
	fakeDM(t, root, "dm-3", "pvg-data_corig", "254:3", "vdb")
	fakeDM(t, root, "dm-4", "pvg-data", "254:4", "dm-1", "dm-2", "dm-3")
	fakeDM(t, root, "dm-5", "pvg-other", "254:5", "vdb") // a plain LV beside it
	tool := multiCacheTool{"pvg-data": {Name: "pvg-data", Origin: "254:3", BlockSectors: 128, Mode: "passthrough"}}
	info, dm, ok := Find(root, "vdb", "254:16", tool)
	if !ok || dm != "dm-4" || info.Name != "pvg-data" {
		t.Fatalf("Find(vdb) = %+v, %q, %v; want pvg-data on dm-4", info, dm, ok)
	}
	// The fast device's stack leads to the cache too, but the cache's
	// origin is not on it: not found.
	if info, dm, ok := Find(root, "ram0", "1:0", tool); ok {
		t.Errorf("Find(ram0) = %+v, %q: the cache device's disk is not the origin", info, dm)
	}
	// A _corig spanning two disks (an LV on two PVs) is not climbed: the
	// disk sees only part of the origin's requests.
	root2 := t.TempDir()
	fakeDM(t, root2, "dm-3", "pvg-data_corig", "254:3", "vdb", "vdc")
	fakeDM(t, root2, "dm-4", "pvg-data", "254:4", "dm-3")
	if info, dm, ok := Find(root2, "vdb", "254:16", tool); ok {
		t.Errorf("Find through a two-disk origin = %+v, %q", info, dm)
	}
	// A raw dm-cache on the disk itself is still found directly.
	root3 := t.TempDir()
	fakeDM(t, root3, "dm-0", "cached", "254:0", "vdb")
	raw := multiCacheTool{"cached": {Name: "cached", Origin: "254:16"}}
	if _, dm, ok := Find(root3, "vdb", "254:16", raw); !ok || dm != "dm-0" {
		t.Errorf("Find of a raw dm-cache: %q, %v", dm, ok)
	}
}
