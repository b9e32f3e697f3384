package openfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/agent/tracer"
)

// TestLoadHeld: no record is no held file; a record that is not JSON is
// an error that names the file; a record round-trips through saveHeld.
func TestLoadHeld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HeldFileName)
	if held, err := loadHeld(path); err != nil || len(held) != 0 {
		t.Fatalf("no record: %v, %v; want none, nil", held, err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadHeld(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken record: %v; want an error naming %s", err, path)
	}
	f := &Follower{heldPath: path, held: map[string][]heldFile{"sdb": {{PID: 42, FD: 7, Ino: 12, Pages: 4}}}}
	if err := f.saveHeld(); err != nil {
		t.Fatal(err)
	}
	held, err := loadHeld(path)
	if err != nil || len(held["sdb"]) != 1 || held["sdb"][0] != (heldFile{PID: 42, FD: 7, Ino: 12, Pages: 4}) {
		t.Errorf("round trip: %+v, %v", held, err)
	}
	f.held = map[string][]heldFile{}
	if err := f.saveHeld(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("no held file left, the record stays: %v", err)
	}
}

// TestUpdateHeld: a raise's kept files are held at their depth; a change
// of the disk to a held file's depth forgets it (it follows the disk
// again); other disks' held files are untouched.
func TestUpdateHeld(t *testing.T) {
	f := &Follower{heldPath: filepath.Join(t.TempDir(), HeldFileName), held: map[string][]heldFile{}}
	kept := []tracer.OpenFile{{PID: 1, FD: 3, Ino: 10, RAPages: 4, Mapped: true}}
	if err := f.updateHeld("sda", kept, 640); err != nil {
		t.Fatal(err)
	}
	if err := f.updateHeld("sdb", []tracer.OpenFile{{PID: 2, FD: 5, Ino: 11, RAPages: 8, Mapped: true}}, 640); err != nil {
		t.Fatal(err)
	}
	if got := f.held["sda"]; len(got) != 1 || got[0] != (heldFile{PID: 1, FD: 3, Ino: 10, Pages: 4}) {
		t.Fatalf("held on sda: %+v", got)
	}
	if err := f.updateHeld("sda", nil, 32); err != nil { // another depth: still held
		t.Fatal(err)
	}
	if len(f.held["sda"]) != 1 {
		t.Errorf("a change to 32 pages forgot the file held at 4: %+v", f.held)
	}
	if err := f.updateHeld("sda", nil, 4); err != nil { // the disk cut to its depth
		t.Fatal(err)
	}
	if _, ok := f.held["sda"]; ok || len(f.held["sdb"]) != 1 {
		t.Errorf("after sda went to 4 pages: %+v; want sda's file forgotten, sdb's kept", f.held)
	}
	held, err := loadHeld(f.heldPath)
	if err != nil || len(held) != 1 || len(held["sdb"]) != 1 {
		t.Errorf("the record: %+v, %v; want sdb's file alone", held, err)
	}
}

func TestHeld(t *testing.T) {
	f := &Follower{heldPath: filepath.Join(t.TempDir(), HeldFileName), held: map[string][]heldFile{}, pageKiB: 4}
	if n, kib := f.Held("sda"); n != 0 || kib != 0 {
		t.Fatalf("none held: %d at %d KiB", n, kib)
	}
	kept := []tracer.OpenFile{{PID: 1, FD: 3, Ino: 10, RAPages: 8, Mapped: true}, {PID: 1, FD: 4, Ino: 10, RAPages: 4, Mapped: true}}
	if err := f.updateHeld("sda", kept, 640); err != nil {
		t.Fatal(err)
	}
	if n, kib := f.Held("sda"); n != 2 || kib != 16 {
		t.Errorf("held on sda: %d at %d KiB; want 2 at 16", n, kib)
	}
	if n, _ := f.Held("sdb"); n != 0 {
		t.Errorf("held on sdb: %d; want none", n)
	}
}
