package tracer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveDeviceFakeSysfs resolves names against a fake sysfs tree
// below a host root.
func TestResolveDeviceFakeSysfs(t *testing.T) {
	dir := t.TempDir()
	devices := filepath.Join(dir, "devices")
	mk := func(rel, dev string, partition bool) {
		p := filepath.Join(devices, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "dev"), []byte(dev+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if partition {
			if err := os.WriteFile(filepath.Join(p, "partition"), []byte("1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range []string{filepath.Join(dir, "sys", "class", "block", filepath.Base(rel)), filepath.Join(dir, "sys", "dev", "block", dev)} {
			if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("sda", "8:0", false)
	mk("sda/sda1", "8:1", true)
	mk("nvme0n1", "259:0", false)
	// A /dev node is stood in for by a symlink named like the disk.
	devNode := filepath.Join(dir, "node", "nvme0n1")
	if err := os.MkdirAll(filepath.Dir(devNode), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(devNode, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	byID := filepath.Join(dir, "node", "by-id-link")
	if err := os.Symlink(devNode, byID); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"sda": "sda 8:0", "8:0": "sda 8:0", devNode: "nvme0n1 259:0", byID: "nvme0n1 259:0"} {
		dev, name, err := ResolveDeviceIn(dir, in)
		if err != nil || name+" "+DevString(dev) != want {
			t.Errorf("ResolveDeviceIn(%q) = %s %s, %v; want %s", in, name, DevString(dev), err, want)
		}
	}
	for in, msg := range map[string]string{"sda1": "partition: trace sda", "8:1": "partition", "sdz": "not a block device", "9:9": "no such block device", "": "empty"} {
		if _, _, err := ResolveDeviceIn(dir, in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ResolveDeviceIn(%q) error %v, want %q", in, err, msg)
		}
	}
}
