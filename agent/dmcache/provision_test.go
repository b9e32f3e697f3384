package dmcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	lvsCmd = "lvs --config C -a --noheadings --separator | -o lv_name,segtype,pool_lv,lv_tags,devices,cache_mode,lv_kernel_major,lv_kernel_minor vg0"
	pvsCmd = "pvs --config C --noheadings --separator | -o pv_name,pv_tags,pv_missing,pv_pe_alloc_count --select vg_name=vg0"
	// an active linear LV vg0/data, 253:0
	lvsLinear = "  data|linear|||/dev/vda(0)||253|0\n"
)

// provFake returns a Tool running testdata/fake-lvm.sh as lvm with
// LVMArgs "--config C" and a fake sysfs: zram-control's hot_add answers
// 1, zram1 and the LV 253:0 have the given logical block sizes. It
// returns the tool, the commands run and a reader of sysfs files.
func provFake(t *testing.T, files map[string]string, zramBlock, lvBlock string) (*Tool, func() []string, func(string) string) {
	t.Helper()
	tool, log := fake(t, files)
	prog, err := filepath.Abs(filepath.Join("testdata", "fake-lvm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	tool.LVM, tool.LVChange, tool.LVMArgs = prog, "", []string{"--config", "C"}
	tool.Sys = t.TempDir()
	for rel, v := range map[string]string{
		"class/zram-control/hot_add": "1\n", "class/zram-control/hot_remove": "",
		"block/zram1/disksize": "0\n", "block/zram1/reset": "",
		"class/block/zram1/queue/logical_block_size": zramBlock, "dev/block/253:0/queue/logical_block_size": lvBlock,
	} {
		p := filepath.Join(tool.Sys, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) string {
		b, _ := os.ReadFile(filepath.Join(tool.Sys, rel))
		return string(b)
	}
	return tool, log, read
}

func sameCmds(t *testing.T, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// attachZRAMCmds are AttachCache's commands for vg0/data on zram1 up to
// the lvcreate of 7 extents.
var attachZRAMCmds = []string{
	lvsCmd,
	"pvs --config C --noheadings -o pv_uuid /dev/zram1",
	"pvcreate --config C -q /dev/zram1",
	"vgextend --config C -q vg0 /dev/zram1",
	"pvchange --config C -q --addtag shadowtune --addtag shadowtune_zram /dev/zram1",
	"pvs --config C --noheadings --nosuffix --units b --separator | -o pv_pe_count,pv_pe_alloc_count,vg_extent_size /dev/zram1",
	"lvcreate --config C -q -y -n data_stcache -l 7 --addtag shadowtune vg0 /dev/zram1",
}

func TestAttachCacheZRAM(t *testing.T) {
	tool, log, read := provFake(t, map[string]string{"lvm.lvs": lvsLinear, "lvm.pvs.2": "  8|0|4194304\n"}, "4096\n", "4096\n")
	if err := tool.AttachCache(context.Background(), "vg0", "data", FastDevice{ZRAM: true}, 30<<20, 128); err != nil {
		t.Fatal(err)
	}
	want := append(append([]string{}, attachZRAMCmds...),
		"lvconvert --config C -q -y --type cache --cachevol data_stcache --cachemode writethrough --chunksize 128s vg0/data")
	sameCmds(t, log(), want)
	if got := read("block/zram1/disksize"); got != "31457280" {
		t.Errorf("zram1 disksize %q, want 31457280 (30 MiB)", got)
	}
	if read("block/zram1/reset") != "" || read("class/zram-control/hot_remove") != "" {
		t.Errorf("zram1 was reset or removed after a successful attach")
	}
}

func TestAttachCacheUndo(t *testing.T) {
	files := map[string]string{"lvm.lvs": lvsLinear, "lvm.pvs.2": "  8|0|4194304\n",
		"lvm.lvconvert.rc": "5", "lvm.lvconvert.err": "  Cache data blocks 409600 and chunk size 128 exceed max chunks 1000000.\n"}
	tool, log, read := provFake(t, files, "4096\n", "4096\n")
	err := tool.AttachCache(context.Background(), "vg0", "data", FastDevice{ZRAM: true}, 30<<20, 0)
	if err == nil || !strings.Contains(err.Error(), "exceed max chunks") ||
		!strings.HasSuffix(err.Error(), "; undone: lvremove vg0/data_stcache, vgreduce vg0 /dev/zram1, pvremove /dev/zram1, zram1 reset and hot_remove") {
		t.Errorf("AttachCache = %v, want lvconvert's error and all undone", err)
	}
	want := append(append([]string{}, attachZRAMCmds...),
		"lvconvert --config C -q -y --type cache --cachevol data_stcache --cachemode writethrough vg0/data",
		"lvremove --config C -q -y vg0/data_stcache", "vgreduce --config C -q vg0 /dev/zram1", "pvremove --config C -q /dev/zram1")
	sameCmds(t, log(), want)
	if read("block/zram1/reset") != "1" || read("class/zram-control/hot_remove") != "1" {
		t.Errorf("zram1 reset %q, hot_remove %q; want 1 and 1", read("block/zram1/reset"), read("class/zram-control/hot_remove"))
	}
}

func TestAttachCacheUndoFails(t *testing.T) {
	files := map[string]string{"lvm.lvs": lvsLinear,
		"lvm.vgextend.rc": "5", "lvm.vgextend.err": "  Devices have inconsistent logical block sizes (512 and 4096).\n",
		"lvm.pvremove.rc": "5", "lvm.pvremove.err": "  Device /dev/zram1 busy.\n"}
	tool, log, read := provFake(t, files, "4096\n", "4096\n")
	err := tool.AttachCache(context.Background(), "vg0", "data", FastDevice{ZRAM: true}, 30<<20, 0)
	if err == nil || !strings.Contains(err.Error(), "inconsistent logical block sizes") ||
		!strings.Contains(err.Error(), "; nothing undone; undoing failed at pvremove /dev/zram1, not undone: zram1 reset and hot_remove: ") {
		t.Errorf("AttachCache = %v, want vgextend's error and the failed undo", err)
	}
	sameCmds(t, log(), append(append([]string{}, attachZRAMCmds[:4]...), "pvremove --config C -q /dev/zram1"))
	if read("block/zram1/reset") != "" {
		t.Errorf("zram1 was reset under its PV")
	}
}

func TestAttachCacheRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("block size", func(t *testing.T) {
		tool, log, read := provFake(t, map[string]string{"lvm.lvs": lvsLinear}, "4096\n", "512\n")
		err := tool.AttachCache(ctx, "vg0", "data", FastDevice{ZRAM: true}, 30<<20, 0)
		if !errors.Is(err, ErrBlockSize) || !strings.HasSuffix(err.Error(), "/dev/zram1 4096 bytes, the LV 512; undone: zram1 reset and hot_remove") {
			t.Errorf("AttachCache = %v, want ErrBlockSize, zram undone", err)
		}
		sameCmds(t, log(), []string{lvsCmd})
		if read("class/zram-control/hot_remove") != "1" {
			t.Errorf("zram1 not removed")
		}
	})
	t.Run("already a PV", func(t *testing.T) {
		dev := filepath.Join(t.TempDir(), "sdz")
		if err := os.WriteFile(dev, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		tool, log, _ := provFake(t, map[string]string{"lvm.lvs": lvsLinear, "lvm.pvs": "  Qhl3ld-zUDL\n"}, "", "512\n")
		if err := os.MkdirAll(filepath.Join(tool.Sys, "class/block/sdz/queue"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tool.Sys, "class/block/sdz/queue/logical_block_size"), []byte("512\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := tool.AttachCache(ctx, "vg0", "data", FastDevice{Path: dev}, 1<<30, 64)
		if err == nil || !strings.Contains(err.Error(), "is a PV already (uuid Qhl3ld-zUDL)") {
			t.Errorf("AttachCache = %v, want a refusal", err)
		}
		sameCmds(t, log(), []string{lvsCmd, "pvs --config C --noheadings -o pv_uuid " + dev})
	})
	for _, tc := range []struct {
		name, lvs string
		fast      FastDevice
		size      int64
		chunk     uint64
		msg       string
	}{
		{"cached", "  data|cache|[x_cvol]||data_corig(0)|writethrough|253|0\n", FastDevice{ZRAM: true}, 1 << 20, 0, "already cached"},
		{"inactive", "  data|linear|||/dev/vda(0)||-1|-1\n", FastDevice{ZRAM: true}, 1 << 20, 0, "not active"},
		{"missing", "  other|linear|||/dev/vda(0)||253|0\n", FastDevice{ZRAM: true}, 1 << 20, 0, "no such LV"},
		{"no device", lvsLinear, FastDevice{}, 1 << 20, 0, "must be zram or a path"},
		{"size", lvsLinear, FastDevice{ZRAM: true}, 0, 0, "cache size 0 bytes"},
		{"chunk", lvsLinear, FastDevice{ZRAM: true}, 1 << 20, 100, "chunk of 100 sectors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, log, read := provFake(t, map[string]string{"lvm.lvs": tc.lvs}, "4096\n", "4096\n")
			err := tool.AttachCache(ctx, "vg0", "data", tc.fast, tc.size, tc.chunk)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("AttachCache = %v, want %q", err, tc.msg)
			}
			if got := log(); len(got) > 1 {
				t.Errorf("commands %q, want at most lvs", got)
			}
			if read("block/zram1/disksize") != "0\n" {
				t.Errorf("a zram device was set up")
			}
		})
	}
}

// lvsCached is vg0/data cached by AttachCache on zram1, cvol tags tags.
func lvsCached(tags, dev string) string {
	return "  data|cache|[data_stcache_cvol]||data_corig(0)|writethrough|253|0\n" +
		"  [data_corig]|linear|||/dev/vda(0)||253|1\n" +
		"  [data_stcache_cvol]|linear||" + tags + "|" + dev + "(0)||253|2\n"
}

func TestDetachCache(t *testing.T) {
	tool, log, read := provFake(t, map[string]string{
		"lvm.lvs": lvsCached("shadowtune", "/dev/zram1"),
		"lvm.pvs": "  /dev/vda|||24\n  /dev/zram1|shadowtune,shadowtune_zram||7\n"}, "4096\n", "4096\n")
	if err := tool.DetachCache(context.Background(), "vg0", "data"); err != nil {
		t.Fatal(err)
	}
	sameCmds(t, log(), []string{lvsCmd, pvsCmd, "lvconvert --config C -q -y --uncache vg0/data",
		"vgreduce --config C -q vg0 /dev/zram1", "pvremove --config C -q /dev/zram1"})
	if read("block/zram1/reset") != "1" || read("class/zram-control/hot_remove") != "1" {
		t.Errorf("zram1 reset %q, hot_remove %q; want 1 and 1", read("block/zram1/reset"), read("class/zram-control/hot_remove"))
	}
	// A brd PV: no zram tag, the device is left.
	tool, log, read = provFake(t, map[string]string{
		"lvm.lvs": lvsCached("shadowtune", "/dev/ram0"),
		"lvm.pvs": "  /dev/vda|||24\n  /dev/ram0|shadowtune||7\n"}, "4096\n", "4096\n")
	if err := tool.DetachCache(context.Background(), "vg0", "data"); err != nil {
		t.Fatal(err)
	}
	sameCmds(t, log(), []string{lvsCmd, pvsCmd, "lvconvert --config C -q -y --uncache vg0/data",
		"vgreduce --config C -q vg0 /dev/ram0", "pvremove --config C -q /dev/ram0"})
	if read("class/zram-control/hot_remove") != "" {
		t.Errorf("a zram device was removed for a brd PV")
	}
}

func TestDetachCacheRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, lvs string
		is        error
		msg       string
	}{
		{"not ours", lvsCached("", "/dev/ram0"), ErrNotOurs, "dmcache: vg0/data: cache not attached by shadowtune (no shadowtune tag): cache data_stcache_cvol, tags []"},
		{"other tag", lvsCached("mine", "/dev/ram0"), ErrNotOurs, `tags ["mine"]`},
		{"not cached", lvsLinear, ErrNotCached, "dmcache: vg0/data: logical volume is not cached (segment type linear)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, log, _ := provFake(t, map[string]string{"lvm.lvs": tc.lvs}, "4096\n", "4096\n")
			err := tool.DetachCache(context.Background(), "vg0", "data")
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("DetachCache = %v, want %v with %q", err, tc.is, tc.msg)
			}
			sameCmds(t, log(), []string{lvsCmd})
		})
	}
}

func TestRecoverMissing(t *testing.T) {
	lvs := strings.ReplaceAll(lvsCached("shadowtune", "[unknown]"), "|253|", "|-1|")
	lvs = strings.ReplaceAll(strings.ReplaceAll(lvs, "|0\n", "|-1\n"), "|1\n", "|-1\n")
	lvs = strings.ReplaceAll(lvs, "|2\n", "|-1\n")
	tool, log, _ := provFake(t, map[string]string{
		"lvm.lvs": lvs, "lvm.pvs": "  /dev/vda|||24\n  [unknown]|shadowtune|missing|0\n"}, "", "")
	got, err := tool.RecoverMissing(context.Background(), "vg0")
	if err != nil || !reflect.DeepEqual(got, []string{"data"}) {
		t.Errorf("RecoverMissing = %q, %v; want [data]", got, err)
	}
	sameCmds(t, log(), []string{lvsCmd, "lvconvert --config C -q -y --uncache vg0/data", pvsCmd,
		"vgreduce --config C -q --removemissing vg0"})
}

func TestRecoverMissingLeavesOthers(t *testing.T) {
	lvs := lvsCached("shadowtune", "[unknown]") + // ours but writeback by now
		"  foreign|cache|[f_cvol]||foreign_corig(0)|writethrough|-1|-1\n" +
		"  [foreign_corig]|linear|||/dev/vda(24)||-1|-1\n" +
		"  [f_cvol]|linear|||[unknown](0)||-1|-1\n" +
		"  ok|cache|[ok_stcache_cvol]||ok_corig(0)|writethrough|253|5\n" +
		"  [ok_corig]|linear|||/dev/vda(30)||253|6\n" +
		"  [ok_stcache_cvol]|linear||shadowtune|/dev/ram0(0)||253|7\n"
	lvs = strings.Replace(lvs, "|writethrough|253|0", "|writeback|253|0", 1)
	tool, log, _ := provFake(t, map[string]string{
		"lvm.lvs": lvs, "lvm.pvs": "  /dev/vda|||40\n  [unknown]|shadowtune|missing|7\n  [unknown]||missing|2\n  /dev/ram0|shadowtune||7\n"}, "", "")
	got, err := tool.RecoverMissing(context.Background(), "vg0")
	if len(got) != 0 || !errors.Is(err, ErrWriteback) || !strings.Contains(err.Error(), "vg0: 2 missing PVs, 0 of them shadowtune's and empty: vgreduce --removemissing not run") {
		t.Errorf("RecoverMissing = %q, %v; want nothing recovered, the writeback cache and the foreign PV reported", got, err)
	}
	sameCmds(t, log(), []string{lvsCmd, pvsCmd})
}

func TestSetModeLVMSubcommand(t *testing.T) {
	files := map[string]string{
		"info.vg0-data":      "253|0|LVM-x|vg0-data\n",
		"table.vg0-data":     fixture(t, "table-lvm.txt"),
		"status.vg0-data":    fixture(t, "status-lvm.txt"),
		"status.vg0-data.2":  strings.Replace(fixture(t, "status-lvm.txt"), "metadata2 writethrough", "metadata2 passthrough", 1),
		"splitname.vg0-data": "vg0|data|\n",
	}
	tool, log, _ := provFake(t, files, "", "")
	prog, _ := filepath.Abs(filepath.Join("testdata", "fake-dmsetup.sh"))
	tool.DMSetup = prog
	if err := tool.SetMode(context.Background(), "vg0-data", Passthrough); err != nil {
		t.Fatal(err)
	}
	if got := log(); !strings.Contains(strings.Join(got, "\n"), "\nlvchange --config C --cachemode passthrough vg0/data\n") {
		t.Errorf("commands:\n%s\nwant `lvm lvchange --config C --cachemode passthrough vg0/data`", strings.Join(got, "\n"))
	}
}
