package tracer

import "errors"

// ErrOpenFilesUnsupported is wrapped by NewOpenFilesProbe's error when the
// kernel cannot run the BPF task-file iterator (iter/task_file, Linux 5.8
// with BTF), or on another platform than Linux.
var ErrOpenFilesUnsupported = errors.New("open-files probe unsupported")

// OpenFile is one regular file open on a listed file system device, as
// the kernel holds it (struct file, include/linux/fs.h).
type OpenFile struct {
	// PID is the process that holds the file (its thread group id in the
	// host's, initial, PID namespace); FD the descriptor it holds it by.
	// Threads that share their process's file table are not listed again.
	PID, FD uint32
	// Dev is the file system's device (s_dev: major<<20 | minor, as
	// KernelDev gives it); Ino the file's inode number.
	Dev uint32
	Ino uint64
	// RAPages is the file's own read-ahead (f_ra.ra_pages), in pages: a
	// copy of the device's read_ahead_kb taken at open, doubled by
	// POSIX_FADV_SEQUENTIAL, reset to the device's by POSIX_FADV_NORMAL.
	RAPages uint32
	// Mode is the file's f_mode: FMODE_* bits, whose values differ
	// between kernel versions.
	Mode uint32
	// Mapped: some process maps the file (a VMA in its address_space's
	// i_mmap tree), so its page faults read around by RAPages
	// (do_sync_mmap_readahead, mm/filemap.c).
	Mapped bool
}

// openFilesMaxDevs is how many devices List accepts (MAX_DEVS in
// bpf/openfiles.c).
const openFilesMaxDevs = 256
