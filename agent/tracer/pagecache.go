package tracer

import "errors"

// ErrPageCacheUnsupported is wrapped by NewPageCacheProbe's error when the
// kernel lacks a tracepoint the probe needs (Linux 6.1 does), or on
// another platform than Linux; the error names the first one missing.
var ErrPageCacheUnsupported = errors.New("page-cache probe unsupported")

// PageCacheOptions configure the page-cache probe.
type PageCacheOptions struct {
	// SampleEvery follows 1 in SampleEvery chunks of 16 pages (64 KiB),
	// chosen by a hash of the device, inode and chunk, and counts only
	// their pages as used or wasted: the waste ratio of the followed
	// pages estimates that of all pages at a fraction of the probe's map
	// updates. A power of two; 0 or 1 follows every chunk.
	// PageCacheSampleEvery is the agent's.
	SampleEvery uint64
}

// PageCacheSampleEvery is the agent's PageCacheOptions.SampleEvery: 1 in 8
// chunks of 64 KiB. A window then needs about 8 × MinResolvedPages pages
// (8 MiB) resolved to report a ratio.
const PageCacheSampleEvery = 8

// sampleMask is the BPF program's sample_mask.
func (o PageCacheOptions) sampleMask() uint64 {
	if o.SampleEvery <= 1 {
		return 0
	}
	n := uint64(1)
	for n < o.SampleEvery {
		n <<= 1
	}
	return n - 1
}

// MinResolvedPages is how many pages (4 KiB) a window must have resolved,
// used plus wasted, for PageCacheStats.WastePct to report a ratio.
const MinResolvedPages = 256

// PageCacheStats are the cumulative page-cache counters of one file
// system device, since it was tracked. Pages are 4 KiB (PAGE_SIZE) units;
// a large folio counts all its pages.
type PageCacheStats struct {
	// AddedPages are the pages added to the page cache.
	AddedPages uint64
	// UsedPages are the pages added while tracked and then accessed
	// (read(), an mmap fault, fault-around mapping) at least once,
	// counted at their first access.
	UsedPages uint64
	// WastedPages are the pages added while tracked and evicted from the
	// page cache by memory reclaim without ever being accessed. Pages
	// removed otherwise (drop_caches, truncation, POSIX_FADV_DONTNEED)
	// are neither used nor wasted.
	WastedPages uint64
	// SyncReadAhead and AsyncReadAhead count the synchronous (on a
	// miss) and asynchronous (on reaching a PG_readahead page)
	// read-ahead decisions (events).
	SyncReadAhead, AsyncReadAhead uint64
	// FaultAsyncReadAhead are the asynchronous read-aheads a page fault
	// started: it found its page cached and marked PG_readahead
	// (do_async_mmap_readahead, mm/filemap.c), as a sequential mmap
	// reader does about once per window it reads (events; part of
	// AsyncReadAhead).
	FaultAsyncReadAhead uint64
	// ReadAheadPages are the pages of the read-ahead windows the kernel
	// read (pages).
	ReadAheadPages uint64
	// MmapFaults count mmap page faults on the device's files (events).
	MmapFaults uint64
	// UnwalkedPages are pages of events beyond the probe's per-event
	// bound (1024 pages), left unresolved (pages).
	UnwalkedPages uint64
	// AroundPages are the pages of the read-ahead windows that page faults
	// read: mmap read-around, read_ahead_kb around each fault that
	// missed the page cache (do_sync_mmap_readahead, mm/filemap.c)
	// (pages; part of ReadAheadPages).
	AroundPages uint64
	// MappedPages are the used pages whose first access was fault-around
	// mapping them into a process (mm_filemap_map_pages), not a read()
	// or a fault on them: no event tells whether the process then
	// touched them (pages; part of UsedPages).
	MappedPages uint64
	// MapEvents count fault-around mappings (events).
	MapEvents uint64
	// ReadUsedPages and ReadWastedPages are the part of UsedPages and
	// WastedPages that read() brought in (any read-ahead not started by a
	// page fault), not a page fault's read-around. To 16 pages: a group
	// of 16 consecutive pages of a file takes the origin of its last page
	// added.
	ReadUsedPages, ReadWastedPages uint64
	// Windows counts the read-ahead windows the kernel read
	// (page_cache_ra_order events; not the forced reads of
	// page_cache_ra_unbounded, whose size the depth does not set),
	// AroundWindows those a page fault read: mmap read-around
	// (do_sync_mmap_readahead) and the next window a fault on a
	// PG_readahead page starts (do_async_mmap_readahead), mm/filemap.c.
	Windows, AroundWindows uint64
	// DepthPages and AroundDepthPages sum, over those windows, the
	// read-ahead of the file each was read for (file_ra_state.ra_pages:
	// the device's read_ahead_kb when the file was opened), pages.
	DepthPages, AroundDepthPages uint64
	// FullWindows are the windows not read around a fault that were as
	// long as their file's read-ahead (a stream the depth bounds; a
	// shorter one was bounded by its file's end, its first read's size,
	// get_init_ra_size, or its reader's context, mm/readahead.c), with
	// their pages and their files' read-ahead summed.
	FullWindows, FullPages, FullDepthPages uint64
}

// Sub returns s - prev, field by field: the counts of a window when prev
// is an earlier reading of the same device. A counter that went backwards
// (the device was untracked and tracked again) gives its value in s.
func (s PageCacheStats) Sub(prev PageCacheStats) PageCacheStats {
	d := func(a, b uint64) uint64 {
		if a < b {
			return a
		}
		return a - b
	}
	return PageCacheStats{
		AddedPages:      d(s.AddedPages, prev.AddedPages),
		UsedPages:       d(s.UsedPages, prev.UsedPages),
		WastedPages:     d(s.WastedPages, prev.WastedPages),
		SyncReadAhead:   d(s.SyncReadAhead, prev.SyncReadAhead),
		AsyncReadAhead:  d(s.AsyncReadAhead, prev.AsyncReadAhead),
		ReadAheadPages:  d(s.ReadAheadPages, prev.ReadAheadPages),
		MmapFaults:      d(s.MmapFaults, prev.MmapFaults),
		UnwalkedPages:   d(s.UnwalkedPages, prev.UnwalkedPages),
		AroundPages:     d(s.AroundPages, prev.AroundPages),
		MappedPages:     d(s.MappedPages, prev.MappedPages),
		MapEvents:       d(s.MapEvents, prev.MapEvents),
		ReadUsedPages:   d(s.ReadUsedPages, prev.ReadUsedPages),
		ReadWastedPages: d(s.ReadWastedPages, prev.ReadWastedPages),
		Windows:         d(s.Windows, prev.Windows),
		AroundWindows:   d(s.AroundWindows, prev.AroundWindows),
		DepthPages:      d(s.DepthPages, prev.DepthPages),

		AroundDepthPages: d(s.AroundDepthPages, prev.AroundDepthPages),
		FullWindows:      d(s.FullWindows, prev.FullWindows),
		FullPages:        d(s.FullPages, prev.FullPages),
		FullDepthPages:   d(s.FullDepthPages, prev.FullDepthPages),

		FaultAsyncReadAhead: d(s.FaultAsyncReadAhead, prev.FaultAsyncReadAhead),
	}
}

// WastePct is the read-ahead waste of s, usually a window (Sub), in
// percent: 100 × WastedPages / (WastedPages + UsedPages). It returns false
// when fewer than MinResolvedPages pages were resolved.
func (s PageCacheStats) WastePct() (float64, bool) {
	n := s.WastedPages + s.UsedPages
	if n < MinResolvedPages {
		return 0, false
	}
	return 100 * float64(s.WastedPages) / float64(n), true
}
