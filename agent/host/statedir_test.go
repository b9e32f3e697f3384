package host

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/fifo"
)

// The reliability probe's findings on the agent's own state files (issue
// 44, F4 and F7): agent.run.

// outsideFile is a file outside the state directory, with its content.
func outsideFile(t *testing.T) (path, content string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "victim")
	content = "not the agent's"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

func assertUnchanged(t *testing.T, path, content string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != content {
		t.Errorf("%s outside the state directory was changed: %q, %v", path, b, err)
	}
}

// TestRunMarkerSymlinkTmp (F4): a symbolic link at STATE/agent.run.tmp
// must not have its target overwritten by the run marker.
func TestRunMarkerSymlinkTmp(t *testing.T) {
	dir := t.TempDir()
	victim, content := outsideFile(t)
	if err := os.Symlink(victim, filepath.Join(dir, runMarkerName+".tmp")); err != nil {
		t.Fatal(err)
	}
	if _, err := MarkRunning(dir, time.Unix(1000, 0)); err != nil {
		t.Logf("markRunning: %v", err)
	}
	assertUnchanged(t, victim, content)
	if err := MarkStopped(dir); err != nil {
		t.Logf("markStopped: %v", err)
	}
	assertUnchanged(t, victim, content)
}

// TestRunMarkerSymlink (F4): a symbolic link at STATE/agent.run is neither
// read nor written through.
func TestRunMarkerSymlink(t *testing.T) {
	dir := t.TempDir()
	victim, content := outsideFile(t)
	if err := os.Symlink(victim, filepath.Join(dir, runMarkerName)); err != nil {
		t.Fatal(err)
	}
	if _, err := MarkRunning(dir, time.Unix(1000, 0)); err != nil {
		t.Logf("markRunning: %v", err)
	}
	if err := MarkStopped(dir); err != nil {
		t.Logf("markStopped: %v", err)
	}
	assertUnchanged(t, victim, content)
}

// TestRunMarkerFIFO (F7): a FIFO at STATE/agent.run must not block the
// agent's start or stop (it hung there, ignoring SIGTERM).
func TestRunMarkerFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, runMarkerName)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo.Within(t, "markRunning on a FIFO", fifo.Unblocker(path), func() {
		if _, err := MarkRunning(dir, time.Unix(1000, 0)); err != nil {
			t.Logf("markRunning: %v", err)
		}
	})
	if err := syscall.Mkfifo(path+"2", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+"2", path); err != nil {
		t.Fatal(err)
	}
	fifo.Within(t, "markStopped on a FIFO", fifo.Unblocker(path), func() {
		if err := MarkStopped(dir); err != nil {
			t.Logf("markStopped: %v", err)
		}
	})
}
