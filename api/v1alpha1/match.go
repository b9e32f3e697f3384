package v1alpha1

import (
	"maps"
	"math"
	"path"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// DeviceInfo is what device selection needs to know about a block device.
//
// +kubebuilder:object:generate=false
type DeviceInfo struct {
	// Name is the kernel name as in /sys/block ("sda", "nvme0n1"), without
	// /dev/.
	Name string
	// Rotational is queue/rotational.
	Rotational bool
	// SizeBytes is the capacity in bytes; 0 when unknown.
	SizeBytes int64
}

// Matches reports whether the selector selects dev. In order:
//  1. a name matching any exclude glob is not selected (exclude wins);
//  2. with include globs, the name must match one of them (no include
//     globs: every name);
//  3. with rotational set, dev.Rotational must equal it;
//  4. with minSizeBytes set, dev.SizeBytes must be at least it (a device of
//     unknown size, 0, is then not selected unless minSizeBytes is 0).
//
// Globs use path.Match; a malformed glob (which Validate rejects) matches
// nothing, so as an exclude it excludes nothing and as an include it
// includes nothing.
func (d *DeviceSelector) Matches(dev DeviceInfo) bool {
	for _, g := range d.Exclude {
		if globMatch(g, dev.Name) {
			return false
		}
	}
	if len(d.Include) > 0 {
		included := false
		for _, g := range d.Include {
			if globMatch(g, dev.Name) {
				included = true
				break
			}
		}
		if !included {
			return false
		}
	}
	if d.Rotational != nil && *d.Rotational != dev.Rotational {
		return false
	}
	if d.MinSizeBytes != nil && dev.SizeBytes < d.MinSizeBytes.Value() {
		return false
	}
	return true
}

func globMatch(glob, name string) bool {
	ok, err := path.Match(glob, name)
	return ok && err == nil
}

// Matches reports whether the policy selects device dev of a node it
// selects: spec.devices.Matches(dev).
func (s *StorageTuningSpec) Matches(dev DeviceInfo) bool { return s.Devices.Matches(dev) }

// MatchesNode reports whether spec.nodeSelector selects a node with the
// given labels. An unset or empty selector selects every node. The error
// reports a malformed selector (Validate rejects those).
func (s *StorageTuningSpec) MatchesNode(nodeLabels map[string]string) (bool, error) {
	if s.NodeSelector == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.NodeSelector)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(nodeLabels)), nil
}

// Values returns the candidate values of the range, ascending and without
// repeats: Steps values spread evenly from Min to Max, both included, each
// rounded down to an integer (Min alone when Min == Max; Steps unset means
// the schema default, 3). It returns nil when the range is invalid (Max unset
// or below Min, Steps below 2).
func (t *TunableRange) Values() []int64 {
	if t.Max == nil || *t.Max < t.Min || t.Min < 0 {
		return nil
	}
	steps := tunableStepsDefault()
	if t.Steps != nil {
		steps = int64(*t.Steps)
	}
	if steps < 2 {
		return nil
	}
	lo, hi := t.Min, *t.Max
	if lo == hi {
		return []int64{lo}
	}
	// lo + (hi-lo)·i/(steps-1) without overflow: hi-lo ≥ 0 fits in int64
	// because lo ≥ 0.
	span, n := hi-lo, steps-1
	q, r := span/n, span%n
	out := make([]int64, 0, steps)
	for i := int64(0); i <= n; i++ {
		v := lo + q*i + r*i/n
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// TunableCandidates returns the tunable settings to simulate for one
// scheduler: the cartesian product of the Values of its ranges in
// spec.tunables, in spec order, the first range varying slowest. Tunables
// not named keep the kernel's default, so a scheduler without ranges gives
// one empty setting. It returns nil for a scheduler that is not a candidate.
// The agent also always simulates the device's current setting (DESIGN §4).
func (s *StorageTuningSpec) TunableCandidates(scheduler SchedulerName) []map[string]int64 {
	if !slices.Contains(s.Schedulers.Candidates, scheduler) {
		return nil
	}
	out := []map[string]int64{{}}
	for i := range s.Tunables {
		t := &s.Tunables[i]
		if SchedulerName(t.Scheduler) != scheduler {
			continue
		}
		vals := t.Values()
		if len(vals) == 0 {
			continue
		}
		next := make([]map[string]int64, 0, len(out)*len(vals))
		for _, base := range out {
			for _, v := range vals {
				m := maps.Clone(base)
				m[t.Name] = v
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

// maxPercent bounds FormatPercent so the result fits the 16-byte schema
// limit.
const maxPercent = 999999

// FormatPercent formats a percentage for the status fields that carry one as
// a string (predictedGainPercent, modelErrorPercent, gainPercent): one
// decimal, e.g. "7.5" or "-56.3". NaN formats as "0.0"; values beyond
// ±999999 are clamped.
func FormatPercent(v float64) string {
	switch {
	case math.IsNaN(v):
		v = 0
	case v > maxPercent:
		v = maxPercent
	case v < -maxPercent:
		v = -maxPercent
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// ParsePercent parses a percentage string written by FormatPercent (any
// string ValidPercent accepts).
func ParsePercent(s string) (float64, error) {
	if !ValidPercent(s) {
		return 0, &strconv.NumError{Func: "ParsePercent", Num: s, Err: strconv.ErrSyntax}
	}
	return strconv.ParseFloat(s, 64)
}
