package statefs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/fifo"
)

func text(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// TestWriteReadRemove: a write replaces the file whole with perm, making
// its directories; a read gets it back; a failed write leaves the old
// content and no temporary file; CreateFile refuses an existing name.
func TestWriteReadRemove(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	for _, s := range []string{"one", "two"} {
		if err := WriteFile(root, "models/sda.json", 0o640, text(s)); err != nil {
			t.Fatal(err)
		}
		if b, err := ReadFile(root, "models/sda.json", 100); err != nil || string(b) != s {
			t.Fatalf("read %q, %v; want %q", b, err, s)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "models/sda.json")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(root, "models")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, %v; want 0700", fi.Mode(), err)
	}
	boom := errors.New("boom")
	if err := WriteFile(root, "models/sda.json", 0o640, func(w io.Writer) error { _, _ = io.WriteString(w, "part"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed write: %v, want %v", err, boom)
	}
	if b, _ := ReadFile(root, "models/sda.json", 100); string(b) != "two" {
		t.Errorf("after a failed write the file holds %q, want %q", b, "two")
	}
	if ents, err := ReadDir(root, "models"); err != nil || len(ents) != 1 {
		t.Errorf("models/ holds %d entries (%v), want the file alone", len(ents), err)
	}
	if err := CreateFile(root, "models/sda.json", 0o600, text("three")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateFile over an existing file: %v, want fs.ErrExist", err)
	}
	if err := CreateFile(root, "sdb.json", 0o600, text("new")); err != nil {
		t.Fatal(err)
	}
	if err := Remove(root, "models/sda.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(root, "models/sda.json", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read after remove: %v, want fs.ErrNotExist", err)
	}
	if err := Remove(root, "models/sda.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second remove: %v, want fs.ErrNotExist", err)
	}
}

// TestSymlinksRefused (the probe's F4/F5): a symbolic link at a file or at
// a directory on its way is refused by every operation, and a write never
// changes what it points to, out of the state directory or into it.
func TestSymlinksRefused(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(root, "agent.run")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "models")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("inside", filepath.Join(root, "memo")); err != nil { // relative, stays in the root
		t.Fatal(err)
	}
	if _, err := ReadFile(root, "agent.run", 100); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("read through a symlink: %v, want ErrRefused", err)
	}
	for _, rel := range []string{"models/victim", "memo/sda.json"} {
		if _, err := ReadFile(root, rel, 100); !errors.Is(err, ErrRefused) {
			t.Errorf("read %s through a symlinked directory: %v, want ErrRefused", rel, err)
		}
		if err := WriteFile(root, rel, 0o600, text("x")); !errors.Is(err, ErrRefused) {
			t.Errorf("write %s through a symlinked directory: %v, want ErrRefused", rel, err)
		}
		if err := Remove(root, rel); !errors.Is(err, ErrRefused) {
			t.Errorf("remove %s through a symlinked directory: %v, want ErrRefused", rel, err)
		}
	}
	if _, err := ReadDir(root, "models"); !errors.Is(err, ErrRefused) {
		t.Errorf("list a symlinked directory: %v, want ErrRefused", err)
	}
	// A write at the symlink's name replaces the link, not its target.
	if err := WriteFile(root, "agent.run", 0o600, text("mine")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(root, "agent.run")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("agent.run is %v (%v), want a regular file in place of the link", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "inside")); len(ents) != 0 {
		t.Errorf("a write went through the in-root link memo -> inside: %v", ents)
	}
}

// TestNotRegularRefused (the probe's F6/F7): a FIFO, a character device
// (/dev/zero's numbers) and a directory are refused without blocking, and
// a file over the limit is refused.
func TestNotRegularRefused(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "big.json"), make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"fifo.json": "a named pipe", "dir.json": "a directory", "big.json": "larger than"}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(root, "zero.json"), syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
			t.Fatal(err)
		}
		cases["zero.json"] = "a character device"
	}
	for name, want := range cases {
		fifo.Within(t, "ReadFile "+name, nil, func() {
			_, err := ReadFile(root, name, 100)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Join(root, name)) {
				t.Errorf("%s: %v, want ErrRefused saying %q and naming the file", name, err, want)
			}
		})
	}
}

// TestBadRel: a path that is not a clean relative path inside the state
// directory is an error before anything is touched.
func TestBadRel(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "./a"} {
		if err := WriteFile(root, rel, 0o600, text("x")); err == nil {
			t.Errorf("WriteFile(%q) accepted", rel)
		}
	}
}
