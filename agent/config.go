package agent

// A device's Policy from the StorageTuning that governs it.

import (
	"slices"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// policyFor translates a defaulted spec (StorageTuningSpec.Default, the
// API's one layer of defaults) into the controller's Policy for device sd:
// the candidates the device offers (candidates), the policy's default
// scheduler (or the device's current one when it does not offer it)
// always among them, the switching rule, the read-ahead bounds and, with
// spec.cache.enabled, REDCAP in memoryBudget with every candidate also
// simulated with the cache.
//
// The decision acts on a predicted gain only where the simulation of the
// setting in effect reproduces the window's measured mean response time
// within window.MaxResponseRatio (decide.Config.MaxResponseRatio).
func policyFor(spec *v1alpha1.StorageTuningSpec, sd sysfs.Device) window.Policy {
	cands := candidates(spec, sd)
	def := engine.Candidate{Scheduler: string(spec.Schedulers.Default)}
	if !slices.Contains(sd.Schedulers, def.Scheduler) {
		def = engine.Candidate{Scheduler: sd.Scheduler}
	}
	if !containsCandidate(cands, def) {
		cands = append(cands, def)
	}
	ev := &spec.Evaluation
	dcfg := decide.DefaultConfig(def.Name())
	dcfg.MarginPct = float64(*ev.MarginPercent)
	dcfg.GuardChanges = int(*ev.ThrashGuard.Changes)
	dcfg.QuietChecks = int(*ev.ThrashGuard.QuietChecks)
	dcfg.MaxResponseRatio = window.MaxResponseRatio
	rot := sd.Rotational
	eopt := engine.Options{
		// What the application waits for, not device service time alone
		// (issue 14 item 2).
		Rank:       engine.RankWait,
		MaxSectors: uint32(sd.MaxSectorsKB * 2),
		Tags:       sd.Tags,
		ReadAhead:  engine.ReadAheadBounds(int(*spec.ReadAhead.MinKiB), int(*spec.ReadAhead.MaxKiB)),
		Rotational: &rot,
	}
	if spec.Cache.Enabled {
		eopt.Cache = engine.CacheForBudget(spec.Cache.MemoryBudget.Value())
		for _, c := range slices.Clone(cands) {
			c.Cache = true
			cands = append(cands, c)
		}
	}
	return window.Policy{
		Apply:                   spec.Mode == v1alpha1.ModeApply,
		Candidates:              cands,
		Decide:                  dcfg,
		Engine:                  eopt,
		ReadAhead:               *spec.ReadAhead.Enabled,
		ToleratedRegressionPct:  float64(*spec.Rollout.ToleratedRegressionPercent),
		RestorePreviousDefaults: spec.Mode == v1alpha1.ModeApply && *spec.Sentinel.RestorePreviousDefaults,
	}
}

// candidates lists the settings allowed by the policy that the device
// offers: each allowed scheduler it lists in queue/scheduler, with each
// combination of the policy's tunable values.
func candidates(spec *v1alpha1.StorageTuningSpec, sd sysfs.Device) []engine.Candidate {
	var out []engine.Candidate
	for _, name := range spec.Schedulers.Candidates {
		if !slices.Contains(sd.Schedulers, string(name)) {
			continue
		}
		for _, tun := range spec.TunableCandidates(name) {
			c := engine.Candidate{Scheduler: string(name)}
			if len(tun) > 0 {
				c.Tunables = engine.Tunables(tun)
			}
			if engine.CheckCandidate(c) != nil {
				continue // a value the model rejects (validated by the API already)
			}
			if !containsCandidate(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

func containsCandidate(cs []engine.Candidate, c engine.Candidate) bool {
	return slices.ContainsFunc(cs, func(x engine.Candidate) bool { return x.Name() == c.Name() })
}
