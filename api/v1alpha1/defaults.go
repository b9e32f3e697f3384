package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Default fills every unset field of the spec with the default the CRD
// schema applies (a test checks the two agree), so a StorageTuning read from
// a file behaves as one read from the API server. Unset means a nil pointer
// or slice, or an empty string: an explicit empty list (candidates: []) is
// kept, and Validate rejects it, as the API server does.
func (st *StorageTuning) Default() { st.Spec.Default() }

// Default fills the unset fields of s with their defaults; see
// StorageTuning.Default.
func (s *StorageTuningSpec) Default() {
	if s.Mode == "" {
		s.Mode = DefaultMode
	}
	if s.Schedulers.Candidates == nil {
		s.Schedulers.Candidates = DefaultCandidates()
	}
	if s.Schedulers.Default == "" {
		s.Schedulers.Default = DefaultScheduler
	}
	for i := range s.Tunables {
		if s.Tunables[i].Steps == nil {
			s.Tunables[i].Steps = ptr.To[int32](DefaultTunableSteps)
		}
	}

	ra := &s.ReadAhead
	if ra.Enabled == nil {
		ra.Enabled = ptr.To(DefaultReadAheadEnabled)
	}
	if ra.MinKiB == nil {
		ra.MinKiB = ptr.To[int32](DefaultReadAheadMinKiB)
	}
	if ra.MaxKiB == nil {
		ra.MaxKiB = ptr.To[int32](DefaultReadAheadMaxKiB)
	}

	if s.Cache.MemoryBudget == nil {
		s.Cache.MemoryBudget = ptr.To(resource.MustParse(DefaultCacheMemoryBudget))
	}

	ev := &s.Evaluation
	if ev.Window == nil {
		ev.Window = mustDuration(DefaultWindow)
	}
	if ev.MarginPercent == nil {
		ev.MarginPercent = ptr.To[int32](DefaultMarginPercent)
	}
	if ev.ThrashGuard.Changes == nil {
		ev.ThrashGuard.Changes = ptr.To[int32](DefaultThrashGuardChanges)
	}
	if ev.ThrashGuard.QuietChecks == nil {
		ev.ThrashGuard.QuietChecks = ptr.To[int32](DefaultThrashGuardQuietChecks)
	}
	if ev.CPUBudgetPercent == nil {
		ev.CPUBudgetPercent = ptr.To[int32](DefaultCPUBudgetPercent)
	}

	ro := &s.Rollout
	if ro.MaxUnavailable == nil {
		ro.MaxUnavailable = ptr.To(intstr.FromInt32(DefaultMaxUnavailable))
	}
	if ro.MinDwell == nil {
		ro.MinDwell = mustDuration(DefaultMinDwell)
	}
	if ro.ToleratedRegressionPercent == nil {
		ro.ToleratedRegressionPercent = ptr.To[int32](DefaultToleratedRegressionPercent)
	}
}

func mustDuration(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}
