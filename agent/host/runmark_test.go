package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRunMarker: a run that ended cleanly leaves no marker; a marker of a
// process that is gone is an unclean end (killed, out of memory); this
// process's own marker (its loop started again) is not.
func TestRunMarker(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1000, 0)
	if unclean, err := MarkRunning(dir, now); err != nil || unclean {
		t.Fatalf("first run: unclean %v, %v", unclean, err)
	}
	if unclean, err := MarkRunning(dir, now); err != nil || unclean {
		t.Fatalf("this process again: unclean %v, %v", unclean, err)
	}
	if err := MarkStopped(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, runMarkerName)); !os.IsNotExist(err) {
		t.Fatalf("marker left after a clean stop: %v", err)
	}
	// A process that ran and is gone (killed) left its marker.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	b := []byte(`{"pid":` + itoa(dead.Process.Pid) + `,"startedAt":"2026-01-01T00:00:00Z"}`)
	if err := os.WriteFile(filepath.Join(dir, runMarkerName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if unclean, err := MarkRunning(dir, now); err != nil || !unclean {
		t.Fatalf("after a killed run: unclean %v, %v; want true", unclean, err)
	}
	// A marker that does not parse is an unclean end too.
	if err := os.WriteFile(filepath.Join(dir, runMarkerName), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if unclean, _ := MarkRunning(dir, now); !unclean {
		t.Fatal("a garbled marker is not taken for an unclean end")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
