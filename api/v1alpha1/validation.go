package v1alpha1

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// globPattern is the CRD's pattern for device globs (DeviceSelector
// markers): letters, digits, _ . : - * ? and well-formed [...] classes. On
// that alphabet it accepts exactly the patterns path.Match accepts.
var globPattern = regexp.MustCompile(`^([A-Za-z0-9_.:*?-]|\[\^?([A-Za-z0-9_.:](-[A-Za-z0-9_.:])?)+\])+$`)

// percentPattern is the CRD's pattern for percentages carried as strings.
var percentPattern = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// maxUnavailablePercent is the CEL rule's pattern for a percentage
// maxUnavailable.
var maxUnavailablePercent = regexp.MustCompile(`^(100|[1-9][0-9]?)%$`)

// Bounds of the duration and quantity fields, as in the CEL rules.
var (
	minWindow       = time.Second
	maxWindow       = 5 * time.Minute
	maxMinDwell     = 24 * time.Hour
	minMemoryBudget = resource.MustParse("1Mi")
	maxMemoryBudget = resource.MustParse("64Gi")
)

// Validate checks the object against the rules the CRD schema and its CEL
// rules enforce, so a StorageTuning read from a file is held to the same
// rules as one stored by the API server. Call Default first: Validate skips
// unset optional fields. Field paths start at the object ("spec.schedulers.default").
//
// Validate is stricter than the API server in one place: it checks the label
// syntax of spec.nodeSelector, which a CRD schema cannot.
func (st *StorageTuning) Validate() field.ErrorList {
	var errs field.ErrorList
	if st.Name != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(st.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), st.Name, msg))
		}
	}
	return append(errs, st.Spec.Validate(field.NewPath("spec"))...)
}

// Validate checks the spec; fld is its path ("spec"). See
// StorageTuning.Validate.
func (s *StorageTuningSpec) Validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Mode != ModeObserve && s.Mode != ModeApply {
		errs = append(errs, field.NotSupported(fld.Child("mode"), s.Mode, []TuningMode{ModeObserve, ModeApply}))
	}
	if s.NodeSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.NodeSelector,
			metav1validation.LabelSelectorValidationOptions{}, fld.Child("nodeSelector"))...)
	}
	errs = append(errs, s.Devices.validate(fld.Child("devices"))...)
	errs = append(errs, s.Schedulers.validate(fld.Child("schedulers"))...)
	errs = append(errs, validateTunables(s.Tunables, s.Schedulers.Candidates, fld.Child("tunables"))...)
	errs = append(errs, s.ReadAhead.validate(fld.Child("readAhead"))...)
	errs = append(errs, s.Cache.validate(fld.Child("cache"))...)
	errs = append(errs, s.Evaluation.validate(fld.Child("evaluation"))...)
	errs = append(errs, s.Rollout.validate(fld.Child("rollout"))...)
	return errs
}

func (d *DeviceSelector) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateGlobs(d.Include, fld.Child("include"))...)
	errs = append(errs, validateGlobs(d.Exclude, fld.Child("exclude"))...)
	if q := d.MinSizeBytes; q != nil && q.Sign() < 0 {
		errs = append(errs, field.Invalid(fld.Child("minSizeBytes"), q.String(), "must not be negative"))
	}
	return errs
}

func validateGlobs(globs []string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(globs) > MaxDeviceGlobs {
		errs = append(errs, field.TooMany(fld, len(globs), MaxDeviceGlobs))
	}
	for i, g := range globs {
		p := fld.Index(i)
		switch {
		case g == "":
			errs = append(errs, field.Required(p, "must be a non-empty glob"))
		case len(g) > MaxGlobLength:
			errs = append(errs, field.TooLong(p, g, MaxGlobLength))
		case !globPattern.MatchString(g) || !validGlob(g):
			errs = append(errs, field.Invalid(p, g,
				"must be a path.Match glob over a device name: letters, digits, '_', '.', ':', '-', '*', '?' and [...] classes such as [0-9] or [^a-c]"))
		case slices.Contains(globs[:i], g):
			errs = append(errs, field.Duplicate(p, g))
		}
	}
	return errs
}

// validGlob reports whether path.Match accepts g as a pattern.
func validGlob(g string) bool {
	_, err := path.Match(g, "")
	return err == nil
}

func (p *SchedulerPolicy) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	cfld := fld.Child("candidates")
	if len(p.Candidates) == 0 {
		errs = append(errs, field.Required(cfld, "must list at least one scheduler"))
	}
	if len(p.Candidates) > len(SchedulerNames()) {
		errs = append(errs, field.TooMany(cfld, len(p.Candidates), len(SchedulerNames())))
	}
	for i, c := range p.Candidates {
		switch {
		case !c.IsKnown():
			errs = append(errs, field.NotSupported(cfld.Index(i), c, SchedulerNames()))
		case slices.Contains(p.Candidates[:i], c):
			errs = append(errs, field.Duplicate(cfld.Index(i), c))
		}
	}
	if !slices.Contains(p.Candidates, p.Default) || !p.Default.IsKnown() {
		errs = append(errs, field.Invalid(fld.Child("default"), p.Default, "must be one of the candidates"))
	}
	return errs
}

func validateTunables(ranges []TunableRange, candidates []SchedulerName, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ranges) > MaxTunableRanges {
		errs = append(errs, field.TooMany(fld, len(ranges), MaxTunableRanges))
	}
	perScheduler := map[TunableSchedulerName]int{}
	type key struct {
		s TunableSchedulerName
		n string
	}
	seen := map[key]bool{}
	for i := range ranges {
		t := &ranges[i]
		p := fld.Index(i)
		errs = append(errs, t.validate(p)...)
		if t.Scheduler.isKnown() && !slices.Contains(candidates, SchedulerName(t.Scheduler)) {
			errs = append(errs, field.Invalid(p.Child("scheduler"), t.Scheduler, "must be one of spec.schedulers.candidates"))
		}
		k := key{t.Scheduler, t.Name}
		if seen[k] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s/%s", t.Scheduler, t.Name)))
		}
		seen[k] = true
		perScheduler[t.Scheduler]++
	}
	for _, s := range []TunableSchedulerName{"mq-deadline", "bfq", "kyber"} {
		if perScheduler[s] > MaxTunableRangesPerScheduler {
			errs = append(errs, field.Invalid(fld, fmt.Sprintf("%d ranges for %s", perScheduler[s], s),
				fmt.Sprintf("at most %d tunable ranges per scheduler", MaxTunableRangesPerScheduler)))
		}
	}
	return errs
}

func (s TunableSchedulerName) isKnown() bool {
	return s != TunableSchedulerName(SchedulerNone) && SchedulerName(s).IsKnown()
}

func (t *TunableRange) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !t.Scheduler.isKnown() {
		errs = append(errs, field.NotSupported(fld.Child("scheduler"), t.Scheduler,
			[]TunableSchedulerName{"mq-deadline", "bfq", "kyber"}))
	}
	nfld := fld.Child("name")
	switch {
	case t.Name == "":
		errs = append(errs, field.Required(nfld, "must name a sysfs tunable"))
	case len(t.Name) > 32:
		errs = append(errs, field.TooLong(nfld, t.Name, 32))
	case t.Scheduler.isKnown() && !slices.Contains(KnownTunables(SchedulerName(t.Scheduler)), t.Name):
		errs = append(errs, field.NotSupported(nfld, t.Name, KnownTunables(SchedulerName(t.Scheduler))))
	}
	if t.Min < 0 {
		errs = append(errs, field.Invalid(fld.Child("min"), t.Min, "must be greater than or equal to 0"))
	}
	xfld := fld.Child("max")
	switch {
	case t.Max == nil:
		errs = append(errs, field.Required(xfld, "must give the largest value"))
	case *t.Max < 0:
		errs = append(errs, field.Invalid(xfld, *t.Max, "must be greater than or equal to 0"))
	case *t.Max < t.Min:
		errs = append(errs, field.Invalid(xfld, *t.Max, "must be greater than or equal to min"))
	case IsBooleanTunable(t.Name) && *t.Max > 1:
		errs = append(errs, field.Invalid(xfld, *t.Max,
			"front_merges, low_latency and strict_guarantees take 0 or 1: max must be at most 1"))
	}
	if k, ok := tunableBounds(t.Name); ok {
		if !k.Within(t.Min) {
			errs = append(errs, field.Invalid(fld.Child("min"), t.Min, between(k.Min, k.Max)))
		}
		if t.Max != nil && !k.Within(*t.Max) {
			errs = append(errs, field.Invalid(xfld, *t.Max, between(k.Min, k.Max)))
		}
	}
	if t.Steps != nil && (*t.Steps < MinTunableSteps || *t.Steps > MaxTunableSteps) {
		errs = append(errs, field.Invalid(fld.Child("steps"), *t.Steps, between(MinTunableSteps, MaxTunableSteps)))
	}
	return errs
}

func (r *ReadAheadPolicy) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(name string, v *int32) bool {
		if v == nil {
			return false
		}
		if *v < MinReadAheadKiB || *v > MaxReadAheadKiB || *v%4 != 0 {
			errs = append(errs, field.Invalid(fld.Child(name), *v,
				fmt.Sprintf("must be a multiple of 4 between %d and %d", MinReadAheadKiB, MaxReadAheadKiB)))
			return false
		}
		return true
	}
	okMin, okMax := check("minKiB", r.MinKiB), check("maxKiB", r.MaxKiB)
	if okMin && okMax && *r.MaxKiB < *r.MinKiB {
		errs = append(errs, field.Invalid(fld.Child("maxKiB"), *r.MaxKiB, "maxKiB must be greater than or equal to minKiB"))
	}
	return errs
}

func (c *CachePolicy) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q := c.MemoryBudget; q != nil && (q.Cmp(minMemoryBudget) < 0 || q.Cmp(maxMemoryBudget) > 0) {
		errs = append(errs, field.Invalid(fld.Child("memoryBudget"), q.String(), "must be between 1Mi and 64Gi"))
	}
	if p := c.Provision; p != nil {
		if !c.Enabled {
			errs = append(errs, field.Invalid(fld.Child("provision"), "set", "provision needs enabled: true"))
		}
		errs = append(errs, p.validate(fld.Child("provision"))...)
	}
	return errs
}

// logicalVolumePattern and fastDevicePattern are the CRD's patterns of
// spec.cache.provision's logicalVolumes items and fastDevice.
var (
	logicalVolumePattern = regexp.MustCompile(`^[A-Za-z0-9+_][A-Za-z0-9+_.-]{0,126}/[A-Za-z0-9+_][A-Za-z0-9+_.-]{0,126}$`)
	fastDevicePattern    = regexp.MustCompile(`^(ram|/dev(/[A-Za-z0-9_+:-][A-Za-z0-9_.+:-]*)+)$`)
)

func (p *CacheProvision) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	lvs := fld.Child("logicalVolumes")
	switch {
	case len(p.LogicalVolumes) == 0:
		errs = append(errs, field.Required(lvs, "must list at least one VG/LV"))
	case len(p.LogicalVolumes) > MaxProvisionVolumes:
		errs = append(errs, field.TooMany(lvs, len(p.LogicalVolumes), MaxProvisionVolumes))
	}
	for i, lv := range p.LogicalVolumes {
		switch {
		case !logicalVolumePattern.MatchString(lv):
			errs = append(errs, field.Invalid(lvs.Index(i), lv,
				"must be VG/LV: LVM names of letters, digits and + _ . -, not starting with - or ., at most 127 bytes each"))
		case slices.Contains(p.LogicalVolumes[:i], lv):
			errs = append(errs, field.Duplicate(lvs.Index(i), lv))
		}
	}
	fd := fld.Child("fastDevice")
	switch {
	case len(p.FastDevice) > 128:
		errs = append(errs, field.TooLong(fd, p.FastDevice, 128))
	case p.FastDevice != "" && !fastDevicePattern.MatchString(p.FastDevice):
		errs = append(errs, field.Invalid(fd, p.FastDevice, `must be "ram" or an absolute path under /dev`))
	case p.FastDevice != "" && p.FastDevice != FastDeviceRAM && len(p.LogicalVolumes) > 1:
		errs = append(errs, field.Invalid(lvs, len(p.LogicalVolumes), "a fastDevice path caches one logical volume"))
	}
	return errs
}

func (e *EvaluationPolicy) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if w := e.Window; w != nil && (w.Duration < minWindow || w.Duration > maxWindow) {
		errs = append(errs, field.Invalid(fld.Child("window"), w.Duration.String(), "must be between 1s and 5m"))
	}
	errs = append(errs, checkRange(fld.Child("marginPercent"), e.MarginPercent, 0, MaxMarginPercent)...)
	tg := fld.Child("thrashGuard")
	errs = append(errs, checkRange(tg.Child("changes"), e.ThrashGuard.Changes, 1, 100)...)
	errs = append(errs, checkRange(tg.Child("quietChecks"), e.ThrashGuard.QuietChecks, 1, 1000)...)
	errs = append(errs, checkRange(fld.Child("cpuBudgetPercent"), e.CPUBudgetPercent, 1, 100)...)
	return errs
}

func (r *RolloutPolicy) validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if mu := r.MaxUnavailable; mu != nil {
		ok := mu.Type == intstr.Int && mu.IntVal >= 1 ||
			mu.Type == intstr.String && maxUnavailablePercent.MatchString(mu.StrVal)
		if !ok {
			errs = append(errs, field.Invalid(fld.Child("maxUnavailable"), mu.String(),
				"must be a count of at least 1 or a percentage from 1% to 100%"))
		}
	}
	if d := r.MinDwell; d != nil && (d.Duration < 0 || d.Duration > maxMinDwell) {
		errs = append(errs, field.Invalid(fld.Child("minDwell"), d.Duration.String(), "must be between 0s and 24h"))
	}
	errs = append(errs, checkRange(fld.Child("toleratedRegressionPercent"), r.ToleratedRegressionPercent, 0, 100)...)
	return errs
}

func checkRange(fld *field.Path, v *int32, lo, hi int32) field.ErrorList {
	if v == nil || (*v >= lo && *v <= hi) {
		return nil
	}
	return field.ErrorList{field.Invalid(fld, *v, between(lo, hi))}
}

func between[T int | int32 | int64](lo, hi T) string {
	return fmt.Sprintf("must be between %d and %d", lo, hi)
}

// ValidPercent reports whether s is a percentage string as the status
// fields carry it ("7.5", "-3", "0.0").
func ValidPercent(s string) bool { return len(s) <= 16 && percentPattern.MatchString(s) }

// formatErrors formats errs on one line, separated by "; ".
func formatErrors(errs field.ErrorList) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}
