package trace

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestBlkreplayRealTraces(t *testing.T) {
	tests := []struct {
		file      string
		requests  int
		writeFrac float64 // share of writes
		readAhead int
		spanS     float64
	}{
		{"linux-mysql.load.gz", 80794, 0.911, 1, 3600},
		{"linux-webserver-2.load.gz", 269007, 0.446, 344, 3601},
		{"windows-mssql.load.gz", 42976, 0.941, 0, 3062},
		{"windows-shared-server.load.gz", 1371, 1, 0, 3597},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := traceFile(t, filepath.Join("blkreplay", tt.file))
			r, c, err := OpenFile("blkreplay", path)
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
			var writes, ra int
			for _, q := range reqs {
				switch {
				case q.Op == Write:
					writes++
					if q.Flags != 0 {
						t.Fatalf("write with flags %v", q.Flags)
					}
				case q.Flags == ReadAhead:
					ra++
				case q.Op != Read || q.Flags != Sync:
					t.Fatalf("unexpected request %+v", q)
				}
				if q.Dispatch != Unknown || q.Complete != Unknown || q.Think != Unknown || q.PID != 0 {
					t.Fatalf("open-loop request carries times or pid: %+v", q)
				}
			}
			if got := float64(writes) / float64(len(reqs)); math.Abs(got-tt.writeFrac) > 0.005 {
				t.Errorf("write share = %.3f, want %.3f", got, tt.writeFrac)
			}
			if ra != tt.readAhead {
				t.Errorf("read-ahead requests = %d, want %d", ra, tt.readAhead)
			}
			if reqs[0].Arrival != 0 {
				t.Errorf("first arrival = %d, want 0", reqs[0].Arrival)
			}
			if span := float64(reqs[len(reqs)-1].Arrival) / 1e9; math.Abs(span-tt.spanS) > 1 {
				t.Errorf("span = %.1f s, want %.0f s", span, tt.spanS)
			}
		})
	}
}

const blkreplayHeader = `Copyright someone

licence text; with a semicolon
#################################################################
start ; sector; length ; op ;  replay_delay=0 ; replay_duration=0
`

func TestBlkreplayParse(t *testing.T) {
	in := blkreplayHeader + `more licence text after the column line
start ; sector; length ; op ;  replay_delay=0 ; replay_duration=0
      1.500000000 ;     37766853 ;   64 ; W ; 0.0 ; 0.0
      1.500000001 ;            0 ;    1 ; R ; 0.0 ; 0.0

# a comment
      2.25 ;     100 ;    8 ; RA ; 0 ; 0
start ; sector; length ; op ;  replay_delay=0 ; replay_duration=0
      3 ;     200 ;    8 ; R ; 0.0 ; 0.0
`
	got, err := readString(t, "blkreplay", "x.load", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		req(0, Write, 37766853, 64),
		req(1, Read, 0, 1),
		req(750_000_000, Read, 100, 8),
		req(1_500_000_000, Read, 200, 8),
	}
	want[1].Flags = Sync
	want[2].Flags = ReadAhead
	want[3].Flags = Sync
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestBlkreplayMalformed(t *testing.T) {
	data := "0.1 ; 10 ; 8 ; W ; 0.0 ; 0.0\n"
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"garbage after data", blkreplayHeader + data + "hello world\n", 7, "want 6 ';'-separated fields"},
		{"too few fields", blkreplayHeader + data + "0.2 ; 10 ; 8 ; W\n", 7, "got 4"},
		{"too many fields", blkreplayHeader + "0.2 ; 10 ; 8 ; W ; 0 ; 0 ; 0\n", 6, "got more"},
		{"negative length", blkreplayHeader + data + "0.2 ; 10 ; -8 ; W ; 0.0 ; 0.0\n", 7, `field 3 (length): want a positive sector count below 2^32, got "-8"`},
		{"zero length", blkreplayHeader + data + "0.2 ; 10 ; 0 ; W ; 0.0 ; 0.0\n", 7, `field 3 (length)`},
		{"negative sector", blkreplayHeader + "0.2 ; -10 ; 8 ; W ; 0.0 ; 0.0\n", 6, `field 2 (sector): want a non-negative integer, got "-10"`},
		{"bad op", blkreplayHeader + "0.2 ; 10 ; 8 ; X ; 0.0 ; 0.0\n", 6, `field 4 (op): want R, RA or W, got "X"`},
		{"bad start", blkreplayHeader + data + "0.2x ; 10 ; 8 ; W ; 0.0 ; 0.0\n", 7, `field 1 (start)`},
		{"bad delay", blkreplayHeader + "0.2 ; 10 ; 8 ; W ; zero ; 0.0\n", 6, `field 5 (replay_delay)`},
		{"backwards", blkreplayHeader + data + "0.05 ; 10 ; 8 ; W ; 0.0 ; 0.0\n", 7, "earlier than the previous request"},
		{"huge length", blkreplayHeader + "0.2 ; 10 ; 4294967296 ; W ; 0 ; 0\n", 6, "field 3 (length)"},
		{"past last sector", blkreplayHeader + "0.2 ; 18446744073709551615 ; 8 ; W ; 0 ; 0\n", 6, "runs past the largest sector"},
		{"data-like header line", "1 ; licence\n", 1, "got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readString(t, "blkreplay", "bad.load", tt.in)
			parseErr(t, err, "bad.load", tt.line, tt.msg)
		})
	}
}

func TestEmptyTraceIsErrEmpty(t *testing.T) {
	dir := t.TempDir()
	for _, f := range Formats() {
		for name, content := range map[string]string{"empty": "", "blank": "\n\n"} {
			if f.Name == "native" && name == "blank" {
				continue
			}
			path := filepath.Join(dir, f.Name+"-"+name)
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(f.Name, path)
			if !errors.Is(err, ErrEmpty) {
				t.Errorf("%s %s: err = %v, want ErrEmpty", f.Name, name, err)
			} else if err.Error() != path+": "+ErrEmpty.Error() {
				t.Errorf("%s %s: error %q does not name the file", f.Name, name, err)
			}
		}
	}
	// A header without requests is empty too.
	for format, content := range map[string]string{
		"blkreplay": blkreplayHeader,
		"fio-iolog": "fio version 3 iolog\n0 /dev/sda add\n0 /dev/sda open\n0 /dev/sda close\n",
		"msr":       "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n",
	} {
		path := filepath.Join(dir, format+"-header")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(format, path); !errors.Is(err, ErrEmpty) {
			t.Errorf("%s header only: err = %v, want ErrEmpty", format, err)
		}
	}
}
