package trace

import (
	"bytes"
	"io"
	"math"
)

func init() {
	register(Format{
		Name:      "blkreplay",
		Doc:       "blkreplay .load file: start_s ; sector ; length_sectors ; R|W|RA ; delay ; duration (open loop, no latency)",
		NewReader: NewBlkreplayReader,
	})
}

// blkreplayReader reads the load files of the blkreplay project (1&1
// production traces converted from blktrace).
//
// A file starts with free-form header text (licence, comments, the column
// line `start ; sector; length ; op ; replay_delay=0 ; replay_duration=0`;
// some files repeat that whole header), followed by one request a line:
//
//	start_s ; sector ; length_sectors ; R|W|RA ; replay_delay ; replay_duration
//
// start_s is the arrival in seconds (up to nine fraction digits), sector and
// length are in 512-byte sectors. The last two columns are checked to be
// decimal numbers and otherwise ignored.
//
// Header rule: every line before the first data line that is not itself a
// data line is header and skipped; a line is taken for a data line when the
// text before its first ';' is a decimal number. From the first data line
// on, every line must be a data line, except blank lines, lines starting
// with '#', and repeated column lines (starting with "start").
//
// The format records arrivals only (open loop): Dispatch, Complete and
// Think are Unknown and PID and Dev are 0. Arrival is in ns since the first
// request of the file. R is a Read flagged Sync, RA a Read flagged
// ReadAhead (not Sync), W a Write.
//
// Requests must come in non-decreasing start order, as the Reader contract
// requires; a line whose start is earlier than the previous request's is
// reported as a *ParseError naming that line (the shipped 1&1 files are all
// ordered).
type blkreplayReader struct {
	ls      *lineScanner
	started bool  // a data line has been seen
	based   bool  // base is set
	base    int64 // start of the first request, ns
	last    int64 // arrival of the previous request, ns
}

// NewBlkreplayReader returns a Reader over a blkreplay load file. name is
// used in errors. Errors are *ParseError for malformed input.
func NewBlkreplayReader(name string, r io.Reader) (Reader, error) {
	return &blkreplayReader{ls: newLineScanner(name, r)}, nil
}

func (b *blkreplayReader) Next() (Request, error) {
	for {
		line, err := b.ls.next()
		if err != nil {
			return Request{}, err
		}
		t := trimSpaceB(line)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		semi := bytes.IndexByte(t, ';')
		if !b.started {
			if semi < 0 || !isDecimal(trimSpaceB(t[:semi])) {
				continue // header text or column line
			}
			b.started = true
		} else if bytes.HasPrefix(t, []byte("start")) {
			continue // repeated column line
		}
		return b.parse(t)
	}
}

func (b *blkreplayReader) parse(t []byte) (Request, error) {
	var f [6][]byte
	n, more := splitFields(f[:], t, sepSemicolon, false)
	if more {
		return Request{}, b.ls.errAt("want 6 ';'-separated fields (start ; sector ; length ; op ; delay ; duration), got more")
	}
	if n != len(f) {
		return Request{}, b.ls.errAt("want 6 ';'-separated fields (start ; sector ; length ; op ; delay ; duration), got %d", n)
	}
	start, ok := parseSecondsNS(f[0])
	if !ok {
		return Request{}, b.ls.errAt("field 1 (start): want non-negative seconds, got %s", quoteField(f[0]))
	}
	sector, ok := ParseUint(f[1], math.MaxUint64)
	if !ok {
		return Request{}, b.ls.errAt("field 2 (sector): want a non-negative integer, got %s", quoteField(f[1]))
	}
	length, ok := ParseUint(f[2], math.MaxUint32)
	if !ok || length == 0 {
		return Request{}, b.ls.errAt("field 3 (length): want a positive sector count below 2^32, got %s", quoteField(f[2]))
	}
	if sector > math.MaxUint64-length {
		return Request{}, b.ls.errAt("field 2 (sector): request %d+%d runs past the largest sector", sector, length)
	}
	q := Request{
		Sector:   sector,
		Sectors:  uint32(length),
		Dispatch: Unknown,
		Complete: Unknown,
		Think:    Unknown,
	}
	switch string(f[3]) {
	case "R":
		q.Op, q.Flags = Read, Sync
	case "RA":
		q.Op, q.Flags = Read, ReadAhead
	case "W":
		q.Op = Write
	default:
		return Request{}, b.ls.errAt("field 4 (op): want R, RA or W, got %s", quoteField(f[3]))
	}
	if !isDecimal(f[4]) {
		return Request{}, b.ls.errAt("field 5 (replay_delay): want a non-negative number, got %s", quoteField(f[4]))
	}
	if !isDecimal(f[5]) {
		return Request{}, b.ls.errAt("field 6 (replay_duration): want a non-negative number, got %s", quoteField(f[5]))
	}
	if !b.based {
		b.based, b.base = true, start
	}
	if start < b.base || start-b.base < b.last {
		return Request{}, b.ls.errAt("field 1 (start): %s s is earlier than the previous request (%s s); requests must be in arrival order",
			fmtSecondsNS(nil, start), fmtSecondsNS(nil, b.last+b.base))
	}
	q.Arrival = start - b.base
	b.last = q.Arrival
	return q, nil
}
