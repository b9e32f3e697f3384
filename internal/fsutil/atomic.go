package fsutil

import (
	"io"
	"os"
	"path/filepath"
)

// WriteAtomic writes a file at path durably with write: to a temporary
// file in the same directory (created 0755 if missing), fsync'd, given
// perm, then renamed over path, so that a reader sees the old content or
// the new, never a part. It returns the first error, write's included;
// the temporary file is removed on failure.
func WriteAtomic(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	for _, step := range []func() error{
		func() error { return write(tmp) },
		func() error { return tmp.Chmod(perm) },
		tmp.Sync,
	} {
		if err := step(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
