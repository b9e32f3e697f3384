package tracer

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Lines as trace_pipe printed them on Linux 6.18 (irq-info on and off).
var realLines = []struct {
	line string
	want tfEvent
}{
	{"              dd-15455   [001] .....  2458.816345: block_io_start: 7,1 RS 4096 () 0 + 8 be,0,4 [dd]",
		tfEvent{kind: tfIOStart, ts: 2458816345000, pid: 15455, dev: 7<<20 | 1, op: trace.Read, opOK: true, flags: trace.Sync, nr: 8}},
	{"              dd-15455   [001] .N...  2458.822213: block_rq_issue: 7,1 RS 4096 () 8 + 8 be,0,4 [dd]",
		tfEvent{kind: tfIssue, ts: 2458822213000, pid: 15455, dev: 7<<20 | 1, op: trace.Read, opOK: true, flags: trace.Sync, sector: 8, nr: 8}},
	{"           <...>-22      [001] ..s..  2458.822353: block_rq_complete: 7,1 RS () 0 + 8 be,0,4 [0]",
		tfEvent{kind: tfComplete, ts: 2458822353000, pid: 22, dev: 7<<20 | 1, op: trace.Read, opOK: true, flags: trace.Sync, nr: 8}},
	{"              dd-15461   [001] .....  2458.823976: block_io_start: 7,1 WFS 8192 () 0 + 16 be,0,4 [dd]",
		tfEvent{kind: tfIOStart, ts: 2458823976000, pid: 15461, dev: 7<<20 | 1, op: trace.Write, opOK: true, flags: trace.FUA | trace.Sync, nr: 16}},
	{"    kworker/1:1H-44      [001] .....  2458.824341: block_rq_issue: 7,1 FF 0 () 0 + 0 none,0,0 [kworker/1:1H]",
		tfEvent{kind: tfIssue, ts: 2458824341000, pid: 44, dev: 7<<20 | 1, op: trace.Flush, opOK: true, pre: true}},
	{"     ksoftirqd/1-22      [001] ..s..  2458.824469: block_rq_complete: 7,1 FF () 18446744073709551615 + 0 none,0,0 [0]",
		tfEvent{kind: tfComplete, ts: 2458824469000, pid: 22, dev: 7<<20 | 1, op: trace.Flush, opOK: true, pre: true, sector: math.MaxUint64}},
	{"              dd-15461   [001] .....  2458.824495: block_io_start: 7,1 FWS 0 () 0 + 0 be,0,4 [dd]",
		tfEvent{kind: tfIOStart, ts: 2458824495000, pid: 15461, dev: 7<<20 | 1, op: trace.Write, opOK: true, pre: true, flags: trace.Sync}},
	{"              dd-15489   [000] .N.1.  2458.861291: block_rq_insert: 7,1 RA 4096 () 800 + 8 be,0,4 [dd]",
		tfEvent{kind: tfInsert, ts: 2458861291000, pid: 15489, dev: 7<<20 | 1, op: trace.Read, opOK: true, flags: trace.ReadAhead, sector: 800, nr: 8}},
	// irq-info off; a command with spaces; an old format without ioprio.
	{"  my-prog -x-31 [003]  17.000001: block_rq_issue: 8,16 N 512 (12 00 00 00 24 00) 0 + 1 [my-prog -x]",
		tfEvent{kind: tfIssue, ts: 17000001000, pid: 31, dev: 8<<20 | 16, nr: 1}},
	{"  fio-9 [000]  5.5: block_rq_complete: 259,0 DE () 100 + 2048 [-5]",
		tfEvent{kind: tfComplete, ts: 5500000000, pid: 9, dev: 259 << 20, op: trace.Discard, opOK: true, sector: 100, nr: 2048, errno: -5}},
	{"  fio-9 [000]  5.000002: block_bio_frontmerge: 8,0 WS 96 + 8 [fio]",
		tfEvent{kind: tfFrontMerge, ts: 5000002000, pid: 9, dev: 8 << 20, op: trace.Write, opOK: true, flags: trace.Sync, sector: 96, nr: 8}},
	{"CPU:1 [LOST 1234 EVENTS]", tfEvent{kind: tfLost, lost: 1234}},
	{"  fio-9 [000]  5.000002: block_plug: [fio]", tfEvent{}},
	{"# tracer: nop", tfEvent{}},
}

func TestParseLine(t *testing.T) {
	for _, c := range realLines {
		got, err := parseLine([]byte(c.line + "\n"))
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.line, got, c.want)
		}
	}
	m, err := parseLine([]byte("           <...>-7 [000] 9.000010: tracing_mark_write: shadowtune-7 sync\n"))
	if err != nil || m.kind != tfMarker || string(m.text) != "shadowtune-7 sync" || m.ts != 9000010000 || m.pid != 7 {
		t.Errorf("marker: %+v %v", m, err)
	}
	for _, bad := range []string{
		"  dd-1 [000] x.y: block_rq_issue: 7,1 R 4096 () 0 + 8 [dd]",
		"  dd-1 [000] 1.0: block_rq_issue: 7;1 R 4096 () 0 + 8 [dd]",
		"  dd-1 [000] 1.0: block_rq_issue: 7,1 Q 4096 () 0 + 8 [dd]",
		"  dd-1 [000] 1.0: block_rq_issue: 7,1 R 4096 (0 + 8 [dd]",
		"  dd-1 [000] 1.0: block_rq_issue: 7,1 R 4096 ()",
		"  dd-x [000] 1.0: block_rq_issue: 7,1 R 4096 () 0 + 8 [dd]",
		"CPU:1 [LOST x EVENTS]",
	} {
		if ev, err := parseLine([]byte(bad)); err == nil {
			t.Errorf("%q: no error, got %+v", bad, ev)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, c := range realLines {
		f.Add(c.line)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ev, err := parseLine([]byte(s))
		if err == nil && ev.kind != tfNone && ev.kind != tfLost && ev.kind != tfMarker && ev.dev>>minorBits >= 1<<12 {
			t.Fatalf("bad device %x", ev.dev)
		}
	})
}

// pairRun feeds lines (with "T.uuuuuu" times) to a pairer and returns what
// it completed.
func pairRun(t *testing.T, lines ...string) (*pairer, []raw) {
	t.Helper()
	var out []raw
	p := newPairer(func(r raw) { out = append(out, r) })
	for _, l := range lines {
		task, rest, _ := strings.Cut(l, " ")
		ts, rest, _ := strings.Cut(rest, " ")
		line := fmt.Sprintf("%16s [000] %s: %s", task, ts, rest)
		ev, err := parseLine([]byte(line))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		p.event(&ev)
	}
	return p, out
}

const ms = 1_000_000

func TestPairBypassAndInsert(t *testing.T) {
	p, out := pairRun(t,
		"app-10 1.000000 block_io_start: 7,0 RS 4096 () 80 + 8 be,0,4 [app]",
		"app-10 1.000001 block_rq_issue: 7,0 RS 4096 () 80 + 8 be,0,4 [app]", // no insert: scheduler none
		"app-11 1.000002 block_io_start: 7,0 WS 8192 () 16 + 16 be,0,4 [app]",
		"app-11 1.000003 block_rq_insert: 7,0 WS 8192 () 16 + 16 be,0,4 [app]",
		"kworker-5 1.000010 block_rq_issue: 7,0 WS 8192 () 16 + 16 be,0,4 [kworker]",
		"irq-0 1.000020 block_rq_complete: 7,0 WS () 16 + 16 be,0,4 [0]",
		"irq-0 1.000030 block_rq_complete: 7,0 RS () 80 + 8 be,0,4 [0]",
		"irq-0 1.000040 block_rq_complete: 7,0 RS () 1000 + 8 be,0,4 [0]", // never seen starting
	)
	want := []raw{
		{arrival: 1000003000, dispatch: 1000010000, complete: 1000020000, sector: 16, sectors: 16, dev: 7 << 20, pid: 11, op: trace.Write, flags: trace.Sync},
		{arrival: 1000001000, dispatch: 1000001000, complete: 1000030000, sector: 80, sectors: 8, dev: 7 << 20, pid: 10, op: trace.Read, flags: trace.Sync},
	}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", out, want)
	}
	if p.orphans != 1 || len(p.pending) != 0 {
		t.Errorf("orphans %d, pending %v", p.orphans, p.pending)
	}
}

func TestPairRequeuePartialMerge(t *testing.T) {
	p, out := pairRun(t,
		// Requeued, re-inserted, issued again: first arrival, last dispatch.
		"app-1 1.000000 block_rq_insert: 8,0 R 4096 () 0 + 8 be,0,4 [app]",
		"app-1 1.000001 block_rq_issue: 8,0 R 4096 () 0 + 8 be,0,4 [app]",
		"kw-2 1.000002 block_rq_requeue: 8,0 R () 0 + 8 be,0,4 [0]",
		"kw-2 1.000003 block_rq_insert: 8,0 R 4096 () 0 + 8 be,0,4 [kw]",
		"kw-2 1.000004 block_rq_issue: 8,0 R 4096 () 0 + 8 be,0,4 [kw]",
		"irq-0 1.000005 block_rq_complete: 8,0 R () 0 + 8 be,0,4 [0]",
		// Partial completion: 64 + 32 sectors, then the last 32.
		"app-1 2.000000 block_rq_issue: 8,0 W 32768 () 100 + 64 be,0,4 [app]",
		"irq-0 2.000001 block_rq_complete: 8,0 W () 100 + 32 be,0,4 [0]",
		"irq-0 2.000002 block_rq_complete: 8,0 W () 132 + 32 be,0,4 [0]",
		// 300+8 is merged into 292+8; a bio front-merges into 400+8.
		"app-1 3.000000 block_rq_insert: 8,0 R 4096 () 292 + 8 be,0,4 [app]",
		"app-1 3.000001 block_rq_insert: 8,0 R 4096 () 300 + 8 be,0,4 [app]",
		"app-1 3.000002 block_rq_merge: 8,0 R 4096 () 300 + 8 be,0,4 [app]",
		"app-1 3.000003 block_rq_insert: 8,0 R 4096 () 400 + 8 be,0,4 [app]",
		"app-1 3.000004 block_bio_frontmerge: 8,0 R 392 + 8 [app]",
		"app-1 3.000005 block_rq_issue: 8,0 R 8192 () 292 + 16 be,0,4 [app]",
		"app-1 3.000006 block_rq_issue: 8,0 R 8192 () 392 + 16 be,0,4 [app]",
		"irq-0 3.000007 block_rq_complete: 8,0 R () 292 + 16 be,0,4 [0]",
		"irq-0 3.000008 block_rq_complete: 8,0 R () 392 + 16 be,0,4 [0]",
	)
	type short struct {
		a, d, c int64
		s       uint64
		n       uint32
	}
	var got []short
	for _, r := range out {
		got = append(got, short{r.arrival, r.dispatch, r.complete, r.sector, r.sectors})
	}
	want := []short{
		{1000000000, 1000004000, 1000005000, 0, 8},
		{2000000000, 2000000000, 2000002000, 100, 64},
		{3000000000, 3000005000, 3000007000, 292, 16},
		{3000003000, 3000006000, 3000008000, 392, 16},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	if p.requeues != 1 || p.partial != 1 || len(p.pending) != 0 || p.orphans != 0 {
		t.Errorf("requeues %d partial %d orphans %d pending %v", p.requeues, p.partial, p.orphans, p.pending)
	}
}

func TestPairFlushMachinery(t *testing.T) {
	// fsync: an empty pre-flush write waits for a flush request that a
	// kworker issues; a FUA write is emulated by a post-flush and completed
	// twice.
	p, out := pairRun(t,
		"app-7 1.000000 block_io_start: 7,1 FWS 0 () 0 + 0 be,0,4 [app]",
		"kworker-44 1.000010 block_rq_issue: 7,1 FF 0 () 0 + 0 none,0,0 [kworker]",
		"irq-22 1.000020 block_rq_complete: 7,1 FF () 18446744073709551615 + 0 none,0,0 [0]",
		"irq-22 1.000021 block_rq_complete: 7,1 WS () 0 + 0 be,0,4 [0]",
		"app-7 2.000000 block_io_start: 7,1 WFS 8192 () 0 + 16 be,0,4 [app]",
		"app-7 2.000001 block_rq_issue: 7,1 WS 8192 () 0 + 16 be,0,4 [app]",
		"irq-22 2.000002 block_rq_complete: 7,1 WS () 0 + 16 be,0,4 [0]",
		"kworker-44 2.000003 block_rq_issue: 7,1 FF 0 () 0 + 0 none,0,0 [kworker]",
		"irq-22 2.000004 block_rq_complete: 7,1 FF () 18446744073709551615 + 0 none,0,0 [0]",
		"irq-22 2.000005 block_rq_complete: 7,1 WS () 0 + 0 be,0,4 [0]",
	)
	if len(out) != 3 {
		t.Fatalf("got %+v", out)
	}
	if f := out[0]; f.op != trace.Flush || f.pid != 7 || f.arrival != 1000000000 || f.dispatch != 1000010000 || f.complete != 1000020000 {
		t.Errorf("fsync flush %+v", f)
	}
	if w := out[1]; w.op != trace.Write || w.pid != 7 || w.sectors != 16 || w.complete != 2000002000 {
		t.Errorf("write %+v", w)
	}
	if f := out[2]; f.op != trace.Flush || f.pid != 44 || f.arrival != 2000003000 {
		t.Errorf("post-flush %+v", f)
	}
	if p.unissued != 1 || p.orphans != 0 || len(p.pending) != 0 || len(p.flushes) != 0 {
		t.Errorf("unissued %d orphans %d pending %v flushes %v", p.unissued, p.orphans, p.pending, p.flushes)
	}
}

func TestPairSweep(t *testing.T) {
	p, _ := pairRun(t,
		"app-1 1.000000 block_rq_insert: 8,0 R 4096 () 0 + 8 be,0,4 [app]",
		"app-1 5.000000 block_io_start: 8,0 R 4096 () 8 + 8 be,0,4 [app]",
		"app-1 6.000000 block_rq_insert: 8,0 R 4096 () 16 + 8 be,0,4 [app]",
	)
	if got := p.sweep(2 * 1000 * ms); got != 5*1000*ms {
		t.Errorf("oldest %d", got)
	}
	if p.stale != 1 || len(p.pending) != 2 {
		t.Errorf("stale %d, pending %v", p.stale, p.pending)
	}
	if got := p.sweep(10 * 1000 * ms); got != math.MaxInt64 || p.stale != 3 {
		t.Errorf("oldest %d, stale %d", got, p.stale)
	}
}

func TestCollectorOrder(t *testing.T) {
	c := collector{base: 1000}
	r := func(a int64) raw {
		return raw{arrival: a, dispatch: a + 1, complete: a + 2, sector: 8, sectors: 8, op: trace.Read}
	}
	c.add(r(1300))
	c.add(r(1100))
	c.add(r(1200))
	c.add(r(999)) // before the base
	got := c.release(1200)
	if len(got) != 2 || got[0].Arrival != 100 || got[1].Arrival != 200 || got[0].Think != trace.Unknown || got[0].Complete != 102 {
		t.Fatalf("release(1200) = %+v", got)
	}
	c.add(r(1150)) // after 1200 was released: cannot be placed
	c.add(raw{arrival: 1400, dispatch: 1300, complete: 1200, op: trace.Flush, sector: 5, sectors: 3})
	got = c.release(math.MaxInt64)
	if len(got) != 2 || got[0].Arrival != 300 || got[1].Dispatch != 400 || got[1].Complete != 400 || got[1].Sector != 0 || got[1].Sectors != 0 {
		t.Fatalf("release(all) = %+v", got)
	}
	if c.lost.Load() != 2 || c.events.Load() != 4 || c.release(math.MaxInt64) != nil {
		t.Errorf("lost %d events %d", c.lost.Load(), c.events.Load())
	}
}

func TestDevNumbers(t *testing.T) {
	if d := Mkdev(259, 3); d != 259<<20|3 || DevString(d) != "259:3" {
		t.Errorf("Mkdev(259,3) = %d (%s)", d, DevString(d))
	}
	for _, s := range []string{"7", "7:", "x:1", "4096:0", "1:1048576"} {
		if _, _, _, err := sysfs.ParseMajorMinor(s); err == nil {
			t.Errorf("ParseMajorMinor(%q): no error", s)
		}
	}
	if _, _, d, err := sysfs.ParseMajorMinor("8:16"); err != nil || d != Mkdev(8, 16) {
		t.Errorf("ParseMajorMinor(8:16) = %d, %v", d, err)
	}
}
