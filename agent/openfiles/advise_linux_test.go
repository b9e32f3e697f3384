//go:build linux

package openfiles

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestAdviseReplacedDescriptor (issue 44, F3): a descriptor that holds
// another file by the time the agent duplicates it (closed and reused,
// or dup2'd over) is left: advise checks the duplicate's device and inode
// against the listing before it gives any advice.
func TestAdviseReplacedDescriptor(t *testing.T) {
	loopdev.NeedLoop(t, "pidfd_getfd needs CAP_SYS_PTRACE")
	dir := t.TempDir()
	open := func(name string) (*os.File, unix.Stat_t) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return f, st
	}
	a, sa := open("a")
	b, _ := open("b")
	step := Step{PID: uint32(os.Getpid()), FD: uint32(a.Fd()), Dev: unix.Major(sa.Dev)<<20 | unix.Minor(sa.Dev),
		Ino: sa.Ino, Advice: Normal}
	if err := advise(step); err != nil {
		t.Fatalf("the listed file: %v", err)
	}
	if err := unix.Dup2(int(b.Fd()), int(a.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := advise(step); !errors.Is(err, ErrReplaced) {
		t.Fatalf("a descriptor now holding another file: %v, want ErrReplaced", err)
	}
}
