package trace

import (
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"
)

// endlessDiskSim is an io.Reader of DiskSim lines that never ends: the
// trace of a generator that is never stopped.
type endlessDiskSim struct {
	buf []byte
	n   uint64
}

func (e *endlessDiskSim) Read(p []byte) (int, error) {
	for len(e.buf) < len(p) {
		e.n++
		e.buf = append(e.buf, "R Hit "...)
		e.buf = strconv.AppendUint(e.buf, e.n*8%1_000_000, 10)
		e.buf = append(e.buf, " 8 500.0 100.0\n"...)
	}
	n := copy(p, e.buf)
	e.buf = e.buf[:copy(e.buf, e.buf[n:])]
	return n, nil
}

// heapInUse returns the live heap after a collection, bytes.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestReadAllLimitStopsOnEndlessInput: on an input without end, ReadAllLimit
// returns ErrTooManyRequests after limit requests instead of growing until
// the process dies, and holds nothing afterwards.
func TestReadAllLimitStopsOnEndlessInput(t *testing.T) {
	const limit = 200_000
	before := heapInUse()
	r, _ := NewDiskSimReader("endless", &endlessDiskSim{})
	reqs, err := ReadAllLimit(r, limit)
	if !errors.Is(err, ErrTooManyRequests) || reqs != nil {
		t.Fatalf("got %d requests, error %v; want ErrTooManyRequests", len(reqs), err)
	}
	if want := "more requests than the limit of 200000"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if after := heapInUse(); after > before+1<<20 {
		t.Errorf("heap grew by %d bytes after a refused read", after-before)
	}
}

// TestReadAllLimitUnderLimitIsReadAll: a trace at or under the limit reads
// exactly as ReadAll reads it.
func TestReadAllLimitUnderLimitIsReadAll(t *testing.T) {
	open := func() Reader {
		r, _ := NewDiskSimReader("x", &endlessDiskSim{})
		return Head(r, 1000)
	}
	all, err := ReadAll(open())
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, len(all), len(all) + 1} {
		got, err := ReadAllLimit(open(), limit)
		if err != nil || len(got) != len(all) {
			t.Fatalf("limit %d: %d requests, %v; want %d", limit, len(got), err, len(all))
		}
		for i := range got {
			if got[i] != all[i] {
				t.Fatalf("limit %d: request %d differs", limit, i)
			}
		}
	}
	if _, err := ReadAllLimit(open(), len(all)-1); !errors.Is(err, ErrTooManyRequests) {
		t.Errorf("limit %d: error %v, want ErrTooManyRequests", len(all)-1, err)
	}
}

// heapWatch is a Reader that records the largest live heap every every
// requests while it passes r's requests on.
type heapWatch struct {
	r     Reader
	n     int
	every int
	peak  uint64
}

func (h *heapWatch) Next() (Request, error) {
	if h.n%h.every == 0 {
		h.peak = max(h.peak, heapInUse())
	}
	h.n++
	return h.r.Next()
}

// TestConvertStreamsInBoundedMemory: trace convert holds a constant amount
// of memory whatever the length of the trace: converting a million
// requests (64 MB as a slice) keeps the live heap within a few MiB.
func TestConvertStreamsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("converts a million requests twice")
	}
	const n = 1_000_000
	before := heapInUse()
	r, _ := NewDiskSimReader("endless", &endlessDiskSim{})
	hw := &heapWatch{r: Head(r, n), every: n / 20}
	for _, name := range []string{"native", "disksim"} {
		f, _ := Lookup(name)
		w, err := f.NewWriter(io.Discard, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hw.r, hw.n = Head(r, n), 0
		got, err := Convert(hw, w)
		if err != nil || got != n {
			t.Fatalf("%s: converted %d, %v; want %d", name, got, err, n)
		}
		if grew := int64(hw.peak) - int64(before); grew > 8<<20 {
			t.Errorf("%s: live heap grew by %d bytes while converting %d requests", name, grew, n)
		}
	}
}

func TestHead(t *testing.T) {
	r, _ := NewDiskSimReader("endless", &endlessDiskSim{})
	got, err := ReadAll(Head(r, 5))
	if err != nil || len(got) != 5 {
		t.Fatalf("%d requests, %v", len(got), err)
	}
	all := []Request{{Arrival: 1}, {Arrival: 2}}
	if got, _ := ReadAll(Head(&sliceReader{q: all}, 0)); len(got) != 2 {
		t.Errorf("Head(r, 0) read %d of 2", len(got))
	}
}
