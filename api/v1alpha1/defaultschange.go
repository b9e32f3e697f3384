package v1alpha1

import (
	"fmt"
	"strings"
)

// Describe renders the change's knobs, old → new, in their order:
// "read_ahead_kb 128 → 4096, scheduler mq-deadline → none".
func (c *DefaultsChange) Describe() string {
	parts := make([]string, len(c.Knobs))
	for i, k := range c.Knobs {
		parts[i] = k.Describe()
	}
	return strings.Join(parts, ", ")
}

// Verdict is the change's verdict as a whole: Slower when a knob was
// judged slower, NotSlower when knobs were judged and none was, "" when
// none was judged.
func (c *DefaultsChange) Verdict() KnobVerdict {
	var v KnobVerdict
	for _, k := range c.Knobs {
		switch k.Verdict {
		case VerdictSlower:
			return VerdictSlower
		case VerdictNotSlower:
			v = VerdictNotSlower
		}
	}
	return v
}

// Describe renders the knob's change: "read_ahead_kb 128 → 4096".
func (k KnobChange) Describe() string { return fmt.Sprintf("%s %s → %s", k.Knob, k.Old, k.New) }
