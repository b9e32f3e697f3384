package agent

// Opt-in provisioning (spec.cache.provision): writethrough caches the
// agent attaches online to LVM logical volumes and takes away at exit, on
// revert and when no policy asks for them (lvmcache(7)). The actuator
// records each attach before it is made.

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// brdDevice is the brd RAM disk a "ram" cache uses on a volume whose
// logical blocks are smaller than zram's 4096 bytes.
const brdDevice = "/dev/ram0"

// zramBlock is zram's logical block size, bytes: a zram cache fits a
// volume whose logical blocks are at least that large.
const zramBlock = 4096

// provisionWant is what the policies ask for one volume.
type provisionWant struct {
	Fast      string // v1alpha1.FastDeviceRAM or a /dev path
	SizeBytes int64  // spec.cache.memoryBudget, bytes
	Paused    bool   // the policy is paused: no new attach, no detach
	Policy    string
}

// lvFacts is what the LVM tool and the actuator say of one volume.
type lvFacts struct {
	State    actuate.VolumeState
	Gone     bool   // no such VG or LV
	Err      string // the tool could not read it
	Recorded string // the fast device of the actuator's record; "" without one
}

// provStep is one decision of planProvision.
type provStep struct {
	Key    string // "VG/LV"
	Action string // "attach", "detach", "keep" or "skip"
	Fast   string // attach: actuate.FastZRAM or a device path
	BRD    bool   // attach: Fast is the brd RAM disk, to be loaded if absent
	Size   int64  // attach: bytes
	Note   string // why, for the status notes and the log
}

// wantedCaches collects spec.cache.provision from the policies that
// apply it: Apply mode, cache.enabled, not being deleted, selecting this
// node. A volume listed by several policies is taken from the one of
// highest precedence.
func wantedCaches(pols []*v1alpha1.StorageTuning, labels map[string]string) map[string]provisionWant {
	want := map[string]provisionWant{}
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
				want[lv] = provisionWant{Fast: fast, SizeBytes: size, Paused: p.Spec.Paused, Policy: p.Name}
			}
		}
	}
	return want
}

// planProvision decides, for every volume wanted or recorded, in the
// order of their names: detach a recorded cache no policy asks for; keep
// one still asked for; attach to a wanted volume that is there, active
// and uncached; skip the others, saying why. Never attach to a volume
// cached otherwise. A "ram" cache is zram on a volume with 4096-byte
// logical blocks, else the one brd RAM disk, which serves one volume.
func planProvision(want map[string]provisionWant, facts map[string]lvFacts) []provStep {
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
	var steps []provStep
	for _, k := range keys {
		w, wanted := want[k]
		f := facts[k]
		s := provStep{Key: k, Action: "skip"}
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
func attachStep(k string, w provisionWant, f lvFacts, brdUser *string) provStep {
	s := provStep{Key: k, Action: "attach", Size: w.SizeBytes, Fast: w.Fast}
	if w.Fast != v1alpha1.FastDeviceRAM {
		s.Note = "on " + w.Fast
		return s
	}
	if f.State.Block >= zramBlock {
		s.Fast, s.Note = actuate.FastZRAM, fmt.Sprintf("on a zram RAM disk (logical blocks of %d bytes)", f.State.Block)
		return s
	}
	if *brdUser != "" {
		return provStep{Key: k, Action: "skip", Note: fmt.Sprintf("the brd RAM disk %s, the only one for volumes with %d-byte logical blocks, caches %s", brdDevice, f.State.Block, *brdUser)}
	}
	*brdUser = k
	s.Fast, s.BRD, s.Note = brdDevice, true, fmt.Sprintf("on the brd RAM disk %s (logical blocks of %d bytes)", brdDevice, f.State.Block)
	return s
}

// provision attaches and detaches the caches the policies ask for
// (planProvision), notes each step in the status and logs it. Called by
// configure, at start and whenever the policies change.
func (a *Agent) provision(pols []*v1alpha1.StorageTuning, labels map[string]string) {
	want := wantedCaches(pols, labels)
	recs := a.act.AttachedCaches()
	if len(want) == 0 && len(recs) == 0 {
		return
	}
	if a.volumes == nil {
		a.provisionNote("spec.cache.provision is not acted on: no LVM tools (lvm, dmsetup) on this host", nil)
		return
	}
	facts := map[string]lvFacts{}
	for k := range want {
		facts[k] = a.lvFacts(k, recs)
	}
	for k := range recs {
		facts[k] = a.lvFacts(k, recs)
	}
	for _, s := range planProvision(want, facts) {
		vg, lv, _ := strings.Cut(s.Key, "/")
		var err error
		switch s.Action {
		case "attach":
			if s.BRD {
				err = ensureBRD(a.opt.HostRoot, s.Size)
			}
			if err == nil {
				err = a.act.AttachCache(vg, lv, s.Fast, s.Size)
			}
		case "detach":
			err = a.act.DetachCache(vg, lv)
		case "keep":
			continue
		}
		msg := fmt.Sprintf("cache of %s: %s: %s", s.Key, s.Action, s.Note)
		if s.Action == "attach" {
			msg = fmt.Sprintf("cache of %s: attach %d bytes writethrough %s", s.Key, s.Size, s.Note)
		}
		a.provisionNote(msg, err)
	}
}

// lvFacts reads key's volume with the tool, and its record.
func (a *Agent) lvFacts(key string, recs map[string]actuate.AttachedCache) lvFacts {
	var f lvFacts
	if r, ok := recs[key]; ok {
		f.Recorded = r.Fast
	}
	vg, lv, _ := strings.Cut(key, "/")
	st, err := a.volumes.Volume(vg, lv)
	switch {
	case errors.Is(err, actuate.ErrDeviceGone):
		f.Gone = true
	case err != nil:
		f.Err = err.Error()
	}
	f.State = st
	return f
}

// provisionNote puts what was done (or its error) in the status notes
// and the log.
func (a *Agent) provisionNote(msg string, err error) {
	if err != nil {
		a.opt.Log.Error(err, msg)
		a.st.Notes = append(a.st.Notes, msg+": failed: "+err.Error())
		return
	}
	a.opt.Log.Info(msg)
	a.st.Notes = append(a.st.Notes, msg)
}

// recoveryNotes are the status notes of what the actuator recovered at
// start: caches of an earlier boot whose device (a RAM disk) was gone,
// dropped from their volume groups with no data lost.
func recoveryNotes(act *actuate.Actuator, log logr.Logger) []string {
	lvs, errs := act.Recovered()
	var notes []string
	if len(lvs) > 0 {
		log.Info("recovered volumes whose cache device was lost with the previous boot", "volumes", lvs)
		notes = append(notes, "recovered after a reboot (the cache's RAM disk was gone; writethrough, no data lost): "+strings.Join(lvs, ", "))
	}
	for _, err := range errs {
		notes = append(notes, "not recovered after a reboot: "+err.Error())
	}
	return notes
}

// ensureBRD makes the brd RAM disk /dev/ram0 of sizeBytes ready: loads
// brd with one disk of that size (rounded up to KiB) when it is absent,
// and refuses one of another size (brd's size is set when the module is
// loaded) or one in use (a holder, or mounted).
func ensureBRD(hostRoot string, sizeBytes int64) error {
	kib := (sizeBytes + 1023) / 1024
	sys := filepath.Join(hostRootOr(hostRoot), "sys", "block", "ram0")
	if _, err := os.Stat(sys); errors.Is(err, os.ErrNotExist) {
		out, err := exec.Command("modprobe", "brd", "rd_nr=1", "rd_size="+strconv.FormatInt(kib, 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("modprobe brd rd_nr=1 rd_size=%d: %w: %s", kib, err, strings.TrimSpace(string(out)))
		}
	}
	b, err := os.ReadFile(filepath.Join(sys, "size"))
	if err != nil {
		return fmt.Errorf("brd RAM disk: %w", err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return fmt.Errorf("brd RAM disk: size %q: %w", strings.TrimSpace(string(b)), err)
	}
	if sectors*512 != kib*1024 {
		return fmt.Errorf("%s exists with %d bytes, memoryBudget asks for %d: not used (brd's size is set when the module is loaded)", brdDevice, sectors*512, kib*1024)
	}
	if h, _ := os.ReadDir(filepath.Join(sys, "holders")); len(h) > 0 {
		return fmt.Errorf("%s is in use (held by %s): not used", brdDevice, h[0].Name())
	}
	if m, err := os.ReadFile(filepath.Join(hostRootOr(hostRoot), "proc", "mounts")); err == nil && slices.Contains(strings.Fields(string(m)), brdDevice) {
		return fmt.Errorf("%s is mounted: not used", brdDevice)
	}
	return nil
}

func hostRootOr(r string) string {
	if r == "" {
		return "/"
	}
	return r
}
