package agent

import (
	"sync"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/openfiles"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

// raFollower is the actuator's read-ahead follower
// (actuate.ReadAheadFollower): after each write of a device's
// read_ahead_kb it starts a new page-cache epoch, so that the new depth's
// waste is measured on the pages read at it (PageCacheWindow.UsedNow),
// then brings the files open on the device along (agent/openfiles). A
// raise the agent decided on sequential readers' evidence
// (keepingMapped) leaves the mapped files at the cut depth; they are put
// back at release.
type raFollower struct {
	probe *tracer.PageCacheProbe // nil: no page-cache probe
	files *openfiles.Follower    // nil: open files are not followed
	log   logr.Logger

	mu   sync.Mutex
	keep map[string]bool // devices whose raise now keeps mapped files
}

// FollowReadAhead implements actuate.ReadAheadFollower.
func (f *raFollower) FollowReadAhead(disk string, fromKiB, toKiB int) {
	if f.probe != nil {
		if err := f.probe.NewEpoch(); err != nil {
			f.log.Error(err, "the old depth's pages count in the new depth's waste", "device", disk)
		}
	}
	if f.files == nil {
		return
	}
	f.mu.Lock()
	keep := f.keep[disk]
	f.mu.Unlock()
	if keep {
		f.files.FollowKeepingMapped(disk, fromKiB, toKiB)
		return
	}
	f.files.FollowReadAhead(disk, fromKiB, toKiB)
}

// keepingMapped makes the raises of disk keep its mapped files
// (openfiles.Follower.FollowKeepingMapped) until the function it returns
// is called. f may be nil.
func (f *raFollower) keepingMapped(disk string) func() {
	if f == nil {
		return func() {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keep == nil {
		f.keep = map[string]bool{}
	}
	f.keep[disk] = true
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.keep, disk)
	}
}

// holdsMapped reports whether f keeps mapped files at a depth of their
// own: it follows open files. f may be nil.
func (f *raFollower) holdsMapped() bool { return f != nil && f.files != nil }

// held is openfiles.Follower.Held for disk; 0, 0 when f follows no open
// files. f may be nil.
func (f *raFollower) held(disk string) (descriptors, minKiB int) {
	if !f.holdsMapped() {
		return 0, 0
	}
	return f.files.Held(disk)
}

// releaseDisk puts the mapped files held on disk back to its read-ahead
// (openfiles.Follower.ReleaseHeldOf). It returns how many it put back,
// and the error of a disk whose files could not be listed (they stay
// held) or of the record. f may be nil.
func (f *raFollower) releaseDisk(disk string) (int, error) {
	if !f.holdsMapped() {
		return 0, nil
	}
	return f.files.ReleaseHeldOf(disk)
}

// prune forgets the held mapped files of disk no longer open
// (openfiles.Follower.PruneHeld) and returns how many descriptors stay
// held; an error is logged, and counts them all as held. f may be nil.
func (f *raFollower) prune(disk string) int {
	if !f.holdsMapped() {
		return 0
	}
	n, err := f.files.PruneHeld(disk)
	if err != nil {
		f.log.Error(err, "held mapped files not pruned", "device", disk)
	}
	return n
}

// release puts the mapped files that raises left at a cut depth back to
// their devices' read-ahead (openfiles.Follower.ReleaseHeld), and logs
// what it did. f may be nil.
func (f *raFollower) release() {
	if f == nil || f.files == nil {
		return
	}
	n, err := f.files.ReleaseHeld()
	if err != nil {
		f.log.Error(err, "held mapped files not all put back", "putBack", n)
		return
	}
	if n > 0 {
		f.log.Info("held mapped files put back to their devices' read-ahead", "files", n)
	}
}
