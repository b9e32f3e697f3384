package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// Kinds of error. Every error the Actuator returns about a device wraps
// one of them (test with errors.Is) and, for a file operation, is an
// *AttrError naming the file.
var (
	// ErrDeviceGone: the device no longer exists (ENOENT on its
	// directory, ENODEV, ENXIO), or its name now belongs to another device
	// (different dev or diskseq from the recorded one, e.g. a loop device
	// detached and re-attached). Not fatal for other devices.
	ErrDeviceGone = errors.New("device gone")
	// ErrBusy: the kernel refused for now (EBUSY, EAGAIN; ENOENT from the
	// scheduler's store while the queue is unregistered or its hardware
	// queues are being updated, block/elevator.c elv_iosched_store).
	// Retrying later may succeed.
	ErrBusy = errors.New("busy, retry later")
	// ErrReadOnly: sysfs is mounted read-only (EROFS), e.g. a container
	// without a writable /sys.
	ErrReadOnly = errors.New("read-only file system")
	// ErrPermission: EACCES or EPERM (not root, or no CAP_SYS_ADMIN).
	ErrPermission = errors.New("permission denied")
	// ErrRejected: the kernel rejected the value (EINVAL, ERANGE).
	ErrRejected = errors.New("value rejected by the kernel")
	// ErrMismatch: the value read back after a write differs from the
	// value written (the kernel rounded or clamped it: read_ahead_kb to
	// whole pages, millisecond tunables to whole jiffies, negative
	// mq-deadline values to 0).
	ErrMismatch = errors.New("read-back differs from the value written")
	// ErrNotAllowed: the attribute is outside the allowlist, or the
	// device or scheduler does not expose it.
	ErrNotAllowed = errors.New("not allowed")
	// ErrInvalidSetting: the Setting is malformed (unknown scheduler,
	// negative value, ...); nothing was written.
	ErrInvalidSetting = errors.New("invalid setting")
	// ErrRollback: a change failed and putting the device back also
	// failed; the device may be half-changed. Its originals are still
	// recorded and the change stays journaled (Interrupted), so Revert
	// (or the next Apply) can still restore it.
	ErrRollback = errors.New("rollback failed")
	// ErrCorruptState: a state file cannot be parsed. It is left in
	// place for an operator to inspect; it is never silently discarded.
	ErrCorruptState = errors.New("corrupt state file")
)

// AttrError is a failed read, write or read-back of one attribute file.
type AttrError struct {
	Op     string // "read", "write" or "verify"
	Device string // kernel name, "sda"
	Path   string // the file, e.g. /sys/block/sda/queue/scheduler
	Value  string // the value written (write, verify)
	Got    string // verify: the value read back
	Kind   error  // one of the Err* kinds, or nil
	Err    error  // the underlying error, or nil for a read-back mismatch
}

func (e *AttrError) Error() string {
	var b strings.Builder
	b.WriteString("actuate: ")
	switch e.Op {
	case "write":
		fmt.Fprintf(&b, "write %q to %s", e.Value, e.Path)
	case "verify":
		fmt.Fprintf(&b, "%s: wrote %q, read back %q", e.Path, e.Value, e.Got)
	default:
		fmt.Fprintf(&b, "%s %s", e.Op, e.Path)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Err != nil {
		var errno syscall.Errno
		if errors.As(e.Err, &errno) {
			fmt.Fprintf(&b, " (%s: %s)", errnoName(errno), errno.Error())
		} else {
			fmt.Fprintf(&b, " (%v)", e.Err)
		}
	}
	return b.String()
}

// Unwrap returns the kind and the underlying error, so errors.Is matches
// both ErrBusy and syscall.EBUSY.
func (e *AttrError) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EBUSY:
		return "EBUSY"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.EROFS:
		return "EROFS"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.ERANGE:
		return "ERANGE"
	case syscall.ENODEV:
		return "ENODEV"
	case syscall.ENXIO:
		return "ENXIO"
	case syscall.EIO:
		return "EIO"
	}
	return fmt.Sprintf("errno %d", int(e))
}

// kindOf classifies an OS error. ENOENT is decided by the caller, who
// knows whether the device still exists.
func kindOf(err error) error {
	switch {
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EAGAIN):
		return ErrBusy
	case errors.Is(err, syscall.EROFS):
		return ErrReadOnly
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, fs.ErrPermission):
		return ErrPermission
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ERANGE):
		return ErrRejected
	case errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ENXIO):
		return ErrDeviceGone
	}
	return nil
}

// ChangeError is a failed Apply: Cause is why the change failed; Rollback
// is nil when the device was put back exactly as it was before the
// change, else why that failed too (then errors.Is(err, ErrRollback)).
type ChangeError struct {
	Device   string
	Cause    error
	Rollback error
}

func (e *ChangeError) Error() string {
	if e.Rollback == nil {
		return fmt.Sprintf("%v; %s rolled back to its state before the change", e.Cause, e.Device)
	}
	return fmt.Sprintf("%v; rollback of %s failed too, the device may be half-changed: %v", e.Cause, e.Device, e.Rollback)
}

// Unwrap returns the cause, and ErrRollback with the rollback's error
// when the rollback failed.
func (e *ChangeError) Unwrap() []error {
	if e.Rollback == nil {
		return []error{e.Cause}
	}
	return []error{e.Cause, ErrRollback, e.Rollback}
}

// ErrRecordNotUpdated means the device is as intended (changed, or restored)
// but its state file could not be written or removed (a read-only or full
// state file system). The error is a *RecordError.
var ErrRecordNotUpdated = errors.New("state file not updated")

// RecordError is a state file that could not be updated while the device
// itself was changed or restored as asked.
type RecordError struct {
	Device string
	Path   string // STATEDIR/DEV.json
	Op     string // "journal", "clear the journal of", "update", "remove"
	// Restored is true for a revert: the device has its original values
	// (read back), only the record is left.
	Restored bool
	// NotChanged is true for an Apply refused because its journal could
	// not be written: the device was not changed.
	NotChanged bool
	Err        error
}

func (e *RecordError) Error() string {
	if e.Restored {
		return fmt.Sprintf("actuate: %s restored, but could not remove its record %s (%v): it stays until a revert can remove it", e.Device, e.Path, e.Err)
	}
	if e.NotChanged {
		return fmt.Sprintf("actuate: %s: could not %s record %s (%v): the device was not changed; the original record is intact", e.Device, e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("actuate: %s: could not %s record %s (%v); the original record is intact", e.Device, e.Op, e.Path, e.Err)
}

// Unwrap returns ErrRecordNotUpdated and the cause (e.g. syscall.ENOSPC).
func (e *RecordError) Unwrap() []error { return []error{ErrRecordNotUpdated, e.Err} }

// DeviceError is an error about one device.
type DeviceError struct {
	Device string
	Err    error
}

// RevertError is RevertAll's account of the devices it did not simply
// restore; each list is in name order.
type RevertError struct {
	// Gone: devices gone or replaced by another device (ErrDeviceGone);
	// not touched, records kept until Forget. Not a failed restore:
	// nothing shadowtune wrote is in effect on them.
	Gone []DeviceError
	// Failed: devices not restored (a write failed, a record that cannot
	// be loaded or does not fit the device, another owner); records kept.
	Failed []DeviceError
	// RecordKept: devices restored whose record could not be removed
	// (*RecordError); a later revert retries.
	RecordKept []DeviceError
	// Left: devices restored except the values another writer changed
	// since shadowtune's change (*LeftError, ErrOtherWriter), which stay;
	// their records are dropped. Not a failed restore: the values in
	// effect are the other writer's.
	Left []DeviceError
}

// AllRestored reports whether every device that still exists was
// restored (only Gone, RecordKept or Left entries).
func (e *RevertError) AllRestored() bool { return len(e.Failed) == 0 }

func (e *RevertError) Error() string {
	var parts []string
	list := func(what string, l []DeviceError) {
		if len(l) == 0 {
			return
		}
		msgs := make([]string, len(l))
		for i, d := range l {
			msgs[i] = d.Err.Error()
		}
		parts = append(parts, fmt.Sprintf("%d %s: %s", len(l), what, strings.Join(msgs, "; ")))
	}
	list("not restored", e.Failed)
	list("gone or replaced (not touched, record kept)", e.Gone)
	list("restored with the record kept", e.RecordKept)
	list("restored, except what another writer changed since", e.Left)
	return "actuate: revert: " + strings.Join(parts, "; ")
}

// Unwrap returns every device's error.
func (e *RevertError) Unwrap() []error {
	var out []error
	for _, l := range [][]DeviceError{e.Failed, e.Gone, e.RecordKept, e.Left} {
		for _, d := range l {
			out = append(out, d.Err)
		}
	}
	return out
}
