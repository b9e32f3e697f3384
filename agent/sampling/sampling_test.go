package sampling

import "testing"

func TestSampleMissed(t *testing.T) {
	for _, tc := range []struct {
		name              string
		completed, traced uint64
		scale             float64
		missed            bool
	}{
		{"its share", 10_000, 1000, 10, false},
		{"a steady load's variation", 10_000, 900, 10, false},
		{"half its share", 10_000, 500, 10, false},
		{"below half its share", 10_000, 499, 10, true},
		{"below half, within three deviations", 200, 9, 10, false},
		{"below half, beyond three deviations", 2000, 50, 10, true},
		{"the work before the sample", 82_000, 2000, 10, true},
		{"more than its share (the load rose)", 10_000, 5000, 10, false},
		{"an idle device", 0, 0, 10, false},
		{"a small count within its deviation", 30, 1, 10, false},
		{"a whole window", 10_000, 10, 1, false},
		{"no scale", 10_000, 10, 0, false},
	} {
		msg, missed := Missed(tc.completed, tc.traced, tc.scale)
		if missed != tc.missed || missed != (msg != "") {
			t.Errorf("%s: missed %v (%q), want %v", tc.name, missed, msg, tc.missed)
		}
	}
}
