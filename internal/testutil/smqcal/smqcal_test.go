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
	if err := measure(&row, m, nil); err != nil || row.MeasuredHitPct != 75 || row.MeasuredGainPct != 50 || row.Passes != 1 {
		t.Errorf("measure: %+v, %v; want 75 %% hits (60 of 80) and a 50 %% gain (2 s → 1 s) in 1 pass", row, err)
	}
	// A second pass, 20 hits and 60 misses in 3 s: pooled, 80 of 160
	// reads hit, and the time through the cache is (1 + 3) ÷ 2 s.
	out := strings.Join([]string{m[0], "smq-pass w 6.0 9.0 | " + strings.Replace(status, "%s", "0 0", 1) + " | " +
		strings.Replace(status, "%s", "20 60", 1), "smq-pass other 1.0 2.0 | x | y"}, "\n")
	more := map[string][][]string{}
	for _, p := range passLineRE.FindAllStringSubmatch(out, -1) {
		more[p[1]] = append(more[p[1]], p[2:])
	}
	if err := measure(&row, m, more["w"]); err != nil || row.MeasuredHitPct != 50 || row.CachedS != 2 || row.Passes != 2 {
		t.Errorf("measure of two passes: %+v, %v; want 50 %% hits (80 of 160), 2 s through the cache, 2 passes", row, err)
	}
	if err := measure(&row, m, more["other"]); err == nil || !strings.Contains(err.Error(), "not a cache status") {
		t.Errorf("measure of a pass with a bad status: %v, want \"not a cache status\"", err)
	}
	m[7] = "0 1048576 linear 8:16 0"
	if err := measure(&row, m, nil); err == nil || !strings.Contains(err.Error(), "not a cache status") {
		t.Errorf("measure of a linear target's status: %v, want \"not a cache status\"", err)
	}
}
