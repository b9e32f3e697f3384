package engine

// The engine as the one door to the simulator for a caller that holds
// traced requests and a policy (the node agent): it builds the window, the
// cache and read-ahead configurations and checks candidates, so that such a
// caller needs none of sim, sched, redcap or readahead.

import (
	"fmt"

	"github.com/shadowtune/shadowtune/internal/readahead"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Loop is how a window's requests arrive in the simulation (sim.Loop).
type Loop = sim.Loop

// The loop modes (sim's).
const (
	// LoopAuto is closed loop when the requests carry completion times and
	// the submitting process of each, open loop otherwise.
	LoopAuto = sim.LoopAuto
	// LoopOpen replays the recorded arrival times.
	LoopOpen = sim.LoopOpen
	// LoopClosed issues each process's next request a think time after its
	// previous one completes.
	LoopClosed = sim.LoopClosed
)

// WaitsFor reports whether an application waits for a request's
// completion (sim.WaitsFor): a read, or a synchronous write.
var WaitsFor = sim.WaitsFor

// Tunables are elevator tunables by their sysfs name, in sysfs units
// (sched.Tunables).
type Tunables = sched.Tunables

// EvaluateRequests simulates reqs (in arrival order, times in ns) under
// each candidate with the given loop mode, and decides (Evaluate). It
// returns sim's error for an empty or malformed window and Evaluate's
// errors.
func EvaluateRequests(reqs []trace.Request, loop Loop, cands []Candidate, opt Options) (Report, error) {
	w, err := sim.NewWindow(reqs, loop)
	if err != nil {
		return Report{}, fmt.Errorf("window: %w", err)
	}
	return Evaluate(w, cands, opt)
}

// CheckCandidate returns an error when the simulator cannot model c: an
// unknown scheduler, a tunable the elevator model does not have or a value
// out of its range, or a queue attribute (nr_requests) the simulator does
// not model, outside the kernel's bounds or set with none.
func CheckCandidate(c Candidate) error {
	if err := checkQueueKnobs(c.Scheduler, c.Tunables); err != nil {
		return err
	}
	iosched, _ := c.split()
	_, err := sched.New(c.Scheduler, iosched, sched.DefaultDevice)
	return err
}

// CacheWarm is what a simulated cache carries from one window to the next
// (redcap.Warm): its segments, least recently used first, and its hot
// hotspots.
type CacheWarm = redcap.Warm

// CacheSegmentSectors is the REDCAP segment size CacheForBudget uses: 256
// sectors of 512 bytes, 128 KiB (REDCAP 2007 §3).
const CacheSegmentSectors = 256

// CacheForBudget is the REDCAP cache that fits in budgetBytes of memory:
// segments of CacheSegmentSectors (128 KiB), at least one.
func CacheForBudget(budgetBytes int64) redcap.Config {
	seg := int64(CacheSegmentSectors * trace.SectorSize)
	return redcap.Config{Segments: int(max(budgetBytes/seg, 1)), SegmentSectors: CacheSegmentSectors}
}

// CacheForBlocks is the simulated cache standing for a dm-cache of blocks
// blocks of blockSectors sectors each on a device of capacitySectors
// sectors, as the agent judges it: one segment per cache block; a miss is
// served from the disk, not prefetched for the reader; a block is copied
// in at its second miss after at least 64 reads without one
// (redcap.Config.PromoteAfter 2, PromoteGapQuiet); the least recently
// used block is replaced. It was the agent's stand-in until smq's own
// rules (SMQ), which predict smq's read hits better, replaced it.
// blockSectors must be a multiple of 8 (dm-cache's block size is a
// multiple of 32 KiB).
func CacheForBlocks(blocks uint64, blockSectors uint32, capacitySectors uint64) redcap.Config {
	return redcap.Config{Segments: int(max(min(blocks, 1<<20), 1)), SegmentSectors: blockSectors, CapacitySectors: capacitySectors,
		PromoteAfter: DMCachePromoteAfter, PromoteGapQuiet: true}
}

// SMQ is the simulated dm-cache the agent judges a dm-cache by: one
// segment per cache block, smq's own rules for what it copies in and
// gives up (redcap.Config.SMQ: its hotspot queue of HotspotSegments
// blocks per hotspot, its ticks timed by the requests' recorded
// completions, its demotions from the lower half of its cached blocks),
// a miss served from the disk. blockSectors must be a multiple of 8;
// capacitySectors is the origin's size, which sets the hotspot size. On
// the VM lab's calibration workloads (TestSMQCalibration) and on a file
// read backward (GNU tac, whose hits come from the blocks copied in
// while it reads them), see docs/agent.md for how close it comes to
// smq's read hits.
func SMQ(blocks uint64, blockSectors uint32, capacitySectors uint64) redcap.Config {
	return redcap.Config{Segments: int(max(min(blocks, 1<<20), 1)), SegmentSectors: blockSectors, CapacitySectors: capacitySectors,
		HotspotSegments: HotspotSegments(blocks, blockSectors, capacitySectors), SMQ: true}
}

// HotspotSegments is how many cache blocks smq groups into one hotspot
// block for a cache of blocks blocks of blockSectors sectors on an origin
// of capacitySectors sectors: 16, halved (down to 1) while 16 × … blocks
// per hotspot × max(blocks/4, 1024) hotspots would cover more than the
// origin (calc_hotspot_params, drivers/md/dm-cache-policy-smq.c).
func HotspotSegments(blocks uint64, blockSectors uint32, capacitySectors uint64) int {
	per := uint64(16)
	n := max(blocks/4, 1024)
	for per > 1 && per*uint64(blockSectors)*n > capacitySectors {
		per /= 2
	}
	return int(per)
}

// DMCachePromoteAfter is the miss count at which the simulated dm-cache
// copies a block in (redcap.Config.PromoteAfter).
const DMCachePromoteAfter = 2

// ReadAheadBounds bounds the competitive read-ahead depth, in KiB.
func ReadAheadBounds(minKiB, maxKiB int) readahead.Bounds {
	return readahead.Bounds{MinKiB: minKiB, MaxKiB: maxKiB}
}
