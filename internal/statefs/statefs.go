// Package statefs is how shadowtune reads and writes the files of its state
// directory (the agent's --state-dir: the device records, agent.run,
// models/, memo/, node/, cache/, attached/): one place that holds the
// rules, so no reader or writer can forget one.
//
// Every file is reached from a descriptor of the state directory,
// component by component (openat), each with O_NOFOLLOW: a symbolic link
// anywhere below the state directory is refused, never followed, whether
// it points out of the directory or into it. (The state directory itself
// is opened by its path, as the operator gave it.) The standard library's
// os.Root was considered and does not fit: it refuses symbolic links that
// escape the root but follows those that stay inside it, so a link
// STATE/agent.run.tmp -> models/sda.json would still be written through.
//
// Reads take regular files only: the file is checked with fstatat before
// it is opened (a device node is never opened) and with fstat after (it
// may have been swapped), and opened with O_NONBLOCK, so a FIFO cannot
// block a reader; at most a limit of bytes is read, and a larger file is
// refused. A reader therefore never blocks on what it reads, nor grows
// without bound (a FIFO, /dev/zero or a huge file in the state directory).
//
// Writes go to a new temporary file in the target's directory (O_CREAT
// and O_EXCL, so an existing name, a symbolic link included, is never
// opened), which is written, fsynced, then renamed over the name (or
// linked to it, for a record that must not be overwritten), and the
// directory is fsynced: readers see the old file or the new one, whole.
//
// Refusals wrap ErrRefused; a missing file wraps fs.ErrNotExist. Every
// error names the file's full path.
package statefs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/fsutil"
)

// ErrRefused is wrapped by the errors for what a state file may not be:
// a symbolic link (at the file or at a directory on its way), anything
// but a regular file, or a file larger than the reader's limit.
var ErrRefused = errors.New("refused")

// dirPerm is the mode of the subdirectories WriteFile creates.
const dirPerm = 0o700

// checkRel accepts a slash-separated path inside the state directory
// ("agent.run", "models/sda.json"; "." for the directory itself in
// ReadDir): relative, clean, without "..".
func checkRel(rel string) error {
	if rel == "." {
		return nil
	}
	if !filepath.IsLocal(rel) || filepath.Clean(rel) != rel || strings.HasPrefix(rel, "./") {
		return fmt.Errorf("statefs: %q is not a clean relative path inside the state directory", rel)
	}
	return nil
}

// walk opens the state directory root and, below it, each directory of
// rel's parent with O_NOFOLLOW (creating missing ones with create). It
// returns the parent's descriptor, which the caller closes, and rel's last
// element.
func walk(root, rel string, create bool) (parent int, base string, err error) {
	if err := checkRel(rel); err != nil {
		return -1, "", err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = os.MkdirAll(root, dirPerm); err == nil {
			fd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return -1, "", pathErr("open", root, err)
	}
	parts := strings.Split(rel, "/")
	at := root
	for _, p := range parts[:len(parts)-1] {
		at = filepath.Join(at, p)
		next, err := openDir(fd, p, at, create)
		unix.Close(fd)
		if err != nil {
			return -1, "", err
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// openDir opens the directory name in parent (full path at) without
// following a symbolic link, making it first with create.
func openDir(parent int, name, at string, create bool) (int, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(parent, name, dirPerm); err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, refusedAt(parent, name, at, "a directory")
	}
	if err != nil {
		return -1, pathErr("open", at, err)
	}
	return fd, nil
}

// refusedAt is the refusal of name in parent (full path at), named by
// what it is instead of want.
func refusedAt(parent int, name, at, want string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("stat", at, err)
	}
	return refused(at, modeOf(uint64(st.Mode)), want)
}

// refused is the error for path, which is of mode m and not want.
func refused(path string, m fs.FileMode, want string) error {
	if m&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w (a state directory is never read or written through one)", path, ErrRefused)
	}
	return fmt.Errorf("%s is %s, not %s: %w", path, fsutil.Kind(m), want, ErrRefused)
}

func pathErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

// ReadFile reads the regular file rel (slash-separated, relative) of the
// state directory root, at most limit bytes. It never follows a symbolic
// link below root, never opens anything but a regular file, and never
// blocks on what it opens. Errors: fs.ErrNotExist for a missing file (or
// directory on its way); ErrRefused for a symbolic link, another kind of
// file, or a file larger than limit; others as the kernel gives them. Each
// names the full path.
func ReadFile(root, rel string, limit int64) ([]byte, error) {
	parent, base, err := walk(root, rel, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(parent)
	path := filepath.Join(root, rel)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, pathErr("stat", path, err)
	}
	if m := modeOf(uint64(st.Mode)); !m.IsRegular() {
		return nil, refused(path, m, "a regular file")
	}
	fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, refused(path, fs.ModeSymlink, "a regular file")
		}
		return nil, pathErr("open", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() { // swapped between the two checks
		return nil, refused(path, fi.Mode(), "a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, larger than the %d a state file may be: %w", path, fi.Size(), limit, ErrRefused)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // grew while read
		return nil, fmt.Errorf("%s is larger than the %d bytes a state file may be: %w", path, limit, ErrRefused)
	}
	return b, nil
}

// WriteFile writes the file rel of the state directory root with write,
// durably and whole: a new temporary file beside it (never an existing
// name), fsynced, given perm, renamed over rel, the directory fsynced. The
// state directory and the directories on rel's way are created (0700)
// when missing; a symbolic link among them is refused (ErrRefused), and a
// symbolic link or other file at rel itself is replaced, not followed. It
// returns the first error, write's included; the temporary file is
// removed on failure.
func WriteFile(root, rel string, perm fs.FileMode, write func(io.Writer) error) error {
	return put(root, rel, perm, write, false)
}

// CreateFile is WriteFile for a file that must not exist yet (an original
// record is never overwritten): the temporary file is linked to rel, and
// an existing rel, of any kind, fails with an error wrapping fs.ErrExist.
func CreateFile(root, rel string, perm fs.FileMode, write func(io.Writer) error) error {
	return put(root, rel, perm, write, true)
}

func put(root, rel string, perm fs.FileMode, write func(io.Writer) error, create bool) error {
	parent, base, err := walk(root, rel, true)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	path := filepath.Join(root, rel)
	tmp, f, err := createTemp(parent, base, filepath.Dir(path), perm)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Unlinkat(parent, tmp, 0) }() // after a rename: ENOENT; after a link: the extra name
	for _, step := range []func() error{
		func() error { return write(f) },
		func() error { return f.Chmod(perm) }, // exactly perm, whatever the umask
		f.Sync,
	} {
		if err := step(); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if create {
		if err := unix.Linkat(parent, tmp, parent, base, 0); err != nil {
			return pathErr("link", path, err)
		}
	} else if err := unix.Renameat(parent, tmp, parent, base); err != nil {
		return pathErr("rename", path, err)
	}
	return syncFd(parent, filepath.Dir(path))
}

// createTemp creates a new file ".BASE.tmp-RANDOM" in parent (dir is its
// path) with O_EXCL|O_NOFOLLOW.
func createTemp(parent int, base, dir string, perm fs.FileMode) (string, *os.File, error) {
	for range 100 {
		var r [6]byte
		_, _ = rand.Read(r[:])
		name := "." + base + ".tmp-" + hex.EncodeToString(r[:])
		fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, pathErr("create", filepath.Join(dir, name), err)
		}
		return name, os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
	}
	return "", nil, fmt.Errorf("%s: no free temporary name for %s", dir, base)
}

// Remove removes the file rel of the state directory root (never
// following a symbolic link on its way; a link at rel is removed itself)
// and fsyncs its directory. A missing file is an error wrapping
// fs.ErrNotExist.
func Remove(root, rel string) error {
	parent, base, err := walk(root, rel, false)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	path := filepath.Join(root, rel)
	if err := unix.Unlinkat(parent, base, 0); err != nil {
		return pathErr("remove", path, err)
	}
	return syncFd(parent, filepath.Dir(path))
}

// ReadDir lists the directory rel of the state directory root ("." for
// root itself), sorted by name, the entries' types as the directory gives
// them (a symbolic link is listed as one, not followed). A symbolic link at
// rel, or on its way, is refused (ErrRefused).
func ReadDir(root, rel string) ([]fs.DirEntry, error) {
	var fd int
	var err error
	if rel == "." {
		fd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, pathErr("open", root, err)
		}
	} else {
		parent, base, err := walk(root, rel, false)
		if err != nil {
			return nil, err
		}
		fd, err = openDir(parent, base, filepath.Join(root, rel), false)
		unix.Close(parent)
		if err != nil {
			return nil, err
		}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(root, rel))
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// syncFd fsyncs the directory fd (path dir). EINVAL, a file system that
// cannot fsync directories (some FUSE and overlay setups), is no error:
// the rename is as durable as it gets there.
func syncFd(fd int, dir string) error {
	if err := unix.Fsync(fd); err != nil && !errors.Is(err, unix.EINVAL) {
		return pathErr("fsync", dir, err)
	}
	return nil
}

// modeOf converts a stat mode's type bits to fs.FileMode's.
func modeOf(m uint64) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
