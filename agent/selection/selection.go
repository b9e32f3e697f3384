// Package selection decides which StorageTuning governs each of the
// host's block devices, and puts back, exactly as the actuator recorded
// them, the devices (and dm-caches) no policy governs in Apply mode. It
// also derives from the governed devices what the agent shares between
// them: the run's mode, the window and the CPU budget.
//
// Devices are discovered through package agent/sysfs below a host-root
// prefix (HOSTROOT/sys/block); the policies given must be defaulted
// (v1alpha1.StorageTuning.Default). It does not depend on the agent's
// root package, which calls it.
package selection

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// Governed is a device and the policy that governs it.
type Governed struct {
	Device sysfs.Device
	Policy *v1alpha1.StorageTuning
}

// Select discovers the host's block devices below hostRoot
// (sysfs.Discover) and finds the policy that governs each tunable whole
// disk (one with a queue/scheduler): the API's rule, v1alpha1.Governing
// (the operator's too), then the device-kind rules of sysfs.SelectFor for
// that policy (virtual devices such as loop devices only when one of its
// include globs names them), which may leave the device ungoverned. others
// are the remaining tunable disks that are not virtual. It returns the
// error of discovery, wrapped, only when no device was discovered.
func Select(hostRoot string, policies []*v1alpha1.StorageTuning, nodeLabels map[string]string) (sel []Governed, others []sysfs.Device, err error) {
	all, err := sysfs.Discover(hostRoot)
	if err != nil && len(all) == 0 {
		return nil, nil, fmt.Errorf("discover devices: %w", err)
	}
	for _, d := range all {
		if d.Partition || d.SizeBytes == 0 || len(d.Schedulers) == 0 {
			continue // no queue/scheduler (zram, most dm): nothing to tune
		}
		info := v1alpha1.DeviceInfo{Name: d.Name, Rotational: d.Rotational, SizeBytes: int64(min(d.SizeBytes, math.MaxInt64))}
		p := v1alpha1.Governing(policies, nodeLabels, info)
		if p != nil && len(sysfs.SelectFor([]sysfs.Device{d}, &p.Spec.Devices)) == 1 {
			sel = append(sel, Governed{Device: d, Policy: p})
		} else if !d.Virtual() {
			others = append(others, d)
		}
	}
	return sel, others, nil
}

// Mode is Status.Mode: the policy's mode for `shadowtune run` (not
// cluster: policies holds its one policy); Apply when some device of sel
// is governed in Apply mode, else Observe, for the cluster agent.
func Mode(policies []*v1alpha1.StorageTuning, sel []Governed, cluster bool) string {
	if !cluster {
		return string(policies[0].Spec.Mode)
	}
	for _, s := range sel {
		if s.Policy.Spec.Mode == v1alpha1.ModeApply {
			return string(v1alpha1.ModeApply)
		}
	}
	return string(v1alpha1.ModeObserve)
}

// RestoreUngoverned reverts, exactly as recorded, every device the
// actuator has a record of that no policy of sel governs in Apply mode,
// and every recorded dm-cache whose origin none governs in Apply mode with
// spec.cache.enabled, and returns what it restored: device names, and
// "dm-cache/NAME" for a cache. A knob another writer changed since keeps
// the writer's value (logged, not an error). A device or cache that is
// gone (actuate.ErrDeviceGone) keeps its record (logged, not an error).
// The error joins the actuator's other errors. m counts each device's
// revert (metrics.RevertObserve) when not nil.
func RestoreUngoverned(act *actuate.Actuator, sel []Governed, m *metrics.Metrics, log logr.Logger) ([]string, error) {
	applyDevs := map[string]bool{}
	for _, s := range sel {
		if s.Policy.Spec.Mode == v1alpha1.ModeApply {
			applyDevs[s.Device.Name] = true
		}
	}
	var errs []error
	var done []string
	for _, dev := range slices.Sorted(maps.Keys(act.Originals())) {
		if applyDevs[dev] {
			continue
		}
		left, err := act.RevertLeaving(dev)
		if left != "" {
			log.Info("restored a device except what another writer changed since", "device", dev, "left", left)
		}
		if err != nil {
			if errors.Is(err, actuate.ErrDeviceGone) {
				log.Info("a device changed by an earlier run is gone; its record is kept", "device", dev, "error", err.Error())
				continue
			}
			errs = append(errs, err)
			continue
		}
		done = append(done, dev)
		if m != nil {
			m.IncRevert(dev, metrics.RevertObserve)
		}
	}
	cacheDone, cacheErrs := restoreUngovernedCaches(act, sel)
	done, errs = append(done, cacheDone...), append(errs, cacheErrs...)
	if len(done) > 0 {
		log.Info("restored devices no policy governs in Apply mode", "devices", done)
	}
	return done, errors.Join(errs...)
}

// restoreUngovernedCaches reverts the recorded dm-caches whose origin no
// policy governs in Apply mode with spec.cache.enabled, and returns them
// ("dm-cache/NAME"). A cache that is gone keeps its record.
func restoreUngovernedCaches(act *actuate.Actuator, sel []Governed) (done []string, errs []error) {
	governed := map[string]bool{}
	for _, s := range sel {
		if s.Policy.Spec.Mode == v1alpha1.ModeApply && s.Policy.Spec.Cache.Enabled {
			governed[s.Device.Name] = true
		}
	}
	recs := act.CacheOriginals()
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		if governed[recs[name].Origin] {
			continue
		}
		err := act.RevertCache(name)
		var left *actuate.LeftError
		switch {
		case err == nil || errors.As(err, &left):
			done = append(done, "dm-cache/"+name)
		case !errors.Is(err, actuate.ErrDeviceGone):
			errs = append(errs, err)
		}
	}
	return done, errs
}

// MinWindow is the shortest window of the governing policies (the
// default window, 5 s, when none governs a device).
func MinWindow(sel []Governed) time.Duration {
	var w time.Duration
	for _, s := range sel {
		if d := s.Policy.Spec.Evaluation.Window.Duration; w == 0 || d < w {
			w = d
		}
	}
	if w == 0 {
		w = defaultSpec().Evaluation.Window.Duration
	}
	return w
}

// CPUBudgetPct is the largest CPU budget of the governing policies,
// percent of one core over the window (the default, 10, when none
// governs a device): the devices share one budget.
func CPUBudgetPct(sel []Governed) int {
	pct := 0
	for _, s := range sel {
		pct = max(pct, int(*s.Policy.Spec.Evaluation.CPUBudgetPercent))
	}
	if pct == 0 {
		pct = int(*defaultSpec().Evaluation.CPUBudgetPercent)
	}
	return pct
}

// defaultSpec is the API's default policy.
func defaultSpec() v1alpha1.StorageTuningSpec {
	var s v1alpha1.StorageTuningSpec
	s.Default()
	return s
}

// PolicyKey identifies a policy's spec, "NAME/UID/GENERATION": a
// controller built for one key is valid for another with the same key.
func PolicyKey(p *v1alpha1.StorageTuning) string {
	return fmt.Sprintf("%s/%s/%d", p.Name, p.UID, p.Generation)
}
