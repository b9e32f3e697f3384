package actuate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Store reads and writes the attribute files of block devices. An
// attribute is named by the device's kernel name and the path of its file
// relative to /sys/block/DEV, e.g. ("sda", "queue/scheduler").
//
// SysfsStore is the real implementation; package actuatetest has a fake
// that behaves like the kernel on a plain directory tree. Errors are
// returned as the operating system reports them (*fs.PathError holding a
// syscall.Errno), so the Actuator can classify them.
type Store interface {
	// Read returns the content of the file as the kernel prints it.
	Read(dev, attr string) (string, error)
	// Write writes value to the file in a single write(2), as the
	// kernel's sysfs store methods expect.
	Write(dev, attr, value string) error
	// List returns the sorted names of the writable regular files in
	// directory dir of the device (e.g. "queue/iosched").
	List(dev, dir string) ([]string, error)
	// Path returns the file's path, for messages.
	Path(dev, attr string) string
}

// SysfsStore is the Store of a running kernel's sysfs, seen below a
// host-root prefix: Root "" or "/" is the real root, "/host" a host root
// mounted into a container.
type SysfsStore struct {
	Root string
}

// Path returns Root/sys/block/DEV/ATTR.
func (s SysfsStore) Path(dev, attr string) string {
	root := s.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "sys", "block", dev, attr)
}

// Read returns the file's content.
func (s SysfsStore) Read(dev, attr string) (string, error) {
	b, err := os.ReadFile(s.Path(dev, attr))
	return string(b), err
}

// Write opens the file write-only (it must exist) and writes value in one
// write(2). On sysfs the kernel's store method runs inside that write and
// its error (EINVAL, EBUSY, ...) is the write's error.
func (s SysfsStore) Write(dev, attr, value string) error {
	f, err := os.OpenFile(s.Path(dev, attr), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	n, err := f.Write([]byte(value))
	if err == nil && n != len(value) {
		err = fmt.Errorf("write %s: short write (%d of %d bytes)", f.Name(), n, len(value))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// List returns the writable regular files of the directory.
func (s SysfsStore) List(dev, dir string) ([]string, error) {
	ents, err := os.ReadDir(s.Path(dev, dir))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile (a concurrent scheduler switch)
		}
		if info.Mode().Perm()&0o200 != 0 {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
