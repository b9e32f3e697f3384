// Package actuatetest provides a fake kernel for testing code that uses
// package actuate: an actuate.Store over a plain directory tree laid out
// like sysfs (ROOT/sys/block/DEV/...), whose writes behave like Linux
// 6.x's (HZ=250, 4 KiB pages) so that read-back checks see what a real
// kernel would show.
//
// All of its state lives in the files of the tree (plus hidden marker
// files), so a second process, or a second Store on the same root, sees
// the same "kernel" — which lets tests kill an actuator mid-change and
// revert from a new one.
package actuatetest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// Store is the fake kernel. The zero value is not usable; call New.
type Store struct {
	root string

	mu sync.Mutex
	// ReadOnly makes every write fail with EROFS, as on a read-only /sys.
	ReadOnly bool
	// FailWrite, if set, is called before each write; a non-nil error is
	// returned instead of writing (wrap a syscall.Errno in an
	// *fs.PathError to look like the kernel).
	FailWrite func(dev, attr, value string) error
	writes    []string
}

// New returns a fake kernel over root (which holds sys/block).
func New(root string) *Store { return &Store{root: root} }

// Writes returns the writes made so far, as "DEV ATTR=VALUE".
func (s *Store) Writes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

// ClaimDir returns ROOT/run/shadowtune/claims: the fake host's claim
// directory (package actuate's Options.ClaimDir default for this Store),
// so two Actuators on one fake root see each other's claims.
func (s *Store) ClaimDir() string { return filepath.Join(s.root, "run", "shadowtune", "claims") }

// BootID returns the content of ROOT/proc/sys/kernel/random/boot_id
// (write it to simulate a reboot), or "" when absent.
func (s *Store) BootID() (string, error) {
	b, err := os.ReadFile(filepath.Join(s.root, "proc", "sys", "kernel", "random", "boot_id"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// Path returns ROOT/sys/block/DEV/ATTR.
func (s *Store) Path(dev, attr string) string {
	return filepath.Join(s.root, "sys", "block", dev, attr)
}

// Read returns the file's content.
func (s *Store) Read(dev, attr string) (string, error) {
	b, err := os.ReadFile(s.Path(dev, attr))
	return string(b), err
}

// List returns the sorted regular files of the directory (all writable).
func (s *Store) List(dev, dir string) ([]string, error) {
	ents, err := os.ReadDir(s.Path(dev, dir))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func perr(op, path string, errno syscall.Errno) error {
	return &fs.PathError{Op: op, Path: path, Err: errno}
}

// Write emulates the kernel's store method of the attribute.
func (s *Store) Write(dev, attr, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.Path(dev, attr)
	if s.ReadOnly {
		return perr("open", path, syscall.EROFS)
	}
	if _, err := os.Stat(path); err != nil {
		return perr("open", path, syscall.ENOENT)
	}
	if s.FailWrite != nil {
		if err := s.FailWrite(dev, attr, value); err != nil {
			return err
		}
	}
	s.writes = append(s.writes, dev+" "+attr+"="+value)
	v := strings.TrimSpace(value)
	switch {
	case attr == "queue/scheduler":
		return s.switchScheduler(dev, path, v)
	case attr == "queue/read_ahead_kb":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return perr("write", path, syscall.EINVAL)
		}
		return writeFile(path, strconv.FormatUint(n/4*4, 10)) // whole 4 KiB pages
	case attr == "queue/nr_requests":
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return perr("write", path, syscall.EINVAL)
		}
		return writeFile(path, strconv.FormatUint(max(n, 4), 10)) // BLKDEV_MIN_RQ
	case strings.HasPrefix(attr, "queue/iosched/"):
		return s.tunable(dev, path, filepath.Base(attr), v)
	}
	return writeFile(path, v)
}

func writeFile(path, v string) error {
	return os.WriteFile(path, []byte(v+"\n"), 0o644)
}

func (s *Store) read(dev, attr string) string {
	b, _ := os.ReadFile(s.Path(dev, attr))
	return strings.TrimSpace(string(b))
}

// Default tunables of Linux 6.x with HZ=250 (what a 6.18 kernel shows).
var defaults = map[string]map[string]string{
	"mq-deadline": {"fifo_batch": "16", "front_merges": "1", "prio_aging_expire": "10000",
		"read_expire": "500", "write_expire": "5000", "writes_starved": "2"}, // + async_depth = nr_requests
	"bfq": {"back_seek_max": "16384", "back_seek_penalty": "2", "fifo_expire_async": "250",
		"fifo_expire_sync": "125", "low_latency": "1", "max_budget": "0", "slice_idle": "8",
		"slice_idle_us": "8000", "strict_guarantees": "0", "timeout_sync": "124"},
	"kyber": {"read_lat_nsec": "2000000", "write_lat_nsec": "10000000"},
}

// Default returns the fake's default tunables of the scheduler.
func Default(scheduler string) map[string]string {
	out := map[string]string{}
	for k, v := range defaults[scheduler] {
		out[k] = v
	}
	return out
}

const wbtMarker = ".fake-wbt-disabled-by-bfq"

// switchScheduler emulates block/elevator.c elv_iosched_store.
func (s *Store) switchScheduler(dev, path, name string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return perr("write", path, syscall.ENOENT)
	}
	list, cur, err := sysfs.ParseScheduler(string(b))
	if err != nil {
		return fmt.Errorf("fake kernel: %s: %w", path, err)
	}
	found := false
	for _, n := range list {
		found = found || n == name
	}
	if !found {
		return perr("write", path, syscall.EINVAL)
	}
	if name == cur {
		return nil // no-op: tunables kept
	}
	var sb strings.Builder
	for _, n := range list {
		if n == name {
			sb.WriteString("[" + n + "] ")
		} else {
			sb.WriteString(n + " ")
		}
	}
	if err := os.WriteFile(path, []byte(sb.String()+"\n"), 0o644); err != nil {
		return err
	}
	// A new elevator instance: defaults, and nr_requests reset.
	iosched := s.Path(dev, "queue/iosched")
	if err := os.RemoveAll(iosched); err != nil {
		return err
	}
	depth, _ := strconv.Atoi(s.read(dev, "mq/0/nr_tags"))
	if depth == 0 {
		depth = 64
	}
	nr := depth
	if name != "none" {
		nr = 2 * min(depth, 128)
	}
	if err := writeFile(s.Path(dev, "queue/nr_requests"), strconv.Itoa(nr)); err != nil {
		return err
	}
	if name != "none" {
		if err := os.MkdirAll(iosched, 0o755); err != nil {
			return err
		}
		t := Default(name)
		if name == "mq-deadline" {
			t["async_depth"] = strconv.Itoa(nr)
		}
		for k, v := range t {
			if err := writeFile(filepath.Join(iosched, k), v); err != nil {
				return err
			}
		}
	}
	// bfq turns writeback throttling off while it runs, unless it was
	// set by hand (here: unless it differs from the default).
	wbt := s.Path(dev, "queue/wbt_lat_usec")
	marker := s.Path(dev, wbtMarker)
	if _, err := os.Stat(wbt); err == nil {
		def := "2000"
		if s.read(dev, "queue/rotational") == "1" {
			def = "75000"
		}
		if name == "bfq" && s.read(dev, "queue/wbt_lat_usec") == def {
			if err := writeFile(wbt, "0"); err != nil {
				return err
			}
			if err := writeFile(marker, def); err != nil {
				return err
			}
		} else if name != "bfq" {
			if _, err := os.Stat(marker); err == nil {
				if err := writeFile(wbt, s.read(dev, wbtMarker)); err != nil {
					return err
				}
				if err := os.Remove(marker); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jiffyMs are tunables stored in jiffies and shown in ms: with HZ=250 a
// value reads back rounded up to a multiple of 4 ms.
var jiffyMs = map[string]bool{
	"read_expire": true, "write_expire": true, "prio_aging_expire": true,
	"fifo_expire_sync": true, "fifo_expire_async": true, "timeout_sync": true,
}

// tunable emulates the iosched store methods.
func (s *Store) tunable(dev, path, name, v string) error {
	_, cur, _ := sysfs.ParseScheduler(s.read(dev, "queue/scheduler"))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return perr("write", path, syscall.EINVAL)
	}
	if n < 0 {
		if cur != "mq-deadline" {
			return perr("write", path, syscall.EINVAL) // kstrtoul
		}
		n = 0 // mq-deadline clamps silently
	}
	switch name {
	case "front_merges", "low_latency", "strict_guarantees":
		n = min(n, 1)
	case "fifo_batch":
		n = max(n, 0)
	}
	if jiffyMs[name] {
		n = (n + 3) / 4 * 4
	}
	switch name {
	case "slice_idle":
		if err := writeFile(filepath.Join(filepath.Dir(path), "slice_idle_us"), strconv.FormatInt(n*1000, 10)); err != nil {
			return err
		}
	case "slice_idle_us":
		if err := writeFile(filepath.Join(filepath.Dir(path), "slice_idle"), strconv.FormatInt(n/1000, 10)); err != nil {
			return err
		}
	}
	return writeFile(path, strconv.FormatInt(n, 10))
}

// Snapshot returns every file under ROOT/sys/block/DEV (relative path →
// content), hidden marker files included, for exact before/after
// comparisons.
func (s *Store) Snapshot(dev string) (map[string]string, error) {
	dir := s.Path(dev, "")
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("snapshot %s", dev), err)
	}
	return out, nil
}
