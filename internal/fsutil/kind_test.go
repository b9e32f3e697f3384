package fsutil

import (
	"io/fs"
	"testing"
)

func TestKind(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		0o644:                             "a regular file",
		fs.ModeSymlink | 0o777:            "a symbolic link",
		fs.ModeDir | 0o755:                "a directory",
		fs.ModeNamedPipe | 0o600:          "a named pipe",
		fs.ModeSocket | 0o600:             "a socket",
		fs.ModeDevice | fs.ModeCharDevice: "a character device",
		fs.ModeDevice | 0o660:             "a block device",
		fs.ModeIrregular:                  "mode ?---------",
	} {
		if got := Kind(m); got != want {
			t.Errorf("Kind(%v) = %q, want %q", m, got, want)
		}
	}
}
