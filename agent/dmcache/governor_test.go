package dmcache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewGovernorHostRoot: with a host tools root the tool runs the
// tools found in it (Tool.Root, the root made absolute); a root
// without dmsetup gives no tool and says where dmsetup was looked for.
func TestNewGovernorHostRoot(t *testing.T) {
	root := t.TempDir()
	ct, err := NewGovernor(root)
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
	ct, err = NewGovernor(filepath.Base(root))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ct.(Governor)
	if !ok || d.Tool == nil || d.Tool.Root != root || d.Tool.DMSetup != "" || d.Tool.LVM != "" {
		t.Errorf("tool %+v, want a Governor with Root %s and the tools by name", ct, root)
	}
}
