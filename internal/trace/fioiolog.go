package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

func init() {
	register(Format{
		Name:      "fio-iolog",
		Doc:       "fio iolog version 2 or 3 (read_iolog/write_iolog): [timestamp_us] filename action [offset length], bytes",
		NewReader: NewFioReader,
		NewWriter: NewFioWriter,
	})
}

const (
	fioHeader2 = "fio version 2 iolog"
	fioHeader3 = "fio version 3 iolog"
	// fioMaxName is the longest filename fio's parser accepts (%256s).
	fioMaxName = 256
)

// fioReader reads fio I/O logs (fio's read_iolog / write_iolog files).
//
// The first line is "fio version 2 iolog" or "fio version 3 iolog".
// Version 2 lines are
//
//	filename add|open|close
//	filename read|write|sync|datasync|trim|wait offset length
//
// and version 3 lines carry a leading timestamp:
//
//	timestamp filename add|open|close
//	timestamp filename read|write|sync|datasync|trim offset length
//
// offset and length are in bytes (length below 2^32, as fio parses it).
// The version 3 timestamp is in microseconds since the start of the run:
// fio writes it with utime_since_now() and replays the difference between
// consecutive timestamps as a delay in microseconds (iolog.c). fio's HOWTO
// does not state the unit.
//
// Mapping: read → Read flagged Sync; write → Write; trim → Discard;
// sync and datasync → Flush with Sector 0 and Sectors 0 (their offset and
// length are ignored, as fio does). add/open/close lines produce no request.
// Offsets and lengths that are not multiples of 512 are rounded outward to
// whole sectors. Dispatch, Complete and Think are Unknown; PID and Dev are 0,
// and the requests of every file named in the log are returned as one
// stream (Dev 0).
//
// Arrivals: version 3: Arrival = (timestamp − timestamp of the first I/O
// line) × 1000 ns; an I/O line whose timestamp is earlier than the previous
// I/O line's is a *ParseError. Version 2 carries no timestamps: every
// request arrives at the time of the latest "wait" line, 0 before the
// first one, so a log without waits is a burst of requests that all arrive
// at 0, in file order. A wait's offset is taken as an absolute time in
// milliseconds since the start of the run, which is what fio's replay code
// does (it sleeps until mtime_since_genesis() reaches it), although the
// HOWTO describes it as microseconds since the previous wait. "wait" is
// rejected in version 3 (fio ignores it there).
type fioReader struct {
	ls      *lineScanner
	version int   // 0 until the header is read
	clock   int64 // v2: arrival of the next request, ns
	base    int64 // v3: timestamp of the first I/O line, µs
	based   bool
	lastTS  int64 // v3: timestamp of the previous I/O line, µs
}

// NewFioReader returns a Reader over a fio iolog (version 2 or 3). name is
// used in errors. Errors are *ParseError for malformed input.
func NewFioReader(name string, r io.Reader) (Reader, error) {
	return &fioReader{ls: newLineScanner(name, r)}, nil
}

func (f *fioReader) Next() (Request, error) {
	for {
		line, err := f.ls.next()
		if err != nil {
			return Request{}, err
		}
		t := trimSpaceB(line)
		if len(t) == 0 {
			continue
		}
		if f.version == 0 {
			switch {
			case bytes.HasPrefix(t, []byte(fioHeader2)):
				f.version = 2
			case bytes.HasPrefix(t, []byte(fioHeader3)):
				f.version = 3
			default:
				return Request{}, f.ls.errAt("want header %q or %q, got %s", fioHeader2, fioHeader3, quoteField(t))
			}
			continue
		}
		q, ok, err := f.parse(t)
		if err != nil {
			return Request{}, err
		}
		if ok {
			return q, nil
		}
	}
}

// parse parses one body line; ok is false for lines that carry no request.
func (f *fioReader) parse(t []byte) (q Request, ok bool, err error) {
	var fs [6][]byte
	n, more := splitFields(fs[:], t, sepBlank, true)
	if more {
		return q, false, f.ls.errAt("too many fields")
	}
	fld := fs[:n]
	ts := int64(-1)
	col := 1 // field number of fld[0], for messages
	if f.version == 3 {
		if n == 0 {
			return q, false, nil
		}
		v, ok := ParseUint(fld[0], math.MaxInt64/1000)
		if !ok {
			return q, false, f.ls.errAt("field 1 (timestamp): want non-negative microseconds, got %s", quoteField(fld[0]))
		}
		ts = int64(v)
		fld = fld[1:]
		col = 2
	}
	if len(fld) != 2 && len(fld) != 4 {
		if f.version == 3 {
			return q, false, f.ls.errAt("want 3 fields (timestamp filename add|open|close) or 5 (timestamp filename action offset length), got %d", n)
		}
		return q, false, f.ls.errAt("want 2 fields (filename add|open|close) or 4 (filename action offset length), got %d", n)
	}
	if len(fld[0]) > fioMaxName {
		return q, false, f.ls.errAt("field %d (filename): longer than %d bytes", col, fioMaxName)
	}
	act := fld[1]
	if len(fld) == 2 {
		switch string(act) {
		case "add", "open", "close":
			return q, false, nil
		}
		return q, false, f.ls.errAt("field %d (action): want add, open or close on a 2-argument line, got %s", col+1, quoteField(act))
	}
	off, ok := ParseUint(fld[2], math.MaxUint64)
	if !ok {
		return q, false, f.ls.errAt("field %d (offset): want a non-negative byte offset, got %s", col+2, quoteField(fld[2]))
	}
	length, ok := ParseUint(fld[3], math.MaxUint32)
	if !ok {
		return q, false, f.ls.errAt("field %d (length): want a byte count below 2^32, got %s", col+3, quoteField(fld[3]))
	}
	q = Request{Dispatch: Unknown, Complete: Unknown, Think: Unknown}
	switch string(act) {
	case "read":
		q.Op, q.Flags = Read, Sync
	case "write":
		q.Op = Write
	case "trim":
		q.Op = Discard
	case "sync", "datasync":
		q.Op = Flush
	case "wait":
		if f.version == 3 {
			return q, false, f.ls.errAt("field %d (action): wait is not allowed in version 3", col+1)
		}
		if off > math.MaxInt64/1_000_000 {
			return q, false, f.ls.errAt("field %d (offset): wait time %d ms out of range", col+2, off)
		}
		f.clock = max(f.clock, int64(off)*1e6)
		return q, false, nil
	default:
		return q, false, f.ls.errAt("field %d (action): want read, write, sync, datasync, trim or wait, got %s", col+1, quoteField(act))
	}
	if q.Op != Flush {
		q.Sector, q.Sectors, ok = byteRange(off, length)
		if !ok {
			return q, false, f.ls.errAt("field %d (length): want a positive byte count, got %d", col+3, length)
		}
	}
	if f.version == 2 {
		q.Arrival = f.clock
		return q, true, nil
	}
	if !f.based {
		f.based, f.base, f.lastTS = true, ts, ts
	}
	if ts < f.lastTS {
		return q, false, f.ls.errAt("field 1 (timestamp): %d µs is earlier than the previous I/O's %d µs", ts, f.lastTS)
	}
	f.lastTS = ts
	q.Arrival = (ts - f.base) * 1000
	return q, true, nil
}

// fioWriter writes a version 3 iolog for one target.
type fioWriter struct {
	w      *bufio.Writer
	target string
	buf    []byte
	n      int64
	first  int64 // Arrival of the first request, ns
	lastTS int64 // last timestamp written, µs
	last   int64 // Arrival of the previous request, ns
}

// NewFioWriter returns a Writer of a fio version 3 iolog that fio can replay
// against a device or file, for example
//
//	fio --name=replay --read_iolog=FILE --ioengine=libaio --direct=1
//
// (add --replay_redirect=/dev/other to aim it at another device). Every
// request is issued to opt.Target (default "/dev/sdX"; it must be a single
// token of at most 256 bytes). The log starts with "add" and "open" lines at
// timestamp 0 and ends with a "close" line. Request timestamps are
// 1 + (Arrival − first Arrival) µs, truncated to whole microseconds: the
// leading 1 µs keeps every inter-arrival gap, because fio replays the first
// line after a timestamp of 0 without delay.
//
// Read and Write map to read and write, Discard to trim, Flush to
// "sync 0 0". Offsets and lengths are in bytes; a request longer than
// 2^32−1 bytes wraps [ErrNotRepresentable], and requests out of arrival
// order wrap [ErrOrder]. Dispatch, Complete, PID and flags are not written.
func NewFioWriter(w io.Writer, opt WriterOptions) (Writer, error) {
	target := opt.Target
	if target == "" {
		target = "/dev/sdX"
	}
	if len(target) > fioMaxName || strings.ContainsAny(target, " \t\r\n") {
		return nil, fmt.Errorf("fio-iolog: target %q: want one token of at most %d bytes", target, fioMaxName)
	}
	fw := &fioWriter{w: bufio.NewWriter(w), target: target}
	fmt.Fprintf(fw.w, "%s\n0 %s add\n0 %s open\n", fioHeader3, target, target)
	return fw, nil
}

func (f *fioWriter) Write(r *Request) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("fio-iolog: %w", err)
	}
	if f.n == 0 {
		f.first, f.last = r.Arrival, r.Arrival
	}
	if r.Arrival < f.last {
		return fmt.Errorf("fio-iolog: arrival %d ns after %d ns: %w", r.Arrival, f.last, ErrOrder)
	}
	var act string
	switch r.Op {
	case Read:
		act = "read"
	case Write:
		act = "write"
	case Discard:
		act = "trim"
	case Flush:
		act = "sync"
	default:
		return fmt.Errorf("fio-iolog: %v request: %w", r.Op, ErrNotRepresentable)
	}
	var off, length uint64
	if r.Op != Flush {
		if r.Sector > math.MaxUint64/SectorSize-uint64(r.Sectors) {
			return fmt.Errorf("fio-iolog: sector %d: %w (byte offset overflows)", r.Sector, ErrNotRepresentable)
		}
		off, length = r.Sector*SectorSize, r.Bytes()
		if length > math.MaxUint32 {
			return fmt.Errorf("fio-iolog: %d-byte request: %w (fio reads lengths as 32-bit)", length, ErrNotRepresentable)
		}
	}
	f.last = r.Arrival
	f.lastTS = 1 + (r.Arrival-f.first)/1000
	b := strconv.AppendInt(f.buf[:0], f.lastTS, 10)
	b = append(b, ' ')
	b = append(b, f.target...)
	b = append(b, ' ')
	b = append(b, act...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, off, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, length, 10)
	b = append(b, '\n')
	f.buf = b
	f.n++
	_, err := f.w.Write(b)
	return err
}

func (f *fioWriter) Close() error {
	fmt.Fprintf(f.w, "%d %s close\n", f.lastTS, f.target)
	return f.w.Flush()
}
