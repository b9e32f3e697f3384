package trace

import (
	"bytes"
	"errors"
	"testing"
)

func TestFioV3(t *testing.T) {
	in := `fio version 3 iolog
0 /dev/sdb add
5 /dev/sdb open
100 /dev/sdb read 4096 8192
150 /dev/sdb write 1000 100
150 /dev/sdb sync 0 0
200 /dev/sdb trim 0 1048576
300 /dev/sdb datasync 0 0
400 /dev/sdb close
`
	got, err := readString(t, "fio-iolog", "v3.log", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		req(0, Read, 8, 16),
		req(50_000, Write, 1, 2),
		req(50_000, Flush, 0, 0),
		req(100_000, Discard, 0, 2048),
		req(200_000, Flush, 0, 0),
	}
	want[0].Flags = Sync
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestFioV2(t *testing.T) {
	in := `fio version 2 iolog
/dev/sdb add
/dev/sdb open
/dev/sdb read 0 4096
/dev/sdb wait 5 0
/dev/sdb write 4096 4096
/dev/sdb wait 2 0
/tmp/other read 0 512
/dev/sdb close
`
	got, err := readString(t, "fio-iolog", "v2.log", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{req(0, Read, 0, 8), req(5e6, Write, 8, 8), req(5e6, Read, 0, 1)}
	want[0].Flags, want[2].Flags = Sync, Sync
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestFioMalformed(t *testing.T) {
	h2, h3 := "fio version 2 iolog\n", "fio version 3 iolog\n"
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"no header", "/dev/sda read 0 512\n", 1, `want header "fio version 2 iolog" or "fio version 3 iolog"`},
		{"version 1", "\nfio version 1 iolog\n", 2, "want header"},
		{"v2 wrong field count", h2 + "/dev/sda read 0\n", 2, "want 2 fields (filename add|open|close) or 4"},
		{"v3 wrong field count", h3 + "1 /dev/sda read 0\n", 2, "want 3 fields"},
		{"v3 io action on a short line", h3 + "1 /dev/sda read\n", 2, `field 3 (action): want add, open or close`},
		{"bad action", h2 + "/dev/sda add\n/dev/sda erase 0 512\n", 3, `field 2 (action): want read, write, sync, datasync, trim or wait, got "erase"`},
		{"negative offset", h3 + "1 /dev/sda read -512 512\n", 2, `field 4 (offset)`},
		{"negative length", h2 + "/dev/sda write 0 -512\n", 2, `field 4 (length): want a byte count below 2^32, got "-512"`},
		{"zero length", h2 + "/dev/sda read 0 0\n", 2, `field 4 (length): want a positive byte count`},
		{"huge length", h2 + "/dev/sda read 0 4294967296\n", 2, `field 4 (length)`},
		{"bad timestamp", h3 + "1.5 /dev/sda read 0 512\n", 2, `field 1 (timestamp)`},
		{"backwards", h3 + "10 /dev/sda read 0 512\n9 /dev/sda read 0 512\n", 3, "earlier than the previous I/O"},
		{"wait in v3", h3 + "10 /dev/sda wait 10 0\n", 2, "wait is not allowed in version 3"},
		{"too many fields", h2 + "a b c d e f g\n", 2, "too many fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readString(t, "fio-iolog", "f.log", tt.in)
			parseErr(t, err, "f.log", tt.line, tt.msg)
		})
	}
}

func TestFioWriter(t *testing.T) {
	in := []Request{
		req(5_000_000, Read, 8, 16),
		req(5_050_500, Write, 1, 2),
		req(5_100_000, Flush, 0, 0),
		req(6_000_000, Discard, 0, 2048),
	}
	var buf bytes.Buffer
	w, err := NewFioWriter(&buf, WriterOptions{Target: "/dev/vdb"})
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
	want := `fio version 3 iolog
0 /dev/vdb add
0 /dev/vdb open
1 /dev/vdb read 4096 8192
51 /dev/vdb write 512 1024
101 /dev/vdb sync 0 0
1001 /dev/vdb trim 0 1048576
1001 /dev/vdb close
`
	if buf.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", buf.String(), want)
	}

	if _, err := NewFioWriter(&buf, WriterOptions{Target: "two words"}); err == nil {
		t.Error("target with a space accepted")
	}
	w, _ = NewFioWriter(&buf, WriterOptions{})
	big := req(0, Read, 0, 1<<23)
	if err := w.Write(&big); !errors.Is(err, ErrNotRepresentable) {
		t.Errorf("4 GiB request: err = %v", err)
	}
	a, b := req(10, Read, 0, 1), req(5, Read, 0, 1)
	if err := w.Write(&a); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&b); !errors.Is(err, ErrOrder) {
		t.Errorf("out of order: err = %v", err)
	}
}
