package window

import (
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
	sc := s.Candidate.Scheduler
	if sc == "" || sc != was.Candidate.Scheduler {
		return s.Candidate.Tunables
	}
	defaults, err := engine.Defaults(sc)
	if err != nil {
		return s.Candidate.Tunables
	}
	var out map[string]int64
	for name := range was.Candidate.Tunables {
		if _, kept := s.Candidate.Tunables[name]; kept {
			continue
		}
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
	if s.Candidate.Scheduler == "" || s.Candidate.Scheduler != was.Candidate.Scheduler {
		return false
	}
	for name := range was.Candidate.Tunables {
		if _, kept := s.Candidate.Tunables[name]; !kept && knob.IsQueue(name) {
			return true
		}
	}
	return false
}
