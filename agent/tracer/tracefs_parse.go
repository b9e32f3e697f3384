package tracer

import (
	"bytes"
	"fmt"
	"math"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// tfKind is the kind of a trace_pipe line.
type tfKind uint8

const (
	tfNone       tfKind = iota // a line of no interest
	tfIOStart                  // block_io_start
	tfInsert                   // block_rq_insert
	tfIssue                    // block_rq_issue
	tfRequeue                  // block_rq_requeue
	tfMerge                    // block_rq_merge
	tfComplete                 // block_rq_complete
	tfFrontMerge               // block_bio_frontmerge
	tfMarker                   // tracing_mark_write
	tfLost                     // "CPU:N [LOST M EVENTS]"
)

// tfEvents maps the block events the tracefs tracer enables to kinds.
var tfEvents = map[string]tfKind{
	"block_io_start":       tfIOStart,
	"block_rq_insert":      tfInsert,
	"block_rq_issue":       tfIssue,
	"block_rq_requeue":     tfRequeue,
	"block_rq_merge":       tfMerge,
	"block_rq_complete":    tfComplete,
	"block_bio_frontmerge": tfFrontMerge,
}

// tfEvent is one parsed trace_pipe line.
type tfEvent struct {
	kind   tfKind
	ts     int64  // ns (the instance's trace clock)
	pid    uint32 // the task the event ran in (tid)
	dev    uint32 // major<<20 | minor
	op     trace.Op
	opOK   bool // op is one a trace holds
	flags  trace.Flags
	pre    bool // REQ_PREFLUSH (RWBS starts with F)
	sector uint64
	nr     uint32 // sectors (for block_rq_complete, those completed)
	errno  int    // block_rq_complete's error
	text   []byte // marker text (aliases the line)
	lost   uint64 // tfLost: events lost
}

// parseLine parses one trace_pipe line of the events in tfEvents, a
// trace_marker line or a lost-events notice, for example
//
//	dd-15455 [001] .....  2458.822395: block_rq_issue: 7,1 RS 4096 () 8 + 8 be,0,4 [dd]
//	<...>-22 [001] ..s..  2458.822405: block_rq_complete: 7,1 RS () 8 + 8 be,0,4 [0]
//
// (the flags column is there only with the irq-info option; ioprio, "be,0,4",
// only since Linux 6.8). Lines of other events give tfNone. It does not
// retain line except in text.
func parseLine(line []byte) (tfEvent, error) {
	var ev tfEvent
	line = bytes.TrimRight(line, "\r\n")
	if bytes.HasPrefix(line, []byte("CPU:")) {
		// "CPU:%d [LOST %lu EVENTS]"
		if i := bytes.Index(line, []byte("[LOST ")); i >= 0 {
			f := bytes.Fields(line[i+6:])
			if len(f) > 0 {
				n, ok := trace.ParseUint(f[0], math.MaxUint64)
				if ok {
					ev.kind, ev.lost = tfLost, n
					return ev, nil
				}
			}
		}
		return ev, fmt.Errorf("bad lost-events line %q", line)
	}
	// Find ": NAME: " after the timestamp.
	i := bytes.Index(line, []byte(": block_"))
	if j := bytes.Index(line, []byte(": tracing_mark_write: ")); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i < 0 {
		return ev, nil
	}
	rest := line[i+2:]
	c := bytes.IndexByte(rest, ':')
	if c < 0 {
		return ev, nil
	}
	name, payload := rest[:c], bytes.TrimLeft(rest[c+1:], " ")
	if string(name) == "tracing_mark_write" {
		ev.kind, ev.text = tfMarker, bytes.TrimRight(payload, " ")
	} else if k, ok := tfEvents[string(name)]; ok {
		ev.kind = k
	} else {
		return ev, nil
	}
	// The head: "comm-pid [cpu] [flags] secs.frac".
	head := bytes.TrimRight(line[:i], " ")
	sp := bytes.LastIndexByte(head, ' ')
	ts, ok := parseTime(head[sp+1:])
	if sp < 0 || !ok {
		return ev, fmt.Errorf("bad timestamp in %q", line)
	}
	ev.ts = ts
	head = bytes.TrimRight(head[:sp], " ")
	b := bytes.LastIndexByte(head, '[')
	if b < 0 {
		return ev, fmt.Errorf("no CPU column in %q", line)
	}
	task := bytes.TrimRight(head[:b], " ")
	d := bytes.LastIndexByte(task, '-')
	pid, ok := trace.ParseUint(task[d+1:], math.MaxUint64)
	if d < 0 || !ok || pid > 1<<32-1 {
		return ev, fmt.Errorf("bad task-pid in %q", line)
	}
	ev.pid = uint32(pid)
	if ev.kind == tfMarker {
		return ev, nil
	}
	if err := ev.parseBlock(payload); err != nil {
		return ev, fmt.Errorf("%w in %q", err, line)
	}
	return ev, nil
}

// parseBlock parses a block event's payload: "MAJ,MIN RWBS [BYTES] [(CMD)]
// SECTOR + NR …", and for block_rq_complete the error in the last "[…]".
func (ev *tfEvent) parseBlock(p []byte) error {
	f, p := nextField(p)
	a, m, ok := bytes.Cut(f, []byte{','})
	ma, ok1 := trace.ParseUint(a, math.MaxUint64)
	mi, ok2 := trace.ParseUint(m, math.MaxUint64)
	if !ok || !ok1 || !ok2 || ma >= 1<<12 || mi >= 1<<minorBits {
		return fmt.Errorf("bad device %q", f)
	}
	ev.dev = Mkdev(uint32(ma), uint32(mi))
	f, p = nextField(p)
	if err := ev.parseRWBS(f); err != nil {
		return err
	}
	for {
		p = bytes.TrimLeft(p, " ")
		if len(p) == 0 {
			return fmt.Errorf("no sector")
		}
		if p[0] == '(' {
			// The command of a passthrough request, may hold spaces.
			e := bytes.IndexByte(p, ')')
			if e < 0 {
				return fmt.Errorf("unterminated command")
			}
			p = p[e+1:]
			continue
		}
		f, p = nextField(p)
		n, ok := trace.ParseUint(f, math.MaxUint64)
		if !ok {
			return fmt.Errorf("bad field %q", f)
		}
		plus, q := nextField(p)
		if string(plus) != "+" {
			continue // the byte count of a request event
		}
		f, p = nextField(q)
		nr, ok := trace.ParseUint(f, math.MaxUint64)
		if !ok || nr > 1<<32-1 {
			return fmt.Errorf("bad length %q", f)
		}
		ev.sector, ev.nr = n, uint32(nr)
		break
	}
	if ev.kind == tfComplete {
		p = bytes.TrimRight(p, " ")
		if o := bytes.LastIndexByte(p, '['); o >= 0 && len(p) > o+1 && p[len(p)-1] == ']' {
			v := p[o+1 : len(p)-1]
			neg := len(v) > 0 && v[0] == '-'
			if neg {
				v = v[1:]
			}
			if n, ok := trace.ParseUint(v, math.MaxUint64); ok && n < 1<<31 {
				ev.errno = int(n)
				if neg {
					ev.errno = -ev.errno
				}
			}
		}
	}
	return nil
}

// parseRWBS decodes blk_fill_rwbs: an optional F (pre-flush), the
// operation R, W, D (DE: secure erase), F (flush) or N (any other), then
// F (FUA), A (read-ahead), S (sync), M (meta), U (atomic).
func (ev *tfEvent) parseRWBS(s []byte) error {
	if len(s) == 0 {
		return fmt.Errorf("empty RWBS")
	}
	i := 0
	if s[0] == 'F' && len(s) > 1 && bytes.IndexByte([]byte("RWDFN"), s[1]) >= 0 {
		i, ev.pre = 1, true
	}
	ev.opOK = true
	switch s[i] {
	case 'R':
		ev.op = trace.Read
	case 'W':
		ev.op = trace.Write
	case 'D':
		ev.op = trace.Discard
	case 'F':
		ev.op = trace.Flush
	case 'N':
		ev.opOK = false
	default:
		return fmt.Errorf("bad RWBS %q", s)
	}
	for _, c := range s[i+1:] {
		switch c {
		case 'F':
			ev.flags |= trace.FUA
		case 'A':
			ev.flags |= trace.ReadAhead
		case 'S':
			ev.flags |= trace.Sync
		case 'M':
			ev.flags |= trace.Meta
		case 'E', 'U':
		default:
			return fmt.Errorf("bad RWBS %q", s)
		}
	}
	// trace.Sync: every read that is not read-ahead; writes with REQ_SYNC.
	if ev.op == trace.Read && ev.opOK {
		ev.flags &^= trace.Sync
		if ev.flags&trace.ReadAhead == 0 {
			ev.flags |= trace.Sync
		}
	}
	return nil
}

// nextField splits off the first space-separated field of p.
func nextField(p []byte) (field, rest []byte) {
	p = bytes.TrimLeft(p, " ")
	if i := bytes.IndexByte(p, ' '); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, nil
}

// parseTime parses "secs.frac" (ftrace prints microseconds) to ns.
func parseTime(b []byte) (int64, bool) {
	s, f, ok := bytes.Cut(b, []byte{'.'})
	if !ok || len(f) == 0 || len(f) > 9 {
		return 0, false
	}
	secs, ok1 := trace.ParseUint(s, math.MaxUint64)
	frac, ok2 := trace.ParseUint(f, math.MaxUint64)
	if !ok1 || !ok2 || secs > 1<<33 {
		return 0, false
	}
	for range 9 - len(f) {
		frac *= 10
	}
	return int64(secs)*1e9 + int64(frac), true
}
