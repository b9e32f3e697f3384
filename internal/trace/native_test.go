package trace

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomRequests returns n valid requests in arrival order, mixing known
// and unknown times and extreme field values.
func randomRequests(n int, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]Request, n)
	t := int64(0)
	for i := range out {
		q := &out[i]
		switch rng.IntN(10) {
		case 0:
			t += rng.Int64N(1e12)
		case 1: // same arrival
		default:
			t += rng.Int64N(1e6)
		}
		q.Arrival = t
		q.Op = Op(rng.IntN(4))
		q.Flags = Flags(rng.IntN(256))
		q.Sectors = uint32(rng.IntN(2048)) + 1
		switch rng.IntN(5) {
		case 0:
			q.Sector = math.MaxUint64 - uint64(q.Sectors)
		case 1:
			if i > 0 && out[i-1].End() <= math.MaxUint64-uint64(q.Sectors) {
				q.Sector = out[i-1].End()
			}
		default:
			q.Sector = rng.Uint64N(1 << 40)
		}
		if q.Op == Flush && rng.IntN(2) == 0 {
			q.Sector, q.Sectors = 0, 0
		}
		q.Dev = uint32(rng.IntN(3)) << 20
		if rng.IntN(20) == 0 {
			q.Dev = math.MaxUint32
		}
		q.PID = uint32(rng.IntN(5) + 1000)
		if rng.IntN(20) == 0 {
			q.PID = math.MaxUint32
		}
		q.Dispatch, q.Complete, q.Think = Unknown, Unknown, Unknown
		if rng.IntN(3) > 0 {
			q.Dispatch = q.Arrival + rng.Int64N(1e7)
		}
		if rng.IntN(3) > 0 {
			q.Complete = max(q.Arrival, q.Dispatch) + rng.Int64N(1e8)
		}
		if rng.IntN(2) == 0 {
			q.Think = rng.Int64N(1e9)
		}
	}
	return out
}

func writeNative(t testing.TB, reqs []Request) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewNativeWriter(&buf, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if err := w.Write(&reqs[i]); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readNative(t testing.TB, data []byte) ([]Request, error) {
	t.Helper()
	r, err := NewNativeReader("n.st", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return checkStream(t, r)
}

func TestNativeRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 100, nativeBlockCount, 3*nativeBlockCount + 17} {
		reqs := randomRequests(n, uint64(n))
		if n == 1 {
			reqs[0] = Request{Arrival: math.MaxInt64, Dispatch: math.MaxInt64, Complete: math.MaxInt64, Think: math.MaxInt64,
				Sector: math.MaxUint64 - 1, Sectors: 1, Dev: math.MaxUint32, PID: math.MaxUint32, Op: Discard, Flags: 0xff}
		}
		data := writeNative(t, reqs)
		got, err := readNative(t, data)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got) != len(reqs) {
			t.Fatalf("n=%d: read %d requests", n, len(got))
		}
		for i := range reqs {
			if got[i] != reqs[i] {
				t.Fatalf("n=%d request %d:\n got %+v\nwant %+v", n, i, got[i], reqs[i])
			}
		}
		if n > 100 {
			t.Logf("%d requests: %.1f bytes/request", n, float64(len(data))/float64(n))
		}
	}
}

func TestNativeWriterRejects(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewNativeWriter(&buf, WriterOptions{})
	bad := []Request{
		{Arrival: -1, Dispatch: Unknown, Complete: Unknown, Think: Unknown, Sectors: 1},
		{Arrival: 5, Dispatch: 4, Complete: Unknown, Think: Unknown, Sectors: 1},
		{Arrival: 5, Dispatch: Unknown, Complete: Unknown, Think: Unknown, Sectors: 0, Op: Read},
		{Arrival: 5, Dispatch: Unknown, Complete: Unknown, Think: Unknown, Sectors: 1, Op: 7},
		{Arrival: 5, Dispatch: Unknown, Complete: Unknown, Think: -2, Sectors: 1},
	}
	for _, q := range bad {
		if err := w.Write(&q); err == nil {
			t.Errorf("accepted invalid %+v", q)
		}
	}
	a, b := req(10, Read, 0, 1), req(9, Read, 0, 1)
	if err := w.Write(&a); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&b); !errors.Is(err, ErrOrder) {
		t.Errorf("out of order: err = %v", err)
	}
	w.Close()
	if err := w.Write(&a); err == nil {
		t.Error("write after Close accepted")
	}
}

func TestNativeCorrupt(t *testing.T) {
	// Small records, so that the first block holds nativeBlockCount.
	reqs := make([]Request, nativeBlockCount+10)
	for i := range reqs {
		reqs[i] = req(int64(i)*1000, Read, uint64(i)*8, 8)
	}
	data := writeNative(t, reqs)

	// Every truncation is an error naming a record, never a panic.
	for n := 1; n < len(data); n += 1 + n/64 {
		_, err := readNative(t, data[:n])
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "truncated") {
			t.Fatalf("truncated at %d of %d: err = %v", n, len(data), err)
		}
	}

	tests := []struct {
		name   string
		mutate func([]byte) []byte
		line   int
		msg    string
	}{
		{"bad magic", func(b []byte) []byte { b[1] = 'X'; return b }, 0, "bad magic"},
		{"text file", func([]byte) []byte { return []byte("R Hit 1 2 3 4\n") }, 0, "bad magic"},
		{"version", func(b []byte) []byte { b[8] = 2; return b }, 0, "unsupported native version 2"},
		{"flags", func(b []byte) []byte { b[9] = 1; return b }, 0, "unknown header flags"},
		{"payload bit flip", func(b []byte) []byte { b[100] ^= 4; return b }, 1, "checksum"},
		{"second block", func(b []byte) []byte { b[len(b)-20] ^= 1; return b }, nativeBlockCount + 1, "checksum"},
		{"trailing data", func(b []byte) []byte { return append(b, 0) }, len(reqs) + 1, "trailing data"},
		{"end count", func(b []byte) []byte { return b[:len(b)-7] }, len(reqs) + 1, "truncated"},
		{"empty block", func(b []byte) []byte { return append(b[:10], 1, 0) }, 1, "corrupt block: 0 bytes for 1 records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readNative(t, tt.mutate(bytes.Clone(data)))
			parseErr(t, err, "n.st", tt.line, tt.msg)
		})
	}
}
