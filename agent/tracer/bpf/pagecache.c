// SPDX-License-Identifier: GPL-2.0
//
// pagecache: counts, per file system device (s_dev), the pages added to the
// page cache and whether each was accessed before it left the cache: the
// read-ahead waste of that device. See ../doc.go ("Page-cache probe") for
// the semantics; compiled by bpf2go (../gen.go) into pagecache_bpfel.o /
// pagecache_bpfeb.o, which are committed.
//
// The technique is bcc's tools/readahead.py (pages allocated by read-ahead
// and not accessed before eviction), done here on tracepoints only: the
// kernel this was written on has no kprobes.
//
// Hooks (BTF-enabled raw tracepoints, tp_btf: the programs get the
// tracepoint's arguments, which CO-RE reads as the classic event's
// TP_fast_assign does, and the kernel builds no event record for them;
// a classic tracepoint filled one per event, about 50 ns of every read()
// on the node, tracked device or not):
//   filemap:mm_filemap_add_to_page_cache      a folio (1 << order pages) enters
//   filemap:mm_filemap_delete_from_page_cache a folio leaves (evicted, truncated)
//   filemap:mm_filemap_get_pages              a read() found index..last_index
//                                             (fires at the END of
//                                             filemap_get_pages, after its
//                                             read-ahead; not at all on some
//                                             paths, see note 2)
//   filemap:mm_filemap_fault                  an mmap fault on index (fires at
//                                             the START of filemap_fault, before
//                                             read-around adds the page, note 1)
//   filemap:mm_filemap_map_pages              fault-around mapped start..end
//   readahead:page_cache_sync_ra              a synchronous read-ahead starts
//   readahead:page_cache_async_ra             an asynchronous one starts
//   readahead:page_cache_ra_order             a read-ahead window is read
//   readahead:page_cache_ra_unbounded         a forced / fallback read-ahead
// Needs a kernel with all of them: 6.18 has them, 6.1 lacks the access and
// readahead ones (added upstream in 2024 and 2025; see ../doc.go).
//
// Per-page state, bounded: an LRU hash keyed by (s_dev, ino, index / 16)
// whose value holds two 16-bit bitmaps, pages added (while traced) and pages
// accessed since. Every event walks at most MAX_CHUNKS chunks (1024 pages);
// pages beyond are counted in unwalked and otherwise ignored.
//
// Note 1: mm_filemap_fault fires before the faulting page is read, so the
// fault is remembered per task (task_state.demand) and credited when that
// task adds the folio that covers it. page_cache_sync_ra, likewise, records
// the read's first page: filemap_get_pages reads it through
// filemap_create_folio, without the get_pages event, when read-ahead added
// nothing.
//
// Note 2: filemap_get_pages returns the folios it found without the event
// when the batch's last folio is not up to date (still being read), and
// filemap_read copies them. Each task's last read request (pages
// req_start..req_end of one file) is kept; a new request of the same file
// that starts after it by less than that request's length (a sequential
// reader) is credited with the pages in between.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define CHUNK_SHIFT 4
#define CHUNK_PAGES (1 << CHUNK_SHIFT)
#define MAX_CHUNKS 64
#define MAX_DEVS 64
#define MAX_ORDER_PAGES 12 // order cap: a folio of more than 16 MiB is unheard of

// Counters of one tracked device (pages are 4 KiB, PAGE_SIZE units).
struct pc_stats {
	__u64 added;      // pages added to the page cache
	__u64 used;       // pages added while traced, then accessed (at the first access)
	__u64 wasted;     // pages added while traced, evicted (reclaim) never accessed
	__u64 sync_ra;    // page_cache_sync_ra events
	__u64 async_ra;   // page_cache_async_ra events
	__u64 ra_pages;   // pages of the read-ahead windows read
	__u64 faults;     // mm_filemap_fault events
	__u64 unwalked;   // pages of events beyond MAX_CHUNKS chunks (not followed)
	__u64 around;     // pages of the read-ahead windows a fault read (mmap read-around)
	__u64 mapped;     // of used, pages first accessed by fault-around mapping them
	__u64 map_events; // mm_filemap_map_pages events (fault-around)
	__u64 used_read;   // of used, pages read() added (not a fault's read-around)
	__u64 wasted_read; // of wasted, pages read() added
	__u64 fault_async; // of async_ra, those a page fault started (a sequential mmap reader)
	__u64 windows;     // read-ahead windows read (ra_order)
	__u64 around_windows; // of windows, those a page fault read (their pages: around)
	__u64 depth;       // sum over windows of the file's read-ahead (ra->ra_pages), pages
	__u64 around_depth; // of depth, the around windows'
	__u64 full_windows; // windows not read around a fault as long as their file's read-ahead
	__u64 full_pages;   // their pages
	__u64 full_depth;   // their files' read-ahead, summed
};

struct chunk_key {
	__u64 ino;
	__u64 chunk; // page index >> CHUNK_SHIFT
	__u32 dev;
	__u32 pad;
};

// bits: low 16 bits, pages added while traced; high 16, pages accessed
// since. tag: FAULT_TAG when a fault's read-around made the chunk's last
// add, else 0 (read() or a read-ahead not started by a fault).
struct chunk {
	__u32 bits;
	__u32 tag;
};

struct task_state {
	__u64 ino;
	__u64 demand;    // page a fault (or a read's first miss) waits for
	__u64 req_start; // the task's last read request, pages, inclusive
	__u64 req_end;
	__u32 dev;
	__u8 has_demand;
	__u8 has_req;
	__u8 in_ra_order; // a ra_order window was counted: its fallback is not
	__u8 pad;
	__u64 around_start; // the task's last fault read-around window, pages
	__u64 around_end;   // (exclusive; 0: none) of (dev, ino)
};

// The tracked devices, set by user space: tracked maps each s_dev to its
// index into stats. A device whose index is below FAST_DEVS is also in
// fast_devs at that index (unused entries 0, which no device is); while
// every tracked device is, fast_many is 0 and the map is not read.
#define FAST_DEVS 8
__u32 fast_devs[FAST_DEVS] SEC(".data.select");
__u32 fast_many SEC(".data.select");
// light_mask: bit i set counts the device at stats index i lightly: its
// faults and read-ahead events and windows (faults, async_ra, ra_pages,
// around), and of its pages only those a page fault's read-around added
// (chunks tagged FAULT_TAG): their use by faults, fault-around and
// sequential mmap readers (async_ra), and their waste. Pages read()
// brings in are not followed, so the programs that run on every read()
// (pc_get_pages) and read() miss (pc_sync_ra) need not be attached. User
// space sets it for a device whose tracing is paused.
__u64 light_mask SEC(".data.select");
// around_mask: bit i set once the light device at stats index i had a
// fault's read-around since user space last cleared it (Track clears a
// device's bit when it turns light): only then does pc_delete look its
// light pages up, so that a paused device read by read() alone costs a
// filter per evicted folio, not a map lookup. Written by the programs, in
// a section of its own (user space writes a section whole).
__u64 around_mask SEC(".data.around");
#define FAULT_TAG 0x80000000u

// tracked: s_dev → index into stats.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_DEVS);
	__type(key, __u32);
	__type(value, __u32);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_DEVS);
	__type(key, __u32);
	__type(value, struct pc_stats);
} stats SEC(".maps");

// chunks: the per-page state (max_entries is set by user space).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, struct chunk_key);
	__type(value, struct chunk);
} chunks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct task_state);
} tasks SEC(".maps");

// fault_tid: per CPU, the thread whose page fault missed the page cache
// last on it (pc_fault); the read-ahead window that thread sets next on
// the CPU (pc_ra_order) is the fault's read-around, which filemap_fault
// reads before it returns (do_sync_mmap_readahead, mm/filemap.c).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fault_tid SEC(".maps");

// sample_mask selects the chunks followed: those whose hash & sample_mask
// is 0, 1 in sample_mask + 1 (set from user space; 0 follows every chunk).
// The waste of the followed pages estimates that of all pages, at a
// fraction of the map traffic on busy page caches.
volatile const __u64 sample_mask = 0;

// sampled reports whether chunk c of (dev, ino) is followed.
static __always_inline int sampled(__u32 dev, __u64 ino, __u64 c)
{
	if (!sample_mask)
		return 1;
	__u64 h = (ino ^ ((__u64)dev << 40)) * 0x9E3779B97F4A7C15ull ^ c * 0xC2B2AE3D27D4EB4Full;
	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 29;
	return (h & sample_mask) == 0;
}

// inode_dev is the device a file's pages count towards, as
// include/trace/events/filemap.h assigns the records' s_dev: its file
// system's (i_sb->s_dev), else, for a block device's own page cache, the
// device (i_rdev).
static __always_inline __u32 inode_dev(struct inode *host)
{
	struct super_block *sb = host->i_sb;
	return sb ? sb->s_dev : host->i_rdev;
}

// folio_order_of is folio_order(): 0 unless the folio is large (PG_head
// in its flags), else the low byte of _flags_1 (include/linux/mm.h). The
// flags word is read by address, so that both its forms (unsigned long,
// and memdesc_flags_t from Linux 6.18) relocate.
static __always_inline __u32 folio_order_of(struct folio *folio)
{
	unsigned long flags = 0;
	if (bpf_core_read(&flags, sizeof(flags), &folio->flags))
		return 0;
	if (!(flags & (1ul << bpf_core_enum_value(enum pageflags, PG_head))))
		return 0;
	if (!bpf_core_field_exists(folio->_flags_1))
		return 0;
	return folio->_flags_1 & 0xff;
}

// lookup_dev_idx is the counters of a tracked device, 0 for any other:
// every page-cache event of the node starts with it. Up to FAST_DEVS
// devices are found in fast_devs without a map lookup (most events are of
// devices not tracked, and a hash lookup was half of what they cost).
// *light is set when the device is counted lightly (light_mask), *index
// to its stats index.
static __always_inline struct pc_stats *lookup_dev_idx(__u32 dev, int *light, __u32 *index)
{
	__u32 i = FAST_DEVS;
	if (fast_many) {
		__u32 *idx = bpf_map_lookup_elem(&tracked, &dev);
		if (!idx)
			return 0;
		i = *idx;
	} else {
		if (!dev)
			return 0;
#pragma unroll
		for (int k = 0; k < FAST_DEVS; k++)
			if (fast_devs[k] == dev)
				i = k;
		if (i == FAST_DEVS)
			return 0;
	}
	*light = i < MAX_DEVS && ((light_mask >> (i & 63)) & 1);
	*index = i;
	return bpf_map_lookup_elem(&stats, &i);
}

// lookup_dev is lookup_dev_idx without the index.
static __always_inline struct pc_stats *lookup_dev(__u32 dev, int *light)
{
	__u32 i;
	return lookup_dev_idx(dev, light, &i);
}

// counts reports whether a chunk's pages are followed for a device
// counted lightly or not: a light device's only when a fault's
// read-around added them.
static __always_inline int counts(struct chunk *v, int light)
{
	return !light || (v->tag & FAULT_TAG);
}

static __always_inline __u32 pop16(__u32 x)
{
	x = x - ((x >> 1) & 0x5555);
	x = (x & 0x3333) + ((x >> 2) & 0x3333);
	x = (x + (x >> 4)) & 0x0f0f;
	return (x + (x >> 8)) & 0x1f;
}

// chunk_mask is the bits of chunk c that pages lo..hi (inclusive) cover.
static __always_inline __u32 chunk_mask(__u64 c, __u64 lo, __u64 hi)
{
	__u64 first = c << CHUNK_SHIFT, last = first + CHUNK_PAGES - 1;
	__u32 a = lo > first ? lo - first : 0;
	__u32 b = hi < last ? hi - first : CHUNK_PAGES - 1;
	return ((0xffffu << a) & (0xffffu >> (15 - b))) & 0xffff;
}

// walk_end returns the last chunk to walk for pages lo..hi and counts the
// pages beyond the cap.
static __always_inline __u64 walk_end(struct pc_stats *st, __u64 lo, __u64 hi)
{
	__u64 c0 = lo >> CHUNK_SHIFT, c1 = hi >> CHUNK_SHIFT;
	if (c1 - c0 >= MAX_CHUNKS) {
		c1 = c0 + MAX_CHUNKS - 1;
		st->unwalked += hi - ((c1 + 1) << CHUNK_SHIFT) + 1;
	}
	return c1;
}

// credit marks pages lo..hi of (dev, ino) accessed; those added while
// traced and not accessed before count as used, and their number is
// returned. For a device counted lightly, only the pages of chunks a
// fault's read-around added count (counts).
static __always_inline __u64 credit(struct pc_stats *st, __u32 dev, __u64 ino, __u64 lo, __u64 hi, int light)
{
	__u64 n = 0, rd = 0;
	if (hi < lo)
		return 0;
	struct chunk_key k = {.ino = ino, .dev = dev};
	__u64 c0 = lo >> CHUNK_SHIFT, c1 = walk_end(st, lo, hi);
	for (int i = 0; i < MAX_CHUNKS; i++) {
		k.chunk = c0 + i;
		if (k.chunk > c1)
			break;
		if (!sampled(dev, ino, k.chunk))
			continue;
		struct chunk *v = bpf_map_lookup_elem(&chunks, &k);
		if (!v || !counts(v, light))
			continue;
		__u32 cur = v->bits;
		__u32 want = chunk_mask(k.chunk, lo, hi) & cur & ~(cur >> 16) & 0xffff;
		if (!want)
			continue;
		__u32 old = __sync_fetch_and_or(&v->bits, want << 16);
		__u32 got = pop16(want & ~(old >> 16) & 0xffff);
		n += got;
		if (!(v->tag & FAULT_TAG))
			rd += got;
	}
	st->used += n;
	st->used_read += rd;
	return n;
}

static __always_inline struct task_state *task(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct task_state *ts = bpf_map_lookup_elem(&tasks, &tid);
	if (ts)
		return ts;
	struct task_state zero = {};
	bpf_map_update_elem(&tasks, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&tasks, &tid);
}

static __always_inline void set_demand(__u32 dev, __u64 ino, __u64 index)
{
	struct task_state *ts = task();
	if (!ts)
		return;
	if (ts->dev != dev || ts->ino != ino)
		ts->has_req = 0;
	ts->dev = dev;
	ts->ino = ino;
	ts->demand = index;
	ts->has_demand = 1;
	ts->in_ra_order = 0;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(pc_add, struct folio *folio)
{
	struct inode *host = folio->mapping->host;
	__u32 dev = inode_dev(host), order;
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st)
		return 0;
	__u64 ino = host->i_ino, lo = folio->index;
	order = folio_order_of(folio);
	if (order > MAX_ORDER_PAGES)
		order = MAX_ORDER_PAGES;
	__u64 hi = lo + (1ull << order) - 1;
	st->added += 1ull << order;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct task_state *ts = bpf_map_lookup_elem(&tasks, &tid);
	__u32 tag = 0;
	if (ts && ts->around_end && ts->dev == dev && ts->ino == ino && lo >= ts->around_start && lo < ts->around_end)
		tag |= FAULT_TAG;
	if (light && !(tag & FAULT_TAG))
		return 0; // read() brought it in: not followed while light
	struct chunk_key k = {.ino = ino, .dev = dev};
	__u64 c0 = lo >> CHUNK_SHIFT, c1 = walk_end(st, lo, hi);
	for (int i = 0; i < MAX_CHUNKS; i++) {
		k.chunk = c0 + i;
		if (k.chunk > c1)
			break;
		if (!sampled(dev, ino, k.chunk))
			continue;
		struct chunk *v = bpf_map_lookup_elem(&chunks, &k);
		if (!v) {
			struct chunk zero = {};
			bpf_map_update_elem(&chunks, &k, &zero, BPF_NOEXIST);
			v = bpf_map_lookup_elem(&chunks, &k);
			if (!v)
				continue;
		}
		__u32 m = chunk_mask(k.chunk, lo, hi);
		// A page added again (its deletion was missed) starts afresh.
		__sync_fetch_and_and(&v->bits, ~(m << 16));
		__sync_fetch_and_or(&v->bits, m);
		v->tag = tag;
	}
	if (ts && ts->has_demand && ts->dev == dev && ts->ino == ino && ts->demand >= lo && ts->demand <= hi) {
		ts->has_demand = 0;
		credit(st, dev, ino, ts->demand, ts->demand, light);
	}
	return 0;
}

// PF_MEMALLOC (include/linux/sched.h) is set while a task reclaims
// memory: kswapd, direct reclaim and memory-cgroup reclaim
// (memalloc_noreclaim_save in mm/vmscan.c). drop_caches, truncation and
// fadvise(POSIX_FADV_DONTNEED) remove pages without it.
#define PF_MEMALLOC 0x00000800

// evicting reports whether the current task removes pages from the page
// cache to reclaim memory: only such a removal makes an unused page
// wasted read-ahead (one removed otherwise cost a read, but no memory the
// reader then lacked).
static __always_inline int evicting(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	return task && (task->flags & PF_MEMALLOC);
}

// pc_delete resolves the pages of a folio that leaves the page cache:
// those never accessed count as wasted when memory reclaim evicts them
// (evicting), and are forgotten otherwise.
SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(pc_delete, struct folio *folio)
{
	struct inode *host = folio->mapping->host;
	__u32 dev = inode_dev(host), order, idx = 0;
	int light = 0;
	struct pc_stats *st = lookup_dev_idx(dev, &light, &idx);
	if (!st || (light && !((around_mask >> (idx & 63)) & 1)))
		return 0;
	__u64 ino = host->i_ino, lo = folio->index;
	order = folio_order_of(folio);
	if (order > MAX_ORDER_PAGES)
		order = MAX_ORDER_PAGES;
	__u64 hi = lo + (1ull << order) - 1;
	int evicted = evicting();
	struct chunk_key k = {.ino = ino, .dev = dev};
	__u64 c0 = lo >> CHUNK_SHIFT, c1 = walk_end(st, lo, hi);
	for (int i = 0; i < MAX_CHUNKS; i++) {
		k.chunk = c0 + i;
		if (k.chunk > c1)
			break;
		if (!sampled(dev, ino, k.chunk))
			continue;
		struct chunk *v = bpf_map_lookup_elem(&chunks, &k);
		if (!v)
			continue;
		__u32 m = chunk_mask(k.chunk, lo, hi);
		__u32 old = __sync_fetch_and_and(&v->bits, ~(m | m << 16));
		__u32 w = evicted && counts(v, light) ? pop16(m & old & ~(old >> 16) & 0xffff) : 0;
		st->wasted += w;
		if (!(v->tag & FAULT_TAG))
			st->wasted_read += w;
		if (!(old & ~(m | m << 16)))
			bpf_map_delete_elem(&chunks, &k);
	}
	return 0;
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(pc_get_pages, struct address_space *mapping, unsigned long lo, unsigned long hi)
{
	struct inode *host = mapping->host;
	__u32 dev = inode_dev(host);
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st || light)
		return 0;
	__u64 ino = host->i_ino;
	struct task_state *ts = task();
	if (ts) {
		int same = ts->has_req && ts->dev == dev && ts->ino == ino;
		if (!same || ts->req_end != hi) {
			// A new request; the pages between the task's last one
			// and this one were read without the event (note 2).
			__u64 start = lo;
			if (same && lo > ts->req_end + 1 &&
			    lo - ts->req_end - 1 <= ts->req_end - ts->req_start) {
				start = ts->req_end + 1;
				credit(st, dev, ino, start, lo - 1, 0);
			}
			ts->dev = dev;
			ts->ino = ino;
			ts->req_start = start;
			ts->req_end = hi;
			ts->has_req = 1;
		}
		ts->in_ra_order = 0;
	}
	credit(st, dev, ino, lo, hi, 0);
	return 0;
}

SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(pc_fault, struct address_space *mapping, unsigned long index)
{
	struct inode *host = mapping->host;
	__u32 dev = inode_dev(host);
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st)
		return 0;
	__u64 ino = host->i_ino;
	st->faults++;
	__u32 zero = 0, *ft = bpf_map_lookup_elem(&fault_tid, &zero);
	if (ft)
		*ft = (__u32)bpf_get_current_pid_tgid();
	credit(st, dev, ino, index, index, light);
	set_demand(dev, ino, index);
	return 0;
}

SEC("tp_btf/mm_filemap_map_pages")
int BPF_PROG(pc_map_pages, struct address_space *mapping, unsigned long lo, unsigned long hi)
{
	struct inode *host = mapping->host;
	__u32 dev = inode_dev(host);
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st)
		return 0;
	st->map_events++;
	st->mapped += credit(st, dev, host->i_ino, lo, hi, light);
	return 0;
}

SEC("tp_btf/page_cache_sync_ra")
int BPF_PROG(pc_sync_ra, struct inode *inode, unsigned long index)
{
	__u32 dev = inode->i_sb->s_dev;
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st)
		return 0;
	st->sync_ra++;
	if (light)
		return 0;
	set_demand(dev, inode->i_ino, index);
	return 0;
}

// page_cache_async_ra fires when a reader reaches a page marked
// PG_readahead (index), before the next window is read: when the page is
// in the file's current window (ra), the kernel's own evidence that the
// reader came sequentially through the window before it, whose ra->size
// pages before index are then credited as used. A sequential mmap reader
// touches most of its pages with no event at all (minor faults that map
// a whole large folio, in filemap_fault's finish_fault, fire none), and
// would look wasteful without it. A random reader that lands on the
// marked page of an older window (its file's window is the last
// read-around, elsewhere) credits nothing.
SEC("tp_btf/page_cache_async_ra")
int BPF_PROG(pc_async_ra, struct inode *inode, unsigned long index, struct file_ra_state *ra)
{
	__u32 dev = inode->i_sb->s_dev;
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st)
		return 0;
	st->async_ra++;
	struct task_state *ts = task();
	if (ts) {
		ts->in_ra_order = 0;
		// A fault that found its page cached, marked PG_readahead,
		// starts the next window (do_async_mmap_readahead): index is
		// the faulting page, which pc_fault left as the task's demand
		// (no folio was added to clear it).
		if (ts->has_demand && ts->dev == dev && ts->ino == inode->i_ino && ts->demand == index) {
			st->fault_async++;
			ts->has_demand = 0;
		}
	}
	__u64 start = ra->start, size = ra->size;
	if (index < start || index >= start + size)
		return 0;
	if (size > index)
		size = index;
	if (size)
		credit(st, dev, inode->i_ino, index - size, index - 1, light);
	return 0;
}

// page_cache_ra_order fires once the window (ra->size pages) is set;
// page_cache_sync_ra and _async_ra fire before, with the previous window.
SEC("tp_btf/page_cache_ra_order")
int BPF_PROG(pc_ra_order, struct inode *inode, unsigned long index, struct file_ra_state *ra)
{
	__u32 dev = inode->i_sb->s_dev, idx = 0;
	int light = 0;
	struct pc_stats *st = lookup_dev_idx(dev, &light, &idx);
	if (!st)
		return 0;
	__u64 ino = inode->i_ino;
	st->ra_pages += ra->size;
	st->windows++;
	st->depth += ra->ra_pages;
	__u32 zero = 0, tid = (__u32)bpf_get_current_pid_tgid();
	__u32 *ft = bpf_map_lookup_elem(&fault_tid, &zero);
	int around = ft && *ft == tid;
	if (around) {
		st->around += ra->size;
		st->around_windows++;
		st->around_depth += ra->ra_pages;
		*ft = 0;
		__u64 bit = 1ull << (idx & 63);
		if (light && !(around_mask & bit))
			__sync_fetch_and_or(&around_mask, bit);
	}
	if (!around && ra->size >= ra->ra_pages) {
		st->full_windows++;
		st->full_pages += ra->size;
		st->full_depth += ra->ra_pages;
	}
	struct task_state *ts = task();
	if (ts) {
		ts->around_start = ra->start;
		ts->around_end = around ? ra->start + ra->size : 0;
		ts->in_ra_order = 1;
		if (ts->dev != dev || ts->ino != ino)
			ts->has_req = 0, ts->has_demand = 0;
		ts->dev = dev;
		ts->ino = ino;
	}
	return 0;
}

// page_cache_ra_unbounded reads a forced read-ahead (read_ahead_kb 0,
// POSIX_FADV_RANDOM, madvise) or the fallback of a ra_order window, which
// was counted there.
SEC("tp_btf/page_cache_ra_unbounded")
int BPF_PROG(pc_ra_unbounded, struct inode *inode, unsigned long index, unsigned long nr)
{
	__u32 dev = inode->i_sb->s_dev;
	int light = 0;
	struct pc_stats *st = lookup_dev(dev, &light);
	if (!st || light)
		return 0;
	__u64 ino = inode->i_ino;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct task_state *ts = bpf_map_lookup_elem(&tasks, &tid);
	if (ts && ts->in_ra_order && ts->dev == dev && ts->ino == ino) {
		ts->in_ra_order = 0;
		return 0;
	}
	st->ra_pages += nr;
	return 0;
}
