//go:build linux

package tracer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// eventSize is sizeof(struct event) in bpf/blocktrace.c.
const eventSize = 56

// frontierMargin is subtracted from the clock reading that bounds the
// arrivals a flush may release: it covers a BPF program that read the clock
// just before the in-flight map was scanned but stored the time just after.
const frontierMargin = int64(time.Millisecond)

// reapEvery is how often the reaper of missed completions runs.
const reapEvery = time.Second

// finalReapAfter is the reaper's age limit in its last run, when Run
// stops (the programs' reap_after_ns, 1 s, otherwise): a request issued
// that long ago whose struct request the kernel has freed again missed its
// completion. The limit only has to cover the instant between
// block_rq_issue and the request's state turning in-flight.
const finalReapAfter = 10 * time.Millisecond

// forceEBPFError, when set (by tests), makes newEBPF fail with it.
var forceEBPFError error

type ebpfTracer struct {
	opts  Options
	coll  *ebpf.Collection
	links []link.Link
	rd    *ringbuf.Reader
	devs  *ebpf.Map
	infl  *ebpf.Map // the in-flight array (struct slot), memory-mapped as slots
	ovf   *ebpf.Map // its overflow hash map
	mem   []byte
	slots []blocktraceSlot
	cnts  *ebpf.Map
	reap  *ebpf.Program // nil if the kernel cannot run it
	notes []string
	// ringFile is the ring buffer's file, a duplicate of its map's
	// descriptor in the Go runtime's network poller, which Run waits on
	// (waitRing); ringConn is its RawConn.
	ringFile *os.File
	ringConn syscall.RawConn

	// fastDevs, fastPaused and fastMany are the programs' device filter
	// (fast_devs, fast_paused, fast_many in bpf/blocktrace.c).
	fastDevs, fastPaused, fastMany *ebpf.Variable
	// reapAfter is the reaper's age limit (reap_after_ns).
	reapAfter *ebpf.Variable

	col    collector     // used by Run's goroutine only (its counters are atomic)
	lostGC atomic.Uint64 // abandoned after StaleAfter
	reaps  atomic.Uint64 // runs of the reaper

	mu      sync.Mutex // guards curDevs, paused, idleSince, detached and links after newEBPF
	curDevs map[uint32]bool
	// paused is the set given to SetPaused (a disk in it is paused only
	// while it is traced).
	paused map[uint32]bool
	// idleSince is when the last selected disk not paused was paused or
	// deselected (zero while one is traced); detached is set while the
	// programs' links are closed: from newEBPF until a selected disk is
	// not paused (Options.Paused), and after detachIdle.
	idleSince time.Time
	detached  bool

	run runState
}

// runState lets Close stop a running Run and wait for it.
type runState struct {
	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// start marks Run as started; it fails after Close or a second Run.
func (s *runState) start(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errClosed
	}
	if s.started {
		return nil, nil, errors.New("tracer: Run called twice")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	done := s.done
	return ctx, func() { close(done) }, nil
}

// stop cancels Run and waits for it; it reports whether this is the first
// call.
func (s *runState) stop() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return true
}

func newEBPF(opts Options) (*ebpfTracer, error) {
	if forceEBPFError != nil {
		return nil, forceEBPFError
	}
	spec, kspec, err := blocktraceSpec(opts)
	if err != nil {
		return nil, err
	}
	// Nothing is attached until SetDevices selects a disk not paused.
	t := &ebpfTracer{opts: opts, col: collector{base: opts.Base}, curDevs: map[uint32]bool{}, paused: map[uint32]bool{}, detached: true}
	for _, d := range opts.Paused {
		t.paused[d] = true
	}
	if err := t.load(spec, kspec); err != nil {
		return nil, err
	}
	fail := func(err error) (*ebpfTracer, error) {
		_ = t.release()
		return nil, err
	}
	if err := t.mapInflight(); err != nil {
		return fail(err)
	}
	t.rd, err = ringbuf.NewReader(t.coll.Maps[blocktraceMapEvents])
	if err != nil {
		return fail(fmt.Errorf("ring buffer reader: %w", err))
	}
	if t.ringFile, t.ringConn, err = pollable(t.coll.Maps[blocktraceMapEvents].FD()); err != nil {
		return fail(fmt.Errorf("ring buffer: %w", err))
	}
	if err := t.SetDevices(opts.Devices); err != nil {
		return fail(err)
	}
	return t, nil
}

// blocktraceSpec lifts the memlock limit and returns the kernel's BTF and
// the programs' spec sized for opts: a ring buffer of RingBufferBytes
// (a power of two of at least one page, else an error), an in-flight
// table of MaxInflight slots rounded up to a power of two (at most 2^24)
// and an overflow map of a quarter of that (at least 1024 entries).
func blocktraceSpec(opts Options) (*ebpf.CollectionSpec, *btf.Spec, error) {
	if rb := opts.RingBufferBytes; rb < os.Getpagesize() || rb&(rb-1) != 0 {
		return nil, nil, fmt.Errorf("ring buffer size %d is not a power of two of at least one page", rb)
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, nil, fmt.Errorf("kernel BTF (needed for CO-RE): %w", err)
	}
	spec, err := loadBlocktrace()
	if err != nil {
		return nil, nil, err
	}
	spec.Maps[blocktraceMapEvents].MaxEntries = uint32(opts.RingBufferBytes)
	// The programs wake the reader only under pressure.
	if err := spec.Variables[blocktraceVarWakeupBytes].Set(uint64(ringPressure(opts.RingBufferBytes))); err != nil {
		return nil, nil, err
	}
	// The in-flight table: MaxInflight slots (a power of two), and an
	// overflow map for requests whose slots are taken.
	nslots := uint32(1)
	for nslots < uint32(min(opts.MaxInflight, 1<<24)) {
		nslots <<= 1
	}
	spec.Maps[blocktraceMapInflight].MaxEntries = nslots
	spec.Maps[blocktraceMapOverflow].MaxEntries = uint32(max(opts.MaxInflight/4, 1024))
	if err := spec.Variables[blocktraceVarSlotMask].Set(nslots - 1); err != nil {
		return nil, nil, err
	}
	return spec, kspec, nil
}

// load loads spec into the kernel and sets t's maps, programs and
// variables. Without block_io_start (before 6.5) or the reaper (before
// 5.14) it loads the rest and says so in t.notes. A verifier error is
// reported by the last lines of its log.
func (t *ebpfTracer) load(spec *ebpf.CollectionSpec, kspec *btf.Spec) error {
	// block_io_start (6.5+) only tells the submitting task; without it the
	// task at insert or issue is used.
	if _, err := kspec.AnyTypeByName("btf_trace_block_io_start"); err != nil {
		delete(spec.Programs, blocktraceProgBlockIoStart)
		t.notes = append(t.notes, "kernel has no block_io_start tracepoint: PID is the task at insert or issue")
	}
	copts := ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kspec}}
	coll, err := ebpf.NewCollectionWithOptions(spec, copts)
	if err != nil && spec.Programs[blocktraceProgReap] != nil {
		// The reaper needs syscall programs and bpf_for_each_map_elem
		// (5.14); trace without it rather than not at all.
		rerr := err
		delete(spec.Programs, blocktraceProgReap)
		if coll, err = ebpf.NewCollectionWithOptions(spec, copts); err == nil {
			t.notes = append(t.notes, fmt.Sprintf("no reaper for missed completions (%v): a missed completion holds delivery back until its request is reused or StaleAfter", rerr))
		}
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load BPF programs: %s", strings.Join(ve.Log[max(0, len(ve.Log)-5):], "; "))
		}
		return fmt.Errorf("load BPF programs: %w", err)
	}
	t.coll = coll
	t.devs = coll.Maps[blocktraceMapDevices]
	t.infl = coll.Maps[blocktraceMapInflight]
	t.ovf = coll.Maps[blocktraceMapOverflow]
	t.cnts = coll.Maps[blocktraceMapCounters]
	t.reap = coll.Programs[blocktraceProgReap]
	t.fastDevs, t.fastMany = coll.Variables[blocktraceVarFastDevs], coll.Variables[blocktraceVarFastMany]
	t.fastPaused = coll.Variables[blocktraceVarFastPaused]
	t.reapAfter = coll.Variables[blocktraceVarReapAfterNs]
	return nil
}

// mapInflight memory-maps the in-flight array into t.mem and t.slots.
func (t *ebpfTracer) mapInflight() error {
	// The reader scans the in-flight array in place (scan), and frees a
	// stale slot with a compare-and-exchange on its key, as the programs
	// do.
	size := int(t.infl.MaxEntries()) * int(unsafe.Sizeof(blocktraceSlot{}))
	if t.infl.ValueSize() != uint32(unsafe.Sizeof(blocktraceSlot{})) {
		return fmt.Errorf("in-flight slot of %d bytes, want %d", t.infl.ValueSize(), unsafe.Sizeof(blocktraceSlot{}))
	}
	var err error
	t.mem, err = unix.Mmap(t.infl.FD(), 0, (size+os.Getpagesize()-1)/os.Getpagesize()*os.Getpagesize(),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the in-flight table: %w", err)
	}
	t.slots = unsafe.Slice((*blocktraceSlot)(unsafe.Pointer(&t.mem[0])), t.infl.MaxEntries())
	return nil
}

// attach attaches the loaded programs to their raw tracepoints, adding
// the links to t.links; on an error it closes those it made.
func (t *ebpfTracer) attach() error {
	made := len(t.links)
	// Attach the completion side first, so that no request is seen
	// starting without its completion being watched.
	for _, name := range []string{
		blocktraceProgBlockRqComplete, blocktraceProgBlockRqMerge, blocktraceProgBlockRqRequeue,
		blocktraceProgBlockRqIssue, blocktraceProgBlockRqInsert, blocktraceProgBlockIoStart,
	} {
		prog := t.coll.Programs[name]
		if prog == nil {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			for _, l := range t.links[made:] {
				_ = l.Close()
			}
			t.links = t.links[:made]
			return fmt.Errorf("attach %s: %w", name, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// detachAfter is how long no selected disk must have been traced (all
// paused or none selected) before detachIdle closes the programs' links:
// a request that passed the programs' filter just before the pause has
// its in-flight entry by then.
const detachAfter = 50 * time.Millisecond

// tracing reports whether a selected disk is not paused (t.mu held).
func (t *ebpfTracer) tracing() bool {
	for d := range t.curDevs {
		if !t.paused[d] {
			return true
		}
	}
	return false
}

// syncAttach follows a new selection (t.mu held): while a selected disk
// is not paused the programs are attached (again, if detachIdle had
// detached them: the requests then in flight complete as orphans, as at a
// resume); once none is, it notes when, for detachIdle.
func (t *ebpfTracer) syncAttach() error {
	if !t.tracing() {
		if t.idleSince.IsZero() {
			t.idleSince = time.Now()
		}
		return nil
	}
	t.idleSince = time.Time{}
	if !t.detached {
		return nil
	}
	if err := t.attach(); err != nil {
		return err
	}
	t.detached = false
	return nil
}

// detachIdle closes the programs' links once no selected disk has been
// traced for detachAfter and no request is left in the in-flight table:
// attached, the programs run at every block event of the node and
// reject each (bench-decisions: a sampled device is paused for most of
// each window), while detached they cost nothing. The requests followed
// at the pause are delivered first, so nothing is lost. Run calls it
// after each drain; syncAttach attaches again.
func (t *ebpfTracer) detachIdle() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.detached || t.idleSince.IsZero() || time.Since(t.idleSince) < detachAfter || !t.inflightEmpty() {
		return nil
	}
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links, t.detached = nil, true
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach the idle programs: %w", err)
	}
	return nil
}

// isDetached reports whether detachIdle has detached the programs. They
// were detached with the in-flight table empty, and nothing enters it
// until they are attached again, so the reaper has nothing to reap
// meanwhile: on a sampled device, most of each window.
func (t *ebpfTracer) isDetached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.detached
}

// inflightEmpty reports whether the in-flight table (its slots and its
// overflow map) holds no request.
func (t *ebpfTracer) inflightEmpty() bool {
	for i := range t.slots {
		if atomic.LoadUint64(&t.slots[i].Key) != 0 {
			return false
		}
	}
	var key uint64
	var v blocktraceSlot
	iter := t.ovf.Iterate()
	return !iter.Next(&key, &v) && iter.Err() == nil
}

func (t *ebpfTracer) Kind() string { return KindEBPF }

func (t *ebpfTracer) Info() Info {
	return Info{Kind: KindEBPF, Base: t.opts.Base, Resolution: time.Nanosecond, Notes: t.notes}
}

func (t *ebpfTracer) SetDevices(devs []uint32) error {
	if len(devs) > int(t.devs.MaxEntries()) {
		return fmt.Errorf("%d devices: at most %d can be traced", len(devs), t.devs.MaxEntries())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	want := map[uint32]bool{}
	for _, d := range devs {
		want[d] = true
	}
	for d := range t.curDevs {
		if !want[d] {
			if err := t.devs.Delete(d); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("deselect device %s: %w", DevString(d), err)
			}
			delete(t.curDevs, d)
		}
	}
	for d := range want {
		t.curDevs[d] = true
	}
	if err := t.writeSelection(); err != nil {
		return err
	}
	return t.syncAttach()
}

// SetPaused pauses the traced disks in devs and resumes the others: a
// paused disk's new requests are not recorded, while those already
// followed are delivered at their completion, so that pausing and
// resuming lose nothing and count no completion missed. A disk in devs
// that is not traced is paused once SetDevices selects it.
func (t *ebpfTracer) SetPaused(devs []uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.paused)
	for _, d := range devs {
		t.paused[d] = true
	}
	if err := t.writeSelection(); err != nil {
		return err
	}
	return t.syncAttach()
}

// writeSelection writes curDevs and paused into the programs' filter:
// the devices map always (its value the SEL_* state), and up to fastDevs
// disks, in order, into the global arrays, which the programs read
// instead of the map while fast_many is 0. t.mu is held.
func (t *ebpfTracer) writeSelection() error {
	sel := slices.Sorted(maps.Keys(t.curDevs))
	var fast, paused [fastDevs]uint32
	for i, d := range sel {
		state := uint8(selTraced)
		if t.paused[d] {
			state = selPaused
		}
		if err := t.devs.Update(d, state, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("select device %s: %w", DevString(d), err)
		}
		if i < fastDevs {
			fast[i] = d
			if state == selPaused {
				paused[i] = 1
			}
		}
	}
	if len(sel) > fastDevs {
		return t.fastMany.Set(uint32(1))
	}
	// A request that meets the arrays half-written gets an entry or not,
	// as at any pause or resume: either way it is counted once.
	if err := t.fastPaused.Set(paused); err != nil {
		return fmt.Errorf("pause devices: %w", err)
	}
	if err := t.fastDevs.Set(fast); err != nil {
		return fmt.Errorf("select devices: %w", err)
	}
	return t.fastMany.Set(uint32(0))
}

// selTraced and selPaused are SEL_TRACED and SEL_PAUSED in
// bpf/blocktrace.c.
const (
	selTraced = 1
	selPaused = 2
)

// fastDevs is FAST_DEVS in bpf/blocktrace.c.
const fastDevs = 8

func (t *ebpfTracer) Stats() Stats {
	var s Stats
	if t.cnts != nil {
		var vals []uint64
		get := func(k blocktraceCounter) uint64 {
			if err := t.cnts.Lookup(uint32(k), &vals); err != nil {
				return 0
			}
			var n uint64
			for _, v := range vals {
				n += v
			}
			return n
		}
		s.Dropped = get(blocktraceCounterCNT_DROPPED)
		s.Orphans = get(blocktraceCounterCNT_ORPHAN)
		s.Skipped = get(blocktraceCounterCNT_SKIPPED)
		s.Requeues = get(blocktraceCounterCNT_REQUEUE)
		s.Partial = get(blocktraceCounterCNT_PARTIAL)
		s.Lost = get(blocktraceCounterCNT_MAPFULL) + get(blocktraceCounterCNT_MISSED)
		s.Unissued = get(blocktraceCounterCNT_UNISSUED)
	}
	s.Events = t.col.events.Load()
	s.Lost += t.col.lost.Load() + t.lostGC.Load()
	s.Errors = t.col.errors.Load()
	return s
}

func (t *ebpfTracer) Run(ctx context.Context, out func([]trace.Request)) error {
	ctx, finish, err := t.run.start(ctx)
	if err != nil {
		return err
	}
	defer finish()

	// The reader drains the ring on a timer: at least every maxPoll, and
	// sooner at a high rate (pollInterval). It waits in the Go runtime's
	// network poller (waitRing), which the programs wake only when half
	// the ring is pending, never in a blocking epoll_wait: a goroutine
	// blocked in a system call holds its P, so the runtime's sysmon thread
	// kept waking, hundreds of times a second, for as long as it did. The
	// ringbuf.Reader only reads: with a deadline in the past every read
	// returns once the ring is empty.
	t.rd.SetDeadline(time.Unix(1, 0))
	var rec ringbuf.Record
	// drain consumes every record in the ring and returns the ring bytes
	// they took.
	drain := func() (int, error) {
		n := 0
		for {
			err := t.rd.ReadInto(&rec)
			switch {
			case err == nil:
				n += ringRecordBytes(len(rec.RawSample))
				t.handle(rec.RawSample)
			case errors.Is(err, os.ErrDeadlineExceeded):
				return n, nil
			default:
				return n, fmt.Errorf("read ring buffer: %w", err)
			}
		}
	}
	var lastReap time.Time
	lastPoll, lastDeliver := time.Now(), time.Now()
	longest := min(t.opts.FlushInterval, maxPoll)
	wait := longest
	// Cancelling ends the wait.
	stopWait := context.AfterFunc(ctx, func() { _ = t.ringFile.SetReadDeadline(time.Unix(1, 0)) })
	defer stopWait()
	for {
		if err := t.waitRing(ctx, wait); err != nil {
			return err
		}
		if ctx.Err() != nil {
			if err := t.finalReap(); err != nil {
				return err
			}
			if _, err := drain(); err != nil {
				return err
			}
			t.deliver(out, math.MaxInt64)
			return nil
		}
		n, err := drain()
		if err != nil {
			return err
		}
		if err := t.detachIdle(); err != nil {
			return err
		}
		if time.Since(lastDeliver) >= t.opts.FlushInterval {
			lastDeliver = time.Now()
			// Everything that arrived before the oldest request still in
			// flight, and before now, is final: scan the in-flight map
			// first, then drain the ring (a completing request is
			// submitted to the ring before it leaves the map). First drop
			// the requests whose completion the program missed.
			if t.reap != nil && time.Since(lastReap) >= reapEvery && !t.isDetached() {
				// It walks every bucket of the map (~0.25 ms for 16384).
				if _, err := t.reap.Run(&ebpf.RunOptions{}); err != nil {
					return fmt.Errorf("run reaper: %w", err)
				}
				t.reaps.Add(1)
				lastReap = time.Now()
			}
			now := Monotonic()
			frontier := min(now-frontierMargin, t.scan(now))
			m, err := drain()
			if err != nil {
				return err
			}
			n += m
			t.deliver(out, frontier)
		}
		wall := time.Now()
		wait = pollInterval(longest, t.opts.RingBufferBytes, n, wall.Sub(lastPoll))
		lastPoll = wall
	}
}

// waitRing returns after d, or sooner when the ring is under pressure (the
// programs then wake its readers) or ctx is cancelled.
func (t *ebpfTracer) waitRing(ctx context.Context, d time.Duration) error {
	if err := t.ringFile.SetReadDeadline(time.Now().Add(d)); err != nil {
		return fmt.Errorf("ring buffer: %w", err)
	}
	if ctx.Err() != nil { // cancelled before the deadline was set
		return nil
	}
	pressure := ringPressure(t.opts.RingBufferBytes)
	err := t.ringConn.Read(func(uintptr) bool { return t.rd.AvailableBytes() >= pressure })
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("wait for the ring buffer: %w", err)
	}
	return nil
}

// pollable returns a duplicate of fd (a BPF ring buffer map), non-blocking,
// as a file in the Go runtime's network poller, and its RawConn, whose Read
// waits for the ring to be readable without holding a thread. The kernel
// reports it readable when a program submits a record with
// BPF_RB_FORCE_WAKEUP.
func pollable(fd int) (*os.File, syscall.RawConn, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("duplicate its descriptor: %w", err)
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, nil, fmt.Errorf("make it non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(dup), "bpf-ringbuf")
	rc, err := f.SyscallConn()
	if err == nil {
		// A file the poller did not take has no deadlines.
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("poll it: %w", err)
	}
	return f, rc, nil
}

// ringPressure is the pending bytes of a ring of ringBytes at which the
// programs wake the reader (wakeup_bytes in bpf/blocktrace.c): half of it.
func ringPressure(ringBytes int) int { return ringBytes / 2 }

// ringRecordBytes is the ring-buffer space of a record of n bytes: an
// 8-byte header (BPF_RINGBUF_HDR_SZ) and the sample, rounded up to 8 bytes
// (kernel/bpf/ringbuf.c).
func ringRecordBytes(n int) int { return (8 + n + 7) &^ 7 }

// The reader drains the ring at most maxPoll and at least minPoll apart.
// Between drains the ring must hold what the programs write: at maxPoll, a
// 4 MiB ring holds a burst of about 650,000 requests/s that starts right
// after a drain.
const (
	minPoll = time.Millisecond
	maxPoll = 100 * time.Millisecond
)

// pollInterval is how long the reader waits before its next drain of a
// ring of ringBytes bytes, having drained drained bytes written over the
// last elapsed: longest, or less if at that rate the ring would be more
// than a quarter full by then (so that a burst four times the rate still
// fits), but not under minPoll. A ring found three quarters full (perhaps
// overflowing: the rate is unknown) is drained again after minPoll.
func pollInterval(longest time.Duration, ringBytes, drained int, elapsed time.Duration) time.Duration {
	if drained <= 0 || elapsed <= 0 {
		return longest
	}
	if drained >= ringBytes/4*3 {
		return minPoll
	}
	// The time to write a quarter of the ring at the last rate.
	quarter := time.Duration(float64(elapsed) * float64(ringBytes/4) / float64(drained))
	return max(minPoll, min(longest, quarter))
}

// finalReap runs the reaper once more as Run stops, with the age limit
// finalReapAfter: a completion missed less than reapEvery before the stop
// is counted lost too, not left in the in-flight table uncounted. It
// waits finalReapAfter first, so that a request issued just before is old
// enough.
func (t *ebpfTracer) finalReap() error {
	if t.reap == nil || t.reapAfter == nil {
		return nil
	}
	time.Sleep(finalReapAfter)
	if err := t.reapAfter.Set(uint64(finalReapAfter)); err != nil {
		return fmt.Errorf("set the reaper's age limit: %w", err)
	}
	if _, err := t.reap.Run(&ebpf.RunOptions{}); err != nil {
		return fmt.Errorf("run reaper: %w", err)
	}
	return nil
}

// deliver releases the requests arrived by frontier to out.
func (t *ebpfTracer) deliver(out func([]trace.Request), frontier int64) {
	batch := t.col.release(frontier)
	if len(batch) > 0 {
		out(batch)
	}
}

// handle decodes one ring-buffer record (struct event).
func (t *ebpfTracer) handle(b []byte) {
	if len(b) < eventSize {
		return
	}
	ne := binary.NativeEndian
	r := raw{
		arrival:  int64(ne.Uint64(b[0:])),
		dispatch: int64(ne.Uint64(b[8:])),
		complete: int64(ne.Uint64(b[16:])),
		sector:   ne.Uint64(b[24:]),
		sectors:  ne.Uint32(b[32:]),
		dev:      ne.Uint32(b[36:]),
		pid:      ne.Uint32(b[40:]),
		op:       trace.Op(b[46]),
		flags:    trace.Flags(b[47]),
		failed:   ne.Uint32(b[48:]) != 0,
	}
	t.col.add(r)
}

// scan walks the in-flight table (the slots in place, then the overflow
// map): it abandons requests older than StaleAfter and returns the earliest
// arrival among the others, or for a request waiting for a flush its
// block_io_start time, which the flush request's arrival does not precede
// (math.MaxInt64 if the table is empty). A request not inserted or issued
// yet has no time: its arrival will be stamped after this scan (within
// frontierMargin).
func (t *ebpfTracer) scan(now int64) int64 {
	oldest := int64(math.MaxInt64)
	stale := now - int64(t.opts.StaleAfter)
	// seen is an entry's earliest time, 0 if it has none yet.
	seen := func(start, arrival uint64) int64 {
		if start != 0 && (arrival == 0 || start < arrival) {
			return int64(start)
		}
		return int64(arrival)
	}
	for i := range t.slots {
		s := &t.slots[i]
		key := atomic.LoadUint64(&s.Key)
		if key == 0 {
			continue
		}
		at := seen(atomic.LoadUint64(&s.R.Start), atomic.LoadUint64(&s.R.Arrival))
		if at != 0 && at < stale {
			// Lock the slot with a key no request has (struct request
			// pointers are aligned), clear it, free it.
			if atomic.CompareAndSwapUint64(&s.Key, key, key|1) {
				// Counted here unless its completion or the reaper
				// closed its life first (as the programs do: whoever
				// takes life to 0 counts the request).
				if closeLife(&s.R.Life) {
					t.lostGC.Add(1)
				}
				s.R = blocktraceInflightReq{}
				atomic.StoreUint64(&s.Key, 0)
			}
			continue
		}
		if at != 0 && at < oldest {
			oldest = at
		}
	}
	var (
		key  uint64
		v    blocktraceSlot
		drop []uint64
		iter = t.ovf.Iterate()
	)
	for iter.Next(&key, &v) {
		at := seen(v.R.Start, v.R.Arrival)
		if at != 0 && at < stale {
			drop = append(drop, key)
			continue
		}
		if at != 0 && at < oldest {
			oldest = at
		}
	}
	if iter.Err() != nil {
		// The map changed under the iteration too often: hold everything
		// back this time.
		return math.MinInt64
	}
	for _, k := range drop {
		if t.ovf.Delete(k) == nil {
			t.lostGC.Add(1)
		}
	}
	return oldest
}

// closeLife takes an in-flight entry's life (struct inflight_req's life
// in bpf/blocktrace.c) to 0, LIFE_CLOSED, as the programs do: true if
// this call did, and so counts the request; false if another party
// (its completion, the reaper) had.
func closeLife(life *uint64) bool {
	for {
		v := atomic.LoadUint64(life)
		if v == 0 {
			return false
		}
		if atomic.CompareAndSwapUint64(life, v, 0) {
			return true
		}
	}
}

func (t *ebpfTracer) Close() error {
	if !t.run.stop() {
		return nil
	}
	return t.release()
}

// release detaches the programs and frees the maps.
func (t *ebpfTracer) release() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
		t.rd = nil
	}
	if t.ringFile != nil {
		errs = append(errs, t.ringFile.Close())
		t.ringFile, t.ringConn = nil, nil
	}
	t.slots = nil
	if t.mem != nil {
		errs = append(errs, unix.Munmap(t.mem))
		t.mem = nil
	}
	if t.coll != nil {
		t.coll.Close()
		t.coll = nil
	}
	t.cnts, t.reap = nil, nil
	return errors.Join(errs...)
}
