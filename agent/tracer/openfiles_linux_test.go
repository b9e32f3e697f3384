//go:build linux

package tracer

import (
	"errors"
	"math/bits"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// TestOpenFilesList: the iterator lists this process's own files on their
// file system, each with its descriptor, inode, read-ahead and mode, as
// fadvise left them.
func TestOpenFilesList(t *testing.T) {
	need.Root(t, "loads a BPF iterator")
	p, err := NewOpenFilesProbe()
	if errors.Is(err, ErrOpenFilesUnsupported) {
		need.Missing(t, "BPF task_file iterator", "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir := t.TempDir()
	advice := map[string]int{"plain": unix.FADV_NORMAL, "random": unix.FADV_RANDOM, "sequential": unix.FADV_SEQUENTIAL}
	fds, inos := map[string]uint32{}, map[string]uint64{}
	var dev uint32
	for name, adv := range advice {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, adv); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		fds[name], inos[name], dev = uint32(f.Fd()), st.Ino, KernelDev(st.Dev)
	}
	files, truncated, err := p.List([]uint32{dev}, 1<<16)
	if err != nil || truncated {
		t.Fatalf("List: %d files, truncated %v, %v", len(files), truncated, err)
	}
	got := map[string]OpenFile{}
	for _, f := range files {
		for name, fd := range fds {
			if f.PID == uint32(os.Getpid()) && f.FD == fd {
				got[name] = f
			}
		}
	}
	for name := range advice {
		f, ok := got[name]
		if !ok {
			t.Fatalf("%s file (fd %d) not listed among %d files of pid %d", name, fds[name], len(files), os.Getpid())
		}
		if f.Ino != inos[name] || f.Dev != dev {
			t.Errorf("%s: inode %d on %s, want %d on %s", name, f.Ino, DevString(f.Dev), inos[name], DevString(dev))
		}
	}
	plain, rnd, seq := got["plain"], got["random"], got["sequential"]
	if d := plain.Mode ^ rnd.Mode; bits.OnesCount32(d) != 1 {
		t.Errorf("f_mode of a file given POSIX_FADV_RANDOM %#x, of a plain one %#x: want one bit apart", rnd.Mode, plain.Mode)
	}
	if seq.RAPages != 2*plain.RAPages || rnd.RAPages != plain.RAPages {
		t.Errorf("read-ahead (pages): plain %d, random %d, sequential %d; want sequential twice plain", plain.RAPages, rnd.RAPages, seq.RAPages)
	}
	if some, truncated, err := p.List([]uint32{dev}, 1); err != nil || !truncated || len(some) != 1 {
		t.Errorf("List(max 1) = %d files, truncated %v, %v; want 1, true", len(some), truncated, err)
	}
	if _, _, err := p.List(make([]uint32, openFilesMaxDevs+1), 1); err != nil {
		t.Errorf("List of %d zero devices (one after dedup): %v", openFilesMaxDevs+1, err)
	}
	many := make([]uint32, openFilesMaxDevs+1)
	for i := range many {
		many[i] = uint32(i + 1)
	}
	if _, _, err := p.List(many, 1); err == nil {
		t.Errorf("List of %d devices: no error", len(many))
	}
}
