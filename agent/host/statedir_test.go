package host

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The reliability probe's findings on the agent's own state files (issue
// 44, F4 and F7): agent.run.

// within fails t when f has not returned after 5 s (a read blocked on a
// FIFO); unblock, if set, is then called to let it go.
func within(t *testing.T, what string, unblock func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		if unblock != nil {
			unblock()
		}
		t.Fatalf("%s blocked for 5 s", what)
	}
}

// openFIFO lets a reader blocked on the FIFO at path go (it opens the
// writing end and closes it).
func openFIFO(path string) func() {
	return func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
}

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
	fifo := filepath.Join(dir, runMarkerName)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	within(t, "markRunning on a FIFO", openFIFO(fifo), func() {
		if _, err := MarkRunning(dir, time.Unix(1000, 0)); err != nil {
			t.Logf("markRunning: %v", err)
		}
	})
	if err := syscall.Mkfifo(fifo+"2", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo+"2", fifo); err != nil {
		t.Fatal(err)
	}
	within(t, "markStopped on a FIFO", openFIFO(fifo), func() {
		if err := MarkStopped(dir); err != nil {
			t.Logf("markStopped: %v", err)
		}
	})
}
