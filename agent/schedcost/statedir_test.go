package schedcost

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/statefs"
)

// TestNodeDirSymlink (issue 44, F5): a symbolic link at STATE/node must not
// get the measurement written outside the state directory.
func TestNodeDirSymlink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "node")); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, Costs{Kernel: "6.18", CPUs: 2}); !errors.Is(err, statefs.ErrRefused) {
		t.Errorf("Save through a symlinked node directory: %v, want statefs.ErrRefused", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside the state directory: %v", ents)
	}
}

// TestCostsFileFIFO (issue 44, F7): a FIFO at node/scheduler-costs.json must
// not block the agent's start: Load refuses it at once.
func TestCostsFileFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(dir); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, statefs.ErrRefused) {
			t.Errorf("Load of a FIFO: %v, want statefs.ErrRefused", err)
		}
	case <-time.After(5 * time.Second):
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("Load of a FIFO blocked for 5 s")
	}
}
