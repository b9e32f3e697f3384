// Package fsutil holds small file-system helpers shared by the packages
// that refuse what is not a regular file (state records, configs).
package fsutil

import "io/fs"

// Kind names a file's type with its article, for errors that refuse what
// is not a regular file: "a symbolic link", "a directory", "a named pipe",
// "a socket", "a character device", "a block device"; "a regular file"
// for one; otherwise "mode " and the mode's string.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}
