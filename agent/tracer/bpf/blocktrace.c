// SPDX-License-Identifier: GPL-2.0
//
// blocktrace: records every block request of selected disks, one record per
// request at its completion, into a BPF ring buffer. See ../doc.go for the
// semantics; this file is compiled by bpf2go (../gen.go) into
// blocktrace_bpfel.o / blocktrace_bpfeb.o, which are committed.
//
// CO-RE: every kernel struct field and enum value used here is relocated
// against the running kernel's BTF at load time (vmlinux.h carries
// preserve_access_index on every struct; enum values go through
// bpf_core_enum_value), so one object runs on any kernel with BTF whose
// struct request / request_queue / gendisk have the fields used.
//
// Hooks (BTF-typed raw tracepoints, include/trace/events/block.h):
//   block_io_start    (6.5+, optional) the request is created from a bio, in
//                     the submitter's context: the start of a request with
//                     REQ_PREFLUSH, which its flush request arrives with
//   block_rq_insert   the request enters the I/O scheduler / dispatch list:
//                     its arrival
//   block_rq_issue    the request is handed to the driver: its dispatch
//   block_rq_requeue  the driver gave it back; it will be issued again
//   block_rq_merge    the request is merged into another and disappears
//   block_rq_complete the device completed nr_bytes of it
//
// Cost: every program runs in the I/O path of every disk, selected or not,
// so each one first filters on the disk (a few loads and compares against
// a global array; a hash lookup only with more than FAST_DEVS disks
// selected) and does nothing else for an unselected disk. A traced request
// takes a slot of the in-flight array (one compare-and-exchange, no lock),
// a few array loads per event, and at completion one ring-buffer record.
//
// Needs kernel 5.12 (atomic compare-and-exchange on map values; compiled
// with -mcpu=v3).

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define EEXIST 17

char LICENSE[] SEC("license") = "GPL";

// Operations as recorded (trace.Op values); OP_SKIP: not recorded.
#define OP_READ 0
#define OP_WRITE 1
#define OP_FLUSH 2
#define OP_DISCARD 3
#define OP_SKIP 0xff

// Flags as recorded (trace.Flags bits).
#define F_SYNC 1
#define F_READAHEAD 2
#define F_META 4
#define F_FUA 8

// Counters, summed over CPUs by the Go side. A record written to the ring
// buffer is not counted here (the reader counts what it delivers).
enum counter {
	CNT_DROPPED = 0, // records lost: ring buffer full
	CNT_ORPHAN,      // completions of requests never seen starting
	CNT_SKIPPED,     // completions of operations not recorded (zone, driver-private)
	CNT_REQUEUE,     // requeues
	CNT_PARTIAL,     // partial completions (more bytes remained)
	CNT_MAPFULL,     // in-flight table full: request not tracked
	CNT_ERROR,       // records of requests completed with an error
	CNT_UNISSUED,    // requests completed without being issued (empty pre-flush)
	CNT_MISSED,      // requests whose completion event never reached the program
	CNT_MAX,
};

// One completed request (ring buffer record). Times are bpf_ktime_get_ns()
// (CLOCK_MONOTONIC, ns).
struct event {
	__u64 arrival;   // block_rq_insert, or the first block_rq_issue if never inserted
	__u64 dispatch;  // the last block_rq_issue
	__u64 complete;  // the block_rq_complete that finished it
	__u64 sector;    // start, 512-byte sectors, as issued
	__u32 nr_sector; // length, 512-byte sectors, as issued
	__u32 dev;       // disk dev_t, major<<20 | minor
	__u32 pid;       // submitting task (thread) id
	__u16 requeues;  // times requeued
	__u8 op;         // OP_*
	__u8 flags;      // F_*
	__u32 error;     // blk_status_t (0: success)
	__u32 partial;   // partial completions before the final one
};

// A request in flight, keyed by its struct request pointer.
//
// life says who may still count the request, and is what they race for:
// every party that counts a request (its completion, which delivers it;
// the reaper, a later life of its struct request finding it stale, which
// count it lost) first takes life to 0 with one compare-and-exchange from
// the value it read, and only the one that succeeds counts it. So a
// request the reaper finds freed just as its completion runs (under TCG a
// completion often comes more than the reaper's second after its issue,
// and the reaper reads the entry, then the request's state) is counted
// once: delivered or lost, never both.
#define LIFE_CLOSED 0 // counted (or the slot is free): nobody may count it again
#define LIFE_OPEN 1   // not in service: not issued yet, or requeued
		      // any other value: in service since then (the last issue's time)
struct inflight_req {
	__u64 life;      // LIFE_*, or the time of the issue being served
	__u64 start;     // block_io_start time of a request with REQ_PREFLUSH, else 0
	__u64 arrival;   // insert (or first issue) time, 0 until then
	__u64 dispatch;  // last issue time, 0 until issued
	__u64 sector;    // as issued
	__u64 born;      // rq->start_time_ns when the entry was made (0: not stamped)
	__u32 nr_sector; // as issued
	__u32 pid;
	__u32 partial;
	__u16 requeues;
	__u8 op;         // OP_*, as issued
	__u8 flags;      // F_*, as issued
	__u32 last_left; // bytes left at the last partial completion seen
	__u32 pad;
};

// An entry of the in-flight table: a slot of the inflight array, or (rarely)
// a value of the overflow map.
struct slot {
	__u64 key; // the struct request pointer; 0: the slot is free
	__u32 ovf; // 1: this is a value of the overflow map
	__u32 pad;
	struct inflight_req r; // all zero while the slot is free
};

// Force BTF for the Go generator (bpf2go -type).
const struct event *unused_event __attribute__((unused));
const struct inflight_req *unused_inflight __attribute__((unused));
const struct slot *unused_slot __attribute__((unused));
const enum counter *unused_counter __attribute__((unused));

// Ring buffer pressure (bytes). The reader drains the ring on a timer, so
// records are submitted without waking it, unless this many bytes are
// pending: a burst it would not drain in time. Set by the loader (half the
// ring); 0 wakes on every record.
volatile const __u64 wakeup_bytes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); // bytes; the loader may change it
} events SEC(".maps");

// The selected disks (dev_t, major<<20 | minor), set by the loader and by
// SetDevices. Up to FAST_DEVS of them are listed in fast_devs (unused
// entries 0, which no disk is), read without a map lookup; with more,
// fast_many is set and the devices hash map holds them all.
//
// A selected disk is traced (SEL_TRACED) or paused (SEL_PAUSED, set by
// SetPaused): a paused disk's new requests get no entry and are not
// recorded, while those that had one are followed to their completion
// and recorded as usual. fast_paused[i] is 1 for a paused fast_devs[i];
// in the devices map the value is the SEL_* state.
#define FAST_DEVS 8
#define SEL_NONE 0
#define SEL_TRACED 1
#define SEL_PAUSED 2
__u32 fast_devs[FAST_DEVS] SEC(".data.select");
__u32 fast_paused[FAST_DEVS] SEC(".data.select");
__u32 fast_many SEC(".data.select");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   // dev_t, major<<20 | minor
	__type(value, __u8);  // SEL_TRACED or SEL_PAUSED
} devices SEC(".maps");

// The requests in flight. A request's entry is one of PROBES consecutive
// slots of the inflight array from a hash of its struct request pointer:
// finding it is a few array loads, and taking or freeing a slot one
// compare-and-exchange on its key, where a hash map insert and delete took
// a bucket lock each (they were most of the tracer's cost per request). A
// request whose PROBES slots are all taken (PROBES requests in flight at
// once with the same hash window: rare while the array is mostly free)
// goes to the overflow hash map. The array is memory-mapped by the reader,
// which scans it in place.
#define PROBES 4
volatile const __u32 slot_mask = 16383; // slots − 1, slots a power of two; set by the loader

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384); // slot_mask + 1; the loader changes both
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct slot);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); // the loader may change it
	__type(key, __u64);        // struct request *
	__type(value, struct slot);
} overflow SEC(".maps");

// overflow_used counts the entries the programs put in the overflow map
// less those they deleted: while 0, lookups do not look there. (The
// reader's deletions of stale entries leave it higher than the map's size,
// which costs only a lookup.)
__u64 overflow_used;

// The oldest request waiting for a flush, per disk: a request with
// REQ_PREFLUSH (typically the empty write of fsync) is held by the flush
// machinery until a flush request, generated by the kernel and issued by a
// kworker, completes. That flush request takes its arrival and task from
// here.
struct flushwait {
	__u64 start;
	__u32 pid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32); // dev_t
	__type(value, struct flushwait);
} flushwait SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Kernels before 5.16 reached the disk through rq->rq_disk.
struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += 1;
}

// rq_dev returns the request's disk as major<<20 | minor (what the block
// tracepoints report as dev), or 0. The programs are tp_btf, so rq is a
// BTF-typed pointer that is read directly (no helper call); the field
// offsets are CO-RE relocations all the same.
static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(rq->q->disk))
		disk = rq->q->disk;
	else
		disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

// selection returns the SEL_* state of rq's disk; it stores the disk's
// dev_t in *dev.
static __always_inline __u32 selection(struct request *rq, __u32 *dev)
{
	__u32 d = rq_dev(rq);

	*dev = d;
	if (!d)
		return SEL_NONE;
	if (fast_many) {
		__u8 *v = bpf_map_lookup_elem(&devices, &d);

		return v ? *v : SEL_NONE;
	}
#pragma unroll
	for (int i = 0; i < FAST_DEVS; i++)
		if (fast_devs[i] == d)
			return fast_paused[i] ? SEL_PAUSED : SEL_TRACED;
	return SEL_NONE;
}

// selected reports whether rq belongs to a selected disk, traced or
// paused; it stores the disk's dev_t in *dev.
static __always_inline bool selected(struct request *rq, __u32 *dev)
{
	return selection(rq, dev) != SEL_NONE;
}

// rq_op maps cmd_flags' operation to OP_*.
static __always_inline __u8 rq_op(__u32 cmd_flags)
{
	__u32 op = cmd_flags & 0xff; // REQ_OP_MASK: REQ_OP_BITS is 8

	if (op == bpf_core_enum_value(enum req_op, REQ_OP_READ))
		return OP_READ;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE))
		return OP_WRITE;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_FLUSH))
		return OP_FLUSH;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_DISCARD) ||
	    op == bpf_core_enum_value(enum req_op, REQ_OP_SECURE_ERASE))
		return OP_DISCARD;
	// Writes without a payload (zeroes) and zone appends still write
	// their range.
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE_ZEROES) ||
	    op == bpf_core_enum_value(enum req_op, REQ_OP_ZONE_APPEND))
		return OP_WRITE;
	return OP_SKIP;
}

// rq_flags maps cmd_flags to F_*. Sync follows trace.Sync: every read that
// is not read-ahead; writes carrying REQ_SYNC.
static __always_inline __u8 rq_flags(__u32 cmd_flags, __u8 op)
{
	__u8 f = 0;

	if (cmd_flags & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		f |= F_READAHEAD;
	if (cmd_flags & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		f |= F_META;
	if (cmd_flags & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		f |= F_FUA;
	if (op == OP_READ) {
		if (!(f & F_READAHEAD))
			f |= F_SYNC;
	} else if (cmd_flags & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC))) {
		f |= F_SYNC;
	}
	return f;
}

static __always_inline __u32 current_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

// slot_hash is the first slot of a struct request whose address has low
// 32 bits lo. The key itself is the pointer (compared and stored as is),
// but the verifier allows no arithmetic on a BTF pointer: a 32-bit copy of
// it is a plain number. (A number read back from map memory would be
// too, but a program interrupted between the store and the load by
// another one on the same CPU would read the other's.)
static __always_inline __u32 slot_hash(__u32 lo)
{
	__u32 h = lo * 2654435761U; // Knuth's multiplicative hash

	return h ^ (h >> 15);
}

// find returns the entry of the struct request key, or NULL.
static __always_inline struct slot *find(__u64 key)
{
	__u32 h = slot_hash((__u32)key);

#pragma unroll
	for (__u32 i = 0; i < PROBES; i++) {
		__u32 idx = (h + i) & slot_mask;
		struct slot *s = bpf_map_lookup_elem(&inflight, &idx);

		if (s && s->key == key)
			return s;
	}
	if (!overflow_used)
		return NULL;
	return bpf_map_lookup_elem(&overflow, &key);
}

// claim makes an entry, all zero, for key, which has none; NULL (counted)
// if the table is full.
static __always_inline struct slot *claim(__u64 key)
{
	__u32 h = slot_hash((__u32)key);
	struct slot z = {};

#pragma unroll
	for (__u32 i = 0; i < PROBES; i++) {
		__u32 idx = (h + i) & slot_mask;
		struct slot *s = bpf_map_lookup_elem(&inflight, &idx);

		if (s && !s->key && __sync_val_compare_and_swap(&s->key, 0, key) == 0)
			return s;
	}
	z.key = key;
	z.ovf = 1;
	if (bpf_map_update_elem(&overflow, &key, &z, BPF_NOEXIST)) {
		count(CNT_MAPFULL);
		return NULL;
	}
	__sync_fetch_and_add(&overflow_used, 1);
	return bpf_map_lookup_elem(&overflow, &key);
}

// release frees key's entry s: its fields are cleared before its key, so
// a reader never sees a taken slot with another request's fields.
static __always_inline void release(struct slot *s, __u64 key)
{
	if (s->ovf) {
		if (!bpf_map_delete_elem(&overflow, &key))
			__sync_fetch_and_add(&overflow_used, -1);
		return;
	}
	__builtin_memset(&s->r, 0, sizeof(s->r));
	__sync_val_compare_and_swap(&s->key, key, 0);
}

// close takes e's life from seen (what the caller read) to LIFE_CLOSED: true
// if this caller did, and so is the one to count the request.
static __always_inline bool close_life(struct inflight_req *e, __u64 seen)
{
	return seen != LIFE_CLOSED && __sync_val_compare_and_swap(&e->life, seen, LIFE_CLOSED) == seen;
}

// rq_born is the request's allocation time as the kernel stamped it
// (rq->start_time_ns; 0 when the queue keeps no statistics).
static __always_inline __u64 rq_born(struct request *rq)
{
	return rq->start_time_ns;
}

// stale reports whether e is left from an earlier life of its struct
// request rq (issued, not requeued, never seen completing). A struct
// request is reused for request after request (one per tag). An entry in
// service whose request has the same allocation stamp is the same request
// issued again without a requeue event (a driver's batch that failed and
// fell back to one-by-one issue does that), not a stale one.
static __always_inline bool stale(struct inflight_req *e, __u64 born)
{
	__u64 life = e->life;

	return life != LIFE_CLOSED && life != LIFE_OPEN && !(born && e->born == born);
}

// renew returns key's entry for a request starting a new life, all zero
// but for its stamp born and LIFE_OPEN: an entry left from an earlier life
// in service is counted missed (unless the reaper counted it first) and
// cleared, else a new one is made; NULL if the table is full.
static __always_inline struct inflight_req *renew(__u64 key, __u64 born)
{
	struct slot *s = find(key);

	if (!s)
		s = claim(key);
	else {
		__u64 life = s->r.life;

		if (life != LIFE_OPEN && close_life(&s->r, life))
			count(CNT_MISSED); // issued, then never seen completing
		__builtin_memset(&s->r, 0, sizeof(s->r));
	}
	if (!s)
		return NULL;
	s->r.born = born;
	__sync_lock_test_and_set(&s->r.life, LIFE_OPEN);
	return &s->r;
}

// current returns key's entry if it belongs to the request's present life;
// otherwise (none, stale, or closed by the reaper) a new one with the
// current task (*fresh set).
static __always_inline struct inflight_req *current_entry(struct request *rq, __u64 key, bool *fresh)
{
	struct slot *s = find(key);
	struct inflight_req *e;
	__u64 born = rq_born(rq);

	if (s && s->r.life != LIFE_CLOSED && !stale(&s->r, born)) {
		*fresh = false;
		return &s->r;
	}
	*fresh = true;
	e = renew(key, born);
	if (e)
		e->pid = current_tid();
	return e;
}

// paused_entry returns key's entry if the request had one before its
// disk was paused and it belongs to its present life (inserted, not yet
// issued, or requeued), else NULL: a paused disk's requests get none.
static __always_inline struct inflight_req *paused_entry(struct request *rq, __u64 key, bool *fresh)
{
	struct slot *s = find(key);

	*fresh = false;
	if (!s || s->r.life == LIFE_CLOSED || stale(&s->r, rq_born(rq)))
		return NULL;
	return &s->r;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(block_io_start, struct request *rq)
{
	struct flushwait fw = {};
	struct inflight_req *e;
	__u32 dev, cmd_flags;
	__u64 key;

	// Only a request waiting for a flush needs its start: the flush
	// request arrives with it, and its entry holds delivery back until
	// then. Any other request gets its entry, and its task, at its first
	// insert or issue, which run in the submitter's context as this does
	// (a plug is flushed by its own task; a stacked device's worker
	// submits as itself): so this program costs the I/O of every disk
	// one load and a test, the first thing it does.
	cmd_flags = rq->cmd_flags;
	if (!(cmd_flags & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH))))
		return 0;
	if (selection(rq, &dev) != SEL_TRACED)
		return 0;
	key = (__u64)rq;
	if (rq_op(cmd_flags) == OP_SKIP)
		return 0;
	fw.start = bpf_ktime_get_ns();
	fw.pid = current_tid();
	e = renew(key, rq_born(rq));
	if (e) {
		e->pid = fw.pid;
		e->start = fw.start;
	}
	// Keeps the oldest waiting request.
	bpf_map_update_elem(&flushwait, &dev, &fw, BPF_NOEXIST);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert, struct request *rq)
{
	__u64 key, now;
	struct inflight_req *e;
	bool fresh;
	__u32 dev;

	// A paused disk's request gets no entry; one that has an entry
	// already (inserted again after a requeue) keeps its first arrival.
	if (selection(rq, &dev) != SEL_TRACED)
		return 0;
	key = (__u64)rq;
	if (rq_op(rq->cmd_flags) == OP_SKIP)
		return 0;
	now = bpf_ktime_get_ns();
	e = current_entry(rq, key, &fresh);
	if (e && !e->arrival)
		e->arrival = now; // a re-insert after a requeue keeps the first
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u64 key, now, life;
	struct inflight_req *e;
	__u32 dev, cmd_flags;
	bool fresh;
	__u32 sel;
	__u8 op;

	sel = selection(rq, &dev);
	if (sel == SEL_NONE)
		return 0;
	key = (__u64)rq;
	cmd_flags = rq->cmd_flags;
	op = rq_op(cmd_flags);
	if (op == OP_SKIP)
		return 0;
	now = bpf_ktime_get_ns();
	if (sel == SEL_PAUSED)
		e = paused_entry(rq, key, &fresh);
	else
		e = current_entry(rq, key, &fresh);
	if (!e)
		return 0;
	if (fresh) {
		if (op == OP_FLUSH) {
			// A flush request of the flush machinery: it arrived with
			// the oldest request waiting for it.
			struct flushwait *fw = bpf_map_lookup_elem(&flushwait, &dev);

			if (fw) {
				e->arrival = fw->start;
				e->start = fw->start;
				e->pid = fw->pid;
				bpf_map_delete_elem(&flushwait, &dev);
			}
		}
	}
	life = e->life;
	if (!e->arrival)
		e->arrival = now; // bypassed the scheduler: arrives when issued
	e->dispatch = now;
	// The request's shape as the device sees it (merges are done).
	e->sector = rq->__sector;
	e->nr_sector = rq->__data_len >> 9;
	e->op = op;
	e->flags = rq_flags(cmd_flags, op);
	// In service from now: last, once its fields are set, and not if the
	// reaper closed the entry meanwhile (counted lost; its completion
	// will find it closed).
	if (life != LIFE_CLOSED)
		__sync_val_compare_and_swap(&e->life, life, now);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(block_rq_requeue, struct request *rq)
{
	__u64 key;
	struct slot *s;
	__u32 dev, sel;

	sel = selection(rq, &dev);
	if (sel == SEL_NONE)
		return 0;
	key = (__u64)rq;
	s = find(key);
	if (s) {
		__u64 life = s->r.life;

		// Out of service until issued again (the reaper leaves it).
		if (life != LIFE_CLOSED && life != LIFE_OPEN)
			__sync_val_compare_and_swap(&s->r.life, life, LIFE_OPEN);
		if (s->r.requeues < 0xffff)
			s->r.requeues++;
	} else if (sel == SEL_PAUSED) {
		return 0; // not followed
	}
	count(CNT_REQUEUE);
	return 0;
}

SEC("tp_btf/block_rq_merge")
int BPF_PROG(block_rq_merge, struct request *rq)
{
	__u64 key;
	struct slot *s;
	__u32 dev;

	// rq is merged into the request in front of it and freed without a
	// completion of its own.
	if (!selected(rq, &dev))
		return 0;
	key = (__u64)rq;
	s = find(key);
	if (s)
		release(s, key);
	return 0;
}

// One program on block_rq_complete. (An identical second one, meant to
// catch completions the first missed, never caught one: the kernel skips
// both for the same completions. See "Missed completions" below.)
SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key, now, flags, start, life;
	struct inflight_req *e;
	struct event *ev;
	struct slot *s;
	__u32 dev, left, sel;

	sel = selection(rq, &dev);
	if (sel == SEL_NONE)
		return 0;
	key = (__u64)rq;
	if (rq_op(rq->cmd_flags) == OP_SKIP) {
		if (sel == SEL_TRACED)
			count(CNT_SKIPPED);
		return 0;
	}
	s = find(key);
	if (!s) {
		// In flight when tracing began or resumed; or the second, empty
		// completion of a request whose data part already completed (FUA
		// emulated by a post-flush), which is not counted; or a request
		// of a paused disk.
		if (nr_bytes && sel == SEL_TRACED)
			count(CNT_ORPHAN);
		return 0;
	}
	e = &s->r;
	life = e->life;
	if (life == LIFE_CLOSED)
		return 0; // the reaper counted it lost as it completed
	if (!e->dispatch) {
		struct flushwait *fw;

		if (!close_life(e, life))
			return 0;
		start = e->start;
		release(s, key);
		if (nr_bytes) {
			count(CNT_MISSED); // its issue was missed
			return 0;
		}
		// Never issued: the empty write of a pre-flush, completed by the
		// flush machinery once its flush request (recorded on its own, with
		// this request's arrival and task) completed. Not a device request.
		fw = bpf_map_lookup_elem(&flushwait, &dev);
		if (fw && fw->start == start)
			bpf_map_delete_elem(&flushwait, &dev); // no flush was needed
		count(CNT_UNISSUED);
		return 0;
	}
	left = rq->__data_len;
	if (nr_bytes < left) {
		// Partial completion: the rest completes later (or is requeued).
		// Counted once per remainder.
		if (e->last_left != left) {
			e->last_left = left;
			e->partial++;
			count(CNT_PARTIAL);
		}
		return 0;
	}
	now = bpf_ktime_get_ns();
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		if (close_life(e, life)) {
			count(CNT_DROPPED);
			release(s, key);
		}
		return 0;
	}
	ev->arrival = e->arrival;
	ev->dispatch = e->dispatch;
	ev->complete = now;
	ev->sector = e->sector;
	ev->nr_sector = e->nr_sector;
	ev->dev = dev;
	ev->pid = e->pid;
	ev->requeues = e->requeues;
	ev->op = e->op;
	ev->flags = e->flags;
	ev->error = error;
	ev->partial = e->partial;
	// The record is made from the entry before it is closed: once closed
	// it may be cleared. Closed by the reaper meanwhile: counted lost.
	if (!close_life(e, life)) {
		bpf_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
		return 0;
	}
	if (error)
		count(CNT_ERROR);
	// Wake the reader only under pressure: it drains the ring on a timer,
	// often enough for the rate it sees, and a wake-up is an irq_work (a
	// self-interrupt) in the way of the I/O being traced.
	flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + sizeof(*ev) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	// Submit before deleting: the reader scans the in-flight table and
	// then drains the ring, so a request is always in one or the other.
	bpf_ringbuf_submit(ev, flags);
	release(s, key);
	return 0;
}

// Missed completions. Under concurrent load the kernel occasionally runs
// no program attached to block_rq_complete for a completion (1e-5 to 2e-4
// of them on Linux 6.18; a second program attached beside the first missed
// exactly the same ones, over millions of requests, so it was dropped).
// Such a request would stay in the in-flight table and hold back
// delivery (which waits for the oldest request in flight) until its struct
// request is reused. So the Go side runs reap() (BPF_PROG_TEST_RUN) once a
// second: it drops every entry issued more than reap_after_ns ago whose
// request the kernel has since freed (rq->state back to MQ_RQ_IDLE; a
// request being issued goes IDLE -> IN_FLIGHT just after block_rq_issue,
// hence the delay), counting it missed. The reader sets a shorter delay
// for one last run when it stops, so that a completion missed in the last
// second is counted too (ns; a global the reader may change, not a
// constant).
__u64 reap_after_ns = 1000000000;

struct reap_ctx {
	__u64 now;
};

static __always_inline void reap_entry(struct slot *s, __u64 key, struct reap_ctx *c)
{
	struct request *rq = (struct request *)key;
	struct inflight_req *e = &s->r;
	enum mq_rq_state st;
	__u64 life = e->life;

	// In service (issued, not requeued) for reap_after_ns: life is the
	// issue's time, which may be after c->now (signed age).
	if (!key || life == LIFE_CLOSED || life == LIFE_OPEN || (__s64)(c->now - life) < (__s64)reap_after_ns)
		return;
	if (bpf_probe_read_kernel(&st, sizeof(st), &rq->state))
		return;
	if (st != bpf_core_enum_value(enum mq_rq_state, MQ_RQ_IDLE))
		return;
	// Freed. Its completion may have run since life was read (it runs
	// before the request is freed): then it closed this life (and the
	// entry may be another life's by now, with another life value), and
	// this fails. Only a completion never seen leaves it to the reaper.
	if (close_life(e, life)) {
		release(s, key);
		count(CNT_MISSED);
	}
}

static long reap_slot(struct bpf_map *map, __u32 *idx, struct slot *s, struct reap_ctx *c)
{
	reap_entry(s, s->key, c);
	return 0;
}

static long reap_overflow(struct bpf_map *map, __u64 *key, struct slot *s, struct reap_ctx *c)
{
	reap_entry(s, *key, c);
	return 0;
}

SEC("syscall")
int reap(void *ctx)
{
	struct reap_ctx c = {.now = bpf_ktime_get_ns()};

	bpf_for_each_map_elem(&inflight, reap_slot, &c, 0);
	if (overflow_used)
		bpf_for_each_map_elem(&overflow, reap_overflow, &c, 0);
	return 0;
}
