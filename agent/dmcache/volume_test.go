package dmcache

import (
	"context"
	"errors"
	"testing"
)

// Volume reads the LV's cache: ours on a missing PV, active with its
// block size, and not found for a VG or an LV that does not exist.
func TestVolume(t *testing.T) {
	lvs := "  data|cache|[data_stcache_cvol]|||writethrough|253|0\n  [data_stcache_cvol]|linear||shadowtune|[unknown](0)||-1|-1\n"
	tool, _, _ := provFake(t, map[string]string{"lvm.vgs": "  vg0\n", "lvm.lvs": lvs}, "4096\n", "512\n")
	v, err := tool.Volume(context.Background(), "vg0", "data")
	if want := (Volume{Cached: true, Ours: true, Missing: true, Active: true, BlockSize: 512}); err != nil || v != want {
		t.Fatalf("Volume: %+v, %v; want %+v", v, err, want)
	}
	if _, err := tool.Volume(context.Background(), "vg0", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing LV: %v, want ErrNotFound", err)
	}
	if _, err := tool.Volume(context.Background(), "vg9", "data"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing VG: %v, want ErrNotFound", err)
	}
}

// Tidy removes the tagged, unconverted cache volume and the tagged empty
// PVs an interrupted attach left, and nothing else.
func TestTidy(t *testing.T) {
	lvs := lvsLinear + "  data_stcache|linear||shadowtune|/dev/zram1(0)||253|1\n"
	pvs := "  /dev/vda|||10\n  /dev/zram1|shadowtune,shadowtune_zram||0\n  /dev/vdb|shadowtune||3\n"
	tool, log, read := provFake(t, map[string]string{"lvm.lvs": lvs, "lvm.pvs": pvs}, "4096\n", "4096\n")
	removed, err := tool.Tidy(context.Background(), "vg0", "data")
	if err != nil || len(removed) != 2 || removed[0] != "vg0/data_stcache" || removed[1] != "/dev/zram1" {
		t.Fatalf("Tidy: %v, %v", removed, err)
	}
	sameCmds(t, log(), []string{
		lvsCmd,
		"lvremove --config C -q -y vg0/data_stcache",
		pvsCmd,
		"vgreduce --config C -q vg0 /dev/zram1",
		"pvremove --config C -q /dev/zram1",
	})
	if got := read("class/zram-control/hot_remove"); got != "1" {
		t.Errorf("zram1 not removed: hot_remove %q", got)
	}
}
