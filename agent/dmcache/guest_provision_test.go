//go:build vmguest

// The in-guest tests of e2e/vm TestDMCacheProvision*: AttachCache,
// DetachCache and RecoverMissing on the 6.1 guest with lvm2 2.03.16. The
// script sets up the VGs named by DMP_* (and DMC_LVM_CONFIG); each test
// skips when its variables are not set.

package dmcache

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// zramDevices lists /sys/block/zram*.
func zramDevices(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob("/sys/block/zram*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// leftovers fails t when vg has LVs other than want or more than pvs
// PVs, or a missing one.
func leftovers(t *testing.T, tool *Tool, vg string, want []string, pvs int) {
	t.Helper()
	ctx := context.Background()
	lvs, err := tool.lvReport(ctx, vg)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(lvs); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: LVs %q, want %q", vg, got, want)
	}
	rows, err := tool.pvReport(ctx, vg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rows {
		if p.Missing {
			t.Errorf("%s: missing PV %+v", vg, p)
		}
	}
	if len(rows) != pvs {
		t.Errorf("%s: %d PVs %+v, want %d", vg, len(rows), rows, pvs)
	}
}

// TestGuestProvisionZRAM: a 32 MiB zram cache attached online to
// DMP_VG/DMP_LV (on a 4096-byte-block disk) serves zipf reads with hits,
// switches passthrough and back, and is detached leaving nothing: no
// zram device, no PV or LV of its own.
func TestGuestProvisionZRAM(t *testing.T) {
	vg, lv := env(t, "DMP_VG"), env(t, "DMP_LV")
	ctx := context.Background()
	tool := guestTool()
	zBefore := zramDevices(t)
	if err := tool.AttachCache(ctx, vg, lv, FastDevice{ZRAM: true}, 32<<20, 128); err != nil {
		t.Fatal(err)
	}
	name := vg + "-" + lv
	d, err := tool.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attached: table %q; zram %q", d.Table.String(), zramDevices(t))
	if !d.LVM || d.Table.Mode != Writethrough || d.Status.Mode != Writethrough || d.Table.BlockSectors != 128 {
		t.Errorf("after AttachCache: LVM %v, mode %s/%s, block %d sectors; want an LVM writethrough cache of 128", d.LVM, d.Table.Mode, d.Status.Mode, d.Table.BlockSectors)
	}
	fio := exec.Command("fio", "--name=z", "--filename=/dev/mapper/"+name, "--direct=1", "--ioengine=libaio", "--iodepth=16",
		"--rw=randread", "--bs=4k", "--random_distribution=zipf:1.2", "--time_based", "--runtime=6", "--output-format=terse", "--terse-version=3")
	out, err := fio.CombinedOutput()
	if err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	d, err = tool.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(string(out), ";")
	hitPct := 100 * float64(d.Status.ReadHits) / float64(max(1, d.Status.ReadHits+d.Status.ReadMisses))
	t.Logf("fio zipf(1.2) 4k iodepth 16, 6 s: %s IOPS; read hits %d, misses %d (%.1f %%), promotions %d, %d/%d blocks",
		f[min(7, len(f)-1)], d.Status.ReadHits, d.Status.ReadMisses, hitPct, d.Status.Promotions, d.Status.UsedBlocks, d.Status.TotalBlocks)
	t.Logf("provision-hits %d %d", d.Status.ReadHits, d.Status.ReadMisses)
	if d.Status.ReadHits == 0 {
		t.Errorf("no read hits after fio: %+v", d.Status)
	}
	for _, m := range []Mode{Passthrough, Writethrough} {
		if err := tool.SetMode(ctx, name, m); err != nil {
			t.Fatalf("SetMode(%s): %v", m, err)
		}
		if d, err := tool.Get(ctx, name); err != nil || d.Status.Mode != m {
			t.Errorf("after SetMode(%s): %v, mode %s", m, err, d.Status.Mode)
		}
	}
	if err := tool.DetachCache(ctx, vg, lv); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Get(ctx, name); !errors.Is(err, ErrNotCache) {
		t.Errorf("Get after DetachCache = %v, want ErrNotCache (a linear LV)", err)
	}
	if z := zramDevices(t); !reflect.DeepEqual(z, zBefore) {
		t.Errorf("zram devices after DetachCache %q, before AttachCache %q", z, zBefore)
	}
	leftovers(t, tool, vg, []string{lv}, 1)
}

// TestGuestProvisionRefuse: a zram cache is refused for an LV on a
// 512-byte-block disk (ErrBlockSize) and nothing is left; an untagged
// cache (DMP_FOREIGN, attached by hand) is not detached (ErrNotOurs).
func TestGuestProvisionRefuse(t *testing.T) {
	small, foreign := env(t, "DMP_SMALL"), env(t, "DMP_FOREIGN")
	ctx := context.Background()
	tool := guestTool()
	vg, lv, _ := strings.Cut(small, "/")
	before, err := tool.lvReport(ctx, vg)
	if err != nil {
		t.Fatal(err)
	}
	pvBefore, err := tool.pvReport(ctx, vg)
	if err != nil {
		t.Fatal(err)
	}
	zBefore := zramDevices(t)
	err = tool.AttachCache(ctx, vg, lv, FastDevice{ZRAM: true}, 16<<20, 0)
	t.Logf("AttachCache(%s, zram): %v", small, err)
	if !errors.Is(err, ErrBlockSize) || !strings.Contains(err.Error(), "undone: zram") {
		t.Errorf("AttachCache(%s, zram) = %v, want ErrBlockSize and the zram device undone", small, err)
	}
	if z := zramDevices(t); !reflect.DeepEqual(z, zBefore) {
		t.Errorf("zram devices after the refusal %q, before %q", z, zBefore)
	}
	leftovers(t, tool, vg, sortedKeys(before), len(pvBefore))
	fvg, flv, _ := strings.Cut(foreign, "/")
	err = tool.DetachCache(ctx, fvg, flv)
	t.Logf("DetachCache(%s): %v", foreign, err)
	if !errors.Is(err, ErrNotOurs) {
		t.Errorf("DetachCache(%s) = %v, want ErrNotOurs", foreign, err)
	}
	after, err := tool.lvReport(ctx, fvg)
	if err != nil || after[flv].SegType != "cache" {
		t.Errorf("%s after the refusal: %v, %+v; want it cached still", foreign, err, after[flv])
	}
}

// TestGuestProvisionAttachRAM (boot 1 of the unclean power-off): a cache
// on the brd RAM disk DMP_RAM is attached to DMP_VG/DMP_LV and left
// there; the script then reads through it and resets the VM.
func TestGuestProvisionAttachRAM(t *testing.T) {
	vg, lv, ram := env(t, "DMP_VG"), env(t, "DMP_LV"), env(t, "DMP_RAM")
	ctx := context.Background()
	tool := guestTool()
	if err := tool.AttachCache(ctx, vg, lv, FastDevice{Path: ram}, 48<<20, 128); err != nil {
		t.Fatal(err)
	}
	d, err := tool.Get(ctx, vg+"-"+lv)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attached: table %q", d.Table.String())
	if d.Status.Mode != Writethrough {
		t.Errorf("mode %s, want writethrough", d.Status.Mode)
	}
}

// TestGuestProvisionRecover (boot 2): the RAM disk's PV is missing;
// RecoverMissing uncaches DMP_VG/DMP_LV and removes the missing PV.
func TestGuestProvisionRecover(t *testing.T) {
	vg, lv := env(t, "DMP_VG"), env(t, "DMP_LV")
	ctx := context.Background()
	tool := guestTool()
	pvs, err := tool.pvReport(ctx, vg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pvs, func(p pvRow) bool { return p.Missing }) {
		t.Fatalf("%s: no missing PV before RecoverMissing: %+v", vg, pvs)
	}
	got, err := tool.RecoverMissing(ctx, vg)
	t.Logf("RecoverMissing(%s) = %q, %v", vg, got, err)
	if err != nil || !reflect.DeepEqual(got, []string{lv}) {
		t.Errorf("RecoverMissing(%s) = %q, %v; want [%s], nil", vg, got, err, lv)
	}
	leftovers(t, tool, vg, []string{lv}, 1)
	again, err := tool.RecoverMissing(ctx, vg)
	if err != nil || len(again) != 0 {
		t.Errorf("RecoverMissing again = %q, %v; want nothing", again, err)
	}
}
