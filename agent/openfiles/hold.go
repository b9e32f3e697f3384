package openfiles

// Held files: mapped files a raise left at a cut depth.
//
// The agent cuts a disk's read-ahead when its pages go unused, mostly
// the read-around of random page faults on mapped files (each fault reads
// the file's whole read-ahead around it, do_sync_mmap_readahead in
// mm/filemap.c), and restores it when sequential readers use read-ahead
// again. Brought back with the disk, a mapped file the process still
// reads at random thrashes again at once: in the decision-quality
// benchmark's MEM, the restore during a scan was followed by the next
// mmap phase's thrash and the restore's revert. So a raise decided on
// sequential readers' evidence leaves the mapped files at the cut depth
// (FollowKeepingMapped), and the Follower holds them: it records them, in
// memory and in the state directory, and puts them back to the disk's
// value at ReleaseHeld (the agent's exit, `shadowtune run --revert` after
// a crash) or ReleaseHeldOf (the agent saw them read in order again,
// agent/mappedrelease.go), forgets those no longer open at PruneHeld, and
// forgets them all when the disk's value comes back to theirs.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/fsutil"
)

// HeldFileName is the file, in the state directory, that records the
// held files.
const HeldFileName = "openfiles-held.json"

// heldFile is one held file: the process and descriptor that hold it, its
// inode (a descriptor reused for another file is not touched) and the
// read-ahead it was left at, pages.
type heldFile struct {
	PID   uint32 `json:"pid"`
	FD    uint32 `json:"fd"`
	Ino   uint64 `json:"ino"`
	Pages uint32 `json:"pages"`
}

// loadHeld reads the held files recorded at path (none when it does not
// exist). It returns an error naming the file when it cannot be read or
// parsed.
func loadHeld(path string) (map[string][]heldFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]heldFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("held open files: %w", err)
	}
	held := map[string][]heldFile{}
	if err := json.Unmarshal(b, &held); err != nil {
		return nil, fmt.Errorf("held open files: %s: %w", path, err)
	}
	return held, nil
}

// updateHeld records the files kept at a raise of disk to toPages, and
// forgets the held files of disk at toPages: the disk's value is theirs
// again, and they follow it like any other. It writes the record when it
// changed, and returns an error when it cannot.
func (f *Follower) updateHeld(disk string, kept []tracer.OpenFile, toPages uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.held[disk]
	hs := slices.DeleteFunc(slices.Clone(old), func(h heldFile) bool { return h.Pages == toPages })
	for _, k := range kept {
		hs = append(hs, heldFile{PID: k.PID, FD: k.FD, Ino: k.Ino, Pages: k.RAPages})
	}
	if slices.Equal(hs, old) {
		return nil
	}
	if len(hs) == 0 {
		delete(f.held, disk)
	} else {
		f.held[disk] = hs
	}
	return f.saveHeld()
}

// Held returns how many open descriptors of mapped files on disk are
// held at a depth of their own (a raise left them at a cut, or the agent
// cut them alone), and the lowest of those depths, KiB; 0, 0 when none
// is held.
func (f *Follower) Held(disk string) (descriptors, minKiB int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.held[disk] {
		if kib := int(h.Pages) * f.pageKiB; descriptors == 0 || kib < minKiB {
			minKiB = kib
		}
		descriptors++
	}
	return descriptors, minKiB
}

// PruneHeld forgets the held files of disk that are no longer open (their
// process exited or closed the descriptor): nothing is left to put back
// for them. It returns how many descriptors of disk stay held, and an
// error, forgetting nothing, when the disk's files cannot be listed, or
// when the record cannot be written.
func (f *Follower) PruneHeld(disk string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hs := f.held[disk]
	if len(hs) == 0 {
		return 0, nil
	}
	files, _, err := f.diskFiles(disk)
	if err != nil {
		return len(hs), fmt.Errorf("prune held open files of %s: %w", disk, err)
	}
	open := make([]heldFile, 0, len(files))
	for _, of := range files {
		open = append(open, heldFile{PID: of.PID, FD: of.FD, Ino: of.Ino, Pages: of.RAPages})
	}
	kept := slices.DeleteFunc(slices.Clone(hs), func(h heldFile) bool { return !slices.Contains(open, h) })
	if len(kept) == len(hs) {
		return len(kept), nil
	}
	if len(kept) == 0 {
		delete(f.held, disk)
	} else {
		f.held[disk] = kept
	}
	return len(kept), f.saveHeld()
}

// saveHeld writes the record of the held files, or removes it when none
// is held (f.mu held).
func (f *Follower) saveHeld() error {
	if len(f.held) == 0 {
		if err := os.Remove(f.heldPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("held open files: %w", err)
		}
		return nil
	}
	err := fsutil.WriteAtomic(f.heldPath, 0o600, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(f.held)
	})
	if err != nil {
		return fmt.Errorf("held open files: %w", err)
	}
	return nil
}

// ReleaseHeld puts every held file still open (the same process,
// descriptor and inode, at the read-ahead it was left at) back to its
// disk's read-ahead with POSIX_FADV_NORMAL, forgets the held files and
// removes their record. It returns how many it put back, and an error
// joining those of the disks whose files could not be listed (their held
// files are kept) and of the record.
func (f *Follower) ReleaseHeld() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	n := 0
	for disk := range f.held {
		k, err := f.releaseDisk(disk)
		n += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := f.saveHeld(); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// ReleaseHeldOf is ReleaseHeld for the held files of disk alone: the
// agent calls it when they are read sequentially again (a scan or merge
// through the mapping), which their cut depth would slow. It returns how
// many it put back, and an error when the disk's files could not be
// listed (they are then kept) or the record not written.
func (f *Follower) ReleaseHeldOf(disk string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.held[disk]; !ok {
		return 0, nil
	}
	n, err := f.releaseDisk(disk)
	if err != nil {
		return n, err
	}
	return n, f.saveHeld()
}

// releaseDisk puts the held files of disk still open back to the disk's
// read-ahead and forgets them (f.mu held; the record is not written). It
// returns how many it put back, and an error, keeping them, when the
// disk's files cannot be listed.
func (f *Follower) releaseDisk(disk string) (int, error) {
	files, _, err := f.diskFiles(disk)
	if err != nil {
		return 0, fmt.Errorf("release held open files of %s: %w", disk, err)
	}
	hs, n := f.held[disk], 0
	for _, of := range files {
		if !slices.Contains(hs, heldFile{PID: of.PID, FD: of.FD, Ino: of.Ino, Pages: of.RAPages}) {
			continue
		}
		if err := advise(Step{PID: of.PID, FD: of.FD, Advice: Normal}); err == nil {
			n++
		}
	}
	delete(f.held, disk)
	return n, nil
}
