package modelfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/testutil/fifo"
)

// The reliability probe's findings on the agent's own state files (issue
// 44, F5 and F7): models/DEV.json.

// TestModelsDirSymlink (F5): a symbolic link at STATE/models must not get a
// model written outside the state directory.
func TestModelsDirSymlink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "models")); err != nil {
		t.Fatal(err)
	}
	sd := sysfs.Device{Name: "loop3", SizeBytes: 64 << 20}
	m := model.Default(sd.Class(), 64<<20/512)
	if err := Save(dir, sd, m); err == nil {
		t.Errorf("Save through a symlinked models directory: no error")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a model was written outside the state directory: %v", ents)
	}
}

// TestModelFileNotRegular (F7): a FIFO or a character device at
// models/DEV.json must not block or grow the model's load: the default
// model is used.
func TestModelFileNotRegular(t *testing.T) {
	sd := sysfs.Device{Name: "loop3", SizeBytes: 64 << 20}
	for _, kind := range []string{"fifo", "zero"} {
		dir := t.TempDir()
		path := Path(dir, sd)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		var unblock func()
		switch kind {
		case "fifo":
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
			unblock = fifo.Unblocker(path)
		case "zero":
			if os.Geteuid() != 0 {
				continue
			}
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o600, 1<<8|5); err != nil { // /dev/zero's numbers
				t.Fatal(err)
			}
		}
		fifo.Within(t, "Load on a "+kind, unblock, func() {
			if _, loaded := Load(dir, sd); loaded {
				t.Errorf("%s: a model was loaded", kind)
			}
		})
	}
}
