// Package trace defines shadowtune's block-request record and streaming
// readers and writers for the trace formats the project consumes.
//
// Units: sector offsets and lengths are in 512-byte sectors; times are
// nanoseconds (int64) relative to the start of the trace. A time that a
// format does not carry is [Unknown].
package trace

import (
	"errors"
	"fmt"
)

// SectorSize is the size of one sector in bytes.
const SectorSize = 512

// Unknown marks a timestamp that the source format does not carry.
const Unknown int64 = -1

// Op is the operation of a block request.
type Op uint8

// Request operations.
const (
	Read Op = iota
	Write
	Flush
	Discard
)

// String returns the short name of the operation ("R", "W", "F", "D").
func (o Op) String() string {
	switch o {
	case Read:
		return "R"
	case Write:
		return "W"
	case Flush:
		return "F"
	case Discard:
		return "D"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Flags qualify a request.
type Flags uint8

const (
	// Sync marks a synchronous request: the issuing process blocks until it
	// completes (REQ_SYNC for writes; every read that is not read-ahead).
	Sync Flags = 1 << iota
	// ReadAhead marks an asynchronous read issued by the kernel's read-ahead
	// (REQ_RAHEAD).
	ReadAhead
	// Meta marks file-system metadata (REQ_META).
	Meta
	// FUA marks a forced-unit-access write (REQ_FUA).
	FUA
)

// Request is one block request as recorded on a device.
//
// Arrival is when the request entered the block layer (blktrace Q, eBPF
// block_rq_insert or block_bio_queue); Dispatch is when it was issued to the
// device driver (D, block_rq_issue); Complete is when the device completed
// it (C, block_rq_complete). Service time = Complete − Dispatch; response
// time = Complete − Arrival. Dispatch and Complete are [Unknown] when the
// format does not carry them.
type Request struct {
	Arrival  int64  // ns since trace start
	Dispatch int64  // ns since trace start, or Unknown
	Complete int64  // ns since trace start, or Unknown
	Sector   uint64 // start, 512-byte sectors
	Sectors  uint32 // length, 512-byte sectors
	Dev      uint32 // device number (Linux dev_t encoding major<<20|minor), 0 if unknown
	PID      uint32 // issuing process id, 0 if unknown
	Op       Op
	Flags    Flags
	// Think is the recorded think time in ns: the gap between the completion
	// of this process's previous request and this request's arrival. Readers
	// set it when the format records it (DiskSim); otherwise it is Unknown and
	// the simulator derives it from the timestamps.
	Think int64
}

// End returns the first sector after the request.
func (r *Request) End() uint64 { return r.Sector + uint64(r.Sectors) }

// Bytes returns the request length in bytes.
func (r *Request) Bytes() uint64 { return uint64(r.Sectors) * SectorSize }

// IsSync reports whether the request is synchronous.
func (r *Request) IsSync() bool { return r.Flags&Sync != 0 }

// HasService reports whether the request carries a measured service time.
func (r *Request) HasService() bool {
	return r.Dispatch != Unknown && r.Complete != Unknown && r.Complete >= r.Dispatch
}

// ServiceTime returns Complete − Dispatch in ns, or Unknown.
func (r *Request) ServiceTime() int64 {
	if !r.HasService() {
		return Unknown
	}
	return r.Complete - r.Dispatch
}

// ResponseTime returns Complete − Arrival in ns, or Unknown.
func (r *Request) ResponseTime() int64 {
	if r.Complete == Unknown || r.Complete < r.Arrival {
		return Unknown
	}
	return r.Complete - r.Arrival
}

// Reader streams requests from a trace. Next returns io.EOF after the last
// request. Requests come in non-decreasing Arrival order. A malformed input
// yields a *ParseError; a reader never panics on any input.
type Reader interface {
	Next() (Request, error)
}

// Writer writes requests in one format. Close flushes buffered output; it
// does not close the underlying io.Writer.
type Writer interface {
	Write(r *Request) error
	Close() error
}

// ParseError reports malformed input at a file position.
type ParseError struct {
	File string // file name as given to the reader ("" for an unnamed stream)
	Line int    // 1-based line number; for binary formats, the record number
	Msg  string
}

func (e *ParseError) Error() string {
	name := e.File
	if name == "" {
		name = "<input>"
	}
	return fmt.Sprintf("%s:%d: %s", name, e.Line, e.Msg)
}

// ErrEmpty is returned by helpers such as ReadAll when a trace holds no request.
var ErrEmpty = errors.New("trace holds no requests")
