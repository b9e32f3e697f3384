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
		parts[i] = fmt.Sprintf("%s %s → %s", k.Knob, k.Old, k.New)
	}
	return strings.Join(parts, ", ")
}
