// Package tracer records every block request of selected disks on a live
// Linux host, for the node agent: one [trace.Request] per request, with its
// insert, issue and completion times, start sector, length, operation, flags
// and submitting task.
//
// # Tracers
//
// Two implementations share one interface, [Tracer]; [New] picks one.
//
//   - "ebpf" (preferred): BTF-typed raw tracepoint programs (tp_btf) on the
//     block layer's request tracepoints, include/trace/events/block.h:
//     block_io_start (kernel 6.5 and later; optional), block_rq_insert,
//     block_rq_issue, block_rq_requeue, block_rq_merge and
//     block_rq_complete. The program keeps each request in flight in a
//     table keyed by its struct request pointer and writes ONE record per
//     request, at its completion, to a BPF ring buffer. The table is a BPF
//     array of slots, a request taking one of 4 consecutive slots from a
//     hash of its pointer with one compare-and-exchange (and an overflow
//     hash map when those are taken): no lock and no map update on the I/O
//     path, where a hash map's insert and delete took a bucket lock each
//     and were most of the tracer's cost. Requests of disks that are not
//     selected are filtered out in the kernel before any other work: the
//     programs run for every block request of the host, so the filter
//     compares the disk's dev_t with a global array of up to 8 selected
//     disks (a few loads, no map lookup; a BPF hash map of dev_t beyond 8),
//     set by [Tracer.SetDevices]. The program is CO-RE: it is
//     compiled once (bpf/blocktrace.c, against a vmlinux.h that bpftool
//     dumped from kernel BTF) and its struct field offsets and enum values
//     (struct request, request_queue, gendisk; enum req_op, req_flag_bits)
//     are relocated at load time against the running kernel's BTF
//     (/sys/kernel/btf/vmlinux). The programs are tp_btf, so struct request
//     is read through its BTF-typed pointer directly (no bpf_probe_read
//     call), and still with relocated offsets; kernels before 5.16, whose
//     struct request has rq_disk instead of q->disk, are handled by a CO-RE
//     field-existence check. It needs BTF and kernel 5.12 or later (5.8 for
//     the ring buffer; 5.11 for tp_btf with one-argument block_rq_insert;
//     5.12 for compare-and-exchange on map values); the reaper of missed
//     completions (below) needs 5.14 and is left out on older kernels.
//
//     Cost, measured on the project's 2-core VM (kernel BPF statistics,
//     fio 4 KiB random reads on a loop device, about 65,000–70,000 IOPS;
//     make bench-agent): about 640 ns of BPF time per traced request, all
//     programs together, where the hash-map version with two completion
//     programs took about 1,400 ns. That counts about 7 program runs per
//     traced request: the traced request's block_io_start (which returns
//     after one test unless the request has REQ_PREFLUSH), block_rq_issue
//     and block_rq_complete, and the events of the disk under the loop
//     device, which the filter rejects. Most of a rejected run is the
//     kernel's dispatch to the program, and the statistics themselves add
//     two clock reads per run. With every event rejected (tracing another
//     device), fio's IOPS did not change measurably (make
//     bench-agent-parts); tracing the device itself cost it about 1.5 %.
//     In the agent, the Go side (reading and ordering the records, and the
//     agent's online learning) takes about 170 ns of CPU per request more.
//
//     The reader drains the ring on a timer: every 100 ms at most, and at
//     a high rate often enough that a quarter of the ring holds what is
//     written between two drains (1 ms at the least; again after 1 ms when
//     a drain finds the ring three quarters full). The programs wake it
//     only when half the ring is pending, and it waits for that in the Go
//     runtime's network poller, not in a blocking epoll_wait. Before, the
//     programs woke it at a quarter (an irq_work, a self-interrupt, per
//     wake-up) and it blocked in epoll_wait, holding a P of the Go
//     scheduler, so the runtime's sysmon thread kept polling: about 220
//     wake-ups a second under make bench-agent's load, now about 30
//     (per-thread context switches, /proc/PID/task/*/status).
//
//   - "tracefs" (fallback): the same tracepoints as trace events, in a
//     private trace instance /sys/kernel/tracing/instances/shadowtune-<pid>
//     created by New and removed by Close (the global trace buffer and its
//     settings are never touched). Event filters on dev select the disks;
//     the instance's trace_clock is "mono" (CLOCK_MONOTONIC, like the eBPF
//     timestamps); trace_pipe lines are parsed and paired into requests by
//     (disk, operation, start sector), as blkparse does. If tracefs is not
//     mounted, New mounts it at /sys/kernel/tracing and says so in
//     [Info].Notes. trace_pipe prints times to the microsecond, so this
//     tracer's times have 1 µs resolution.
//
// # Units and time base
//
// As in package trace: sectors are 512 bytes, times are int64 ns. The
// kernel stamps events with CLOCK_MONOTONIC (bpf_ktime_get_ns; the mono
// trace clock); a request's times are those stamps minus the tracer's base,
// [Info].Base, which is [Options].Base or, by default, CLOCK_MONOTONIC read
// when New is called (floored to the microsecond for tracefs). So time 0 is
// the moment tracing was set up, and Base + Arrival is comparable with
// clock_gettime(CLOCK_MONOTONIC) on the host ([Monotonic]).
//
// # What a request's fields mean
//
//   - Arrival: block_rq_insert (the request entered the I/O scheduler or
//     the dispatch list). A request that bypasses the elevator (scheduler
//     "none", or issued directly) has no insert event: it arrives at its
//     first block_rq_issue. A request inserted before tracing began arrives
//     at its first traced issue.
//   - Dispatch: the last block_rq_issue (after a requeue the request is
//     issued again; the service time runs from the issue that was served).
//   - Complete: the block_rq_complete that completed the request's last
//     byte. A partial completion (nr_bytes below the bytes left) only
//     advances the request; it completes with its last part.
//   - Sector, Sectors: the request as issued (after every merge), of the
//     whole disk (partition offsets are added by the kernel). Flushes have
//     Sector 0 and Sectors 0, as in the blkparse reader.
//   - Dev: the disk's dev_t, major<<20 | minor (what the block tracepoints
//     report): always the whole disk, never a partition.
//   - PID: the thread id (kernel task pid, what blktrace and ftrace report;
//     not the tgid) of the task at the request's first insert, else at its
//     issue. Both run in the submitter's context (a plug is flushed by
//     the task that holds it, a stacked device's worker submits as
//     itself), so this is the task that created the request from a bio;
//     only for a request with REQ_PREFLUSH is it the task at
//     block_io_start, since the flush machinery, not that task, inserts
//     its data part (and an empty one is never inserted or issued). For synchronous I/O this is the thread that
//     waits for the request: the unit whose think time the simulator
//     derives. Flush requests generated by the flush machinery are issued
//     by a kworker and carry its tid.
//   - Op: REQ_OP_READ → Read; WRITE, WRITE_ZEROES and ZONE_APPEND → Write
//     (tracefs cannot tell write-zeroes from other data-less operations and
//     skips it); FLUSH → Flush; DISCARD and SECURE_ERASE → Discard. Zone
//     management and driver-private (passthrough) requests are not recorded
//     (counted in [Stats].Skipped).
//   - Flags: Sync for every read that is not read-ahead and for writes with
//     REQ_SYNC; ReadAhead (REQ_RAHEAD), Meta (REQ_META), FUA (REQ_FUA), as
//     issued. Think is [trace.Unknown].
//
// Requests that never reach the driver are not recorded: the empty shell of
// a pre-flush (completed by the flush machinery once its flush request, which
// is recorded, completed), and a request merged into another
// (block_rq_merge). A write whose FUA the device lacks is completed twice by
// the kernel (its data, then after a post-flush with 0 bytes); it is recorded
// at its data completion and the post-flush is a Flush of its own.
//
// # Delivery
//
// [Tracer.Run] delivers completed requests in batches, every
// [Options].FlushInterval, in non-decreasing Arrival order across batches: a
// completed request is held until every request still in flight arrived
// after it (for eBPF the in-flight table is scanned before the ring buffer is
// drained; for tracefs a trace_marker line written at each tick orders the
// stream), so the output can be written straight to a native trace. A
// request in flight longer than [Options].StaleAfter is abandoned and
// counted in [Stats].Lost, so that one stuck request cannot hold the output
// back for ever.
//
// # Missed completions (a kernel surprise)
//
// On Linux 6.18, under concurrent load, the kernel occasionally runs none
// of the BPF programs attached to block_rq_complete for a completion that
// perf and tracefs do see: about 1e-5 to 2e-4 of requests, in bursts, more
// on a busy machine. It is not the per-program recursion guard: a second,
// identical program attached beside the first (with its own guard) missed
// exactly the same completions and caught none of them over 4 million
// requests (fio random reads, 4 jobs × qd 8 and 1 job × qd 1, none and
// mq-deadline), so it was dropped; every recursion-miss counter stays 0,
// and a classic tracepoint program misses the same ones, so no other hook
// of this kind would catch them. The mechanism is not known. A missed
// completion would leave the request in the in-flight
// table and, since delivery waits for the oldest request in flight, hold
// every later request back; so once a second the tracer runs a
// BPF_PROG_TYPE_SYSCALL program, reap, that drops the entries issued more
// than 1 s earlier whose struct request the kernel has since freed
// (rq->state back to MQ_RQ_IDLE), counting them in [Stats].Lost (as is a
// missed completion found when the struct request is reused). When Run
// stops, the reaper runs once more with a 10 ms age limit, so a completion
// missed in the last second is counted too (a short recording used to
// leave it in the table, uncounted). While the programs are detached
// (every traced disk paused, by SetPaused or from the start by
// Options.Paused) the table is empty and the reaper does not run. Every
// request is thus either delivered or counted lost: traced + Lost equals
// the kernel's own count in /sys/block/*/stat. Exactly one of them: the
// reaper reads an entry,
// then its request's state, and a completion that runs in between (the
// request is freed just after it) used to be delivered and then counted
// lost as well, which a slow guest (QEMU TCG, where completions often
// come more than a second after issue) hit about one run in five. Each
// entry now carries a life word (its issue time while it is in service);
// the completion, the reaper, a later request in the same struct request
// finding the entry stale, and the reader abandoning it after StaleAfter
// each take it to 0 with one compare-and-exchange before counting the
// request, and only the one that succeeds counts it. A request issued
// again without a requeue event (same struct request, same allocation
// stamp rq->start_time_ns) is the same request, not a missed completion.
//
// # Losses
//
// eBPF: a record the ring buffer has no room for is dropped in the kernel
// and counted per CPU ([Stats].Dropped, requests). A full in-flight table or
// a missed completion loses the request ([Stats].Lost). tracefs: events overwritten in the
// instance's buffer before they were read are reported by trace_pipe as
// "[LOST n EVENTS]" and counted in [Stats].Dropped (events, not requests;
// the requests they belonged to end up in Orphans or Lost).
//
// # Page-cache probe
//
// [PageCacheProbe] (separate from the tracers) measures read-ahead waste
// per file system device: of the pages the kernel put in the page cache,
// how many were never accessed before they left it. It is bcc's
// tools/readahead.py technique (count the pages read-ahead allocated and
// those unused before eviction), done on tracepoints only, since kprobes
// are not configured on every kernel the agent runs on (fentry is refused
// on the functions involved, too). Per device s_dev (major<<20 | minor;
// [KernelDev] and [UnixDev] convert to and from stat's st_dev) it keeps
// cumulative [PageCacheStats]: pages added, pages used (added while
// tracked, then accessed at least once, counted at the first access),
// pages wasted (added while tracked, evicted by memory reclaim never
// accessed: a page removed otherwise, by drop_caches, truncation or
// POSIX_FADV_DONTNEED, cost a read but no memory, and counts neither way;
// pc_delete tells reclaim by the task's PF_MEMALLOC, which kswapd, direct
// and memory-cgroup reclaim set), the
// synchronous and asynchronous read-ahead decisions, the pages of the
// read-ahead windows read, and mmap faults (filemap_fault calls: a fault
// retried after dropping mmap_lock for its I/O counts twice). The waste of a window is ΔWasted / (ΔWasted + ΔUsed)
// ([PageCacheStats.Sub], [PageCacheStats.WastePct]). Pages are 4 KiB; a
// large folio (ext4 uses them on 6.18) counts all its pages.
//
// The programs (bpf/pagecache.c) are BTF-enabled raw tracepoint programs
// (tp_btf), which read the tracepoints' arguments through CO-RE as the
// classic events fill their records, without the record:
// filemap:mm_filemap_add_to_page_cache
// and mm_filemap_delete_from_page_cache (a folio enters, leaves),
// mm_filemap_get_pages (a read() found pages index..last_index),
// mm_filemap_fault and mm_filemap_map_pages (mmap faults and fault-around),
// readahead:page_cache_sync_ra, page_cache_async_ra, page_cache_ra_order and
// page_cache_ra_unbounded. The filemap access tracepoints (get_pages,
// fault, map_pages) were added upstream in 2024 and the readahead ones in
// 2025; 6.18 has them all, Debian's 6.1 lacks those, and
// [NewPageCacheProbe] then returns an error wrapping
// [ErrPageCacheUnsupported] that names the first missing tracepoint (it
// checks kernel BTF for each before loading, so nothing is half attached).
//
// While it tracks a device, every page-cache event of the node runs a
// program, whichever file system it is on; the programs return after a
// filter of up to 8 tracked devices, read without a map lookup (a hash
// map beyond 8). While it tracks none (no policy governs read-ahead) the
// programs are detached ([PageCacheProbe.Track]).
//
// A device can be tracked lightly (the agent does so while its tracing is
// paused for a sample): then its faults, its asynchronous read-ahead
// events and the pages of its read-ahead windows are counted, with
// AroundPages, the pages of the windows that faults read (mmap
// read-around), and of its pages only those the read-around added: their
// use by faults, fault-around and sequential mmap readers, and their
// waste. pc_fault notes, per CPU, the thread whose fault missed the page
// cache, and the window that thread sets next on that CPU (pc_ra_order)
// is the fault's read-around, which filemap_fault reads before it
// returns; pc_add follows a light device's folio only when it falls in
// that window (its chunk is tagged FAULT_TAG), and pc_delete looks a
// light device's folios up only once it has had such a window since it
// turned light (around_mask). While every tracked device is light,
// pc_get_pages and pc_sync_ra, which run on every read() and read() miss,
// are detached, and pc_ra_unbounded too: a page read() adds costs a
// filter and a task lookup, a cached read() nothing. In
// TestPageCacheLight, random mmap reads counted lightly measured the same
// waste as counted fully (96.57 %), a sequential mmap reader's under 1 %,
// and a sequential read()'s pages were not followed. Forced read-ahead
// (page_cache_ra_unbounded) is not counted then. Measured by
// TestPageCacheReadCost (4 KiB read() calls of a cached file), a read()
// of an untracked file system costs about 43 ns more with the probe
// attached, of a tracked one about 67 ns, on a 730–755 ns call; as
// classic tracepoints with a hash-map filter they cost 61–64 and 85–95 ns.
//
// Where the tracepoints fire matters (mm/filemap.c, mm/readahead.c):
// mm_filemap_fault fires at the start of filemap_fault, before the
// read-around adds the faulting page, so a fault (and a read's first miss,
// from page_cache_sync_ra) is remembered per task and credited when that
// task adds the folio covering it. (In TestPageCacheWaste that credit made
// no difference: the kernel retries a fault that dropped mmap_lock for the
// I/O, and the retry finds the page; it matters for faults not retried.) The
// read-ahead events fire before the new window is computed (their size is
// the previous window's), so the pages read are taken from
// page_cache_ra_order, once the window is set, and page_cache_ra_unbounded
// for forced read-ahead (a ra_order fallback to it is not counted twice).
// mm_filemap_get_pages fires at the end of filemap_get_pages, after its
// read-ahead, but not at all when the batch's last folio is still being
// read (the folios before it are returned, and copied, without the event):
// on a 1 GiB sequential read that lost about 5 % of the pages, counted as
// waste. Each task's last read request (its pages, of one file) is kept,
// and a new request of the same file that starts after it by no more than
// its length (a sequential reader) is credited with the pages in between.
// Random readers are unaffected by that rule unless a request lands within
// one request length after the previous one. A sequential mmap reader
// touches most pages through minor faults that map a whole large folio
// and fire no event (filemap_fault's finish_fault); page_cache_async_ra,
// which fires when a reader reaches the PG_readahead page, credits the
// ra->size pages before it when that page is in the file's current
// window (in TestPageCacheWaste a sequential mmap scan measured 91 %
// waste without that credit, 1.3 % with it; a random reader that lands
// on an older window's marked page credits nothing). The pages whose
// first access was fault-around mapping them (mm_filemap_map_pages) are
// counted apart in MappedPages, as the agent counts them as wasted in a
// window of random mmap reads.
//
// Origins: each chunk keeps a tag of its last add, set when the pages
// came in with a page fault's read-around (the task's last pc_ra_order
// window that pc_fault marked, held in its task state). ReadUsedPages and
// ReadWastedPages count the pages of untagged chunks: what read() (or a
// read-ahead no fault started) brought in (TestPageCacheOrigin: a scan
// that evicted 60,060 pages of another reader's read-around, 0 of its
// own wasted).
//
// Windows: pc_ra_order counts each read-ahead window (Windows), those a
// fault read (AroundWindows), and the read-ahead of the file each was
// read for (ra->ra_pages: the device's depth when the file was opened;
// DepthPages, AroundDepthPages). The forced reads of
// page_cache_ra_unbounded are not windows: their size is the caller's,
// not the depth's.
//
// Read-aheads started by faults: an asynchronous
// read-ahead whose page is the one the task last faulted on, and which no
// folio added since covered (a fault that found its page cached and
// marked PG_readahead, do_async_mmap_readahead in mm/filemap.c), counts in
// FaultAsyncReadAhead too. A sequential mmap reader starts one about every
// window and a random one almost never; read() starts none
// (TestPageCacheLight: 65,536 for 65,537 faults on a mapping read in order
// at 16 KiB, 1 for 1,550 at random, 0 of 410 for read()). The agent
// releases the mapped files it holds at a cut depth on them.
//
// Only the devices given to [PageCacheProbe.Track] (64 at most) are
// counted: the programs run for every page-cache event of the host, and
// for another device they cost one hash lookup. Per page, the state is a
// BPF LRU hash keyed by (s_dev, inode, index / 16) whose value holds two
// 16-bit bitmaps (pages added while tracked, pages accessed since); an
// event walks at most 64 such chunks (1,024 pages) and counts pages beyond
// in UnwalkedPages. Memory, preallocated by the kernel (memlock as
// bpftool reports it on 6.18): the chunk map, 131,072 entries (8 GiB of
// the tracked devices' page cache) of a 24-byte key and an 8-byte value,
// 96 bytes each with the LRU hash's element overhead: 12.6 MB; the
// per-task map, 8,192 entries of 4 + 56 bytes, 128 bytes each: 1.0 MB; the
// counters, 64 devices × 104 bytes per possible CPU, and the device set, 64
// entries: a few KiB. About 13.6 MB in all. When the
// tracked devices cache more than 8 GiB, the least recently touched chunks
// are forgotten: their pages are then neither used nor wasted, so the
// ratio stays an estimate over the pages still followed.
//
// Sampling (PageCacheOptions.SampleEvery; the agent's is
// PageCacheSampleEvery, 8): only chunks whose hash of (s_dev, inode,
// chunk) falls in 1 of SampleEvery are followed, so the chunk map sees an
// eighth of the updates and covers 8 × 8 GiB of page cache; AddedPages and
// the event counts still count everything. In TestPageCacheWaste, where an
// exact and a sampled probe count the same I/O, the sampled waste was
// 96.46 % against 96.57 % (mmap) and 0.00 % against 0.00 % (sequential),
// over 33,664 of 262,144 pages (1 in 7.8).
//
// Measured (TestPageCacheWaste: ext4 on a loop device, read_ahead_kb 2560,
// a 256 MiB memory cgroup, kernel 6.18, three runs): 2,000 random 4 KiB
// reads through mmap waste 96.6 % of what read-around brought in (about
// 920,000 pages added, 31,500 used); a sequential read() of 1 GiB in 1 MiB
// calls 0.00–0.05 %. Cost (TestPageCacheOverhead, cold-cache sequential
// read of 1 GiB): 11–14 ms of BPF time per GiB with the device tracked
// (pc_add, 3–5 µs per folio added, is most of it), about 2 % of the 0.65 s
// read on one CPU; the read's wall time did not measurably change (its
// spread between runs, 0.63–1.24 s, was far larger).
package tracer
