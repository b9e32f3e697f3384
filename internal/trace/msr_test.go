package trace

import (
	"fmt"
	"strings"
	"testing"
)

func TestMSRParse(t *testing.T) {
	in := `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
128166372003061629,wdev,0,Read,3154152448,4096,2118
128166372016382155,wdev,0,Write,1000,100,100

128166372016382150,wdev,1,write,512,512,0
`
	got, err := readString(t, "msr", "wdev_0.csv", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Arrival: 0, Dispatch: Unknown, Complete: 211800, Sector: 3154152448 / 512, Sectors: 8, Op: Read, Flags: Sync, Think: Unknown},
		// earlier than the line before it: reordered
		{Arrival: 1332052100, Dispatch: Unknown, Complete: 1332052100, Sector: 1, Sectors: 1, Dev: 1, Op: Write, Think: Unknown},
		// bytes 1000..1099 lie in sectors 1 and 2
		{Arrival: 1332052600, Dispatch: Unknown, Complete: 1332062600, Sector: 1, Sectors: 2, Op: Write, Think: Unknown},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestMSRMalformed(t *testing.T) {
	ok := "128166372003061629,wdev,0,Read,0,4096,10\n"
	var many strings.Builder
	for i := 0; i <= msrReorder+1; i++ {
		fmt.Fprintf(&many, "%d,h,0,Read,0,512,1\n", 1000+i)
	}
	many.WriteString("999,h,0,Read,0,512,1\n")
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"too few fields", ok + "128166372003061630,wdev,0,Read,0,4096\n", 2, "want 7 comma-separated fields"},
		{"too many fields", ok + ok + "1,h,0,Read,0,4096,1,1\n", 3, "got more"},
		{"negative size", ok + "128166372003061630,wdev,0,Read,0,-4096,10\n", 2, `field 6 (Size): want a positive byte count, got "-4096"`},
		{"zero size", ok + "128166372003061630,wdev,0,Read,0,0,10\n", 2, `field 6 (Size)`},
		{"negative offset", "128166372003061630,wdev,0,Read,-1,512,10\n", 1, `field 5 (Offset)`},
		{"bad type", ok + "128166372003061630,wdev,0,Trim,0,512,10\n", 2, `field 4 (Type): want Read or Write, got "Trim"`},
		{"bad timestamp", "12x,wdev,0,Read,0,512,10\n", 1, `field 1 (Timestamp)`},
		{"empty hostname", "12,,0,Read,0,512,10\n", 1, `field 2 (Hostname)`},
		{"bad disk", "12,h,-1,Read,0,512,10\n", 1, `field 3 (DiskNumber)`},
		{"bad response", ok + "128166372003061629,h,0,Read,0,512,x\n", 2, `field 7 (ResponseTime)`},
		{"header after data", ok + "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n", 2, "field 1 (Timestamp)"},
		{"garbage", "hello\n", 1, "want 7 comma-separated fields"},
		{"beyond reorder window", many.String(), msrReorder + 3, "reorder window"},
		{"too far apart", "0,h,0,Read,0,512,1\n9223372036854775807,h,0,Read,0,512,1\n", 2, "too far"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readString(t, "msr", "m.csv", tt.in)
			parseErr(t, err, "m.csv", tt.line, tt.msg)
		})
	}
}
