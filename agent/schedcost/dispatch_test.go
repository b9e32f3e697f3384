package schedcost

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestAttemptAndStart: a declined attempt charges the prior, is recorded
// and sets a retry time after the back-off; a start within it charges the
// prior without measuring; a measurement is charged and saved; any other
// failure is tried again at the next start only.
func TestAttemptAndStart(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	contended := func(context.Context, string, string) (Costs, error) {
		calls++
		return Costs{}, fmt.Errorf("%w: 8 phases of 8", ErrContended)
	}
	before := time.Now()
	ch := Attempt(context.Background(), "", dir, Costs{}, contended)
	if ch.Measured || ch.Costs.PerRequestNs["bfq"] != Prior(runtime.NumCPU()).PerRequestNs["bfq"] {
		t.Errorf("declined: charged %+v, want the prior", ch)
	}
	if d := ch.RetryAt.Sub(before); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("retry %v after the attempt, want 5 min", d)
	}
	if len(ch.Notes) != 1 || !strings.HasPrefix(ch.Notes[0], PriorNote) || !strings.Contains(ch.Notes[0], "tried again after") {
		t.Errorf("declined: notes %q", ch.Notes)
	}
	if saved, err := Load(dir); err != nil || saved.Contended != 1 || ch.Saved.Contended != 1 {
		t.Fatalf("the record: %+v, %v; charge's %+v", saved, err, ch.Saved)
	}

	st := Start(context.Background(), "", dir, contended)
	if calls != 1 || st.Measured || st.RetryAt.IsZero() || len(st.Notes) != 1 || !strings.Contains(st.Notes[0], "too busy in the last 1 attempts") {
		t.Fatalf("start within the back-off: %d calls, %+v", calls, st)
	}

	ok := func(context.Context, string, string) (Costs, error) {
		return Costs{Kernel: Kernel(), CPUs: runtime.NumCPU(), PerRequestNs: map[string]float64{"none": 0, "bfq": 4000}}, nil
	}
	ch = Attempt(context.Background(), "", dir, st.Saved, ok)
	if !ch.Measured || ch.Costs.PerRequestNs["bfq"] != 4000 || !ch.RetryAt.IsZero() || len(ch.Notes) != 0 {
		t.Fatalf("measured: %+v", ch)
	}
	if c, err := Load(dir); err != nil || c.PerRequestNs["bfq"] != 4000 || c.Contended != 0 {
		t.Errorf("saved: %+v, %v", c, err)
	}

	failed := func(context.Context, string, string) (Costs, error) { return Costs{}, errors.New("no loop devices") }
	ch = Attempt(context.Background(), "", t.TempDir(), Costs{}, failed)
	if ch.Measured || !ch.RetryAt.IsZero() || len(ch.Notes) != 1 || !strings.Contains(ch.Notes[0], "measured again at the next start") {
		t.Errorf("failed: %+v", ch)
	}
}

func TestRetryDue(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		retryAt, now time.Time
		idle         float64
		want         bool
	}{
		{time.Time{}, at, 1, false},
		{at, at.Add(-time.Second), 1, false},
		{at, at, RetryIdle, true},
		{at, at.Add(time.Second), 0.5, false},
		{at, at.Add(time.Second), -1, false},
	} {
		if got := RetryDue(c.retryAt, c.now, c.idle); got != c.want {
			t.Errorf("RetryDue(%v, %v, %v) = %v, want %v", c.retryAt, c.now, c.idle, got, c.want)
		}
	}
}
