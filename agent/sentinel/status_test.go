package sentinel

import (
	"maps"
	"math"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// Current takes a changed device's recorded original, not its value now,
// and leaves out nr_requests.
func TestCurrent(t *testing.T) {
	d := sysfs.Device{Scheduler: "bfq", ReadAheadKiB: 64, NrRequests: 128}
	at := time.Date(2026, 12, 1, 8, 0, 0, 5e8, time.FixedZone("x", 3600))
	if s := Current(d, nil, Host{}, at); s.Knobs["scheduler"] != "bfq" || s.Knobs["nr_requests"] != "128" || !s.At.Equal(at.Truncate(time.Second)) || s.At.Location() != time.UTC {
		t.Errorf("unchanged device: %+v", s)
	}
	s := Current(d, &Original{Scheduler: "mq-deadline", ReadAheadKiB: 128}, Host{}, at)
	if _, has := s.Knobs["nr_requests"]; has || s.Knobs["scheduler"] != "mq-deadline" || s.Knobs["read_ahead_kb"] != "128" {
		t.Errorf("changed device: %+v", s.Knobs)
	}
}

// Check finds a change against the previous start, reports a change still
// in force again with the time it was found, and nothing on a first start.
func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	seen := func(ra string, kernel string, at time.Time) Seen {
		return Seen{Knobs: map[string]string{"read_ahead_kb": ra}, Host: Host{KernelRelease: kernel}, At: at}
	}
	old, upgraded := seen("128", "6.16.1", t0), seen("4096", "6.17.2", t0.Add(time.Hour))
	if c := Check(nil, nil, old); c.Change != nil || c.Previous != nil || !c.Keep.At.Equal(t0) {
		t.Fatalf("first start: %+v", c)
	}
	c := Check(&old, nil, upgraded)
	want := v1alpha1.KnobChange{Knob: "read_ahead_kb", Old: "128", New: "4096"}
	if c.Change == nil || !c.New || len(c.Change.Knobs) != 1 || c.Change.Knobs[0] != want || c.Change.With != "kernel 6.16.1 → 6.17.2" ||
		!c.Change.DetectedTime.Time.Equal(upgraded.At) || c.Previous == nil || c.Previous.Knobs["read_ahead_kb"] != "128" {
		t.Fatalf("upgrade: %+v", c)
	}
	again := Check(&c.Keep, c.Previous, seen("4096", "6.17.2", t0.Add(2*time.Hour)))
	if again.Change == nil || again.New || !again.Keep.At.Equal(upgraded.At) || !again.Change.DetectedTime.Time.Equal(upgraded.At) {
		t.Errorf("a start on the same defaults: %+v", again)
	}
	c.Previous.Knobs["read_ahead_kb"] = "1"
	if old.Knobs["read_ahead_kb"] != "128" {
		t.Error("Check's Previous shares the knobs of before")
	}
}

// JudgeKnobs judges the knobs costs prices, keeps the last verdict of the
// others, and returns the knobs with a verdict.
func TestJudgeKnobs(t *testing.T) {
	dc := &v1alpha1.DefaultsChange{Knobs: []v1alpha1.KnobChange{
		{Knob: "scheduler", Old: "mq-deadline", New: "none", Verdict: v1alpha1.VerdictNotSlower, ChangePercent: "+1.0"},
		{Knob: "read_ahead_kb", Old: "128", New: "4096"},
		{Knob: "nr_requests", Old: "64", New: "256"},
	}}
	costs := func(k v1alpha1.KnobChange) (float64, float64) {
		switch k.Knob {
		case "read_ahead_kb":
			return 120, 100
		case "nr_requests":
			return 101, 100
		}
		return math.NaN(), 100
	}
	judged := JudgeKnobs(dc, costs, 5)
	if want := map[string]bool{"scheduler": false, "read_ahead_kb": true, "nr_requests": false}; !maps.Equal(judged, want) {
		t.Errorf("judged %v, want %v", judged, want)
	}
	k := dc.Knobs
	if k[0].ChangePercent != "+1.0" || k[1].Verdict != v1alpha1.VerdictSlower || k[1].ChangePercent != "+20.0" ||
		k[2].Verdict != v1alpha1.VerdictNotSlower || k[2].ChangePercent != "+1.0" {
		t.Errorf("verdicts %+v", k)
	}
	if n := PreviousReadAhead(dc); n != 128 {
		t.Errorf("previous read-ahead %d, want 128", n)
	}
	if n := KnobNames(dc); len(n) != 3 || n[1] != "read_ahead_kb" {
		t.Errorf("knob names %v", n)
	}
}
