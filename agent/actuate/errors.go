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
