package window

import (
	"maps"
	"testing"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// TestSettingWrites: a tunable the last setting set and the next leaves
// out, with the scheduler kept, is written back at its kernel default
// (mq-deadline's fifo_batch 16, mq-deadline.c; nr_requests from the
// queue's defaults); a switch, which resets them, writes the next
// setting's own only, and so does a kept scheduler with nothing left
// out.
func TestSettingWrites(t *testing.T) {
	set := func(s string, tun sched.Tunables) Setting {
		return Setting{Candidate: engine.Candidate{Scheduler: s, Tunables: tun}}
	}
	qd := sched.Tunables{"nr_requests": 256}
	for _, c := range []struct {
		name      string
		s, was    Setting
		qd        sched.Tunables
		want      sched.Tunables
		dropQueue bool
	}{
		{"switch", set("mq-deadline", sched.Tunables{"fifo_batch": 32}), set("none", nil), qd,
			sched.Tunables{"fifo_batch": 32}, false},
		{"switch away from tunables", set("kyber", nil), set("mq-deadline", sched.Tunables{"fifo_batch": 32}), qd,
			nil, false},
		{"tunable left out", set("mq-deadline", nil), set("mq-deadline", sched.Tunables{"fifo_batch": 32}), qd,
			sched.Tunables{"fifo_batch": 16}, false},
		{"tunable changed", set("mq-deadline", sched.Tunables{"fifo_batch": 8}), set("mq-deadline", sched.Tunables{"fifo_batch": 32}), qd,
			sched.Tunables{"fifo_batch": 8}, false},
		{"one left out, one set", set("mq-deadline", sched.Tunables{"read_expire": 100}),
			set("mq-deadline", sched.Tunables{"fifo_batch": 32}), qd,
			sched.Tunables{"fifo_batch": 16, "read_expire": 100}, false},
		{"queue attribute left out", set("mq-deadline", nil), set("mq-deadline", sched.Tunables{"nr_requests": 32}), qd,
			sched.Tunables{"nr_requests": 256}, true},
		{"queue default unknown", set("mq-deadline", nil), set("mq-deadline", sched.Tunables{"nr_requests": 32}), nil,
			nil, true},
		{"nothing left out", set("bfq", sched.Tunables{"slice_idle": 0}), set("bfq", nil), qd,
			sched.Tunables{"slice_idle": 0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.s.Writes(c.was, c.qd); !maps.Equal(got, c.want) {
				t.Errorf("Writes = %v, want %v", got, c.want)
			}
			if got := c.s.DropsQueueKnob(c.was); got != c.dropQueue {
				t.Errorf("DropsQueueKnob = %v, want %v", got, c.dropQueue)
			}
		})
	}
}
