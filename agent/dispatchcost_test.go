package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/shadowtune/shadowtune/agent/schedcost"
)

// TestDispatchBackoff: a measurement the busy CPUs declined is recorded
// in the state directory; the next start within the back-off charges the
// prior without measuring; a window's end tries again only after the
// back-off and only when the CPUs were idle; a success there is charged
// from then on, saved, and its note of the prior goes; a second decline
// doubles the back-off.
func TestDispatchBackoff(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	contended := func(context.Context, string, string) (schedcost.Costs, error) {
		calls++
		return schedcost.Costs{}, fmt.Errorf("%w: 8 phases of 8", schedcost.ErrContended)
	}
	a := &Agent{dispatch: schedcost.Charger{StateDir: dir, Log: testr.New(t)}}
	before := time.Now()
	note := a.dispatch.Try(context.Background(), schedcost.Costs{}, contended)
	if !strings.HasPrefix(note, schedcost.PriorNote) || !strings.Contains(note, "tried again after") {
		t.Errorf("note %q", note)
	}
	if a.dispatch.Costs().PerRequestNs["bfq"] != schedcost.Prior(runtime.NumCPU()).PerRequestNs["bfq"] {
		t.Errorf("charged %v, want the prior", a.dispatch.Costs().PerRequestNs)
	}
	if d := a.dispatch.RetryAt().Sub(before); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("retry %v after the attempt, want 5 min", d)
	}
	saved, err := schedcost.Load(dir)
	if err != nil || saved.Contended != 1 || saved.LastTry.IsZero() {
		t.Fatalf("the state directory's record: %+v, %v; want 1 contended attempt and its time", saved, err)
	}

	// A start within the back-off does not measure (measureOnce would).
	b := &Agent{dispatch: schedcost.Charger{StateDir: dir, Log: testr.New(t)}}
	b.measureDispatch(context.Background())
	if len(b.notes) != 1 || !strings.Contains(b.notes[0], "too busy in the last 1 attempts") || b.dispatch.RetryAt().IsZero() {
		t.Fatalf("start within the back-off: notes %q, retry %v", b.notes, b.dispatch.RetryAt())
	}
	b.st.Notes = slices.Clone(b.notes)

	ok := func(context.Context, string, string) (schedcost.Costs, error) {
		calls++
		return schedcost.Costs{Kernel: schedcost.Kernel(), CPUs: runtime.NumCPU(),
			PerRequestNs: map[string]float64{"none": 0, "mq-deadline": 2500, "bfq": 4000}}, nil
	}
	b.dispatch.Remeasure, calls = ok, 0
	b.retryDispatch(context.Background(), b.dispatch.RetryAt().Add(-time.Second), 0.99)
	b.retryDispatch(context.Background(), b.dispatch.RetryAt().Add(time.Second), 0.5)
	b.retryDispatch(context.Background(), b.dispatch.RetryAt().Add(time.Second), -1)
	if calls != 0 {
		t.Fatalf("measured %d times before the back-off ended or with busy CPUs", calls)
	}
	b.retryDispatch(context.Background(), b.dispatch.RetryAt().Add(time.Second), 0.9)
	if calls != 1 || b.dispatch.Costs().PerRequestNs["bfq"] != 4000 || !b.dispatch.RetryAt().IsZero() {
		t.Fatalf("after the retry: %d calls, charged %v, retry %v", calls, b.dispatch.Costs().PerRequestNs, b.dispatch.RetryAt())
	}
	if len(b.notes) != 0 || len(b.st.Notes) != 0 {
		t.Errorf("notes after the measurement: %q, status %q", b.notes, b.st.Notes)
	}
	if c, err := schedcost.Load(dir); err != nil || c.PerRequestNs["bfq"] != 4000 || c.Contended != 0 {
		t.Errorf("saved after the retry: %+v, %v", c, err)
	}

	// Declined twice in a row: 10 minutes.
	if err := os.Remove(filepath.Join(dir, schedcost.FileName)); err != nil {
		t.Fatal(err)
	}
	c := &Agent{dispatch: schedcost.Charger{StateDir: dir, Log: testr.New(t)}}
	c.dispatch.Try(context.Background(), schedcost.Costs{}, contended)
	first, _ := schedcost.Load(dir)
	at := time.Now()
	c.dispatch.Remeasure = contended
	c.retryDispatch(context.Background(), c.dispatch.RetryAt(), 1)
	second, _ := schedcost.Load(dir)
	if second.Contended != 2 || first.Contended != 1 {
		t.Fatalf("contended %d then %d, want 1 then 2", first.Contended, second.Contended)
	}
	if d := c.dispatch.RetryAt().Sub(at); d < 9*time.Minute || d > 11*time.Minute {
		t.Errorf("retry %v after the second attempt, want 10 min", d)
	}
	if len(c.st.Notes) != 1 || !strings.HasPrefix(c.st.Notes[0], schedcost.PriorNote) {
		t.Errorf("status notes after the second decline: %q", c.st.Notes)
	}
}
