//go:build vmguest

// The in-guest test of the VM lab (e2e/vm TestDMCacheTool): built with
// -tags vmguest and run in a guest where the script has set up the
// devices named by the environment (DMC_*). Each test skips when its
// device is not given, so the host test checks that all of them passed.

package dmcache

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func guestTool() *Tool {
	return &Tool{LVMArgs: []string{"--config", os.Getenv("DMC_LVM_CONFIG")}}
}

// env returns the variable or skips the test.
func env(t *testing.T, k string) string {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		t.Skipf("%s is not set", k)
	}
	return v
}

// TestGuestList: List finds the raw cache, the LVM cached LV and the dirty
// writeback cache with their devices, modes and block sizes.
func TestGuestList(t *testing.T) {
	raw, lv, wb := env(t, "DMC_RAW"), env(t, "DMC_LVM"), env(t, "DMC_WB")
	devs, skipped, err := guestTool().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Device{}
	for _, d := range devs {
		got[d.Name] = d
		t.Logf("%s (%s, uuid %q, LVM %v %s/%s): table %q; status mode %s policy %s, %d/%d blocks, %d dirty",
			d.Name, d.MajorMinor, d.UUID, d.LVM, d.VG, d.LV, d.Table.String(), d.Status.Mode, d.Status.Policy, d.Status.UsedBlocks, d.Status.TotalBlocks, d.Status.Dirty)
	}
	for _, s := range skipped {
		t.Logf("skipped %s: %s", s.Name, s.Reason)
	}
	if len(devs) != 3 || len(skipped) != 1 || skipped[0].Name != os.Getenv("DMC_MULTI") {
		t.Errorf("List: %d devices, skipped %+v; want 3 and %s skipped", len(devs), skipped, os.Getenv("DMC_MULTI"))
	}
	check := func(name, origin, cache string, mode Mode, lvm bool) {
		d, ok := got[name]
		switch {
		case !ok:
			t.Errorf("List did not find %s", name)
		case d.Table.Origin != origin || d.Table.Cache != cache || d.Table.BlockSectors != 128 || d.Status.BlockSectors != 128:
			t.Errorf("%s: origin %s, cache %s, block %d/%d sectors; want %s, %s, 128", name, d.Table.Origin, d.Table.Cache, d.Table.BlockSectors, d.Status.BlockSectors, origin, cache)
		case d.Table.Mode != mode || d.Status.Mode != mode:
			t.Errorf("%s: mode %s (table) %s (status), want %s", name, d.Table.Mode, d.Status.Mode, mode)
		case d.LVM != lvm || (lvm && (d.VG != "vg0" || d.LV != "data")):
			t.Errorf("%s: LVM %v %s/%s, want %v vg0/data", name, d.LVM, d.VG, d.LV, lvm)
		}
	}
	check(raw, os.Getenv("DMC_RAW_ORIGIN"), os.Getenv("DMC_RAW_CACHE"), Writethrough, false)
	check(lv, os.Getenv("DMC_LVM_ORIGIN"), os.Getenv("DMC_LVM_CACHE"), Writethrough, true)
	check(wb, os.Getenv("DMC_WB_ORIGIN"), os.Getenv("DMC_WB_CACHE"), Writeback, false)
	if d := got[wb]; d.Status.Dirty == 0 {
		t.Errorf("%s: no dirty blocks, the refusal test needs some", wb)
	}
}

// TestGuestSwitchRaw and TestGuestSwitchLVM: writethrough → passthrough →
// writethrough online while fio reads the device; writeback refused.
func TestGuestSwitchRaw(t *testing.T) { switchModes(t, env(t, "DMC_RAW")) }

func TestGuestSwitchLVM(t *testing.T) { switchModes(t, env(t, "DMC_LVM")) }

func switchModes(t *testing.T, name string) {
	ctx := context.Background()
	tool := guestTool()
	fio := exec.Command("fio", "--name=io", "--filename=/dev/mapper/"+name, "--direct=1", "--ioengine=libaio", "--iodepth=4",
		"--rw=randread", "--bs=4k", "--time_based", "--runtime=4", "--output-format=terse", "--terse-version=3")
	var out strings.Builder
	fio.Stdout, fio.Stderr = &out, &out
	if err := fio.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // fio runs
	for _, m := range []Mode{Passthrough, Writethrough, Writethrough} {
		t0 := time.Now()
		if err := tool.SetMode(ctx, name, m); err != nil {
			t.Fatalf("SetMode(%s): %v", m, err)
		}
		d, err := tool.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SetMode(%s) %.2f s: table %q; status %s, dirty %d", m, time.Since(t0).Seconds(), d.Table.String(), d.Status.Mode, d.Status.Dirty)
		if d.Table.Mode != m || d.Status.Mode != m {
			t.Errorf("after SetMode(%s): table mode %s, status mode %s", m, d.Table.Mode, d.Status.Mode)
		}
	}
	if err := tool.SetMode(ctx, name, Writeback); !errors.Is(err, ErrWriteback) {
		t.Errorf("SetMode(writeback) = %v, want ErrWriteback", err)
	}
	if d, err := tool.Get(ctx, name); err != nil || d.Status.Mode != Writethrough {
		t.Errorf("after the refused writeback: %v, mode %s", err, d.Status.Mode)
	}
	if err := fio.Wait(); err != nil {
		t.Fatalf("fio during the switches: %v\n%s", err, out.String())
	}
	f := strings.Split(out.String(), ";")
	if len(f) < 8 || f[7] == "0" {
		t.Errorf("fio read nothing during the switches: %s", out.String())
	} else {
		t.Logf("fio during the switches: %s read IOPS, %s reads", f[7], f[5])
	}
}

// TestGuestRefuseDirty: a writeback cache with dirty blocks is not put in
// passthrough, nor in writeback; it stays active and dirty.
func TestGuestRefuseDirty(t *testing.T) {
	name := env(t, "DMC_WB")
	ctx := context.Background()
	tool := guestTool()
	before, err := tool.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	err = tool.SetMode(ctx, name, Passthrough)
	t.Logf("SetMode(passthrough) with %d dirty blocks: %v", before.Status.Dirty, err)
	if !errors.Is(err, ErrDirty) {
		t.Errorf("SetMode(passthrough) = %v, want ErrDirty", err)
	}
	if err := tool.SetMode(ctx, name, Writeback); !errors.Is(err, ErrWriteback) {
		t.Errorf("SetMode(writeback) = %v, want ErrWriteback", err)
	}
	after, err := tool.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.Mode != Writeback || after.Status.Dirty != before.Status.Dirty || after.Table.String() != before.Table.String() {
		t.Errorf("after the refusals: %s, %d dirty, table %q; before %s, %d, %q",
			after.Status.Mode, after.Status.Dirty, after.Table.String(), before.Status.Mode, before.Status.Dirty, before.Table.String())
	}
	info, err := exec.Command("dmsetup", "info", name).CombinedOutput()
	if err != nil || !strings.Contains(string(info), "ACTIVE") {
		t.Errorf("dmsetup info %s after the refusals: %v\n%s", name, err, info)
	}
	if _, err := tool.Get(ctx, "no-such-cache"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(no-such-cache) = %v, want ErrNotFound", err)
	}
}
