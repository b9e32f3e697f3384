package actuate

// Caches attached to LVM logical volumes (spec.cache.provision): each
// attach is recorded durably before it is made, so that a revert, or the
// next start after a crash or a power-off, takes the cache away again
// (lvmcache(7)).

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FastZRAM is AttachedCache.Fast for a zram RAM disk created for the cache.
const FastZRAM = "zram"

// ErrCachedByOther is returned when the logical volume has a cache shadowtune did not
// attach, or attached without a record here (another agent, an earlier
// run whose record is gone). Nothing was changed.
var ErrCachedByOther = errors.New("logical volume already cached by another writer")

// VolumeState is a logical volume's cache as CacheVolumes reports it.
type VolumeState struct {
	Cached  bool  // the LV has a cache
	Ours    bool  // the cache carries shadowtune's LVM tag
	Missing bool  // the cache's device is missing (a RAM disk after a power-off)
	Active  bool  // the LV is active
	Block   int64 // the LV's logical block size, bytes; 0 when inactive
}

// CacheVolumes attaches writethrough caches to LVM logical volumes and
// takes them away (lvmcache(7)); the agent passes package dmcache's tool.
// Errors for a VG or LV that does not exist wrap ErrDeviceGone.
type CacheVolumes interface {
	// Volume reports vg/lv's cache.
	Volume(vg, lv string) (VolumeState, error)
	// Attach puts a writethrough cache of at most sizeBytes bytes on fast
	// (FastZRAM or a device path) in front of the active vg/lv, online;
	// on an error, what it did is undone.
	Attach(vg, lv, fast string, sizeBytes int64) error
	// Detach flushes and removes the cache Attach put in front of vg/lv,
	// and its device from the VG.
	Detach(vg, lv string) error
	// Recover drops vg's caches whose device is missing (with no data
	// lost: they are writethrough), removes the missing devices from the
	// VG, activates the LVs and returns them ("VG/LV").
	Recover(vg string) (recovered []string, err error)
	// Tidy removes what an interrupted Attach of vg/lv left: a cache
	// volume not attached, an empty device of shadowtune's in the VG.
	Tidy(vg, lv string) (removed []string, err error)
}

// AttachedCache is the record of a cache the Actuator attached.
type AttachedCache struct {
	VG         string    `json:"vg"`
	LV         string    `json:"lv"`
	Fast       string    `json:"fast"`       // FastZRAM or a device path
	SizeBytes  int64     `json:"size_bytes"` // the cache's size asked for, bytes
	BootID     string    `json:"boot_id,omitempty"`
	RecordedAt time.Time `json:"recorded_at"`
}

// Key is "VG/LV".
func (c AttachedCache) Key() string { return c.VG + "/" + c.LV }

type attachedFile struct {
	Version int           `json:"version"`
	Cache   AttachedCache `json:"attached_cache"`
}

const attachedDir = "dm-cache-attached"

// lvmName is an LVM VG or LV name as the API accepts it (lvm(8), VALID
// NAMES).
var lvmName = regexp.MustCompile(`^[A-Za-z0-9+_][A-Za-z0-9+_.-]{0,126}$`)

// dmName is LVM's device-mapper name of vg/lv: each "-" doubled, joined
// by "-"; one file name per VG/LV.
func dmName(vg, lv string) string {
	return strings.ReplaceAll(vg, "-", "--") + "-" + strings.ReplaceAll(lv, "-", "--")
}

// attachedName is the record of VG/LV, relative to the state directory.
func attachedName(vg, lv string) string { return attachedDir + "/" + dmName(vg, lv) + stateSuffix }

func (a *Actuator) attachedPath(vg, lv string) string {
	return filepath.Join(a.stateDir, attachedName(vg, lv))
}

// loadAttached reads DIR/dm-cache-attached; a record that cannot be read
// is reported in bad under "dm-cache-attached/FILE".
func loadAttached(dir string) (map[string]*AttachedCache, map[string]error) {
	recs := map[string]*AttachedCache{}
	bad := loadRecordDir(dir, attachedDir, func(rel, name string) error {
		rec, err := readAttachedFile(dir, rel, name)
		if err == nil {
			recs[rec.Key()] = rec
		}
		return err
	})
	return recs, bad
}

func readAttachedFile(dir, rel, name string) (*AttachedCache, error) {
	path := filepath.Join(dir, rel)
	var f attachedFile
	if err := decodeRecord(dir, rel, "attached cache record", &f); err != nil {
		return nil, err
	}
	c := f.Cache
	switch {
	case f.Version != StateVersion:
		return nil, fmt.Errorf("actuate: attached cache record %s: %w: version %d, this agent reads version %d", path, ErrCorruptState, f.Version, StateVersion)
	case !lvmName.MatchString(c.VG) || !lvmName.MatchString(c.LV) || dmName(c.VG, c.LV) != name:
		return nil, fmt.Errorf("actuate: attached cache record %s: %w: records %q/%q", path, ErrCorruptState, c.VG, c.LV)
	case c.Fast != FastZRAM && !strings.HasPrefix(c.Fast, "/dev/"):
		return nil, fmt.Errorf("actuate: attached cache record %s: %w: fast device %q", path, ErrCorruptState, c.Fast)
	}
	return &c, nil
}

func (a *Actuator) writeAttached(c *AttachedCache) error {
	return writeRecord(a.stateDir, attachedName(c.VG, c.LV), "attached cache record "+c.Key(),
		attachedFile{Version: StateVersion, Cache: *c}, false)
}

func (a *Actuator) removeAttached(c *AttachedCache) error {
	if err := removeStateFile(a.stateDir, attachedName(c.VG, c.LV)); err != nil {
		return &RecordError{Device: attachedDir + "/" + c.Key(), Op: "remove", Path: a.attachedPath(c.VG, c.LV), Err: err, Restored: true}
	}
	delete(a.attached, c.Key())
	return nil
}

// AttachedCaches returns a copy of the records of attached caches, by
// "VG/LV".
func (a *Actuator) AttachedCaches() map[string]AttachedCache {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]AttachedCache, len(a.attached))
	for k, c := range a.attached {
		out[k] = *c
	}
	return out
}

// Recovered returns what Open recovered: the logical volumes whose cache
// was recorded in an earlier boot and found on a missing device, now
// uncached and active, with the records removed; and the errors of the
// recoveries that failed (their records are kept for the revert).
func (a *Actuator) Recovered() (recovered []string, errs []error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.recovered), slices.Clone(a.recoverErrs)
}

// AttachCache attaches a writethrough cache of at most sizeBytes bytes on
// fast (FastZRAM, or a /dev path) to the LVM logical volume vg/lv,
// online, after recording it durably: a crash during the attach is undone
// by the revert. A volume with a recorded cache of ours is left as it is;
// one cached otherwise is refused (ErrCachedByOther). Errors:
// ErrNotAllowed (no tool), ErrInvalidSetting, ErrCachedByOther,
// ErrDeviceGone, and the tool's or the state directory's, wrapped. On
// the tool's error the record is removed (the tool undid the attach).
func (a *Actuator) AttachCache(vg, lv, fast string, sizeBytes int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	who := vg + "/" + lv
	switch {
	case a.lock == nil:
		return errClosed
	case a.volumes == nil:
		return fmt.Errorf("actuate: cache of %s: no LVM tool configured: %w", who, ErrNotAllowed)
	case !lvmName.MatchString(vg) || !lvmName.MatchString(lv):
		return fmt.Errorf("actuate: cache of %q/%q: %w (VG/LV names)", vg, lv, ErrInvalidSetting)
	case fast != FastZRAM && !strings.HasPrefix(fast, "/dev/") || sizeBytes <= 0:
		return fmt.Errorf("actuate: cache of %s: fast device %q of %d bytes: %w", who, fast, sizeBytes, ErrInvalidSetting)
	}
	st, err := a.volumes.Volume(vg, lv)
	if err != nil {
		return fmt.Errorf("actuate: cache of %s: %w", who, err)
	}
	_, recorded := a.attached[who]
	switch {
	case st.Cached && st.Ours && recorded:
		return nil
	case st.Cached:
		return fmt.Errorf("actuate: cache of %s: %w (shadowtune's tag: %v, recorded here: %v)", who, ErrCachedByOther, st.Ours, recorded)
	}
	rec := &AttachedCache{VG: vg, LV: lv, Fast: fast, SizeBytes: sizeBytes, BootID: a.bootID, RecordedAt: time.Now().UTC()}
	if err := a.writeAttached(rec); err != nil {
		return fmt.Errorf("actuate: cache of %s: record it first: %w", who, err)
	}
	a.attached[who] = rec
	if err := a.volumes.Attach(vg, lv, fast, sizeBytes); err != nil {
		if rerr := a.removeAttached(rec); rerr != nil {
			return fmt.Errorf("actuate: cache of %s: %w; and its record is kept: %s", who, err, rerr.Error())
		}
		return fmt.Errorf("actuate: cache of %s: %w", who, err)
	}
	return nil
}

// DetachCache takes away the cache AttachCache attached to vg/lv and
// removes its record (see revertAttached). A volume without a record is
// left alone.
func (a *Actuator) DetachCache(vg, lv string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	rec, ok := a.attached[vg+"/"+lv]
	if !ok {
		return nil
	}
	return a.revertAttached(rec)
}

// revertAttached takes a recorded cache away: Detach when it is there and
// ours; Recover of the VG when its device is missing; Tidy when the
// volume has no cache (an attach that did not finish); a cache that is
// not ours is left (*LeftError). Then the record is removed. A VG or LV
// that is gone keeps its record (ErrDeviceGone).
func (a *Actuator) revertAttached(rec *AttachedCache) error {
	who := rec.Key()
	if a.volumes == nil {
		return fmt.Errorf("actuate: cache of %s: no LVM tool configured to detach it: %w", who, ErrNotAllowed)
	}
	st, err := a.volumes.Volume(rec.VG, rec.LV)
	if err != nil {
		return fmt.Errorf("actuate: cache of %s: %w", who, err)
	}
	var left error
	switch {
	case st.Cached && st.Missing && st.Ours:
		if _, err := a.volumes.Recover(rec.VG); err != nil {
			return fmt.Errorf("actuate: cache of %s on a missing device: %w", who, err)
		}
	case st.Cached && st.Ours:
		if err := a.volumes.Detach(rec.VG, rec.LV); err != nil {
			return fmt.Errorf("actuate: detach the cache of %s: %w", who, err)
		}
	case st.Cached:
		left = &LeftError{Device: attachedDir + "/" + who, Left: []string{"cache left: not shadowtune's (replaced by another writer)"}}
	default:
		if _, err := a.volumes.Tidy(rec.VG, rec.LV); err != nil {
			return fmt.Errorf("actuate: cache of %s: remove what an interrupted attach left: %w", who, err)
		}
	}
	if err := a.removeAttached(rec); err != nil {
		return err
	}
	return left
}

// revertAttachedAll takes every recorded cache away, into re; it returns
// the volumes done ("dm-cache-attached/VG/LV").
func (a *Actuator) revertAttachedAll(re *RevertError) []string {
	var done []string
	for _, key := range slices.Sorted(maps.Keys(a.attached)) {
		name := attachedDir + "/" + key
		if re.sortCache(name, a.revertAttached(a.attached[key])) {
			done = append(done, name)
		}
	}
	return done
}

// recoverAfterReboot runs at Open: a cache recorded in another boot whose
// device is missing (a RAM disk lost in a power-off) is dropped from its
// VG at once (CacheVolumes.Recover), which leaves the volume usable, and
// its record is removed. Other records wait for the revert.
func (a *Actuator) recoverAfterReboot() {
	if a.volumes == nil || a.bootID == "" {
		return
	}
	done := map[string]bool{} // VGs recovered
	for _, key := range slices.Sorted(maps.Keys(a.attached)) {
		rec := a.attached[key]
		if rec.BootID == "" || rec.BootID == a.bootID {
			continue
		}
		st, err := a.volumes.Volume(rec.VG, rec.LV)
		if err != nil || !st.Cached || !st.Missing || !st.Ours {
			continue // gone, or left for the revert
		}
		if !done[rec.VG] {
			lvs, err := a.volumes.Recover(rec.VG)
			if err != nil {
				a.recoverErrs = append(a.recoverErrs, fmt.Errorf("actuate: cache of %s on a missing device after a reboot: %w", key, err))
				continue
			}
			done[rec.VG] = true
			a.recovered = append(a.recovered, lvs...)
		}
		if err := a.removeAttached(rec); err != nil {
			a.recoverErrs = append(a.recoverErrs, err)
		}
	}
}

// forgetAttached drops the record of the cache of key ("VG/LV"): when the
// volume is gone (or force), or the record is bad ("dm-cache-attached/
// FILE" in BadRecords). Called with a.mu held.
func (a *Actuator) forgetAttached(key string, force bool) error {
	name := attachedDir + "/" + key
	if _, isBad := a.bad[name]; isBad {
		if err := removeStateFile(a.stateDir, attachedDir+"/"+key+stateSuffix); err != nil {
			return fmt.Errorf("actuate: remove attached cache record: %w", err)
		}
		delete(a.bad, name)
		return nil
	}
	rec, ok := a.attached[key]
	if !ok {
		return nil
	}
	if !force {
		if a.volumes == nil {
			return fmt.Errorf("actuate: forget %s: no LVM tool to check that it is gone; force to drop the record", name)
		}
		if _, err := a.volumes.Volume(rec.VG, rec.LV); !errors.Is(err, ErrDeviceGone) {
			return fmt.Errorf("actuate: forget %s: %w (recorded in %s): revert it to detach its cache, or force",
				name, ErrNotGone, a.attachedPath(rec.VG, rec.LV))
		}
	}
	return a.removeAttached(rec)
}
