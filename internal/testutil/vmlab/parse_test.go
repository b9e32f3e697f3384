package vmlab

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseAptDepends(t *testing.T) {
	out := "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n"
	if p, err := parseAptDepends(out, "linux-image-"); err != nil || p != "linux-image-6.1.0-56-amd64" {
		t.Errorf("got %q, %v", p, err)
	}
	if _, err := parseAptDepends("linux-image-amd64\n", "linux-image-"); err == nil {
		t.Error("no Depends line: no error")
	}
}

func TestParseLdd(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007ffd)
	libaio.so.1 => /lib/x86_64-linux-gnu/libaio.so.1 (0x00007f62)
	/lib64/ld-linux-x86-64.so.2 (0x00007f7f)
`
	got, err := parseLdd(out)
	if want := []string{"/lib/x86_64-linux-gnu/libaio.so.1", "/lib64/ld-linux-x86-64.so.2"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if _, err := parseLdd("\tlibfoo.so.1 => not found\n"); err == nil {
		t.Error("a missing library: no error")
	}
	if _, err := parseLdd("\tnot a dynamic executable\n"); err == nil {
		t.Error("no libraries: no error")
	}
}

func TestModuleClosure(t *testing.T) {
	dep := `kernel/drivers/md/dm-mod.ko:
kernel/lib/libcrc32c.ko:
kernel/drivers/md/dm-cache.ko: kernel/drivers/md/dm-bufio.ko kernel/lib/libcrc32c.ko kernel/drivers/md/dm-mod.ko
kernel/drivers/md/dm-bufio.ko: kernel/drivers/md/dm-mod.ko
kernel/block/bfq.ko:
`
	got, err := moduleClosure(dep, []string{"dm-cache", "bfq"})
	want := []string{"kernel/block/bfq.ko", "kernel/drivers/md/dm-bufio.ko", "kernel/drivers/md/dm-cache.ko",
		"kernel/drivers/md/dm-mod.ko", "kernel/lib/libcrc32c.ko"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if _, err := moduleClosure(dep, []string{"zram"}); err == nil || !strings.Contains(err.Error(), "zram") {
		t.Errorf("a module not in modules.dep: %v", err)
	}
}

func TestParseSerial(t *testing.T) {
	r, err := parseSerial([]byte("@@VMLAB-START 3.25\r\nhello\nworld\n@@VMLAB-EXIT 7 5.75\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.output != "hello\nworld" || r.exitCode != 7 || r.boot != 3250*time.Millisecond || r.script != 2500*time.Millisecond {
		t.Errorf("got %+v", r)
	}
	// Output without a final newline, and the marker's text inside it.
	r, err = parseSerial([]byte("@@VMLAB-START 1\nno newline @@VMLAB-EXIT 9\n@@VMLAB-EXIT 0 2\n"))
	if err != nil || r.output != "no newline @@VMLAB-EXIT 9" || r.exitCode != 0 {
		t.Errorf("got %+v, %v", r, err)
	}
	if _, err := parseSerial([]byte("@@VMLAB-START 1\npartial output")); err == nil {
		t.Error("no exit line: no error")
	}
	if _, err := parseSerial(nil); err == nil {
		t.Error("nothing: no error")
	}
}

func TestValidate(t *testing.T) {
	for name, o := range map[string]Options{
		"disk without size": {Disks: []Disk{{}}},
		"bad accel":         {Accel: "hvf"},
		"negative memory":   {MemoryMiB: -1},
		"relative file":     {Files: map[string]string{"bin/x": "/bin/true"}},
		"negative throttle": {Disks: []Disk{{SizeMiB: 1, Throttle: &Throttle{IOPS: -1}}}},
	} {
		if err := o.validate(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line", name, err)
		}
	}
	o := Options{Disks: []Disk{{SizeMiB: 8, Throttle: &CloudDisk}}}
	if err := o.validate(); err != nil || o.CPUs != 2 || o.MemoryMiB != 2048 || o.Timeout != 5*time.Minute {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}
