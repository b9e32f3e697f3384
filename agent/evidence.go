package agent

// The window's charges for each scheduler's CPU cost, in the device's
// status (issue 14 item 6; the rest of the evidence is the controller's:
// window.Controller.ShowEvidence).

import (
	"maps"
	"slices"
	"strconv"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// maxDispatchCharges bounds window.dispatchCharges (the schema's
// MaxItems).
const maxDispatchCharges = 8

// dispatchCharges is r's dispatch factors by scheduler, none's (always
// 1) left out, sorted by name; nil when nothing was charged.
func dispatchCharges(r *engine.Report) []v1alpha1.DispatchCharge {
	var out []v1alpha1.DispatchCharge
	for _, s := range slices.Sorted(maps.Keys(r.DispatchFactors)) {
		if s == "none" {
			continue
		}
		if len(out) == maxDispatchCharges {
			break
		}
		out = append(out, v1alpha1.DispatchCharge{Scheduler: s, Factor: strconv.FormatFloat(r.DispatchFactors[s], 'f', 3, 64)})
	}
	return out
}
