package trace

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiskSimRealTraces(t *testing.T) {
	tests := []struct {
		file        string
		requests    int
		meanService float64 // ms
	}{
		{"hp_c2247a.trace", 9999, 15.3},
		{"st41601n.trace", 9999, 14.6},
		{"atlas10k.trace", 10000, 3.9},
		{"cheetah9LP.trace", 10000, 4.3},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, c, err := OpenFile("disksim", traceFile(t, filepath.Join("disksim", tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			reqs, err := checkStream(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != tt.requests {
				t.Errorf("requests = %d, want %d", len(reqs), tt.requests)
			}
			var sum float64
			for _, q := range reqs {
				if !q.HasService() {
					t.Fatalf("request without service time: %+v", q)
				}
				sum += float64(q.ServiceTime())
			}
			if mean := sum / float64(len(reqs)) / 1e6; math.Abs(mean-tt.meanService) > 0.1 {
				t.Errorf("mean service = %.2f ms, want %.1f ± 0.1", mean, tt.meanService)
			}
		})
	}
}

func TestDiskSimMalformed(t *testing.T) {
	ok := "R Hit 100 8 1000.0 200.0\n"
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"wrong field count", ok + "R Hit 100 8 1000.0\n", 2, "want 6 fields"},
		{"bad op", ok + ok + "X Hit 100 8 1 1\n", 3, `field 1 (op)`},
		{"negative count", "R Hit 100 -8 1 1\n", 1, `field 4 (bcount)`},
		{"negative service", "R Hit 100 8 -1 1\n", 1, `field 5 (service_us): negative value`},
		{"garbage", "\n\nhello\n", 3, "want 6 fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readString(t, "disksim", "d.trace", tt.in)
			parseErr(t, err, "d.trace", tt.line, tt.msg)
		})
	}
}

func TestDiskSimWriter(t *testing.T) {
	in := []Request{
		{Arrival: 0, Dispatch: 0, Complete: 1500, Op: Read, Sector: 10, Sectors: 8, Think: Unknown},
		// arrives 500 ns after the previous completion
		{Arrival: 2000, Dispatch: 2100, Complete: 3100, Op: Write, Sector: 20, Sectors: 1, Think: Unknown},
		// overlaps the previous one: serialised, think 0
		{Arrival: 2500, Dispatch: 3200, Complete: 4200, Op: Read, Sector: 30, Sectors: 2, Think: Unknown},
	}
	var buf bytes.Buffer
	w, err := NewDiskSimWriter(&buf, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if err := w.Write(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "R Hit 10 8 1.500 0.500\nW Hit 20 1 1.000 0.000\nR Hit 30 2 1.000 0.000\n"
	if buf.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", buf.String(), want)
	}
	got, err := readString(t, "disksim", "w", buf.String())
	if err != nil {
		t.Fatal(err)
	}
	if got[1].Arrival != 2000 || got[1].ServiceTime() != 1000 || got[2].Arrival != 3000 {
		t.Fatalf("read back %+v", got)
	}

	w, _ = NewDiskSimWriter(&buf, WriterOptions{})
	noSvc := req(0, Read, 1, 1)
	if err := w.Write(&noSvc); !errors.Is(err, ErrNotRepresentable) {
		t.Errorf("request without service time: err = %v", err)
	}
	flush := Request{Op: Flush, Dispatch: 0, Complete: 1, Think: Unknown}
	if err := w.Write(&flush); !errors.Is(err, ErrNotRepresentable) || !strings.Contains(err.Error(), "F request") {
		t.Errorf("flush: err = %v", err)
	}
}
