package fsutil

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAtomic: a write replaces the file whole, with perm; a failed
// write leaves the old content and no temporary file.
func TestWriteAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "f.json")
	put := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	for _, s := range []string{"one", "two"} {
		if err := WriteAtomic(path, 0o640, put(s)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != s {
			t.Fatalf("read %q, %v; want %q", b, err, s)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", fi.Mode(), err)
	}
	boom := errors.New("boom")
	if err := WriteAtomic(path, 0o640, func(w io.Writer) error { _, _ = io.WriteString(w, "part"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed write: %v, want %v", err, boom)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("after a failed write the file holds %q, want %q", b, "two")
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want the file alone", len(ents))
	}
}
