package loopdev

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// MountExt4 makes an ext4 file system on d (its inode tables written
// now, not lazily in the background during the test) and mounts it in a
// new directory of t.TempDir() until t ends; it returns the mount point.
// Without mkfs.ext4 ($MKFS_EXT4 overrides its path) t is skipped, or fails
// under CI=true.
func (d *Dev) MountExt4(t testing.TB) string {
	t.Helper()
	mkfs := need.Tool(t, "mkfs.ext4", "e2fsprogs has it")
	if out, err := exec.Command(mkfs, "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", d.Path).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v: %s", d.Path, err, out)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(d.Path, dir, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", d.Path, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
	return dir
}

// WriteRandom writes size bytes (a multiple of 1 MiB) of pseudo-random
// data, the same for every call, to a new file at path and fsyncs it.
func WriteRandom(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Evict drops the cached pages of the file at path that no process maps
// (POSIX_FADV_DONTNEED: this file's only, not the host's whole page
// cache), so that the next reads go to the device.
func Evict(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}
