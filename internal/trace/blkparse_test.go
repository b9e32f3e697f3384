package trace

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

// bpLine formats one event line the way blkparse's default output does.
func bpLine(dev string, seq int, secs float64, pid int, act, rwbs, rest string) string {
	s := int64(secs)
	ns := int64(secs*1e9+0.5) - s*1e9
	return fmt.Sprintf("%7s %2d %8d %5d.%09d %5d %2s %3s %s\n", dev, 1, seq, s, ns, pid, act, rwbs, rest)
}

const bpFooter = `
CPU0 (sda):
 Reads Queued:           3,       12KiB	 Writes Queued:           4,       32KiB
 Read Dispatches:        3,       12KiB	 Write Dispatches:        2,       32KiB
 Reads Requeued:         0		 Writes Requeued:         0
 Reads Completed:        3,       12KiB	 Writes Completed:        2,       32KiB
 Read Merges:            0,        0KiB	 Write Merges:            2,        8KiB
 Read depth:             2	 	 Write depth:             1
 IO unplugs:             1        	 Timer unplugs:           0
Total (sda):
 Reads Queued:           3,       12KiB	 Writes Queued:           4,       32KiB

Throughput (R/W): 12KiB/s / 32KiB/s
Events (sda): 40 entries
Skips: 0 forward (0 -   0.0%)
`

func TestBlkparse(t *testing.T) {
	var b strings.Builder
	seq := 0
	ev := func(secs float64, pid int, act, rwbs, rest string) {
		seq++
		b.WriteString(bpLine("8,0", seq, secs, pid, act, rwbs, rest))
	}
	b.WriteString("Input file sda.blktrace.0 added\n")
	// 1: a back merge: two writes become one 16-sector request.
	ev(10.000, 100, "Q", "WS", "100 + 8 [dd]")
	ev(10.001, 100, "G", "WS", "100 + 8 [dd]")
	ev(10.001, 100, "P", "N", "[dd]")
	ev(10.002, 100, "Q", "WS", "108 + 8 [dd]")
	ev(10.002, 100, "M", "WS", "108 + 8 [dd]")
	ev(10.003, 100, "U", "N", "[dd] 1")
	ev(10.003, 100, "I", "WS", "100 + 16 [dd]")
	ev(10.004, 100, "D", "WS", "100 + 16 [dd]")
	// 2 and 3: two reads, completed in reverse order.
	ev(10.005, 200, "A", "R", "5000 + 8 <- (8,1) 4000")
	ev(10.005, 200, "Q", "R", "5000 + 8 [cat]")
	ev(10.005, 200, "G", "R", "5000 + 8 [cat]")
	ev(10.006, 200, "Q", "RA", "9000 + 8 [cat]")
	ev(10.006, 200, "G", "RA", "9000 + 8 [cat]")
	ev(10.006, 200, "I", "R", "5000 + 8 [cat]")
	ev(10.007, 200, "I", "RA", "9000 + 8 [cat]")
	ev(10.007, 200, "D", "R", "5000 + 8 [cat]")
	ev(10.007, 200, "D", "RA", "9000 + 8 [cat]")
	ev(10.009, 0, "C", "RA", "9000 + 8 [0]")
	b.WriteString("  8,0    1        0    10.009000000     0  m   N cfq200S / dispatched a request\n")
	ev(10.010, 0, "C", "WS", "100 + 16 (    6000) [0]") // completes request 1
	ev(10.011, 0, "C", "R", "5000 + 8 [0]")
	// 4: a front merge.
	ev(11.000, 300, "Q", "W", "200 + 8 [kworker/u8:2]")
	ev(11.000, 300, "G", "W", "200 + 8 [kworker/u8:2]")
	ev(11.001, 300, "Q", "W", "192 + 8 [kworker/u8:2]")
	ev(11.001, 300, "F", "W", "192 + 8 [kworker/u8:2]")
	ev(11.002, 300, "I", "W", "192 + 16 [kworker/u8:2]")
	ev(11.003, 300, "D", "W", "192 + 16 [kworker/u8:2]")
	ev(11.004, 300, "R", "W", "192 + 16 [0]")
	ev(11.005, 300, "D", "W", "192 + 16 [kworker/u8:2]")
	ev(11.006, 0, "C", "W", "192 + 8 [0]") // partial completion
	ev(11.007, 0, "C", "W", "200 + 8 [0]")
	// 5 and 6: a split bio.
	ev(12.000, 400, "Q", "R", "1000 + 16 [fio]")
	ev(12.000, 400, "X", "R", "1000 / 1008 [fio]")
	ev(12.001, 400, "G", "R", "1000 + 8 [fio]")
	ev(12.001, 400, "G", "R", "1008 + 8 [fio]")
	ev(12.002, 400, "D", "R", "1000 + 8 [fio]")
	ev(12.002, 400, "D", "R", "1008 + 8 [fio]")
	ev(12.003, 0, "C", "R", "1008 + 8 [0]")
	ev(12.004, 0, "C", "R", "1000 + 8 [0]")
	// 7: a flush.
	ev(13.000, 500, "Q", "FN", "[jbd2/sda1-8]")
	ev(13.000, 500, "G", "FN", "[jbd2/sda1-8]")
	ev(13.001, 500, "D", "FN", "[jbd2/sda1-8]")
	ev(13.002, 0, "C", "FN", "0 [0]")
	// An event of a request that began before the trace.
	ev(13.003, 0, "C", "W", "777 + 8 [0]")
	// 8: sync(1) flushing the cache: an empty pre-flush write.
	ev(13.500, 700, "Q", "FWS", "[sync]")
	ev(13.500, 700, "G", "FWS", "[sync]")
	ev(13.501, 81, "D", "FN", "[kworker/0:1H]")
	ev(13.502, 0, "C", "FN", "0 [0]")
	ev(13.502, 0, "C", "WS", "0 [0]")
	// A passthrough command.
	ev(13.600, 900, "D", "R", "512 (12 01 00 00 ..) [smartctl]")
	// 9: a write with FUA that never completes.
	ev(14.000, 600, "Q", "WFS", "3000 + 8 [postgres]")
	ev(14.001, 600, "D", "WFS", "3000 + 8 [postgres]")
	b.WriteString(bpFooter)

	r, err := NewBlkparseReader("sda.txt", strings.NewReader(b.String()), BlkparseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkStream(t, r)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(x float64) int64 { return int64(x*1e6 + 0.5) } // ms since 10.000 s → ns
	dev := uint32(8 << 20)
	want := []Request{
		{Arrival: 0, Dispatch: ms(4), Complete: ms(10), Sector: 100, Sectors: 16, Dev: dev, PID: 100, Op: Write, Flags: Sync, Think: Unknown},
		{Arrival: ms(5), Dispatch: ms(7), Complete: ms(11), Sector: 5000, Sectors: 8, Dev: dev, PID: 200, Op: Read, Flags: Sync, Think: Unknown},
		{Arrival: ms(6), Dispatch: ms(7), Complete: ms(9), Sector: 9000, Sectors: 8, Dev: dev, PID: 200, Op: Read, Flags: ReadAhead, Think: Unknown},
		{Arrival: ms(1000), Dispatch: ms(1005), Complete: ms(1007), Sector: 192, Sectors: 16, Dev: dev, PID: 300, Op: Write, Think: Unknown},
		{Arrival: ms(2000), Dispatch: ms(2002), Complete: ms(2004), Sector: 1000, Sectors: 8, Dev: dev, PID: 400, Op: Read, Flags: Sync, Think: Unknown},
		{Arrival: ms(2000), Dispatch: ms(2002), Complete: ms(2003), Sector: 1008, Sectors: 8, Dev: dev, PID: 400, Op: Read, Flags: Sync, Think: Unknown},
		{Arrival: ms(3000), Dispatch: ms(3001), Complete: ms(3002), Dev: dev, PID: 500, Op: Flush, Think: Unknown},
		{Arrival: ms(3500), Dispatch: ms(3501), Complete: ms(3502), Dev: dev, PID: 700, Op: Flush, Flags: Sync, Think: Unknown},
		{Arrival: ms(4000), Dispatch: ms(4001), Complete: Unknown, Sector: 3000, Sectors: 8, Dev: dev, PID: 600, Op: Write, Flags: FUA | Sync, Think: Unknown},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i+1, got[i], want[i])
		}
	}
	st := r.Stats()
	wantSt := BlkparseStats{Events: 52, Requests: 9, BackMerges: 1, FrontMerges: 1, Splits: 1, Requeues: 1, Ignored: 5, Orphans: 2, Incomplete: 1}
	if st != wantSt {
		t.Errorf("stats:\n got %v\nwant %v", st, wantSt)
	}
}

func TestBlkparseStaleAndBound(t *testing.T) {
	var b strings.Builder
	b.WriteString(bpLine("8,16", 1, 0, 1, "Q", "R", "10 + 8 [a]")) // never completes
	for i := 0; i < 5; i++ {
		s := 100 + float64(i)
		b.WriteString(bpLine("8,16", 2+2*i, s, 2, "Q", "W", fmt.Sprintf("%d + 8 [b]", 1000+8*i)))
		b.WriteString(bpLine("8,16", 3+2*i, s+0.5, 2, "C", "W", fmt.Sprintf("%d + 8 [0]", 1000+8*i)))
	}
	in := b.String()

	// Stale after 60 s: the first request is released while reading.
	r, _ := NewBlkparseReader("s", strings.NewReader(in), BlkparseOptions{})
	q, err := r.Next()
	if err != nil || q.Sector != 10 || q.Complete != Unknown {
		t.Fatalf("first = %+v, %v", q, err)
	}
	if r.ls.line >= 11 {
		t.Errorf("stale request released only at line %d", r.ls.line)
	}

	// Bounded: with StaleAfter disabled the table overflows.
	r, _ = NewBlkparseReader("s", strings.NewReader(in), BlkparseOptions{MaxInFlight: 3, StaleAfter: -time.Second})
	_, err = checkStream(t, r)
	parseErr(t, err, "s", 6, "more than 3 requests in flight")

	// Requests piling up at one sector are bounded too.
	b.Reset()
	for i := 0; i < bpMaxSameKey+5; i++ {
		b.WriteString(bpLine("8,16", i, 0, 1, "Q", "W", "64 + 8 [a]"))
	}
	_, err = readString(t, "blkparse", "same", b.String())
	parseErr(t, err, "same", bpMaxSameKey+1, "more than 1024 requests in flight at sector 64")
}

func TestBlkparseMalformed(t *testing.T) {
	q := bpLine("8,0", 1, 0.5, 10, "Q", "W", "100 + 8 [x]")
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"garbage", q + "hello world\n", 2, `field 1 (dev): want major,minor of a blkparse event, got "hello"`},
		{"few fields", q + "  8,0  1 2 0.6 10 Q\n", 2, "want at least 7 fields"},
		{"bad time", q + "  8,0  1 2 -0.6 10 Q W 100 + 8 [x]\n", 2, `field 4 (time)`},
		{"bad pid", "  8,0  1 2 0.6 -1 Q W 100 + 8 [x]\n", 1, `field 5 (pid)`},
		{"bad action", q + "  8,0  1 2 0.6 10 QQ W 100 + 8 [x]\n", 2, `field 6 (action): unknown action "QQ"`},
		{"unknown action", "  8,0  1 2 0.6 10 K W 100 + 8 [x]\n", 1, `unknown action "K"`},
		{"bad rwbs", q + "  8,0  1 2 0.6 10 Q WX 100 + 8 [x]\n", 2, `field 7 (rwbs)`},
		{"negative size", q + q + "  8,0  1 2 0.6 10 Q W 100 + -8 [x]\n", 3, `field 10 (sectors): want a sector count below 2^32, got "-8"`},
		{"bad sector", "  8,0  1 2 0.6 10 Q W x100 + 8 [x]\n", 1, `field 8 (sector)`},
		{"bad split", "  8,0  1 2 0.6 10 X W 100 + 8 [x]\n", 1, "split event"},
		{"bad dev", "  8,x  1 2 0.6 10 Q W 100 + 8 [x]\n", 1, "field 1 (dev)"},
		{"stats line before footer", q + " Reads Queued:  3,  12KiB\n", 2, "field 1 (dev)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readString(t, "blkparse", "b.txt", tt.in)
			parseErr(t, err, "b.txt", tt.line, tt.msg)
		})
	}
}

// TestBlkparseSimulated generates blkparse output for many overlapping
// requests with random merges, splits, requeues, partial and out-of-order
// completions, and checks that the reader rebuilds exactly those requests.
func TestBlkparseSimulated(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		type event struct {
			t    int64
			line string
		}
		var evs []event
		add := func(t int64, pid int, act, rwbs string, sector uint64, n int) {
			rest := fmt.Sprintf("%d + %d [p%d]", sector, n, pid)
			if act == "C" {
				rest = fmt.Sprintf("%d + %d [0]", sector, n)
			}
			evs = append(evs, event{t, fmt.Sprintf("%3d,%-3d %2d %8d %5d.%09d %5d %2s %3s %s\n", 8, 16, 0, len(evs), t/1e9, t%1e9, pid, act, rwbs, rest)})
		}
		var want []Request
		for i := 0; i < 2000; i++ {
			arr := int64(i) * 20_000
			pid := 100 + rng.IntN(5)
			op, rwbs, flags := Write, "WS", Sync
			if rng.IntN(2) == 0 {
				op, rwbs, flags = Read, "R", Sync
			}
			base := uint64(i+1) * 10_000
			sector, n := base, 8
			add(arr, pid, "Q", rwbs, base, 8)
			if op == Read && rng.IntN(5) == 0 {
				// split in two requests
				add(arr, pid, "Q", rwbs, base+8, 8)
				add(arr, pid, "M", rwbs, base+8, 8)
				evs = append(evs, event{arr, fmt.Sprintf("  8,16   0 %8d %5d.%09d %5d  X %3s %d / %d [p%d]\n", len(evs), arr/1e9, arr%1e9, pid, rwbs, base, base+4, pid)})
				d := arr + 1000 + rng.Int64N(10_000)
				add(arr+1, pid, "G", rwbs, base, 4)
				add(arr+1, pid, "G", rwbs, base+4, 12)
				add(d, pid, "D", rwbs, base, 4)
				add(d, pid, "D", rwbs, base+4, 12)
				c1, c2 := d+rng.Int64N(500_000), d+rng.Int64N(500_000)
				add(c1, 0, "C", rwbs, base, 4)
				add(c2, 0, "C", rwbs, base+4, 12)
				want = append(want,
					Request{Arrival: arr, Dispatch: d, Complete: c1, Sector: base, Sectors: 4, Dev: 8<<20 | 16, PID: uint32(pid), Op: op, Flags: flags, Think: Unknown},
					Request{Arrival: arr, Dispatch: d, Complete: c2, Sector: base + 4, Sectors: 12, Dev: 8<<20 | 16, PID: uint32(pid), Op: op, Flags: flags, Think: Unknown})
				continue
			}
			add(arr+1, pid, "G", rwbs, base, 8)
			for k := rng.IntN(3); k > 0; k-- { // back merges
				add(arr+2, pid+1, "Q", rwbs, sector+uint64(n), 8)
				add(arr+2, pid+1, "M", rwbs, sector+uint64(n), 8)
				n += 8
			}
			for k := rng.IntN(2); k > 0; k-- { // front merges
				add(arr+3, pid+1, "Q", rwbs, sector-8, 8)
				add(arr+3, pid+1, "F", rwbs, sector-8, 8)
				sector -= 8
				n += 8
			}
			add(arr+4, pid, "I", rwbs, sector, n)
			d := arr + 1000 + rng.Int64N(50_000)
			add(d, pid, "D", rwbs, sector, n)
			if rng.IntN(10) == 0 {
				add(d+10, pid, "R", rwbs, sector, n)
				d += 100 + rng.Int64N(1000)
				add(d, pid, "D", rwbs, sector, n)
			}
			c := d + 1 + rng.Int64N(2_000_000)
			if n > 8 && rng.IntN(4) == 0 {
				add(c-1, 0, "C", rwbs, sector, 8) // partial completion
				add(c, 0, "C", rwbs, sector+8, n-8)
			} else {
				add(c, 0, "C", rwbs, sector, n)
			}
			want = append(want, Request{Arrival: arr, Dispatch: d, Complete: c, Sector: sector, Sectors: uint32(n), Dev: 8<<20 | 16, PID: uint32(pid), Op: op, Flags: flags, Think: Unknown})
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
		var b strings.Builder
		for _, e := range evs {
			b.WriteString(e.line)
		}
		b.WriteString(bpFooter)
		r, _ := NewBlkparseReader("sim", strings.NewReader(b.String()), BlkparseOptions{})
		got, err := checkStream(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: got %d requests, want %d (%v)", seed, len(got), len(want), r.Stats())
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("seed %d request %d:\n got %+v\nwant %+v", seed, i, got[i], want[i])
			}
		}
		if st := r.Stats(); st.Orphans != 0 || st.Incomplete != 0 || st.Clamped != 0 {
			t.Fatalf("seed %d: %v", seed, st)
		}
	}
}
