package dmcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ProbeRead reads the cache's data device: the largest slave that is
// not the origin (the metadata device is smaller).
func TestProbeCacheRead(t *testing.T) {
	root := t.TempDir()
	for _, d := range []struct{ name, dev, size string }{
		{"dm-0", "253:0", "8192"},    // metadata
		{"dm-1", "253:1", "131072"},  // data: 64 MiB
		{"vdb", "254:16", "1048576"}, // origin
	} {
		dir := filepath.Join(root, "sys", "block", d.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"dev": d.dev + "\n", "size": d.size + "\n"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(root, "sys", "block", "dm-2", "slaves", d.name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "dev", "dm-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(root, "dev", "dm-1"), 131072*512); err != nil {
		t.Fatal(err)
	}
	dev, ns, err := ProbeRead(root, "dm-2", "254:16")
	if err != nil || dev != "dm-1" || ns <= 0 {
		t.Fatalf("ProbeRead = %q, %d ns, %v; want dm-1, a positive time", dev, ns, err)
	}
	// With dm-1 the origin, vdb is the largest other slave; it has no
	// /dev node here.
	if _, _, err := ProbeRead(root, "dm-2", "253:1"); err == nil || !strings.Contains(err.Error(), "vdb") {
		t.Errorf("with dm-1 the origin: %v; want an error naming vdb", err)
	}
	if err := os.RemoveAll(filepath.Join(root, "sys", "block", "dm-2", "slaves", "dm-0")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "sys", "block", "dm-2", "slaves", "dm-1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ProbeRead(root, "dm-2", "254:16"); err == nil {
		t.Error("a cache whose only slave is the origin was probed")
	}
}
