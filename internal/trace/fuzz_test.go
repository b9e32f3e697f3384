package trace

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// fuzzRead reads data as format and checks that the reader neither panics
// nor returns an insane request, and that every error is a *ParseError.
func fuzzRead(t *testing.T, format string, data []byte) {
	f, err := Lookup(format)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.NewReader("fuzz", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for i := 0; i < 1<<16; i++ {
		q, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is not a *ParseError: %v", err)
			}
			if pe.File != "fuzz" || pe.Line < 0 || pe.Msg == "" {
				t.Fatalf("bad error position: %v", err)
			}
			_, _ = r.Next() // must not panic either
			return
		}
		if msg := checkRequest(&q, last); msg != "" {
			t.Fatalf("request %d %+v: %s", i+1, q, msg)
		}
		last = q.Arrival
	}
}

func FuzzBlkreplay(f *testing.F) {
	f.Add([]byte(blkreplayHeader + "0.0 ; 10 ; 8 ; W ; 0.0 ; 0.0\n0.5 ; 18 ; 8 ; RA ; 0.0 ; 0.0\n"))
	f.Add([]byte("start ; sector; length ; op\n1.000000001 ; 0 ; 1 ; R ; 0 ; 0\n1 ; 0 ; 1 ; R ; 0 ; 0\n"))
	f.Add([]byte("0.5 ; 18446744073709551615 ; 1 ; W ; 0 ; 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "blkreplay", data) })
}

func FuzzBlkparse(f *testing.F) {
	f.Add([]byte(bpLine("8,0", 1, 0, 1, "Q", "WS", "100 + 8 [dd]") +
		bpLine("8,0", 2, 0.001, 1, "G", "WS", "100 + 8 [dd]") +
		bpLine("8,0", 3, 0.002, 1, "Q", "WS", "108 + 8 [dd]") +
		bpLine("8,0", 4, 0.002, 1, "M", "WS", "108 + 8 [dd]") +
		bpLine("8,0", 5, 0.003, 1, "D", "WS", "100 + 16 [dd]") +
		bpLine("8,0", 6, 0.004, 0, "C", "WS", "100 + 8 [0]") +
		bpLine("8,0", 7, 0.005, 0, "C", "WS", "108 + 8 [0]") + bpFooter))
	f.Add([]byte(bpLine("8,0", 1, 5, 1, "Q", "R", "100 + 16 [a]") +
		bpLine("8,0", 2, 5, 1, "X", "R", "100 / 108 [a]") +
		bpLine("8,0", 3, 5, 1, "Q", "R", "92 + 8 [a]") +
		bpLine("8,0", 4, 5, 1, "F", "R", "92 + 8 [a]") +
		bpLine("8,0", 5, 6, 1, "D", "R", "92 + 16 [a]") +
		bpLine("8,0", 6, 6, 1, "R", "R", "92 + 16 [a]") +
		bpLine("8,0", 7, 9, 1, "D", "FN", "[a]") +
		bpLine("8,0", 8, 4, 1, "C", "R", "108 + 8 [0]") +
		bpLine("8,0", 9, 70, 1, "Q", "W", "1 + 1 [a]")))
	f.Add([]byte(bpLine("253,0", 1, 0, 1, "Q", "FWFSM", "4294967295 + 4294967295 [a b]") +
		bpLine("253,0", 1, 0, 1, "X", "W", "4294967295 / 7 [a b]")))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "blkparse", data) })
}

func FuzzMSR(f *testing.F) {
	f.Add([]byte("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n128166372003061629,wdev,0,Read,3154152448,4096,2118\n128166372003061620,wdev,1,Write,1000,100,0\n"))
	f.Add([]byte("0,h,0,Read,18446744073709551615,1,1000000000000\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "msr", data) })
}

func FuzzFioIolog(f *testing.F) {
	f.Add([]byte("fio version 3 iolog\n0 /dev/sdb add\n5 /dev/sdb open\n100 /dev/sdb read 4096 8192\n150 /dev/sdb sync 0 0\n200 /dev/sdb trim 1 511\n400 /dev/sdb close\n"))
	f.Add([]byte("fio version 2 iolog\n/dev/sdb add\n/dev/sdb read 0 4096\n/dev/sdb wait 5 0\n/dev/sdb write 18446744073709551615 4294967295\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "fio-iolog", data) })
}

func FuzzDiskSim(f *testing.F) {
	f.Add([]byte("R Hit 100 8 1000.0 200.0\nW Miss 4583176   4    663.00000  45422.00000\n"))
	f.Add([]byte("R Hit 18446744073709551615 1 1e12 1e12\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "disksim", data) })
}

func FuzzNative(f *testing.F) {
	f.Add(writeNative(f, randomRequests(20, 1)))
	f.Add(writeNative(f, nil))
	f.Add(writeNative(f, []Request{req(0, Flush, 0, 0), req(0, Write, 1<<40, 8)}))
	f.Add([]byte(NativeMagic + "\x01\x00\x01\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "native", data) })
}

// FuzzNativeRoundTrip checks that every valid request survives the native
// writer and reader unchanged.
func FuzzNativeRoundTrip(f *testing.F) {
	f.Add(int64(0), int64(5), int64(9), int64(-1), uint64(100), uint32(8), uint32(1), uint32(2), uint8(1), uint8(1), int64(3))
	f.Add(int64(1<<62), int64(-1), int64(-1), int64(1<<62), uint64(1<<63), uint32(0), uint32(0), uint32(0), uint8(2), uint8(255), int64(-1))
	f.Fuzz(func(t *testing.T, a, dd, dc, think int64, sector uint64, sectors, dev, pid uint32, op, flags uint8, a2 int64) {
		q := Request{Arrival: a, Dispatch: dd, Complete: dc, Think: think, Sector: sector, Sectors: sectors, Dev: dev, PID: pid, Op: Op(op), Flags: Flags(flags)}
		if dd != Unknown {
			q.Dispatch = a + dd
		}
		if dc != Unknown {
			q.Complete = a + dc
		}
		q2 := q
		q2.Arrival, q2.Sector = a+a2, sector^uint64(a2)
		if q2.Dispatch != Unknown {
			q2.Dispatch += a2
		}
		if q2.Complete != Unknown {
			q2.Complete += a2
		}
		in := []Request{q, q2}
		if in[0].Validate() != nil || in[1].Validate() != nil || in[1].Arrival < in[0].Arrival {
			return
		}
		got, err := readNative(t, writeNative(t, in))
		if err != nil || len(got) != 2 || got[0] != in[0] || got[1] != in[1] {
			t.Fatalf("round trip of %+v: got %+v, %v", in, got, err)
		}
	})
}
