package actuate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Ownership of a device.
//
// Two Actuators with different state directories must never govern one
// device: the second would record the first one's change as the
// "original", and whichever reverts last leaves the device changed. So an
// Actuator claims a device before it changes or reverts it: it holds an
// exclusive flock on CLAIMDIR/MAJOR:MINOR.lock (by default
// HOSTROOT/run/shadowtune/claims, see DefaultClaimDir: /run is a tmpfs, so
// a claim never outlives a boot, and the flock dies with its process). The
// file holds the owner's state directory and pid (JSON, see claimFile).
//
// An Actuator holds the claim of a device while the device is claimed with
// Claim or while it has a record of the device (the device is changed), and
// releases it with Release (unless a record remains), with the record's
// removal, or with Close. A claim file left by a process that died is
// taken over, unless that process's state directory still records the
// original of the same device (same dev and diskseq): then the device is
// changed and only that state directory can put it back, so the claim is
// refused (OwnedError with Live false) until it is reverted or forgotten
// there.

// DefaultClaimDir is where claims live, below the host root.
const DefaultClaimDir = "/run/shadowtune/claims"

// ErrOwned means another Actuator (another state directory) owns the
// device; nothing was written. The error is an *OwnedError naming the owner.
var ErrOwned = errors.New("owned by another shadowtune actuator")

// OwnedError is a refused claim, change or revert of a device another
// Actuator owns. errors.Is(err, ErrOwned) matches it.
type OwnedError struct {
	Device     string // kernel name, "loop0"
	MajorMinor string // "7:0"
	StateDir   string // the owner's state directory ("" if unreadable)
	PID        int    // the owner's process id (0 if unreadable)
	// Live is true when the owner still runs (it holds the flock); false
	// when it died leaving the device changed (its StateDir records the
	// device's original).
	Live bool
	Path string // the claim file
}

func (e *OwnedError) Error() string {
	owner := fmt.Sprintf("state dir %s, pid %d", orUnknown(e.StateDir), e.PID)
	if e.Live {
		return fmt.Sprintf("actuate: %s (dev %s) is %s (%s; claim %s)", e.Device, e.MajorMinor, ErrOwned, owner, e.Path)
	}
	return fmt.Sprintf("actuate: %s (dev %s) is %s that exited leaving it changed (%s, no longer running; claim %s): put it back first with `shadowtune run --revert --state-dir %s`",
		e.Device, e.MajorMinor, ErrOwned, owner, e.Path, e.StateDir)
}

// Is matches ErrOwned.
func (e *OwnedError) Is(target error) bool { return target == ErrOwned }

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// claimFile is the content of a claim file.
type claimFile struct {
	StateDir  string    `json:"state_dir"`
	PID       int       `json:"pid"`
	Device    string    `json:"device"`
	Dev       string    `json:"dev"`
	ClaimedAt time.Time `json:"claimed_at"`
}

type claim struct {
	f        *os.File
	path     string
	mm       string
	explicit bool // claimed with Claim (else only while a record exists)
}

// claimPath is CLAIMDIR/MAJOR:MINOR.lock.
func (a *Actuator) claimPath(mm string) string { return filepath.Join(a.claimDir, mm+".lock") }

// Claim makes the Actuator the owner of dev (a whole disk's kernel name)
// until Release or Close: another Actuator then cannot claim, change or
// revert it. Claiming a device this Actuator already owns is a no-op. The
// agent claims every device it starts governing. Errors: *OwnedError
// (ErrOwned) naming the owner's state directory and pid; ErrDeviceGone;
// ErrInvalidSetting for a bad name; an error creating the claim file.
func (a *Actuator) Claim(dev string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	if !validAttrName(dev) {
		return fmt.Errorf("actuate: device name %q: %w", dev, ErrInvalidSetting)
	}
	if err := a.claim(dev); err != nil {
		return err
	}
	if c := a.claims[dev]; c != nil { // nil without claims (ClaimsUnavailable)
		c.explicit = true
	}
	return nil
}

// Release gives up the claim of dev taken by Claim. While the Actuator
// still has a record of dev (the device is changed: Revert or Forget it),
// the claim is kept until the record goes. Releasing a device not claimed
// is a no-op.
func (a *Actuator) Release(dev string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.claims[dev]; c != nil {
		c.explicit = false
	}
	return a.settle(dev)
}

// Claimed returns, sorted, the devices this Actuator owns now.
func (a *Actuator) Claimed() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.claims))
	for k := range a.claims {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// claim takes dev's claim (not explicit) unless this Actuator has it.
func (a *Actuator) claim(dev string) error {
	id, err := a.identity(dev)
	if err != nil {
		return err
	}
	if c := a.claims[dev]; c != nil {
		if c.mm == id.majorMinor {
			return nil
		}
		// The name now belongs to another device: the old claim is moot
		// (a file left behind is retaken by whoever claims it next).
		_ = a.dropClaim(dev)
	}
	if a.claimsOff != nil {
		return nil
	}
	c, err := a.acquire(dev, id)
	if err != nil {
		if errors.Is(err, syscall.EROFS) {
			// No claim can be taken on this host root (see
			// ClaimsUnavailable).
			a.claimsOff = err
			return nil
		}
		return err
	}
	a.claims[dev] = c
	return nil
}

// ClaimsUnavailable returns why this Actuator cannot take claims (the
// claim directory is on a read-only file system, e.g. a container's
// read-only root without a mount for it), or nil. Without claims the
// Actuator works as before they existed: nothing stops another Actuator
// from changing the same device. The agent should report it; the fix is to
// mount a writable host directory there (the host's /run/shadowtune at
// HOSTROOT/run/shadowtune).
func (a *Actuator) ClaimsUnavailable() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.claimsOff
}

// settle releases dev's claim unless it is explicit or dev has a record.
func (a *Actuator) settle(dev string) error {
	c := a.claims[dev]
	if c == nil || c.explicit || a.records[dev] != nil {
		return nil
	}
	return a.dropClaim(dev)
}

// dropClaim removes the claim file (while holding its lock, so that a
// waiting claimer re-checks the inode and retries) and closes it.
func (a *Actuator) dropClaim(dev string) error {
	c := a.claims[dev]
	if c == nil {
		return nil
	}
	delete(a.claims, dev)
	err := os.Remove(c.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("actuate: release claim of %s: %w", dev, err)
	}
	return nil
}

func (a *Actuator) acquire(dev string, id identity) (*claim, error) {
	if err := os.MkdirAll(a.claimDir, 0o755); err != nil {
		return nil, fmt.Errorf("actuate: claim directory: %w", err)
	}
	path := a.claimPath(id.majorMinor)
	for range 5 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("actuate: claim %s: %w", dev, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			prev := readClaim(f)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &OwnedError{Device: dev, MajorMinor: id.majorMinor, StateDir: prev.StateDir, PID: prev.PID, Live: true, Path: path}
			}
			return nil, fmt.Errorf("actuate: claim %s: flock %s: %w", dev, path, err)
		}
		// The owner may have removed the file between our open and our
		// flock: then we hold a lock on a dead inode; start over.
		var st1, st2 syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &st1) != nil || syscall.Stat(path, &st2) != nil || st1.Ino != st2.Ino || st1.Dev != st2.Dev {
			f.Close()
			continue
		}
		prev := readClaim(f)
		if prev.StateDir != "" && prev.StateDir != a.stateDir && a.deadOwnerChanged(prev, dev, id) {
			f.Close() // the file stays: it names the owner
			return nil, &OwnedError{Device: dev, MajorMinor: id.majorMinor, StateDir: prev.StateDir, PID: prev.PID, Path: path}
		}
		b, _ := json.Marshal(claimFile{StateDir: a.stateDir, PID: os.Getpid(), Device: dev, Dev: id.majorMinor, ClaimedAt: time.Now().UTC()})
		werr := f.Truncate(0)
		if werr == nil {
			_, werr = f.WriteAt(append(b, '\n'), 0)
		}
		if err := werr; err != nil {
			f.Close()
			return nil, fmt.Errorf("actuate: claim %s: write %s: %w", dev, path, err)
		}
		return &claim{f: f, path: path, mm: id.majorMinor}, nil
	}
	return nil, fmt.Errorf("actuate: claim %s: %s keeps being replaced", dev, path)
}

// deadOwnerChanged reports whether the state directory of a dead owner
// still records the original of this very device.
func (a *Actuator) deadOwnerChanged(prev claimFile, dev string, id identity) bool {
	o, err := readStateFile(prev.StateDir, dev)
	if err != nil {
		return false
	}
	return o.MajorMinor == id.majorMinor && (o.DiskSeq == 0 || id.diskSeq == 0 || o.DiskSeq == id.diskSeq)
}

// readClaim reads a claim file's content; a zero claimFile if it is empty
// or unreadable (its owner is writing it).
func readClaim(f *os.File) claimFile {
	var c claimFile
	for range 3 {
		b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
		if err == nil && len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &c) == nil {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	return claimFile{}
}

// OwnerOf returns the owner recorded in the claim file of a device number
// ("7:0") in claimDir, and whether a live process holds it. For `shadowtune
// state list`.
func OwnerOf(claimDir, majorMinor string) (stateDir string, pid int, live bool, err error) {
	path := filepath.Join(claimDir, majorMinor+".lock")
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", 0, false, nil
		}
		return "", 0, false, fmt.Errorf("actuate: claim file: %w", err)
	}
	defer f.Close()
	c := readClaim(f)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return c.StateDir, c.PID, errors.Is(err, syscall.EWOULDBLOCK), nil
	}
	return c.StateDir, c.PID, false, nil
}
