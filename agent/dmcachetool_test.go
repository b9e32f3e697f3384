package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewDMCacheToolHostRoot: with a host tools root the tool runs the
// tools found in it (dmcache.Tool.Root, the root made absolute); a root
// without dmsetup gives no tool and says where dmsetup was looked for.
func TestNewDMCacheToolHostRoot(t *testing.T) {
	root := t.TempDir()
	ct, err := NewDMCacheTool(root)
	if ct != nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), root) ||
		!strings.HasPrefix(err.Error(), "no dm-cache governance: ") {
		t.Fatalf("root without dmsetup: tool %v, error %v; want none, fs.ErrNotExist naming the root", ct, err)
	}
	p := filepath.Join(root, "usr", "sbin", "dmsetup")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(root))
	ct, err = NewDMCacheTool(filepath.Base(root))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ct.(DMCacheTool)
	if !ok || d.Tool == nil || d.Tool.Root != root || d.Tool.DMSetup != "" || d.Tool.LVM != "" {
		t.Errorf("tool %+v, want a DMCacheTool with Root %s and the tools by name", ct, root)
	}
}
