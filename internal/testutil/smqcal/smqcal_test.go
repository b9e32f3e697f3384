package smqcal

import (
	"strings"
	"testing"
)

// ParseRun names the workload whose trace or status line it cannot use.
func TestParseRunErrors(t *testing.T) {
	status := "0 1048576 cache 8 9/1024 128 0/1024 %s 0 0 0 0 0 1 writethrough 2 migration_threshold 2048 smq 0 rw -"
	for _, tc := range []struct{ name, out, want string }{
		{"no trace", "smq zipf12 1.0 2.0 3.0 4.0 | " + strings.Replace(status, "%s", "0 0", 1) + " | " +
			strings.Replace(status, "%s", "10 5", 1) + "\n", "zipf12: "},
		{"no lines", "nothing here\n", ""},
	} {
		rows, err := ParseRun(tc.out, t.TempDir(), Setup{CacheBlocks: 1024, BlockSectors: 128})
		switch {
		case tc.want == "" && (err != nil || len(rows) != 0):
			t.Errorf("%s: %d rows, %v; want none and no error", tc.name, len(rows), err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error starting %q", tc.name, err, tc.want)
		}
	}
	var row Row
	m := runLineRE.FindStringSubmatch("smq w 1.0 3.0 4.0 5.0 | " + strings.Replace(status, "%s", "10 30", 1) + " | " +
		strings.Replace(status, "%s", "70 50", 1))
	if err := measure(&row, m); err != nil || row.MeasuredHitPct != 75 || row.MeasuredGainPct != 50 {
		t.Errorf("measure: %+v, %v; want 75 %% hits (60 of 80) and a 50 %% gain (2 s → 1 s)", row, err)
	}
	m[7] = "0 1048576 linear 8:16 0"
	if err := measure(&row, m); err == nil || !strings.Contains(err.Error(), "not a cache status") {
		t.Errorf("measure of a linear target's status: %v, want \"not a cache status\"", err)
	}
}
