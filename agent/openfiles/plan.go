// Package openfiles brings the files open on a disk to the disk's new
// read-ahead when the agent changes it.
//
// The kernel copies a device's read-ahead (queue/read_ahead_kb) into a
// file's own state when the file is opened (file_ra_state_init,
// mm/readahead.c); read(2) and an mmap's fault read-around then use that
// copy (page_cache_sync_ra, mm/readahead.c; do_sync_mmap_readahead,
// mm/filemap.c). So a change of read_ahead_kb reaches only the files
// opened after it: a database that keeps its files open, or a process
// that maps a file once, keeps the read-ahead it opened with. Measured on
// ext4 over a loop device with read_ahead_kb cut from 2560 to 16 KiB
// while a process held a 256 MiB file mapped: each random fault still
// read 2,222 KiB; once the file was followed, 16 KiB
// (TestFollowReadAheadReachesOpenFiles; docs/agent.md, "Open files").
//
// POSIX_FADV_NORMAL sets an open file's read-ahead to the device's
// current value and clears the file's POSIX_FADV_RANDOM and
// POSIX_FADV_NOREUSE marks; POSIX_FADV_SEQUENTIAL sets it to twice the
// device's (generic_fadvise, mm/fadvise.c). Both act on the open file, so
// on any descriptor of it, and pidfd_getfd(2) gives the agent one.
// Follow therefore changes only the files that follow the device's
// value: a file whose read-ahead is the old value and that carries no
// mark gets POSIX_FADV_NORMAL; one at twice the old value and no mark
// (an application's POSIX_FADV_SEQUENTIAL) gets POSIX_FADV_SEQUENTIAL; a
// file with a mark, or at any other value, is the application's own
// choice and is left. Changing the device back brings the same files
// back to the value they had, so the change is put back exactly.
package openfiles

import (
	"errors"

	"github.com/shadowtune/shadowtune/agent/tracer"
)

// Advice is the fadvise advice a step gives a file.
type Advice int

const (
	// Normal is POSIX_FADV_NORMAL: the file's read-ahead becomes the
	// device's.
	Normal Advice = iota
	// Sequential is POSIX_FADV_SEQUENTIAL: twice the device's.
	Sequential
)

func (a Advice) String() string {
	if a == Sequential {
		return "POSIX_FADV_SEQUENTIAL"
	}
	return "POSIX_FADV_NORMAL"
}

// Step is one file to advise: the process and descriptor that hold it,
// and the file they held when it was listed (its file system's device,
// tracer.OpenFile.Dev, and inode).
type Step struct {
	PID, FD uint32
	Dev     uint32
	Ino     uint64
	Advice  Advice
}

// ErrReplaced is wrapped by a step's error when the descriptor no longer
// holds the file it was listed with: the file it holds is left.
var ErrReplaced = errors.New("the descriptor holds another file than the one listed")

// Plan is what Follow does for one change of a device's read-ahead.
type Plan struct {
	Steps []Step
	// Marked counts the files left because they carry an application's
	// POSIX_FADV_RANDOM or POSIX_FADV_NOREUSE mark; Own those left
	// because their read-ahead is neither the old value nor twice it.
	Marked, Own int
}

// PlanFollow decides, for a device's read-ahead changed from fromPages to
// toPages (pages), which of files (listed on the device's file systems)
// follow it. marks is the f_mode bits of POSIX_FADV_RANDOM and
// POSIX_FADV_NOREUSE on the running kernel (Calibrate). A change to the
// same value plans nothing.
func PlanFollow(files []tracer.OpenFile, fromPages, toPages, marks uint32) Plan {
	var p Plan
	if fromPages == toPages {
		return p
	}
	for _, f := range files {
		switch {
		case f.Mode&marks != 0:
			p.Marked++
		case f.RAPages == fromPages:
			p.Steps = append(p.Steps, Step{PID: f.PID, FD: f.FD, Dev: f.Dev, Ino: f.Ino, Advice: Normal})
		case fromPages > 0 && f.RAPages == 2*fromPages:
			p.Steps = append(p.Steps, Step{PID: f.PID, FD: f.FD, Dev: f.Dev, Ino: f.Ino, Advice: Sequential})
		default:
			p.Own++
		}
	}
	return p
}
