package trace

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// sliceReader replays a slice.
type sliceReader struct{ q []Request }

func (s *sliceReader) Next() (Request, error) {
	if len(s.q) == 0 {
		return Request{}, io.EOF
	}
	q := s.q[0]
	s.q = s.q[1:]
	return q, nil
}

// convertVia converts reqs to format through a native file (native → X →
// native) and returns what comes back.
func convertVia(t *testing.T, reqs []Request, format string) []Request {
	t.Helper()
	nat := writeNative(t, reqs)
	f, err := Lookup(format)
	if err != nil || f.NewWriter == nil {
		t.Fatalf("format %s: no writer (%v)", format, err)
	}
	nr, _ := NewNativeReader("in.st", bytes.NewReader(nat))
	var mid bytes.Buffer
	w, err := f.NewWriter(&mid, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Convert(nr, w)
	if err != nil || n != int64(len(reqs)) {
		t.Fatalf("native → %s: %d requests, %v", format, n, err)
	}
	fr, err := f.NewReader("mid", bytes.NewReader(mid.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	nw, _ := NewNativeWriter(&back, WriterOptions{})
	if n, err := Convert(fr, nw); err != nil || n != int64(len(reqs)) {
		t.Fatalf("%s → native: %d requests, %v", format, n, err)
	}
	got, err := readNative(t, back.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRoundTripEveryWriter(t *testing.T) {
	// Source: a real closed-loop trace with measured service times, which
	// every writer can represent.
	orig, err := ReadFile("disksim", traceFile(t, filepath.Join("disksim", "hp_c2247a.trace")))
	if err != nil {
		t.Fatal(err)
	}
	orig = orig[:2000]
	for i := range orig {
		orig[i].Dev = 3
	}
	// keep maps an original request to what the format can carry back.
	tests := []struct {
		format string
		keep   func(q Request) Request
	}{
		{"native", func(q Request) Request { return q }},
		{"disksim", func(q Request) Request { return q }},
		{"msr", func(q Request) Request {
			a := roundDiv(q.Arrival, 100) * 100
			c := roundDiv(q.Complete, 100) * 100
			q.Arrival, q.Dispatch, q.Complete, q.Think, q.PID = a, Unknown, c, Unknown, 0
			if q.Op == Write {
				q.Flags = 0
			}
			return q
		}},
		{"fio-iolog", func(q Request) Request {
			q.Arrival = q.Arrival / 1000 * 1000
			q.Dispatch, q.Complete, q.Think, q.PID, q.Dev = Unknown, Unknown, Unknown, 0, 0
			if q.Op == Write {
				q.Flags = 0
			}
			return q
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			got := convertVia(t, orig, tt.format)
			if len(got) != len(orig) {
				t.Fatalf("got %d requests, want %d", len(got), len(orig))
			}
			for i := range orig {
				want := tt.keep(orig[i])
				g := got[i]
				if tt.format == "disksim" {
					g.Dev = want.Dev // not carried
				}
				if g != want {
					t.Fatalf("request %d:\n got %+v\nwant %+v", i, g, want)
				}
			}
		})
	}
}

func TestRoundTripRealOpenLoop(t *testing.T) {
	orig, err := ReadFile("blkreplay", traceFile(t, filepath.Join("blkreplay", "windows-shared-server.load.gz")))
	if err != nil {
		t.Fatal(err)
	}
	got := convertVia(t, orig, "native")
	for i := range orig {
		if got[i] != orig[i] {
			t.Fatalf("native request %d: got %+v want %+v", i, got[i], orig[i])
		}
	}
	got = convertVia(t, orig, "fio-iolog")
	for i := range orig {
		want := orig[i]
		want.Arrival = want.Arrival / 1000 * 1000
		if got[i] != want {
			t.Fatalf("fio request %d: got %+v want %+v", i, got[i], want)
		}
	}
}

func TestConvertErrors(t *testing.T) {
	// A read error still closes (flushes) the writer.
	r, _ := NewBlkreplayReader("x", strings.NewReader("1 ; 2 ; 8 ; W ; 0 ; 0\nbad\n"))
	var buf bytes.Buffer
	w, _ := NewNativeWriter(&buf, WriterOptions{})
	n, err := Convert(r, w)
	parseErr(t, err, "x", 2, "want 6")
	if n != 1 {
		t.Errorf("n = %d, want 1", n)
	}
	if got, err := readNative(t, buf.Bytes()); err != nil || len(got) != 1 {
		t.Errorf("writer not closed: %v, %d", err, len(got))
	}
	// A writer error stops the copy.
	r = &sliceReader{[]Request{req(0, Flush, 0, 0)}}
	mw, _ := NewMSRWriter(&buf, WriterOptions{})
	if _, err := Convert(r, mw); !errors.Is(err, ErrNotRepresentable) {
		t.Errorf("msr flush: err = %v", err)
	}
}

func TestFormatsRegistered(t *testing.T) {
	want := "blkparse, blkreplay, disksim, fio-iolog, msr, native"
	if got := FormatNames(); got != want {
		t.Errorf("formats = %s, want %s", got, want)
	}
	for _, name := range []string{"disksim", "msr", "fio-iolog", "native"} {
		if f, _ := Lookup(name); f.NewWriter == nil {
			t.Errorf("%s has no writer", name)
		}
	}
}
