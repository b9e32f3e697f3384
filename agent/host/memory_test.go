package host

import (
	"strings"
	"testing"
)

func TestPlanMemory(t *testing.T) {
	const mib = int64(1) << 20
	tests := []struct {
		name    string
		limit   int64
		devices int
		max     int
		note    string
	}{
		{"no limit", 0, 8, maxSimulated, ""},
		{"a large limit keeps the default", 4096 * mib, 4, maxSimulated, ""},
		{"the chart's limit fits one device at 58982", 256 * mib, 1, 58982, "newest 58982 requests"},
		{"more devices share it", 256 * mib, 4, 14745, "simulated over its newest 14745 requests"},
		{"too small a limit keeps the floor and says so", 96 * mib, 4, minSimulated, "too small for 4 device(s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanMemory(tc.limit, tc.devices)
			if p.MaxSimulated != tc.max || !strings.Contains(p.Note, tc.note) || (tc.note == "") != (p.Note == "") {
				t.Errorf("PlanMemory(%d MiB, %d) = %+v, want MaxSimulated %d and a note with %q", tc.limit/mib, tc.devices, p, tc.max, tc.note)
			}
		})
	}
}
