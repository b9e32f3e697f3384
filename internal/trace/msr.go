package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

func init() {
	register(Format{
		Name:      "msr",
		Doc:       "SNIA MSR Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime (100 ns ticks, bytes)",
		NewReader: NewMSRReader,
		NewWriter: NewMSRWriter,
	})
}

const (
	// msrTick is the Windows filetime unit in ns.
	msrTick = 100
	// msrReorder is the reorder window of the MSR reader, in records.
	msrReorder = 1 << 12
	// msrMaxSpan bounds |Timestamp − first Timestamp| (about 7 years of
	// ticks), so that every time fits in int64 ns.
	msrMaxSpan = math.MaxInt64 / msrTick / 4
	// msrMaxResponse bounds ResponseTime (1e12 ticks = 27.8 hours).
	msrMaxResponse = 1e12
)

// msrReader reads the block traces of Microsoft Research Cambridge
// (Narayanan et al., FAST 2008) as distributed by SNIA IOTTA:
//
//	Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//
// Timestamp is the issue time as a Windows filetime (100 ns ticks); Type is
// Read or Write; Offset and Size are in bytes; ResponseTime is the time the
// I/O took to complete, in 100 ns ticks. An optional header line whose first
// field is "Timestamp" may precede the data.
//
// Mapping: Arrival = (Timestamp − earliest Timestamp) × 100 ns;
// Complete = Arrival + ResponseTime × 100 ns; Dispatch is Unknown, because
// the trace was taken above the disk queue and its ResponseTime includes
// queueing (it is a response time, not a service time); Think is Unknown;
// PID is 0; Dev is DiskNumber. Reads are flagged Sync (there is no
// read-ahead marker). Offsets and sizes that are not multiples of 512 are
// rounded outward to whole sectors: Sector = ⌊Offset/512⌋ and the request
// ends at ⌈(Offset+Size)/512⌉. A Size of 0 is rejected.
//
// Records are expected in Timestamp order; small disorder is repaired by a
// reorder window of 4096 records. A record earlier than a request already
// returned is reported as a *ParseError naming its line.
type msrReader struct {
	ls      *lineScanner
	buf     reorderBuf
	first   int64 // Timestamp of the first record, ticks
	started bool
	base    int64 // Timestamp of the first request returned, ticks
	based   bool
	eof     bool
}

// NewMSRReader returns a Reader over an MSR Cambridge CSV trace. name is
// used in errors. Errors are *ParseError for malformed input.
func NewMSRReader(name string, r io.Reader) (Reader, error) {
	return &msrReader{ls: newLineScanner(name, r), buf: reorderBuf{cap: msrReorder}}, nil
}

func (m *msrReader) Next() (Request, error) {
	for !m.eof && !m.buf.full() {
		line, err := m.ls.next()
		if errors.Is(err, io.EOF) {
			m.eof = true
			break
		}
		if err != nil {
			return Request{}, err
		}
		t := trimSpaceB(line)
		if len(t) == 0 {
			continue
		}
		if !m.started && len(t) >= 9 && bytes.EqualFold(t[:9], []byte("timestamp")) {
			continue // header line
		}
		q, err := m.parse(t)
		if err != nil {
			return Request{}, err
		}
		if !m.buf.push(q) {
			return Request{}, m.ls.errAt("field 1 (Timestamp): %d is earlier than a request already returned; disorder exceeds the %d-record reorder window", q.Arrival, msrReorder)
		}
	}
	if m.buf.empty() {
		return Request{}, io.EOF
	}
	q := m.buf.pop()
	if !m.based {
		m.based, m.base = true, q.Arrival
	}
	q.Arrival = (q.Arrival - m.base) * msrTick
	q.Complete = q.Arrival + q.Complete*msrTick
	return q, nil
}

// parse returns the record with Arrival holding the raw Timestamp and
// Complete the raw ResponseTime, both in ticks; Next converts them.
func (m *msrReader) parse(t []byte) (Request, error) {
	var f [7][]byte
	n, more := splitFields(f[:], t, sepComma, false)
	if more {
		return Request{}, m.ls.errAt("want 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), got more")
	}
	if n != len(f) {
		return Request{}, m.ls.errAt("want 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), got %d", n)
	}
	ts, ok := ParseUint(f[0], math.MaxInt64)
	if !ok {
		return Request{}, m.ls.errAt("field 1 (Timestamp): want a non-negative integer filetime, got %s", quoteField(f[0]))
	}
	if !m.started {
		m.started, m.first = true, int64(ts)
	}
	if d := int64(ts) - m.first; d > msrMaxSpan || d < -msrMaxSpan {
		return Request{}, m.ls.errAt("field 1 (Timestamp): %d is too far from the first record's %d", ts, m.first)
	}
	if len(f[1]) == 0 {
		return Request{}, m.ls.errAt("field 2 (Hostname): empty")
	}
	disk, ok := ParseUint(f[2], math.MaxUint32)
	if !ok {
		return Request{}, m.ls.errAt("field 3 (DiskNumber): want a non-negative integer below 2^32, got %s", quoteField(f[2]))
	}
	q := Request{Dev: uint32(disk), Dispatch: Unknown, Think: Unknown}
	switch {
	case bytes.EqualFold(f[3], []byte("Read")):
		q.Op, q.Flags = Read, Sync
	case bytes.EqualFold(f[3], []byte("Write")):
		q.Op = Write
	default:
		return Request{}, m.ls.errAt("field 4 (Type): want Read or Write, got %s", quoteField(f[3]))
	}
	off, ok := ParseUint(f[4], math.MaxUint64)
	if !ok {
		return Request{}, m.ls.errAt("field 5 (Offset): want a non-negative byte offset, got %s", quoteField(f[4]))
	}
	size, ok := ParseUint(f[5], math.MaxUint64)
	if !ok || size == 0 {
		return Request{}, m.ls.errAt("field 6 (Size): want a positive byte count, got %s", quoteField(f[5]))
	}
	q.Sector, q.Sectors, ok = byteRange(off, size)
	if !ok {
		return Request{}, m.ls.errAt("field 6 (Size): %d bytes at offset %d is out of range", size, off)
	}
	resp, ok := ParseUint(f[6], msrMaxResponse)
	if !ok {
		return Request{}, m.ls.errAt("field 7 (ResponseTime): want a non-negative tick count up to %d, got %s", int64(msrMaxResponse), quoteField(f[6]))
	}
	q.Arrival, q.Complete = int64(ts), int64(resp)
	return q, nil
}

// msrWriter writes MSR Cambridge CSV without a header line.
type msrWriter struct {
	w   *bufio.Writer
	buf []byte
}

// NewMSRWriter returns a Writer of MSR Cambridge CSV. Timestamp is
// Arrival/100 (rounded to the nearest tick, so the trace starts near
// filetime 0), Hostname is "shadowtune", DiskNumber is Dev, Offset and Size
// are bytes, ResponseTime is the rounded Complete minus the rounded Arrival
// in ticks. Requests that are not Read or Write, or whose Complete is
// Unknown, are rejected with an error wrapping [ErrNotRepresentable].
func NewMSRWriter(w io.Writer, _ WriterOptions) (Writer, error) {
	return &msrWriter{w: bufio.NewWriter(w)}, nil
}

func (m *msrWriter) Write(r *Request) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("msr: %w", err)
	}
	var typ string
	switch r.Op {
	case Read:
		typ = "Read"
	case Write:
		typ = "Write"
	default:
		return fmt.Errorf("msr: %v request: %w (only Read and Write)", r.Op, ErrNotRepresentable)
	}
	if r.Complete == Unknown {
		return fmt.Errorf("msr: request without completion time: %w (ResponseTime is required)", ErrNotRepresentable)
	}
	if r.Sector > math.MaxUint64/SectorSize-uint64(r.Sectors) {
		return fmt.Errorf("msr: sector %d: %w (byte offset overflows)", r.Sector, ErrNotRepresentable)
	}
	a := roundDiv(r.Arrival, msrTick)
	c := roundDiv(r.Complete, msrTick)
	b := m.buf[:0]
	b = strconv.AppendInt(b, a, 10)
	b = append(b, ",shadowtune,"...)
	b = strconv.AppendUint(b, uint64(r.Dev), 10)
	b = append(b, ',')
	b = append(b, typ...)
	b = append(b, ',')
	b = strconv.AppendUint(b, r.Sector*SectorSize, 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, r.Bytes(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, c-a, 10)
	b = append(b, '\n')
	m.buf = b
	_, err := m.w.Write(b)
	return err
}

func (m *msrWriter) Close() error { return m.w.Flush() }

// roundDiv returns v/d rounded half up, for v ≥ 0 and d > 0.
func roundDiv(v, d int64) int64 { return v/d + (v%d*2)/d }
