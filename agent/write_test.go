package agent

import (
	"testing"

	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// TestWriteLeavesNoTunableBehind: a move between two candidates of one
// scheduler that leaves a tunable out puts it back at the kernel's
// default, on the fake kernel (which, like Linux, resets tunables only
// on a switch): mq-deadline's fifo_batch to 16, nr_requests to twice the
// fake sda's 32 tags.
func TestWriteLeavesNoTunableBehind(t *testing.T) {
	e := newGateEnv(t, "sda", testTuning("fleet", 1, v1alpha1.ModeApply, nil))
	set := func(s string, tun sched.Tunables) window.Setting {
		return window.Setting{Candidate: engine.Candidate{Scheduler: s, Tunables: tun}}
	}
	steps := []struct {
		s, was window.Setting
		attr   string
		want   string
	}{
		{set("mq-deadline", sched.Tunables{"fifo_batch": 32}), set("none", nil), "queue/iosched/fifo_batch", "32"},
		{set("mq-deadline", nil), set("mq-deadline", sched.Tunables{"fifo_batch": 32}), "queue/iosched/fifo_batch", "16"},
		{set("mq-deadline", sched.Tunables{"nr_requests": 16}), set("mq-deadline", nil), "queue/nr_requests", "16"},
		{set("mq-deadline", nil), set("mq-deadline", sched.Tunables{"nr_requests": 16}), "queue/nr_requests", "64"},
	}
	for i, s := range steps {
		if !e.d.write(s.s, s.was, e.env) {
			t.Fatalf("step %d: not written: %s", i, e.d.status.LastError)
		}
		got, err := e.fake.Read("sda", s.attr)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want && got != s.want+"\n" {
			t.Errorf("step %d: %s %q, want %s", i, s.attr, got, s.want)
		}
	}
}
