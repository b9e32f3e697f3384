package train

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// fakeHost is the fake sysfs tree of package agent/sysfs: sda (8:0) with
// partitions sda1 (8:1) and sda2 (8:2, held by dm-0), nvme0n1 (259:0),
// vda, loop3 and others, none of them mounted by default.
const fakeRoot = "../sysfs/testdata"

// mountinfo lines as the kernel writes them (proc(5)).
const (
	rootMount = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
	procMount = "23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
)

func hostFiles(t *testing.T, mountinfo, swaps string) HostFiles {
	t.Helper()
	dir := t.TempDir()
	mi := filepath.Join(dir, "mountinfo")
	sw := filepath.Join(dir, "swaps")
	if err := os.WriteFile(mi, []byte(mountinfo), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sw, []byte("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"+swaps), 0o600); err != nil {
		t.Fatal(err)
	}
	return HostFiles{Root: fakeRoot, MountInfo: mi, Swaps: sw}
}

func TestCheckUnused(t *testing.T) {
	cases := []struct {
		name, disk, mountinfo, swaps string
		want                         string // "" = unused
	}{
		{"unused NVMe disk", "nvme0n1", rootMount + procMount, "", ""},
		{"unused loop device", "loop3", rootMount, "", ""},
		{"disk mounted (by number)", "nvme0n1", rootMount + "40 22 259:0 / /data rw - xfs /dev/whatever rw\n", "",
			"nvme0n1 (259:0) is mounted at /data"},
		{"partition mounted (by number)", "sda", rootMount + "41 22 8:1 / /boot/efi rw - vfat /dev/other rw\n", "",
			"its partition sda1 (8:1) is mounted at /boot/efi"},
		{"btrfs: anonymous number, source names the disk", "nvme0n1", rootMount + "42 22 0:45 /@home /home rw - btrfs /dev/nvme0n1 rw\n", "",
			"nvme0n1 (259:0) is mounted at /home"},
		{"mount point with a space", "loop3", rootMount + "43 22 7:3 / /mnt/my\\040disk rw - ext4 /dev/loop3 rw\n", "",
			"loop3 (7:3) is mounted at /mnt/my disk"},
		{"partition holds a device-mapper volume", "sda", rootMount, "",
			"its partition sda2 (8:2) is held by dm-0"},
		{"swap", "vda", procMount, "/dev/vda\t\t\t\tpartition\t8388604\t\t0\t\t-2\n",
			"vda (254:0) is an active swap area"},
		{"swap file elsewhere is fine", "loop3", rootMount, "/swapfile                               file\t\t1048572\t\t0\t\t-2\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckUnused(hostFiles(t, c.mountinfo, c.swaps), c.disk)
			if c.want == "" {
				if err != nil {
					t.Fatalf("unused disk refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInUse) {
				t.Fatalf("got %v, want an in-use error", err)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "refusing to write to "+c.disk+": ") {
				t.Errorf("error %q does not say which disk is refused", err)
			}
		})
	}
}

func TestCheckUnusedRefusesWhenUnsure(t *testing.T) {
	h := hostFiles(t, rootMount, "")
	for name, hf := range map[string]HostFiles{
		"no mount table":  {Root: h.Root, MountInfo: "/nonexistent/mountinfo", Swaps: h.Swaps},
		"bad mount table": {Root: h.Root, MountInfo: hostFiles(t, "garbage\n", "").MountInfo, Swaps: h.Swaps},
	} {
		if err := CheckUnused(hf, "nvme0n1"); err == nil || !strings.HasPrefix(err.Error(), "refusing to write") {
			t.Errorf("%s: got %v, want a refusal", name, err)
		}
	}
	if err := CheckUnused(h, "sda1"); err == nil || !strings.Contains(err.Error(), "partition of sda") {
		t.Errorf("partition: got %v, want a refusal naming the disk", err)
	}
	if err := CheckUnused(h, "nosuch"); !errors.Is(err, sysfs.ErrNotFound) {
		t.Errorf("unknown disk: got %v", err)
	}
	// No /proc/swaps (kernel without swap): not in use.
	if err := CheckUnused(HostFiles{Root: h.Root, MountInfo: h.MountInfo, Swaps: "/nonexistent/swaps"}, "nvme0n1"); err != nil {
		t.Errorf("no swaps file: %v", err)
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`: "/mnt/a b", `/x\134y`: `/x\y`, `/t\011`: "/t\t", `/plain`: "/plain", `/bad\04`: `/bad\04`, `/\9999`: `/\9999`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}
