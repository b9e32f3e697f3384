package schedcost

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 5 * time.Minute}, {2, 10 * time.Minute}, {3, 20 * time.Minute}, {4, 40 * time.Minute},
		{5, time.Hour}, {60, time.Hour}} {
		if got := Backoff(c.n); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	measuredHere := Costs{Kernel: "6.18", CPUs: 2, PerRequestNs: map[string]float64{"none": 0}}
	declined := func(n int) Costs { return Costs{Kernel: "6.18", CPUs: 2, Contended: n, LastTry: t0} }
	for _, c := range []struct {
		name         string
		saved        Costs
		now          time.Time
		use, measure bool
		wantRetryAt  time.Time
	}{
		{"nothing saved", Costs{}, t0, false, true, time.Time{}},
		{"measured on this kernel", measuredHere, t0, true, false, time.Time{}},
		{"measured on another kernel", Costs{Kernel: "6.1", CPUs: 2, PerRequestNs: map[string]float64{}}, t0, false, true, time.Time{}},
		{"measured with other CPUs", Costs{Kernel: "6.18", CPUs: 4, PerRequestNs: map[string]float64{}}, t0, false, true, time.Time{}},
		{"declined once, 4 min ago", declined(1), t0.Add(4 * time.Minute), false, false, t0.Add(5 * time.Minute)},
		{"declined once, 5 min ago", declined(1), t0.Add(5 * time.Minute), false, true, t0.Add(5 * time.Minute)},
		{"declined 3 times, 15 min ago", declined(3), t0.Add(15 * time.Minute), false, false, t0.Add(20 * time.Minute)},
		{"declined on another kernel", Costs{Kernel: "6.1", CPUs: 2, Contended: 9, LastTry: t0}, t0, false, true, time.Time{}},
	} {
		use, measure, at := Plan(c.saved, "6.18", 2, c.now)
		if use != c.use || measure != c.measure || !at.Equal(c.wantRetryAt) {
			t.Errorf("%s: Plan = %v, %v, %v; want %v, %v, %v", c.name, use, measure, at, c.use, c.measure, c.wantRetryAt)
		}
	}
}

func TestContention(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 500, time.UTC)
	first := Contention(Costs{}, "6.18", 2, t0)
	if first.Contended != 1 || !first.LastTry.Equal(t0.Truncate(time.Second)) || first.PerRequestNs != nil {
		t.Errorf("first: %+v", first)
	}
	if second := Contention(first, "6.18", 2, t0); second.Contended != 2 {
		t.Errorf("second: %d contended, want 2", second.Contended)
	}
	if other := Contention(first, "6.19", 2, t0); other.Contended != 1 {
		t.Errorf("after a kernel change: %d contended, want 1", other.Contended)
	}
	measured := Costs{Kernel: "6.18", CPUs: 2, PerRequestNs: map[string]float64{"none": 0}}
	if after := Contention(measured, "6.18", 2, t0); after.Contended != 1 {
		t.Errorf("after a measurement: %d contended, want 1", after.Contended)
	}
}
