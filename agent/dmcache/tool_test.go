package dmcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fake returns a Tool running testdata/fake-dmsetup.sh as dmsetup and
// lvchange, answering from the files (name → content) put into its
// folder, and a function returning the commands it ran.
func fake(t *testing.T, files map[string]string) (*Tool, func() []string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FAKE_DIR", dir)
	prog, err := filepath.Abs(filepath.Join("testdata", "fake-dmsetup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	log := func() []string {
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		return splitLines(string(b))
	}
	return &Tool{DMSetup: prog, LVChange: prog}, log
}

const infoCmd = "-c --noheadings --separator | -o major,minor,uuid,name"

// raw is a device-mapper cache device "cached" with the fixtures' table
// and status.
func raw(t *testing.T, table, status string) map[string]string {
	return map[string]string{
		"info.cached":   "253|2||cached\n",
		"table.cached":  fixture(t, table),
		"status.cached": fixture(t, status),
	}
}

// getCmds are the commands of Get("cached").
var getCmds = []string{"info cached " + infoCmd, "table cached", "status cached"}

func TestList(t *testing.T) {
	files := map[string]string{}
	for _, f := range []string{"info.all", "table.all", "status.all", "splitname.vg0-data"} {
		files[f] = fixture(t, filepath.Join("fake", f))
	}
	tool, log := fake(t, files)
	devs, skipped, err := tool.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 {
		t.Fatalf("List returned %d devices, want 2 (vg0-data, cached2): %+v", len(devs), devs)
	}
	lv, c2 := devs[0], devs[1]
	if lv.Name != "vg0-data" || !lv.LVM || lv.VG != "vg0" || lv.LV != "data" || lv.MajorMinor != "253:5" ||
		lv.Table.Origin != "253:9" || lv.Table.Cache != "253:7" || lv.Table.Metadata != "253:8" || lv.Table.Mode != Writethrough ||
		lv.Table.BlockSectors != 128 || lv.Status.Policy != "mq" || lv.Status.TotalBlocks != 384 {
		t.Errorf("vg0-data: %+v", lv)
	}
	if c2.Name != "cached2" || c2.LVM || c2.UUID != "" || c2.MajorMinor != "253:2" || c2.Table.Origin != "254:16" ||
		!reflect.DeepEqual(c2.Table.Features, []string{"metadata2", "writethrough", "no_discard_passdown"}) || c2.Status.Mode != Writethrough {
		t.Errorf("cached2: %+v", c2)
	}
	if len(skipped) != 1 || skipped[0].Name != "multi" || !strings.Contains(skipped[0].Reason, "2 table lines") {
		t.Errorf("skipped %+v, want multi (a cache target among others)", skipped)
	}
	want := []string{"info " + infoCmd, "table", "status", "splitname vg0-data LVM --noheadings -c -o vg_name,lv_name,lv_layer --separator |"}
	if got := log(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestListNoDevices(t *testing.T) {
	tool, _ := fake(t, map[string]string{"info.all": "No devices found\n", "table.all": "No devices found\n", "status.all": "No devices found\n"})
	devs, skipped, err := tool.List(context.Background())
	if err != nil || len(devs) != 0 || len(skipped) != 0 {
		t.Errorf("List = %v, %v, %v; want nothing", devs, skipped, err)
	}
}

func TestGetErrors(t *testing.T) {
	tool, _ := fake(t, map[string]string{
		"info.nope.rc": "1", "info.nope.err": "Device does not exist.\nCommand failed.\n",
		"info.lin": "253|3||lin\n", "table.lin": "0 1000 linear 254:16 0\n1000 1000 linear 254:16 2000\n", "status.lin": "0 1000 linear \n1000 1000 linear \n",
		"info.one": "253|4||one\n", "table.one": "0 1000 linear 254:16 0\n", "status.one": "0 1000 linear \n",
		"info.bad": "253|5||bad\n", "table.bad": "0 1000 cache 253:0 253:1 254:16 128 1 writethrough smq\n", "status.bad": "0 1000 cache Fail\n",
		"info.gone": "253|6||gone\n", "table.gone.rc": "1", "table.gone.err": "device-mapper: table ioctl on gone  failed: No such device or address\nCommand failed.\n",
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		is   error
		msg  string
	}{
		{"nope", ErrNotFound, "dmcache: nope: no such device-mapper device"},
		{"lin", ErrNotCache, "dmcache: lin: not a single dm-cache target: 2 table lines"},
		{"one", ErrNotCache, `dmcache: one: not a single dm-cache target: table "0 1000 linear 254:16 0"`},
		{"bad", ErrSyntax, "no policy and policy argument count (device bad)"},
		{"gone", nil, "table gone: exit status 1: device-mapper: table ioctl on gone  failed: No such device or address; Command failed."},
	} {
		_, err := tool.Get(ctx, tc.name)
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Get(%s) = %v, want a one-line error (%v) with %q", tc.name, err, tc.is, tc.msg)
		}
	}
}

func TestSetModeRaw(t *testing.T) {
	tool, log := fake(t, raw(t, "table-writethrough-smq.txt", "status-writethrough-smq.txt"))
	if err := tool.SetMode(context.Background(), "cached", Passthrough); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]string{}, getCmds...), "suspend cached"), getCmds...)
	want = append(want, "reload cached --table 0 262144 cache 253:0 253:1 254:16 128 1 passthrough smq 0", "resume cached")
	if got := log(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSetModeKeepsFeatures(t *testing.T) {
	tool, log := fake(t, raw(t, "table-metadata2.txt", "status-metadata2.txt"))
	if err := tool.SetMode(context.Background(), "cached", Passthrough); err != nil {
		t.Fatal(err)
	}
	want := "reload cached --table 0 262144 cache 253:0 253:1 254:16 128 3 metadata2 passthrough no_discard_passdown smq 2 migration_threshold 4096"
	if got := log(); !slices.Contains(got, want) {
		t.Errorf("commands:\n%s\nwant %q among them", strings.Join(got, "\n"), want)
	}
}

func TestSetModeReloadFails(t *testing.T) {
	files := raw(t, "table-passthrough.txt", "status-passthrough.txt")
	files["reload.cached.rc"] = "1"
	files["reload.cached.err"] = "device-mapper: reload ioctl on cached  failed: Invalid argument\nCommand failed.\n"
	tool, log := fake(t, files)
	err := tool.SetMode(context.Background(), "cached", Writethrough)
	if err == nil || !strings.Contains(err.Error(), "dmcache: cached: ") || !strings.Contains(err.Error(), " reload cached --table 0 262144 cache 253:0 253:1 254:16 128 1 writethrough smq 0: exit status 1: device-mapper: reload ioctl on cached  failed: Invalid argument; Command failed.") {
		t.Errorf("SetMode = %v, want the reload's error", err)
	}
	got := log()
	if len(got) < 2 || got[len(got)-1] != "resume cached" || !strings.HasPrefix(got[len(got)-2], "reload cached") {
		t.Errorf("commands:\n%s\nwant the failed reload followed by a resume", strings.Join(got, "\n"))
	}
}

func TestSetModeResumeFailsRestores(t *testing.T) {
	files := raw(t, "table-writeback.txt", "status-passthrough.txt") // a clean writeback cache
	files["status.cached"] = strings.Replace(files["status.cached"], "1 passthrough", "1 writeback", 1)
	files["resume.cached.1.rc"] = "1"
	files["resume.cached.1.err"] = "device-mapper: resume ioctl on cached  failed: Device or resource busy\nCommand failed.\n"
	tool, log := fake(t, files)
	err := tool.SetMode(context.Background(), "cached", Passthrough)
	if err == nil || !strings.Contains(err.Error(), "Device or resource busy; Command failed.; the previous table was restored") {
		t.Errorf("SetMode = %v, want the resume's error and the rollback", err)
	}
	got := log()[7:]
	want := []string{
		"reload cached --table 0 262144 cache 253:0 253:1 254:16 128 1 passthrough smq 0", "resume cached",
		"reload cached --table 0 262144 cache 253:0 253:1 254:16 128 0 smq 0", "resume cached"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("commands after the suspended Get:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSetModeRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("writeback", func(t *testing.T) {
		tool, log := fake(t, raw(t, "table-writethrough-smq.txt", "status-writethrough-smq.txt"))
		err := tool.SetMode(ctx, "cached", Writeback)
		if !errors.Is(err, ErrWriteback) || err.Error() != "dmcache: cached: refusing to set writeback mode (only writethrough or passthrough are set)" {
			t.Errorf("SetMode(writeback) = %v", err)
		}
		if got := log(); len(got) != 0 {
			t.Errorf("commands run: %q, want none", got)
		}
	})
	t.Run("dirty", func(t *testing.T) {
		tool, log := fake(t, raw(t, "table-writeback.txt", "status-writeback-dirty.txt"))
		err := tool.SetMode(ctx, "cached", Passthrough)
		if !errors.Is(err, ErrDirty) || err.Error() != "dmcache: cached: cache has dirty blocks: 100 dirty blocks in writeback mode, passthrough needs 0" {
			t.Errorf("SetMode(passthrough) = %v", err)
		}
		if got := log(); !reflect.DeepEqual(got, getCmds) {
			t.Errorf("commands %q, want only Get's %q", got, getCmds)
		}
	})
	t.Run("dirty-while-suspended", func(t *testing.T) {
		files := raw(t, "table-writeback.txt", "status-passthrough.txt")
		files["status.cached"] = strings.Replace(files["status.cached"], "1 passthrough", "1 writeback", 1)
		files["status.cached.2"] = fixture(t, "status-writeback-dirty.txt")
		tool, log := fake(t, files)
		if err := tool.SetMode(ctx, "cached", Passthrough); !errors.Is(err, ErrDirty) {
			t.Errorf("SetMode(passthrough) = %v, want ErrDirty", err)
		}
		want := append(append(append([]string{}, getCmds...), "suspend cached"), getCmds...)
		want = append(want, "resume cached")
		if got := log(); !reflect.DeepEqual(got, want) {
			t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("unknown", func(t *testing.T) {
		tool, _ := fake(t, nil)
		if err := tool.SetMode(ctx, "cached", "fast"); err == nil || !strings.Contains(err.Error(), `unknown mode "fast"`) {
			t.Errorf("SetMode(fast) = %v", err)
		}
	})
	t.Run("failed", func(t *testing.T) {
		files := raw(t, "table-writethrough-smq.txt", "status-writethrough-smq.txt")
		files["status.cached"] = "0 262144 cache Fail\n"
		tool, _ := fake(t, files)
		if err := tool.SetMode(ctx, "cached", Passthrough); !errors.Is(err, ErrFailed) {
			t.Errorf("SetMode = %v, want ErrFailed", err)
		}
	})
}

func TestSetModeNoop(t *testing.T) {
	tool, log := fake(t, raw(t, "table-passthrough.txt", "status-passthrough.txt"))
	if err := tool.SetMode(context.Background(), "cached", Passthrough); err != nil {
		t.Fatal(err)
	}
	if got := log(); !reflect.DeepEqual(got, getCmds) {
		t.Errorf("commands %q, want only Get's %q", got, getCmds)
	}
}

func TestSetModeLVM(t *testing.T) {
	uuid := "LVM-Qhl3ldzUDLxn7fLsBcjSzE9ZwKK2VZxe7x1jz040lQwdD2CSt6TfqQ76k8nqKHzD"
	files := map[string]string{
		"info.vg0-data":      "253|0|" + uuid + "|vg0-data\n",
		"table.vg0-data":     fixture(t, "table-lvm.txt"),
		"status.vg0-data":    fixture(t, "status-lvm.txt"),
		"status.vg0-data.2":  strings.Replace(fixture(t, "status-lvm.txt"), "metadata2 writethrough", "metadata2 passthrough", 1),
		"splitname.vg0-data": "vg0|data|\n",
	}
	tool, log := fake(t, files)
	tool.LVMArgs = []string{"--config", "devices { use_devicesfile=0 }"}
	if err := tool.SetMode(context.Background(), "vg0-data", Passthrough); err != nil {
		t.Fatal(err)
	}
	get := []string{"info vg0-data " + infoCmd, "table vg0-data", "status vg0-data", "splitname vg0-data LVM --noheadings -c -o vg_name,lv_name,lv_layer --separator |"}
	want := append(append(append([]string{}, get...), "--config devices { use_devicesfile=0 } --cachemode passthrough vg0/data"), get...)
	if got := log(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// lvchange fails: its error, nothing else run.
	files["lvchange.vg0_data.rc"] = "5"
	files["lvchange.vg0_data.err"] = "  Command failed with status code 5.\n"
	tool, _ = fake(t, files)
	err := tool.SetMode(context.Background(), "vg0-data", Passthrough)
	if err == nil || !strings.Contains(err.Error(), "--cachemode passthrough vg0/data: exit status 5: Command failed with status code 5.") {
		t.Errorf("SetMode with a failing lvchange = %v", err)
	}
}
