package v1alpha1

import "testing"

func TestDefaultsChangeDescribeAndVerdict(t *testing.T) {
	ra := KnobChange{Knob: "read_ahead_kb", Old: "128", New: "4096"}
	sched := KnobChange{Knob: "scheduler", Old: "mq-deadline", New: "none"}
	c := DefaultsChange{Knobs: []KnobChange{ra, sched}}
	if got, want := c.Describe(), "read_ahead_kb 128 → 4096, scheduler mq-deadline → none"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		ra, sched, want KnobVerdict
	}{
		{"", "", ""},
		{VerdictNotSlower, "", VerdictNotSlower},
		{VerdictNotSlower, VerdictSlower, VerdictSlower},
		{"", VerdictSlower, VerdictSlower},
	} {
		c.Knobs[0].Verdict, c.Knobs[1].Verdict = tc.ra, tc.sched
		if got := c.Verdict(); got != tc.want {
			t.Errorf("Verdict() with %q, %q = %q, want %q", tc.ra, tc.sched, got, tc.want)
		}
	}
}
