package trace

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

func init() {
	register(Format{
		Name: "blkparse",
		Doc:  "default text output of blkparse (blktrace): Q/G/I/D/C events paired into requests, merges folded in",
		NewReader: func(name string, r io.Reader) (Reader, error) {
			return NewBlkparseReader(name, r, BlkparseOptions{})
		},
	})
}

// BlkparseOptions bound the state of a blkparse reader. Zero values select
// the defaults.
type BlkparseOptions struct {
	// MaxInFlight bounds the requests held at once (queued, in service, or
	// finished but waiting for an earlier one to finish). Exceeding it is an
	// error. Default 1<<20.
	MaxInFlight int
	// StaleAfter: a request that has not completed this long (in trace
	// time) after its arrival is returned without a completion (Complete
	// Unknown), so that a lost event cannot hold back every later request.
	// Default 60 s, above the kernel's default 30 s I/O timeout; negative
	// disables it.
	StaleAfter time.Duration
}

// BlkparseStats counts what a blkparse reader saw.
type BlkparseStats struct {
	Events      int64 // event lines parsed
	Requests    int64 // requests returned
	BackMerges  int64 // M events folded into an existing request
	FrontMerges int64 // F events folded into an existing request
	Splits      int64 // X events that split a queued bio in two
	Requeues    int64 // R events
	Ignored     int64 // events that change no request (A, B, S, P, U, T, m, N-only RWBS, passthrough, data without a sector)
	Orphans     int64 // events that match no known request (began before the trace, or lost events)
	Incomplete  int64 // requests returned without a completion (at EOF or stale)
	Clamped     int64 // times raised to keep Arrival ≤ Dispatch ≤ Complete and arrival order
}

// BlkparseReader reads the default text output of blkparse(1):
//
//	8,0    3        1     0.000000000  1234  Q  WS 1234 + 8 [proc]
//
// (device major,minor; CPU; sequence; seconds.nanoseconds; PID; action;
// RWBS; then sector + sectors and [process] or, for completions,
// [error]). It pairs the events of each request: Q (bio queued) gives
// Arrival and PID, G (request allocated) and I (inserted) mark it queued,
// D (issued to the driver) gives Dispatch and C (completed) gives Complete.
// A request first seen at G, I or D arrives then. Events are matched by
// device, operation and start sector; several requests at the same place
// are served first in, first out.
//
// Merges: a bio that is back-merged (M, its start = a queued request's
// end) or front-merged (F, its end = a queued request's start) joins that
// request, which grows; it is not returned on its own. X (split) divides a
// queued bio in two requests that keep the bio's arrival; R (requeue) makes
// the next D the dispatch time; a C covering only part of a request is a
// partial completion and the request completes with its last part. A
// (remap), B, S, P, U, T and m (message) lines are skipped, as is the
// summary blkparse prints at the end (from a "CPU0 (…):", "Total (…):" or
// "name (pid)" line on) and "Input file … added" lines.
//
// RWBS: an optional leading F (pre-flush), then the operation R, W, D
// (discard; DE secure erase) or F (flush), or N (no data: a flush when
// pre-flush is set, otherwise skipped), then flags F (FUA), A
// (read-ahead), S (sync), M (metadata); B and E are accepted and ignored.
// Reads that are not read-ahead are flagged Sync. Flushes have Sector 0 and
// Sectors 0; an empty write (RWBS W without sectors, the "FWS" bio by which
// file systems flush the cache) is a Flush too. The pre-flush of a write
// that carries data is not represented. Passthrough (SCSI command) events
// are skipped.
//
// Times are ns since the first event. Requests are returned in Arrival
// order: each is held until it has completed and no earlier request is
// pending. Requests lacking a completion at EOF, or stale (see
// BlkparseOptions), are returned with Complete Unknown (and Dispatch
// Unknown if they were never issued). blkparse sorts events by time; if an
// event is nonetheless earlier than an event it must follow, its time is
// raised to keep Arrival ≤ Dispatch ≤ Complete and arrival order (counted
// in Stats().Clamped). Dev is major<<20|minor.
type BlkparseReader struct {
	ls      *lineScanner
	opt     BlkparseOptions
	stats   BlkparseStats
	start   bpIndex   // by (dev, op, current start sector)
	end     bpIndex   // by (dev, op, end sector)
	heap    bpHeap    // pending, min-heap by (arrival, seq)
	out     []Request // ready to return
	outPos  int
	seq     uint64
	first   int64 // absolute time of the first event, ns
	based   bool
	now     int64 // latest event time seen, ns since first
	last    int64 // arrival of the last request returned
	footer  bool  // inside blkparse's summary block
	crowded bool  // a sector holds more than bpMaxSameKey requests
	eof     bool
	err     error
}

type bpKey struct {
	dev    uint32
	op     Op
	sector uint64
}

// bpNoSector keys events that carry no sector (flushes).
const bpNoSector = math.MaxUint64

// bpMaxSameKey bounds the requests held at one (device, op, sector): far
// above any device queue depth, it keeps lookups cheap on any input.
const bpMaxSameKey = 1024

const (
	bpQueued uint8 = iota
	bpGot
	bpInserted
	bpDispatched
	bpDone
	bpDropped
)

type bpReq struct {
	q         Request
	seq       uint64
	state     uint8
	fromSplit bool
	cur       uint64 // current start-index sector (moves on partial completion)
	done      uint32 // sectors completed so far
	atStart   bpLink // place in BlkparseReader.start
	atEnd     bpLink // place in BlkparseReader.end
}

// bpLink is a request's place in one bpIndex chain.
type bpLink struct {
	next *bpReq
	in   bool
}

// bpIndex chains the requests at each key in insertion order (oldest
// first); link selects which of a request's links the index uses.
type bpIndex struct {
	m    map[bpKey]*bpReq
	link func(*bpReq) *bpLink
}

// first returns the oldest request at k, or nil; follow link(r).next.
func (x *bpIndex) first(k bpKey) *bpReq { return x.m[k] }

// add appends r to k's chain and returns the chain's length before.
func (x *bpIndex) add(k bpKey, r *bpReq) int {
	l := x.link(r)
	l.next, l.in = nil, true
	p := x.m[k]
	if p == nil {
		x.m[k] = r
		return 0
	}
	n := 1
	for ; x.link(p).next != nil; n++ {
		p = x.link(p).next
	}
	x.link(p).next = r
	return n
}

// remove takes r out of k's chain, if it is in it.
func (x *bpIndex) remove(k bpKey, r *bpReq) {
	l := x.link(r)
	if !l.in {
		return
	}
	l.in = false
	if p := x.m[k]; p == r {
		if l.next == nil {
			delete(x.m, k)
		} else {
			x.m[k] = l.next
		}
	} else {
		for p != nil && x.link(p).next != r {
			p = x.link(p).next
		}
		if p != nil {
			x.link(p).next = l.next
		}
	}
	l.next = nil
}

// NewBlkparseReader returns a reader over blkparse text output. name is
// used in errors. Errors are *ParseError, for malformed lines and for
// exceeding opt.MaxInFlight or 1024 requests at one (device, op, sector).
func NewBlkparseReader(name string, r io.Reader, opt BlkparseOptions) (*BlkparseReader, error) {
	if opt.MaxInFlight <= 0 {
		opt.MaxInFlight = 1 << 20
	}
	if opt.StaleAfter == 0 {
		opt.StaleAfter = 60 * time.Second
	}
	return &BlkparseReader{
		ls:    newLineScanner(name, r),
		opt:   opt,
		start: bpIndex{m: map[bpKey]*bpReq{}, link: func(r *bpReq) *bpLink { return &r.atStart }},
		end:   bpIndex{m: map[bpKey]*bpReq{}, link: func(r *bpReq) *bpLink { return &r.atEnd }},
	}, nil
}

// Stats returns counts of what the reader has seen so far.
func (b *BlkparseReader) Stats() BlkparseStats { return b.stats }

// Next returns the next request in Arrival order, or io.EOF.
func (b *BlkparseReader) Next() (Request, error) {
	for {
		if b.outPos < len(b.out) {
			q := b.out[b.outPos]
			b.outPos++
			if b.outPos == len(b.out) {
				b.out, b.outPos = b.out[:0], 0
			}
			return q, nil
		}
		if b.err != nil {
			return Request{}, b.err
		}
		if b.eof {
			return Request{}, io.EOF
		}
		line, err := b.ls.next()
		if errors.Is(err, io.EOF) {
			b.eof = true
			b.drain(true)
			continue
		}
		if err == nil {
			err = b.line(line)
		}
		if err != nil {
			b.err = err
			return Request{}, err
		}
		if len(b.heap) > b.opt.MaxInFlight {
			b.err = b.ls.errAt("more than %d requests in flight or awaiting an earlier one", b.opt.MaxInFlight)
			return Request{}, b.err
		}
		b.drain(false)
	}
}

// bpEvent is one parsed event line.
type bpEvent struct {
	dev      uint32
	t        int64 // ns since the first event
	pid      uint32
	act      byte
	op       Op
	flags    Flags
	skip     bool // RWBS N without pre-flush: not a request
	sector   uint64
	n        uint32
	hasSect  bool // a sector is given
	newSect  uint64
	hasSplit bool
}

func (b *BlkparseReader) line(line []byte) error {
	var f [10][]byte
	nf, _ := splitFields(f[:], line, sepBlankCR, true) // fields past the 10th are not used
	if nf == 0 {
		return nil
	}
	dev, isEvent := parseDev(f[0])
	if !isEvent {
		return b.nonEvent(line, f[0])
	}
	b.footer = false
	if nf < 7 {
		return b.ls.errAt("want at least 7 fields (dev cpu seq time pid action rwbs), got %d", nf)
	}
	if _, ok := ParseUint(f[1], math.MaxUint32); !ok {
		return b.ls.errAt("field 2 (cpu): want a non-negative integer, got %s", quoteField(f[1]))
	}
	if _, ok := ParseUint(f[2], math.MaxUint64); !ok {
		return b.ls.errAt("field 3 (sequence): want a non-negative integer, got %s", quoteField(f[2]))
	}
	abs, ok := parseSecondsNS(f[3])
	if !ok {
		return b.ls.errAt("field 4 (time): want non-negative seconds.nanoseconds, got %s", quoteField(f[3]))
	}
	pid, ok := ParseUint(f[4], math.MaxUint32)
	if !ok {
		return b.ls.errAt("field 5 (pid): want a non-negative integer below 2^32, got %s", quoteField(f[4]))
	}
	act := f[5]
	if len(act) == 0 || len(act) > 2 || (len(act) == 2 && act[0] != 'Z') {
		return b.ls.errAt("field 6 (action): unknown action %s", quoteField(act))
	}
	b.stats.Events++
	if !b.based {
		b.based, b.first = true, abs
	}
	ev := bpEvent{dev: dev, pid: uint32(pid), act: act[0]}
	if abs < b.first {
		b.stats.Clamped++
	} else {
		ev.t = abs - b.first
	}
	b.now = max(b.now, ev.t)
	switch ev.act {
	case 'Q', 'G', 'I', 'D', 'C', 'R', 'M', 'F', 'X':
	case 'A', 'B', 'S', 'P', 'U', 'T', 'm', 'Z':
		b.stats.Ignored++
		return nil
	default:
		return b.ls.errAt("field 6 (action): unknown action %s", quoteField(act))
	}
	if err := b.rwbs(&ev, f[6]); err != nil {
		return err
	}
	if err := b.payload(&ev, f[7:nf]); err != nil {
		return err
	}
	if ev.op == Write && !ev.hasSect {
		// An empty write, always with pre-flush when queued ("FWS"
		// without sectors), is how file systems flush the cache.
		ev.op = Flush
	}
	if ev.op == Flush {
		// Flushes carry no range; blkparse prints a sector only on some
		// of their events. Key them all alike.
		ev.sector, ev.n, ev.hasSect, ev.hasSplit = bpNoSector, 0, false, false
		if ev.act == 'X' || ev.act == 'M' || ev.act == 'F' {
			ev.skip = true
		}
	} else if !ev.hasSect {
		ev.skip = true // a data request always shows "sector + n"
	}
	if ev.skip {
		b.stats.Ignored++
		return nil
	}
	b.event(&ev)
	if b.crowded {
		return b.ls.errAt("more than %d requests in flight at sector %d", bpMaxSameKey, ev.sector)
	}
	return nil
}

// parseDev parses "major,minor".
func parseDev(s []byte) (uint32, bool) {
	i := bytes.IndexByte(s, ',')
	if i < 0 {
		return 0, false
	}
	maj, ok1 := ParseUint(s[:i], 1<<12-1)
	min, ok2 := ParseUint(s[i+1:], 1<<20-1)
	if !ok1 || !ok2 {
		return 0, false
	}
	return uint32(maj<<20 | min), true
}

// nonEvent handles a line that does not start with a device number.
func (b *BlkparseReader) nonEvent(line, first []byte) error {
	t := trimSpaceB(line)
	switch {
	case b.footer:
		return nil
	case bytes.HasPrefix(t, []byte("Input file ")):
		return nil
	case isSummaryHeader(line, t):
		b.footer = true
		return nil
	}
	return b.ls.errAt("field 1 (dev): want major,minor of a blkparse event, got %s", quoteField(first))
}

// isSummaryHeader recognises the first line of blkparse's summary: "CPU0
// (sda):", "Total (sda):", a per-process "name (pid)" header, or the
// Throughput/Events/Skips lines.
func isSummaryHeader(line, t []byte) bool {
	for _, p := range []string{"Total (", "Throughput (", "Events (", "Skips:"} {
		if bytes.HasPrefix(t, []byte(p)) {
			return true
		}
	}
	if len(t) > 3 && bytes.HasPrefix(t, []byte("CPU")) && t[3] >= '0' && t[3] <= '9' {
		return true
	}
	if line[0] == ' ' || line[0] == '\t' {
		return false
	}
	h := bytes.TrimSuffix(t, []byte(":"))
	i := bytes.LastIndex(h, []byte(" ("))
	return i > 0 && len(h) > i+3 && h[len(h)-1] == ')' && h[i+2] >= '0' && h[i+2] <= '9'
}

// rwbs decodes the RWBS field into ev.op and ev.flags.
func (b *BlkparseReader) rwbs(ev *bpEvent, s []byte) error {
	bad := func() error {
		return b.ls.errAt("field 7 (rwbs): want [F]R|W|D|F|N[F][A][S][M], got %s", quoteField(s))
	}
	if len(s) == 0 || len(s) > 8 {
		return bad()
	}
	i := 0
	preflush := false
	if s[0] == 'F' && len(s) > 1 && bytes.IndexByte([]byte("RWDNF"), s[1]) >= 0 {
		preflush, i = true, 1
	}
	switch s[i] {
	case 'R':
		ev.op = Read
	case 'W':
		ev.op = Write
	case 'D':
		ev.op = Discard
	case 'F':
		ev.op = Flush
	case 'N':
		if preflush {
			ev.op = Flush
		} else {
			ev.skip = true
		}
	default:
		return bad()
	}
	for _, c := range s[i+1:] {
		switch c {
		case 'F':
			ev.flags |= FUA
		case 'A':
			ev.flags |= ReadAhead
		case 'S':
			ev.flags |= Sync
		case 'M':
			ev.flags |= Meta
		case 'B', 'E', 'Z':
		default:
			return bad()
		}
	}
	if ev.op == Read && ev.flags&ReadAhead == 0 {
		ev.flags |= Sync
	}
	return nil
}

// payload decodes "sector + n …", "sector / newsector …", "sector …" or a
// sectorless "[…]" / "(…)" tail.
func (b *BlkparseReader) payload(ev *bpEvent, p [][]byte) error {
	if len(p) == 0 {
		return nil // e.g. "Q FN" with no process name
	}
	if c := p[0][0]; c == '[' || c == '(' {
		return nil
	}
	s, ok := ParseUint(p[0], math.MaxUint64)
	if !ok {
		return b.ls.errAt("field 8 (sector): want a sector number, [process] or (…), got %s", quoteField(p[0]))
	}
	ev.sector = s
	switch {
	case len(p) >= 3 && string(p[1]) == "+":
		n, ok := ParseUint(p[2], math.MaxUint32)
		if !ok {
			return b.ls.errAt("field 10 (sectors): want a sector count below 2^32, got %s", quoteField(p[2]))
		}
		if s > math.MaxUint64-n {
			return b.ls.errAt("field 8 (sector): %d + %d runs past the largest sector", s, n)
		}
		ev.n = uint32(n)
		ev.hasSect = n > 0
	case len(p) >= 3 && string(p[1]) == "/":
		if ev.act != 'X' {
			return b.ls.errAt("field 9: want '+' after the sector, got '/' (only splits use it)")
		}
		ns, ok := ParseUint(p[2], math.MaxUint64)
		if !ok {
			return b.ls.errAt("field 10 (new sector): want a sector number, got %s", quoteField(p[2]))
		}
		ev.newSect, ev.hasSplit, ev.hasSect = ns, true, true
	case len(p) >= 2 && string(p[1]) == "+":
		return b.ls.errAt("field 10 (sectors): missing after '+'")
	case ev.act == 'C':
		// "sector [error]" of a completion without sectors (flushes).
	default:
		// "bytes (cdb) [process]": a SCSI passthrough command.
		ev.skip = true
	}
	if ev.act == 'X' && !ev.hasSplit {
		return b.ls.errAt("split event: want \"sector / new_sector\"")
	}
	return nil
}

// event applies one request event.
func (b *BlkparseReader) event(ev *bpEvent) {
	k := bpKey{ev.dev, ev.op, ev.sector}
	switch ev.act {
	case 'Q':
		if r := b.newest(k, bpQueued, bpQueued); r != nil && r.fromSplit && r.q.Sectors == ev.n {
			// Older kernels queue the remainder of a split bio again.
			r.fromSplit = false
			return
		}
		b.add(ev, bpQueued)
	case 'G':
		if r := b.oldest(k, bpQueued, bpQueued); r != nil {
			r.state = bpGot
			return
		}
		b.add(ev, bpGot)
	case 'I':
		if r := b.oldest(k, bpQueued, bpGot); r != nil {
			r.state = bpInserted
			return
		}
		b.add(ev, bpInserted)
	case 'D':
		r := b.oldest(k, bpQueued, bpInserted)
		if r == nil {
			r = b.add(ev, bpInserted)
		}
		r.state = bpDispatched
		r.q.Dispatch = b.atLeast(ev.t, r.q.Arrival)
	case 'R':
		if r := b.oldest(k, bpDispatched, bpDispatched); r != nil {
			r.state = bpInserted
			b.stats.Requeues++
			return
		}
		b.stats.Orphans++
	case 'C':
		b.complete(ev, k)
	case 'M':
		b.backMerge(ev, k)
	case 'F':
		b.frontMerge(ev, k)
	case 'X':
		b.split(ev, k)
	}
}

// complete applies a C event at k: the request completes, or, for a
// completion of fewer sectors (ev.n) than it has left, moves its start
// past them.
func (b *BlkparseReader) complete(ev *bpEvent, k bpKey) {
	r := b.oldest(k, bpDispatched, bpDispatched)
	if r == nil {
		r = b.oldest(k, bpQueued, bpInserted) // bio-based devices: Q then C
	}
	if r == nil {
		b.stats.Orphans++
		return
	}
	if ev.hasSect && ev.n < r.q.Sectors-r.done {
		// Partial completion: the rest is still in flight.
		b.unlinkStart(r)
		r.done += ev.n
		r.cur = ev.sector + uint64(ev.n)
		b.linkStart(r)
		return
	}
	base := r.q.Arrival
	if r.q.Dispatch != Unknown {
		base = r.q.Dispatch
	}
	r.q.Complete = b.atLeast(ev.t, base)
	b.finish(r, bpDone)
}

// backMerge applies an M event: the bio queued at k (if seen) is dropped
// and the queued request ending at ev.sector grows by ev.n sectors (an
// orphan when there is none).
func (b *BlkparseReader) backMerge(ev *bpEvent, k bpKey) {
	bio := b.newest(k, bpQueued, bpInserted)
	target := b.oldestEnd(bpKey{ev.dev, ev.op, ev.sector}, bio)
	b.drop(bio)
	if target == nil || uint64(target.q.Sectors)+uint64(ev.n) > math.MaxUint32 {
		b.stats.Orphans++
		return
	}
	b.unlinkEnd(target)
	target.q.Sectors += ev.n
	b.linkEnd(target)
	b.stats.BackMerges++
}

// frontMerge applies an F event: the bio queued at k (if seen) is dropped
// and the queued request starting where the bio ends now starts at
// ev.sector, ev.n sectors longer.
func (b *BlkparseReader) frontMerge(ev *bpEvent, k bpKey) {
	bio := b.newest(k, bpQueued, bpInserted)
	end := ev.sector + uint64(ev.n)
	target := b.oldestExcept(bpKey{ev.dev, ev.op, end}, bpQueued, bpInserted, bio)
	b.drop(bio)
	if target == nil || target.done != 0 || uint64(target.q.Sectors)+uint64(ev.n) > math.MaxUint32 {
		b.stats.Orphans++
		return
	}
	b.unlinkStart(target)
	target.q.Sector = ev.sector
	target.q.Sectors += ev.n
	target.cur = ev.sector
	b.linkStart(target)
	b.stats.FrontMerges++
}

// drop forgets bio, a merged bio (nil: none was seen), whether or not
// its merge found a request to join: it is never returned on its own.
func (b *BlkparseReader) drop(bio *bpReq) {
	if bio != nil {
		b.finish(bio, bpDropped)
	}
}

// split applies an X event: the newest queued bio at k ends at
// ev.newSect and a new request, with the bio's arrival, PID and flags,
// holds the sectors from there on.
func (b *BlkparseReader) split(ev *bpEvent, k bpKey) {
	r := b.newest(k, bpQueued, bpInserted)
	if r == nil || r.done != 0 {
		b.stats.Orphans++
		return
	}
	ns := ev.newSect
	if ns <= ev.sector || ns >= r.q.End() {
		// blkparse prints the new sector as 32 bits: restore the
		// high bits from the bio's own sector.
		ns = ev.sector&^0xffffffff | ns&0xffffffff
		if ns <= ev.sector {
			ns += 1 << 32
		}
	}
	if ns <= ev.sector || ns >= r.q.End() {
		b.stats.Orphans++
		return
	}
	rest := *ev
	rest.sector, rest.n, rest.t = ns, uint32(r.q.End()-ns), r.q.Arrival
	rest.pid = r.q.PID
	b.unlinkEnd(r)
	r.q.Sectors = uint32(ns - ev.sector)
	b.linkEnd(r)
	nr := b.add(&rest, r.state)
	nr.q.Flags = r.q.Flags
	nr.fromSplit = true
	b.stats.Splits++
}

// atLeast returns t, raised to floor (and counted) if it is earlier.
func (b *BlkparseReader) atLeast(t, floor int64) int64 {
	if t < floor {
		b.stats.Clamped++
		return floor
	}
	return t
}

// add starts tracking a new request seen first at ev.
func (b *BlkparseReader) add(ev *bpEvent, state uint8) *bpReq {
	b.seq++
	r := &bpReq{
		q: Request{
			Dispatch: Unknown,
			Complete: Unknown,
			Think:    Unknown,
			Sector:   ev.sector,
			Sectors:  ev.n,
			Dev:      ev.dev,
			PID:      ev.pid,
			Op:       ev.op,
			Flags:    ev.flags,
		},
		seq:   b.seq,
		state: state,
		cur:   ev.sector,
	}
	if ev.op == Flush {
		r.q.Sector = 0
	}
	r.q.Arrival = b.atLeast(ev.t, b.last)
	b.linkStart(r)
	b.linkEnd(r)
	b.push(r)
	return r
}

// finish marks r completed or dropped and forgets its index entries.
func (b *BlkparseReader) finish(r *bpReq, state uint8) {
	b.unlinkStart(r)
	b.unlinkEnd(r)
	r.state = state
}

// oldest returns the first request at k whose state is within [lo, hi].
func (b *BlkparseReader) oldest(k bpKey, lo, hi uint8) *bpReq {
	return b.oldestExcept(k, lo, hi, nil)
}

func (b *BlkparseReader) oldestExcept(k bpKey, lo, hi uint8, not *bpReq) *bpReq {
	for r := b.start.first(k); r != nil; r = r.atStart.next {
		if r.state >= lo && r.state <= hi && r != not {
			return r
		}
	}
	return nil
}

// newest returns the last request at k whose state is within [lo, hi].
func (b *BlkparseReader) newest(k bpKey, lo, hi uint8) *bpReq {
	var found *bpReq
	for r := b.start.first(k); r != nil; r = r.atStart.next {
		if r.state >= lo && r.state <= hi {
			found = r
		}
	}
	return found
}

// oldestEnd returns the first not yet dispatched request ending at k.
func (b *BlkparseReader) oldestEnd(k bpKey, not *bpReq) *bpReq {
	for r := b.end.first(k); r != nil; r = r.atEnd.next {
		if r.state <= bpInserted && r != not && r.done == 0 {
			return r
		}
	}
	return nil
}

func (b *BlkparseReader) linkStart(r *bpReq) {
	n := b.start.add(bpKey{r.q.Dev, r.q.Op, r.cur}, r)
	b.crowded = b.crowded || n >= bpMaxSameKey
}

func (b *BlkparseReader) unlinkStart(r *bpReq) {
	b.start.remove(bpKey{r.q.Dev, r.q.Op, r.cur}, r)
}

func (b *BlkparseReader) linkEnd(r *bpReq) {
	if r.q.Op == Flush {
		return
	}
	n := b.end.add(bpKey{r.q.Dev, r.q.Op, r.q.End()}, r)
	b.crowded = b.crowded || n >= bpMaxSameKey
}

func (b *BlkparseReader) unlinkEnd(r *bpReq) {
	b.end.remove(bpKey{r.q.Dev, r.q.Op, r.q.End()}, r)
}

// drain moves finished requests from the head of the heap to the output,
// and stale or (at EOF) all remaining ones.
func (b *BlkparseReader) drain(eof bool) {
	stale := int64(b.opt.StaleAfter)
	for len(b.heap) > 0 {
		r := b.heap[0]
		switch {
		case r.state == bpDropped:
		case r.state == bpDone:
			b.emit(r)
		case eof || stale > 0 && b.now-r.q.Arrival > stale:
			b.finish(r, bpDone)
			b.stats.Incomplete++
			b.emit(r)
		default:
			return
		}
		b.pop()
	}
}

func (b *BlkparseReader) emit(r *bpReq) {
	b.out = append(b.out, r.q)
	b.last = r.q.Arrival
	b.stats.Requests++
}

// bpHeap orders pending requests by (arrival, sequence) for container/heap.
type bpHeap []*bpReq

func (h bpHeap) Len() int { return len(h) }
func (h bpHeap) Less(i, j int) bool {
	x, y := h[i], h[j]
	if x.q.Arrival != y.q.Arrival {
		return x.q.Arrival < y.q.Arrival
	}
	return x.seq < y.seq
}
func (h bpHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *bpHeap) Push(x any)   { *h = append(*h, x.(*bpReq)) }
func (h *bpHeap) Pop() any {
	old := *h
	n := len(old) - 1
	r := old[n]
	old[n] = nil
	*h = old[:n]
	return r
}

func (b *BlkparseReader) push(r *bpReq) { heap.Push(&b.heap, r) }

func (b *BlkparseReader) pop() { heap.Pop(&b.heap) }

// String summarises the stats for logs.
func (s BlkparseStats) String() string {
	return fmt.Sprintf("%d events, %d requests, %d back merges, %d front merges, %d splits, %d requeues, %d ignored, %d orphans, %d incomplete, %d clamped",
		s.Events, s.Requests, s.BackMerges, s.FrontMerges, s.Splits, s.Requeues, s.Ignored, s.Orphans, s.Incomplete, s.Clamped)
}
