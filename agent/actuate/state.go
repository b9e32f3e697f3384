package actuate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shadowtune/shadowtune/internal/fsutil"
	"github.com/shadowtune/shadowtune/internal/statefs"
)

// StateVersion is the version of the state file format written by this
// package. Load refuses any other version.
const StateVersion = 1

// The state file.
//
// The Actuator keeps one file per device it has changed,
// STATEDIR/DEV.json (DEV the kernel name), written before the device's
// first change and removed only when a Revert has put every recorded value
// back and read it back. Its content is one JSON object:
//
//	{
//	  "version": 1,                    // StateVersion
//	  "device": "sda",                 // kernel name, must match the file name
//	  "dev": "8:0",                    // MAJOR:MINOR when recorded
//	  "diskseq": 1,                    // /sys/block/DEV/diskseq when recorded; 0 if the kernel has none
//	  "boot_id": "…",                  // /proc/sys/kernel/random/boot_id when recorded (optional)
//	  "stable_id": "naa.5000…",        // the disk's wwid, else serial, when recorded (optional)
//	  "recorded_at": "2026-01-02T15:04:05Z",
//	  "original": {                    // the device before shadowtune's first change (a State)
//	    "scheduler": "mq-deadline",    // "" if the device has no queue/scheduler
//	    "tunables": {"fifo_batch": "16", "read_expire": "500", ...},
//	                                   // every writable queue/iosched/* file of that scheduler, raw text
//	    "queue": {"nr_requests": "64", "wbt_lat_usec": "75000"},
//	                                   // queue attributes a scheduler switch resets, raw text
//	    "read_ahead_kb": 128
//	  },
//	  "applied": {                     // per knob, what shadowtune's last finished change left
//	    "scheduler": "kyber",          // (the original for a knob it never changed); absent in
//	    "tunables": {...},             // records of older agents, which revert every knob
//	    "read_ahead_kb": 1024
//	  },
//	  "in_progress": {                 // the journal, written before the device is changed
//	    "started_at": "...",           // and cleared when the change is done
//	    "before": { ...a State... },   // the device just before this change
//	    "target": {"scheduler": "bfq", "tunables": {"slice_idle": 0}, "read_ahead_kb": 512}
//	  }                                // (the values about to be written: "pending")
//	}
//
// A revert restores a knob only while it holds the original, the applied
// value or the in-progress target; another value is another writer's and
// stays (see LeftError).
//
// Every state file is read and written through package statefs: under the
// state directory's descriptor, never through a symbolic link, regular
// files only, at most maxRecordBytes read, never blocking on a FIFO.
// Writes are atomic and durable: a temporary file in STATEDIR is written,
// fsynced, then linked (first record: an existing record fails the link,
// so an original is never overwritten) or renamed (journal updates) onto
// DEV.json, and STATEDIR is fsynced. A crash leaves either the old or the
// new file, plus possibly a stale ".DEV.json.tmp*" that New removes.
//
// STATEDIR/memo/DEV.json holds the agent's DeviceMemo (not a record);
// files other than DEV.json are ignored. A DEV.json that is a symlink or
// not a regular file is refused (ErrCorruptState), never followed.

// stateFile is the JSON document.
type stateFile struct {
	Version    int       `json:"version"`
	Device     string    `json:"device"`
	MajorMinor string    `json:"dev"`
	DiskSeq    uint64    `json:"diskseq,omitempty"`
	BootID     string    `json:"boot_id,omitempty"`
	StableID   string    `json:"stable_id,omitempty"`
	RecordedAt time.Time `json:"recorded_at"`
	Original   *State    `json:"original"`
	InProgress *Change   `json:"in_progress,omitempty"`
	Applied    *State    `json:"applied,omitempty"`
}

func (o *Original) file() stateFile {
	st := o.State
	return stateFile{
		Version: StateVersion, Device: o.Device, MajorMinor: o.MajorMinor, DiskSeq: o.DiskSeq,
		BootID: o.BootID, StableID: o.StableID,
		RecordedAt: o.RecordedAt, Original: &st, InProgress: o.Interrupted, Applied: o.Applied,
	}
}

const stateSuffix = ".json"

func statePath(dir, dev string) string { return filepath.Join(dir, dev+stateSuffix) }

// maxRecordBytes is the most a record or memo file may hold: a record is
// a few KiB.
const maxRecordBytes = 1 << 20

// loadState reads every DEV.json of dir. A file that cannot be loaded
// (unparsable, another version, invalid values, a symlink or another
// non-regular file) is returned in bad, by device name, with an error
// naming the file (ErrCorruptState); the others load. err is for a state
// directory that cannot be read at all.
func loadState(dir string) (recs map[string]*Original, bad map[string]error, err error) {
	return loadRecords(dir, true)
}

// loadRecords is loadState; clean removes stale temporary files.
func loadRecords(dir string, clean bool) (recs map[string]*Original, bad map[string]error, err error) {
	ents, err := statefs.ReadDir(dir, ".")
	if err != nil {
		return nil, nil, fmt.Errorf("actuate: state directory: %w", err)
	}
	recs, bad = map[string]*Original{}, map[string]error{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			if clean && strings.Contains(name, stateSuffix+".tmp") {
				// An interrupted write; the real file is intact. A
				// read-only state directory keeps it: harmless.
				_ = statefs.Remove(dir, name)
			}
			continue
		}
		dev, ok := strings.CutSuffix(name, stateSuffix)
		if !ok {
			continue
		}
		path := filepath.Join(dir, name)
		if !e.Type().IsRegular() {
			bad[dev] = fmt.Errorf("actuate: state file %s: %w: %s, not a regular file: refused (left in place; inspect it, then replace it by the real record or forget it)",
				path, ErrCorruptState, fsutil.Kind(e.Type()))
			continue
		}
		o, err := readStateFile(dir, dev)
		if err != nil {
			bad[dev] = err
			continue
		}
		recs[dev] = o
	}
	return recs, bad, nil
}

// readStateFile reads and checks STATEDIR/DEV.json of the state
// directory dir.
func readStateFile(dir, dev string) (*Original, error) {
	path := statePath(dir, dev)
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("actuate: state file %s: %w: %s (left in place; inspect it, then revert by hand or delete it)",
			path, ErrCorruptState, fmt.Sprintf(format, a...))
	}
	b, err := statefs.ReadFile(dir, dev+stateSuffix, maxRecordBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("actuate: state file: %w", err)
		}
		return nil, corrupt("%v", err)
	}
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, corrupt("%v", err)
	}
	if dec.More() {
		return nil, corrupt("trailing data after the JSON object")
	}
	switch {
	case f.Version != StateVersion:
		return nil, corrupt("version %d, this agent reads version %d", f.Version, StateVersion)
	case f.Device != dev:
		return nil, corrupt("records device %q, but the file is named for %q", f.Device, dev)
	case f.Original == nil:
		return nil, corrupt("no \"original\" state")
	case f.MajorMinor == "":
		return nil, corrupt("no \"dev\"")
	}
	if err := f.Original.check(); err != nil {
		return nil, corrupt("original: %v", err)
	}
	if f.InProgress != nil {
		if err := f.InProgress.Before.check(); err != nil {
			return nil, corrupt("in_progress.before: %v", err)
		}
	}
	if f.Applied != nil {
		if err := f.Applied.check(); err != nil {
			return nil, corrupt("applied: %v", err)
		}
	}
	return &Original{
		Device: f.Device, MajorMinor: f.MajorMinor, DiskSeq: f.DiskSeq, BootID: f.BootID, StableID: f.StableID,
		RecordedAt: f.RecordedAt, State: *f.Original, Interrupted: f.InProgress, Applied: f.Applied,
	}, nil
}

// MaxReadAheadKiB is the largest read_ahead_kb a record may hold or a
// Setting may ask for: 1 GiB, in KiB.
const MaxReadAheadKiB = 1 << 20

// check validates a recorded State on its own: only names and values that
// Apply or Revert may write back (a scheduler name, integer tunables and
// queue attributes, read-ahead in [0, MaxReadAheadKiB]). Each error names
// the field.
func (s *State) check() error {
	if s.Scheduler != "" && !validSchedName(s.Scheduler) {
		return fmt.Errorf("scheduler %q is not a scheduler name", s.Scheduler)
	}
	if s.ReadAheadKiB < 0 || s.ReadAheadKiB > MaxReadAheadKiB {
		return fmt.Errorf("read_ahead_kb %d is out of range [0, %d]", s.ReadAheadKiB, MaxReadAheadKiB)
	}
	for k, v := range s.Tunables {
		if !validAttrName(k) || strings.ContainsAny(v, "\n\x00") {
			return fmt.Errorf("bad tunable %q=%q", k, v)
		}
		if !isInteger(v) {
			return fmt.Errorf("tunable %s=%q is not an integer", k, v)
		}
	}
	for k, v := range s.Queue {
		if !isQueueSideEffect(k) || strings.ContainsAny(v, "\n\x00") {
			return fmt.Errorf("bad queue attribute %q=%q", k, v)
		}
		if !isInteger(v) {
			return fmt.Errorf("queue attribute %s=%q is not an integer", k, v)
		}
	}
	return nil
}

// validSchedName accepts an elevator name: lower-case letters, digits,
// '-' and '_', at most 32 bytes (ELV_NAME_MAX is 16).
func validSchedName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// writeState writes o to DIR/DEV.json durably. With create set the file
// must not exist yet (an original is never overwritten).
func writeState(dir string, o *Original, create bool) error {
	b, err := json.MarshalIndent(o.file(), "", "  ")
	if err != nil {
		return fmt.Errorf("actuate: encode state of %s: %w", o.Device, err)
	}
	return writeFileAtomic(dir, o.Device+stateSuffix, append(b, '\n'), create)
}

// writeFileAtomic writes b to rel of the state directory dir durably
// (package statefs): a temporary file beside it, fsynced, then linked
// (create: fails if rel exists) or renamed onto rel, then its directory
// fsynced; the directories on rel's way are made (0700).
func writeFileAtomic(dir, rel string, b []byte, create bool) error {
	write := func(w io.Writer) error { _, err := w.Write(b); return err }
	if create {
		err := statefs.CreateFile(dir, rel, 0o600, write)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("actuate: state file %s already exists; refusing to overwrite an original record", filepath.Join(dir, rel))
		}
		if err != nil {
			return fmt.Errorf("actuate: create state file: %w", err)
		}
		return nil
	}
	if err := statefs.WriteFile(dir, rel, 0o600, write); err != nil {
		return fmt.Errorf("actuate: replace state file: %w", err)
	}
	return nil
}

// removeState removes DIR/DEV.json durably.
func removeState(dir, dev string) error {
	return removeStateFile(dir, dev+stateSuffix)
}

// removeStateFile removes rel of the state directory dir durably (its
// directory fsynced); a missing file is no error.
func removeStateFile(dir, rel string) error {
	if err := statefs.Remove(dir, rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("actuate: remove state file: %w", err)
	}
	return nil
}

// lockDir takes an exclusive flock on DIR/.lock so that two agents never
// share a state directory. The lock dies with the process. On a read-only
// state directory (EROFS, EACCES) the lock file is opened read-only, or,
// if it does not exist, the directory itself is locked: a revert must not
// depend on being able to write.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil && (errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)) {
		f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, fs.ErrNotExist) {
			f, err = os.Open(dir)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("actuate: lock state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("actuate: state directory %s is in use by another actuator (flock %s)", dir, f.Name())
		}
		return nil, fmt.Errorf("actuate: lock state directory %s: %w", dir, err)
	}
	return f, nil
}
