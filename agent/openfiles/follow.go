package openfiles

import (
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

// MaxFiles bounds the files listed for one change: a change on a disk with
// more files open than this follows the first MaxFiles and reports the
// rest as left out (Result.Truncated).
const MaxFiles = 1 << 16

// ErrNotHostPID is wrapped by New's error when the agent does not run in
// the host's PID namespace: the kernel lists open files by host PIDs,
// which pidfd_open cannot reach from another namespace (in Kubernetes,
// the pod needs hostPID).
var ErrNotHostPID = errors.New("not in the host's PID namespace")

// Follower brings the files open on a disk to the disk's new read-ahead
// (the package doc says which files, and how). Its methods may be called
// concurrently.
type Follower struct {
	probe    *tracer.OpenFilesProbe
	hostRoot string
	marks    uint32
	pageKiB  int
	log      logr.Logger
	observe  func(disk string, r Result)
}

// Result is what one Follow did.
type Result struct {
	Plan
	// Followed counts the files advised; Failed those whose advice
	// failed (the process exited, or closed the descriptor, meanwhile),
	// FirstErr the first failure.
	Followed, Failed int
	FirstErr         error
	// Truncated: more than MaxFiles files were open on the disk.
	Truncated bool
}

// New loads the open-files probe and learns the running kernel's f_mode
// bits for POSIX_FADV_RANDOM and POSIX_FADV_NOREUSE from files of its own
// (Calibrate), in a directory it creates and removes under dir (the
// agent's state directory: writable where the agent runs), or else under
// the temporary directory or /var/tmp. hostRoot
// prefixes /sys; observe, when not nil, is given every Follow's result
// (the agent counts them in its metrics). It returns an error wrapping
// tracer.ErrOpenFilesUnsupported when the kernel cannot run the probe,
// one wrapping ErrNotHostPID outside the host's PID namespace, and other
// calibration errors wrapped; nothing is left loaded on an error.
func New(hostRoot, dir string, log logr.Logger, observe func(disk string, r Result)) (*Follower, error) {
	p, err := tracer.NewOpenFilesProbe()
	if err != nil {
		return nil, err
	}
	marks, err := calibrateIn(p, []string{dir, os.TempDir(), "/var/tmp"})
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return &Follower{probe: p, hostRoot: hostRoot, marks: marks, pageKiB: os.Getpagesize() / 1024, log: log, observe: observe}, nil
}

// calibrateIn calibrates in the first of dirs where it can: fadvise does
// nothing to a file on a file system without a backing device (tmpfs),
// and an overlay keeps the marks on the file beneath. It returns the
// first error that says the agent runs outside the host's PID namespace,
// or else every directory's error.
func calibrateIn(p *tracer.OpenFilesProbe, dirs []string) (uint32, error) {
	var errs []error
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		marks, err := Calibrate(p, d)
		if err == nil {
			return marks, nil
		}
		if errors.Is(err, ErrNotHostPID) {
			return 0, err
		}
		errs = append(errs, fmt.Errorf("in %s: %w", d, err))
	}
	return 0, errors.Join(errs...)
}

// Close unloads the probe.
func (f *Follower) Close() error { return f.probe.Close() }

// FollowReadAhead brings the files open on disk's file systems (the disk
// itself and its partitions) from fromKiB to toKiB, the disk's
// read_ahead_kb before and after a change, and logs what it did: the
// agent's actuator calls it after each write of read_ahead_kb. Files on a
// device-mapper or md device over the disk, or on an overlay over it, are
// not followed.
func (f *Follower) FollowReadAhead(disk string, fromKiB, toKiB int) {
	r, err := f.Follow(disk, fromKiB, toKiB)
	if err != nil {
		f.log.Error(err, "open files not brought to the new read-ahead", "device", disk, "fromKiB", fromKiB, "toKiB", toKiB)
		return
	}
	if f.observe != nil {
		f.observe(disk, r)
	}
	if len(r.Steps) == 0 && r.Marked == 0 && r.Own == 0 {
		return
	}
	kv := []any{"device", disk, "fromKiB", fromKiB, "toKiB", toKiB, "followed", r.Followed,
		"leftMarked", r.Marked, "leftOwn", r.Own, "failed", r.Failed, "truncated", r.Truncated}
	if r.FirstErr != nil {
		kv = append(kv, "firstError", r.FirstErr.Error())
	}
	f.log.Info("open files brought to the new read-ahead", kv...)
}

// Follow is FollowReadAhead's work, returned instead of logged. It
// returns an error when the disk's devices cannot be read from sysfs or
// the probe cannot list the files; a file that cannot be advised counts
// in Result.Failed.
func (f *Follower) Follow(disk string, fromKiB, toKiB int) (Result, error) {
	files, truncated, err := f.diskFiles(disk)
	if err != nil {
		return Result{}, fmt.Errorf("follow read-ahead of %s: %w", disk, err)
	}
	r := Result{Plan: PlanFollow(files, uint32(fromKiB/f.pageKiB), uint32(toKiB/f.pageKiB), f.marks), Truncated: truncated}
	for _, s := range r.Steps {
		if err := advise(s); err != nil {
			r.Failed++
			if r.FirstErr == nil {
				r.FirstErr = err
			}
			continue
		}
		r.Followed++
	}
	return r, nil
}

// diskFiles lists the regular files open on disk's file systems (the
// disk itself and its partitions), at most MaxFiles (truncated: more were
// open). It returns an error when the disk cannot be read from sysfs or
// the probe cannot list the files.
func (f *Follower) diskFiles(disk string) (files []tracer.OpenFile, truncated bool, err error) {
	d, err := sysfs.Read(f.hostRoot, disk)
	if err != nil {
		return nil, false, err
	}
	devs := []uint32{d.Dev}
	if parts, err := sysfs.PartitionDevs(f.hostRoot, disk); err == nil {
		devs = append(devs, parts...)
	}
	return f.probe.List(devs, MaxFiles)
}
