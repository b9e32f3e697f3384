// Package readahead is the agent's read-ahead road: it chooses a device's
// read_ahead_kb from what the page cache measured of the device's readers,
// with one decision function ([Decide]) over plain inputs, and keeps the
// state a device carries between windows ([Road]): the evidence of the
// recent windows, the verification of the last change and its back-off.
//
// # What a depth change reaches
//
// The kernel copies a device's read_ahead_kb into a file's own read-ahead
// state when the file is opened (file_ra_state_init, mm/readahead.c), and
// read(2) and a mapping's fault read-around use that copy
// (page_cache_sync_ra, mm/readahead.c; do_sync_mmap_readahead,
// mm/filemap.c). A new depth therefore serves the files opened after it:
// the decision is a prediction about the device's next readers, made from
// its recent ones. The evidence of past windows is kept, decayed with the
// policy's spec.rollout.minDwell as its time constant (the time a setting
// is meant to serve), so that a device whose random and sequential
// readers alternate gets the depth that serves both rather than a depth
// that flips with each phase and always lags it.
//
// # The evidence
//
// From the page-cache probe (agent/tracer, bpf/pagecache.c), per window:
// the read-ahead windows the kernel read and their pages, split by who
// started them, and how many of their pages were used before memory
// reclaim evicted them. Two kinds of reader:
//
//   - random: the read-around of page faults that missed the page cache
//     (do_sync_mmap_readahead): read_ahead_kb around each fault, of which
//     the faulting page is used and, under memory pressure, little else.
//     The pages fault-around mapped (filemap_map_pages maps up to 16
//     cached pages around a fault) count as wasted here: the probe cannot
//     see whether the process touched them.
//   - sequential: the windows read() read (page_cache_sync_ra and
//     page_cache_async_ra, mm/readahead.c), and those a sequential mmap
//     reader starts by faulting on a page marked PG_readahead
//     (do_async_mmap_readahead). Page faults' windows are one kind or the
//     other as most of them were synchronous or asynchronous.
//
// Waste arises only when reclaim evicts a page before its use: it is the
// measure of memory pressure on the device's readers.
//
// # The decision
//
// Each kind's windows are costed at each candidate depth (Cost): a
// window of p pages costs the service time of its requests, a line in
// their size fitted to the device's measured read-ahead requests
// (LineDevice), and at least its share of the readers' blk-throttle caps
// (agent/blkcaps), which no service time shows. A kind that used u pages
// of each window needs used ÷ min(p, u) windows at depth p; a kind that
// wasted at most the policy's tolerated regression uses all it is given
// (u unbounded: a sequential reader). A lower depth wins on measured
// waste (a random reader's read-around costs the transfer of pages it
// never uses), a higher one on measured sequential demand (a sequential
// reader pays the per-request cost once per window): competitive
// prefetching's trade-off (EuroSys 2007 §3: depth against the cost of a
// switch) with both sides measured. Decide chooses the deepest depth
// within the policy's margin of the least (DADS §4.2's 5 %), and a cut
// stops at the competitive depth (§4.1, CompetitiveRatio), which keeps
// readers the evidence has not seen within twice their least. A change
// must beat the current depth by the margin, and go the way the window's
// own evidence calls for: a cut needs waste measured in the window, a
// raise sequential readers in it using what read-ahead brought. The
// decayed evidence chooses how far a change goes, not whether one is
// made: it holds readers that may be gone.
//
// # Gates and verification
//
// A move of read-ahead within the policy's bounds is low risk and is made
// in the window that measured its evidence: it passes minDwell and the
// operator's grant, and is held only in Observe mode, by a paused policy,
// or when the agent yields to another writer. Every change is verified:
// the device's busy time per used page over the next windows of the same
// kind of reader at the new depth is compared with windows of that kind
// at the old depth: those before the change, or, when the window that
// decided it held other readers too, those after it whose files were
// opened before it; a
// regression beyond the tolerance reverts it and backs off that direction
// for the policy's back-off.
//
// Units: depths in KiB (multiples of 4), pages of 4 KiB, times in ns.
package readahead
