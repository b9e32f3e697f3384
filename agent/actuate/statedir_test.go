package actuate

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/statefs"
)

// The reliability probe's findings on the actuator's state files (issue
// 44, F5–F7): a symlinked memo/ or dm-cache/ directory must not get files
// outside the state directory replaced, and a FIFO or a character device
// at a record must not block or grow a reader.

// TestMemoDirSymlink (F5): a symbolic link at STATE/memo is refused, and
// nothing is written where it points.
func TestMemoDirSymlink(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(e.stateDir, memoDir)); err != nil {
		t.Fatal(err)
	}
	err := e.a.SaveDeviceState("sda", DeviceMemo{LastChange: time.Unix(1000, 0)})
	if !errors.Is(err, statefs.ErrRefused) {
		t.Errorf("SaveDeviceState through a symlinked memo directory: %v, want statefs.ErrRefused", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside the state directory: %v", ents)
	}
	if _, _, err := e.a.LoadDeviceState("sda"); !errors.Is(err, statefs.ErrRefused) {
		t.Errorf("LoadDeviceState through a symlinked memo directory: %v, want statefs.ErrRefused", err)
	}
}

// TestRecordNotRegularDoesNotBlock (F6/F7): a FIFO at a device record and
// a FIFO at a memo are refused at once (a revert reading them must not
// block); a character device at a record (/dev/zero's numbers) is
// refused without being read.
func TestRecordNotRegularDoesNotBlock(t *testing.T) {
	e := newEnv(t)
	e.a.Close() // the state directory's lock, for the Open below
	if err := syscall.Mkfifo(filepath.Join(e.stateDir, "nvme0n1.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(e.stateDir, "vda.json"), syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(e.stateDir, memoDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.stateDir, memoDir, "sda.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err := Open(Options{Store: e.fake, StateDir: e.stateDir, ClaimDir: t.TempDir()})
		if err != nil {
			t.Errorf("Open: %v", err)
			return
		}
		defer a.Close()
		bad := a.BadRecords()
		for _, dev := range []string{"nvme0n1", "vda"} {
			if _, ok := bad[dev]; !ok && (dev == "nvme0n1" || os.Geteuid() == 0) {
				t.Errorf("%s's record is not reported bad: %v", dev, bad)
			}
		}
		if _, _, err := a.LoadDeviceState("sda"); !errors.Is(err, ErrCorruptState) {
			t.Errorf("a FIFO memo: %v, want ErrCorruptState", err)
		}
		if _, err := a.RevertAll(); err == nil {
			t.Errorf("RevertAll with bad records: no error")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the actuator blocked on a FIFO in its state directory for 10 s")
	}
}
