package tracer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Tracer kinds, as returned by [Tracer.Kind] and accepted by [Options].Kind.
const (
	KindAuto    = "auto"    // eBPF, else tracefs
	KindEBPF    = "ebpf"    // BPF programs on the block tracepoints
	KindTracefs = "tracefs" // trace events in a private tracefs instance
)

// Tracer records the block requests of the selected disks.
type Tracer interface {
	// Run traces until ctx is done (or Close is called) and calls out with
	// batches of completed requests, in non-decreasing Arrival order within
	// and across batches. out is called from Run's goroutine; the slice is
	// valid only until out returns (the tracer reuses it for the next
	// batch), so out copies what it keeps. When ctx is done, Run delivers
	// every request that has completed and returns nil; it returns an
	// error only if tracing failed. Run may be called once.
	Run(ctx context.Context, out func([]trace.Request)) error
	// SetDevices replaces the set of traced disks (dev_t, major<<20 |
	// minor; see [ResolveDevice]). It may be called while Run is running.
	// An empty set traces nothing.
	SetDevices(devs []uint32) error
	// SetPaused pauses the traced disks in devs and resumes the others:
	// a paused disk's new requests are not recorded, and those in flight
	// when it was paused are still delivered, so that a disk can be traced
	// in samples (the agent traces a settled disk's windows in part). A
	// disk in devs that is not traced is paused once it is. While no
	// traced disk is left unpaused (or none is traced) and the requests
	// followed at the pause have completed, the eBPF tracer detaches its
	// programs, so that they cost the node's I/O nothing; the next disk
	// resumed or selected attaches them again. It may be called while Run
	// is running; it returns ErrPauseUnsupported when the tracer cannot
	// pause (tracefs), and an error when the programs cannot be attached
	// again.
	SetPaused(devs []uint32) error
	// Stats returns the counters so far. It is safe to call at any time.
	Stats() Stats
	// Kind returns KindEBPF or KindTracefs.
	Kind() string
	// Info describes the tracer: kind, time base, resolution, why eBPF was
	// not used.
	Info() Info
	// Close stops Run if it is running, waits for it to return and
	// releases every kernel resource (BPF programs and maps; the tracefs
	// instance). It is idempotent.
	Close() error
}

// Options configure [New]. The zero value is usable (it traces no disk
// until SetDevices is called).
type Options struct {
	// Devices are the disks to trace, as dev_t (major<<20 | minor).
	Devices []uint32
	// Paused are disks of Devices whose tracing starts paused, as after
	// SetPaused(Paused): the eBPF tracer attaches its programs only once
	// a selected disk is not paused, so a start with every disk paused
	// runs no program at any block event. A tracer that cannot pause
	// (tracefs) traces them; its SetPaused returns ErrPauseUnsupported.
	Paused []uint32
	// Kind is KindAuto (also ""), KindEBPF or KindTracefs.
	Kind string
	// Base is the CLOCK_MONOTONIC time, in ns, that trace time 0 stands
	// for. 0 means the time New is called. Requests that arrived before it
	// are not delivered (counted in Stats.Lost).
	Base int64
	// FlushInterval is how often batches are delivered (default 250 ms).
	FlushInterval time.Duration
	// StaleAfter abandons a request in flight for longer than this
	// (default 60 s; counted in Stats.Lost).
	StaleAfter time.Duration
	// RingBufferBytes is the size of the eBPF ring buffer in bytes: a power
	// of two, at least one page (default 4 MiB: 65,536 records of 64 bytes,
	// about 0.9 s at 70,000 requests/s). The programs wake the reader when
	// half of it is pending; otherwise it is drained on a timer (doc.go).
	RingBufferBytes int
	// MaxInflight is the number of slots of the eBPF in-flight table,
	// rounded up to a power of two (default 16384, requests across the
	// traced disks); its overflow map holds a quarter of that, at least
	// 1024.
	MaxInflight int
	// TracefsBufferKB is the per-CPU buffer size of the tracefs instance
	// (default 4096 KiB).
	TracefsBufferKB int
	// TracefsRoot is where tracefs is mounted (default /sys/kernel/tracing,
	// else /sys/kernel/debug/tracing; if neither is mounted, New mounts
	// tracefs at /sys/kernel/tracing).
	TracefsRoot string
}

// Defaults.
const (
	DefaultFlushInterval   = 250 * time.Millisecond
	DefaultStaleAfter      = 60 * time.Second
	DefaultRingBufferBytes = 4 << 20
	DefaultMaxInflight     = 16384
	DefaultTracefsBufferKB = 4096
)

func (o *Options) setDefaults() {
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.RingBufferBytes <= 0 {
		o.RingBufferBytes = DefaultRingBufferBytes
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.TracefsBufferKB <= 0 {
		o.TracefsBufferKB = DefaultTracefsBufferKB
	}
}

// Stats count what a tracer saw. Counters only grow.
type Stats struct {
	// Events is the number of requests delivered to Run's out.
	Events uint64
	// Dropped counts records the kernel could not hand over: eBPF,
	// requests whose ring-buffer record found no room; tracefs, trace
	// events overwritten before they were read ("[LOST n EVENTS]").
	Dropped uint64
	// Lost counts requests the tracer saw but did not deliver: abandoned
	// after StaleAfter in flight, not tracked because the in-flight table was
	// full, whose completion event the BPF program missed (see the package
	// doc), arrived before Base, or could not be placed in order.
	Lost uint64
	// Orphans counts completions of requests not seen starting (in flight
	// when tracing began, or whose start was dropped).
	Orphans uint64
	// Skipped counts completed requests of operations a trace cannot hold
	// (zone management, driver-private; for tracefs also write-zeroes).
	Skipped uint64
	// Requeues counts requeues (the driver gave a request back).
	Requeues uint64
	// Partial counts partial completions.
	Partial uint64
	// Errors counts delivered requests that completed with an I/O error.
	Errors uint64
	// Unissued counts requests completed without reaching the driver: the
	// empty pre-flush writes of fsync, served by a flush request that is
	// recorded (as a Flush with their arrival and task). They are not
	// delivered, but /sys/block/*/stat counts them as writes of 0 sectors.
	Unissued uint64
}

// Info describes a tracer.
type Info struct {
	Kind string // KindEBPF or KindTracefs
	// Base is the CLOCK_MONOTONIC time (ns) of trace time 0.
	Base int64
	// Resolution of the times: 1 ns (eBPF) or 1 µs (tracefs).
	Resolution time.Duration
	// EBPFError says why eBPF is not in use (nil for the eBPF tracer, and
	// when tracefs was asked for).
	EBPFError error
	// Notes are remarks for the operator, such as "mounted tracefs at
	// /sys/kernel/tracing".
	Notes []string
}

// New returns a tracer of the kind opts.Kind asks for. With KindAuto it
// tries eBPF and falls back to tracefs; the reason eBPF failed is in
// Info().EBPFError. The tracer records from the moment New returns.
func New(opts Options) (Tracer, error) {
	opts.setDefaults()
	if opts.Base == 0 {
		opts.Base = Monotonic()
	}
	switch opts.Kind {
	case "", KindAuto:
		t, err := newEBPF(opts)
		if err == nil {
			return t, nil
		}
		ft, ferr := newTracefs(opts, err)
		if ferr != nil {
			return nil, fmt.Errorf("no tracer: ebpf: %w; tracefs: %w", err, ferr)
		}
		return ft, nil
	case KindEBPF:
		t, err := newEBPF(opts)
		if err != nil {
			return nil, fmt.Errorf("ebpf tracer: %w", err)
		}
		return t, nil
	case KindTracefs:
		t, err := newTracefs(opts, nil)
		if err != nil {
			return nil, fmt.Errorf("tracefs tracer: %w", err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("unknown tracer kind %q (want %s, %s or %s)", opts.Kind, KindAuto, KindEBPF, KindTracefs)
}

// errClosed is returned by Run after Close.
var errClosed = errors.New("tracer closed")

// ErrPauseUnsupported is returned by [Tracer.SetPaused] of a tracer that
// cannot pause a disk (tracefs).
var ErrPauseUnsupported = errors.New("this tracer cannot pause a disk: it traces every request of its disks")
