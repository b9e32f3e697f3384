package window

import (
	"slices"

	"github.com/shadowtune/shadowtune/api/knob"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// Writes returns the tunables (knob table names and units) that writing
// s over the device's setting was must set. A candidate is its scheduler
// at the kernel's defaults with its own tunables (sim.Run), but the kernel
// resets them only when the scheduler changes: without a switch, a
// tunable was set and s leaves out keeps the value written before. So,
// when s keeps was's scheduler, each such tunable is written back at its
// default: a scheduler's from engine.Defaults (the scheduler's kernel
// file), a queue attribute's from queueDefaults (actuate.QueueDefaults;
// one missing there is left as it is). s's own tunables win; the result
// is nil when there is nothing to write.
func (s Setting) Writes(was Setting, queueDefaults map[string]int64) map[string]int64 {
	dropped := s.dropped(was)
	if len(dropped) == 0 {
		return s.Candidate.Tunables
	}
	defaults, err := engine.Defaults(s.Candidate.Scheduler)
	if err != nil {
		return s.Candidate.Tunables
	}
	var out map[string]int64
	for _, name := range dropped {
		v, ok := defaults[name]
		if knob.IsQueue(name) {
			v, ok = queueDefaults[name]
		}
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[name] = v
	}
	if out == nil {
		return s.Candidate.Tunables
	}
	for name, v := range s.Candidate.Tunables {
		out[name] = v
	}
	return out
}

// DropsQueueKnob reports whether writing s over was needs the kernel's
// defaults of queue attributes (Writes' queueDefaults): s keeps was's
// scheduler and leaves out a queue attribute was set.
func (s Setting) DropsQueueKnob(was Setting) bool {
	return slices.ContainsFunc(s.dropped(was), knob.IsQueue)
}

// dropped are the tunables was set that s, keeping was's scheduler,
// leaves out; none when s switches the scheduler (or sets none).
func (s Setting) dropped(was Setting) []string {
	sc := s.Candidate.Scheduler
	if sc == "" || sc != was.Candidate.Scheduler {
		return nil
	}
	var out []string
	for name := range was.Candidate.Tunables {
		if _, kept := s.Candidate.Tunables[name]; !kept {
			out = append(out, name)
		}
	}
	return out
}
