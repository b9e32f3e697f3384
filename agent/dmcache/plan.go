package dmcache

// Opt-in provisioning (spec.cache.provision): writethrough caches the
// agent attaches online to LVM logical volumes and takes away at exit, on
// revert and when no policy asks for them (lvmcache(7)). The actuator
// records each attach before it is made. This file decides, without
// side effects: what the policies ask for (Wanted) and what to do about
// each volume (Plan); Provision carries the plan out.

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// zramBlock is zram's logical block size, bytes: a zram cache fits a
// volume whose logical blocks are at least that large.
const zramBlock = 4096

// Want is what the policies ask for one volume (Wanted's values, by
// "VG/LV").
type Want struct {
	Fast      string // v1alpha1.FastDeviceRAM or a /dev path
	SizeBytes int64  // spec.cache.memoryBudget, bytes
	Paused    bool   // the policy is paused: no new attach, no detach
	Policy    string
}

// LVFacts is what the LVM tool and the actuator say of one volume (Plan's
// facts, by "VG/LV").
type LVFacts struct {
	State    actuate.VolumeState
	Gone     bool   // no such VG or LV
	Err      string // the tool could not read it
	Recorded string // the fast device of the actuator's record; "" without one
}

// Step is one decision of Plan.
type Step struct {
	Key    string // "VG/LV"
	Action string // "attach", "detach", "keep" or "skip"
	Fast   string // attach: actuate.FastZRAM or a device path
	BRD    bool   // attach: Fast is the brd RAM disk, to be loaded if absent
	Size   int64  // attach: bytes
	Note   string // why, for the status notes and the log
}

// Wanted collects spec.cache.provision from the policies that
// apply it: Apply mode, cache.enabled, not being deleted, selecting this
// node. A volume listed by several policies is taken from the one of
// highest precedence.
func Wanted(pols []*v1alpha1.StorageTuning, labels map[string]string) map[string]Want {
	want := map[string]Want{}
	sorted := slices.Clone(pols)
	slices.SortStableFunc(sorted, v1alpha1.ComparePrecedence)
	for _, p := range sorted {
		c := p.Spec.Cache
		if p.Spec.Mode != v1alpha1.ModeApply || !c.Enabled || c.Provision == nil || !p.Active() {
			continue
		}
		if ok, err := p.Spec.MatchesNode(labels); err != nil || !ok {
			continue
		}
		fast := c.Provision.FastDevice
		if fast == "" {
			fast = v1alpha1.FastDeviceRAM
		}
		var size int64
		if c.MemoryBudget != nil {
			size = c.MemoryBudget.Value()
		}
		for _, lv := range c.Provision.LogicalVolumes {
			if _, taken := want[lv]; !taken {
				want[lv] = Want{Fast: fast, SizeBytes: size, Paused: p.Spec.Paused, Policy: p.Name}
			}
		}
	}
	return want
}

// Plan decides, for every volume wanted or recorded, in the
// order of their names: detach a recorded cache no policy asks for; keep
// one still asked for; attach to a wanted volume that is there, active
// and uncached; skip the others, saying why. Never attach to a volume
// cached otherwise. A "ram" cache is zram on a volume with 4096-byte
// logical blocks, else the one brd RAM disk, which serves one volume.
func Plan(want map[string]Want, facts map[string]LVFacts) []Step {
	keys := slices.Sorted(maps.Keys(want))
	for k, f := range facts {
		if _, ok := want[k]; !ok && f.Recorded != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	brdUser := ""
	for _, k := range keys {
		if f := facts[k]; f.Recorded == brdDevice {
			brdUser = k
		}
	}
	var steps []Step
	for _, k := range keys {
		w, wanted := want[k]
		f := facts[k]
		s := Step{Key: k, Action: "skip"}
		switch {
		case !wanted:
			s.Action, s.Note = "detach", "no policy in Apply mode asks for its cache"
		case w.Paused && f.Recorded != "":
			s.Action, s.Note = "keep", "policy paused"
		case w.Paused:
			s.Note = "policy paused: no cache attached"
		case f.Err != "":
			s.Note = "cannot read the volume: " + f.Err
		case f.Gone:
			s.Note = "no such logical volume"
		case f.State.Cached && f.Recorded != "" && f.State.Ours && !f.State.Missing:
			s.Action, s.Note = "keep", "cached on "+f.Recorded
		case f.State.Cached && f.Recorded != "":
			s.Action, s.Note = "detach", "its recorded cache is missing or was replaced"
		case f.State.Cached:
			s.Note = "already cached by another writer: left alone"
		case !f.State.Active:
			s.Note = "inactive: a cache is attached to an active volume only"
		case w.SizeBytes <= 0:
			s.Note = "no memoryBudget"
		default:
			s = attachStep(k, w, f, &brdUser)
		}
		steps = append(steps, s)
	}
	return steps
}

// attachStep is the attach of a wanted, active, uncached volume, or its
// skip when its RAM disk is taken.
func attachStep(k string, w Want, f LVFacts, brdUser *string) Step {
	s := Step{Key: k, Action: "attach", Size: w.SizeBytes, Fast: w.Fast}
	if w.Fast != v1alpha1.FastDeviceRAM {
		s.Note = "on " + w.Fast
		return s
	}
	if f.State.Block >= zramBlock {
		s.Fast, s.Note = actuate.FastZRAM, fmt.Sprintf("on a zram RAM disk (logical blocks of %d bytes)", f.State.Block)
		return s
	}
	if *brdUser != "" {
		return Step{Key: k, Action: "skip", Note: fmt.Sprintf("the brd RAM disk %s, the only one for volumes with %d-byte logical blocks, caches %s", brdDevice, f.State.Block, *brdUser)}
	}
	*brdUser = k
	s.Fast, s.BRD, s.Note = brdDevice, true, fmt.Sprintf("on the brd RAM disk %s (logical blocks of %d bytes)", brdDevice, f.State.Block)
	return s
}
