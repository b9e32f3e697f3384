package actuate

// The I/O mode of dm-cache devices: the one knob of a device-mapper cache
// the agent changes, writethrough (the cache on) or passthrough (off),
// recorded first and put back like the sysfs attributes.

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"
)

// Cache modes the Actuator may set (Documentation/admin-guide/
// device-mapper/cache.rst, "Updating on-disk metadata" and "Passthrough").
// Writeback is never set: a crash with dirty blocks in a RAM cache loses
// data.
const (
	CacheWritethrough = "writethrough"
	CachePassthrough  = "passthrough"
	CacheWriteback    = "writeback"
)

// ErrCacheUnsafe is returned when the cache's mode cannot be changed safely: it is in
// writeback mode, or it holds dirty blocks and passthrough was asked for.
// Nothing was changed.
var ErrCacheUnsafe = errors.New("cache mode change refused")

// CacheModes switches dm-cache devices, named by their device-mapper
// name; the agent passes package dmcache's tool. Errors for a device that
// does not exist wrap ErrDeviceGone.
type CacheModes interface {
	// Mode returns the cache's mode (CacheWritethrough, CachePassthrough
	// or CacheWriteback) and its dirty blocks. It resumes a cache left
	// suspended by a switch that was killed half-way (Open calls it for
	// every recorded cache).
	Mode(name string) (mode string, dirty uint64, err error)
	// SetMode switches the cache online to mode (writethrough or
	// passthrough); on an error the previous table stays in effect.
	SetMode(name, mode string) error
}

// CacheOriginal is the record of a cache whose mode the Actuator changed.
type CacheOriginal struct {
	Name       string    `json:"name"`   // device-mapper name
	Origin     string    `json:"origin"` // the origin's kernel name, for messages
	Mode       string    `json:"mode"`   // the mode before the first change
	Applied    string    `json:"applied,omitempty"`
	RecordedAt time.Time `json:"recorded_at"`
}

type cacheFile struct {
	Version int           `json:"version"`
	Cache   CacheOriginal `json:"cache"`
}

const cacheDir = "dm-cache"

// cacheName is dm-cache name's record, relative to the state directory.
func cacheName(name string) string { return cacheDir + "/" + name + stateSuffix }

func (a *Actuator) cachePath(name string) string { return filepath.Join(a.stateDir, cacheName(name)) }

// loadCaches reads the cache records of DIR/dm-cache; a record that
// cannot be read is reported in bad under "dm-cache/NAME".
func loadCaches(dir string) (map[string]*CacheOriginal, map[string]error) {
	recs := map[string]*CacheOriginal{}
	bad := loadRecordDir(dir, cacheDir, func(rel, name string) error {
		rec, err := readCacheFile(dir, rel, name)
		if err == nil {
			recs[name] = rec
		}
		return err
	})
	return recs, bad
}

func readCacheFile(dir, rel, name string) (*CacheOriginal, error) {
	path := filepath.Join(dir, rel)
	var f cacheFile
	if err := decodeRecord(dir, rel, "cache record", &f); err != nil {
		return nil, err
	}
	c := f.Cache
	switch {
	case f.Version != StateVersion:
		return nil, fmt.Errorf("actuate: cache record %s: %w: version %d, this agent reads version %d", path, ErrCorruptState, f.Version, StateVersion)
	case c.Name != name:
		return nil, fmt.Errorf("actuate: cache record %s: %w: records cache %q", path, ErrCorruptState, c.Name)
	case c.Mode != CacheWritethrough && c.Mode != CachePassthrough:
		return nil, fmt.Errorf("actuate: cache record %s: %w: original mode %q is not writethrough or passthrough", path, ErrCorruptState, c.Mode)
	}
	return &c, nil
}

func (a *Actuator) writeCache(c *CacheOriginal, create bool) error {
	return writeRecord(a.stateDir, cacheName(c.Name), "cache record "+c.Name, cacheFile{Version: StateVersion, Cache: *c}, create)
}

// healCaches reads every recorded cache's mode once, which resumes one
// that a killed switch left suspended (CacheModes.Mode); errors are for
// the revert to report.
func (a *Actuator) healCaches() {
	if a.cacheModes == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(a.caches)) {
		_, _, _ = a.cacheModes.Mode(name)
	}
}

// CacheOriginals returns a copy of the cache records, by name.
func (a *Actuator) CacheOriginals() map[string]CacheOriginal {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]CacheOriginal, len(a.caches))
	for n, c := range a.caches {
		out[n] = *c
	}
	return out
}

// SetCacheMode switches dm-cache name (whose origin is the kernel device
// origin, for the record) to mode, CacheWritethrough or CachePassthrough.
// Before the first change it records the cache's mode durably; a state
// directory that cannot take the record means no change. It refuses
// (ErrCacheUnsafe) a cache in writeback mode and passthrough while the
// cache holds dirty blocks. A cache already in mode is left alone.
// Errors: ErrInvalidSetting (a mode or name not allowed), ErrCacheUnsafe,
// ErrDeviceGone, and the tool's or the state directory's errors, wrapped.
func (a *Actuator) SetCacheMode(name, origin, mode string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.lock == nil:
		return errClosed
	case a.cacheModes == nil:
		return fmt.Errorf("actuate: cache %s: no dm-cache tool configured: %w", name, ErrNotAllowed)
	case mode != CacheWritethrough && mode != CachePassthrough:
		return fmt.Errorf("actuate: cache %s: mode %q: %w (writethrough or passthrough only)", name, mode, ErrInvalidSetting)
	case !validAttrName(name):
		return fmt.Errorf("actuate: cache name %q: %w", name, ErrInvalidSetting)
	}
	// The origin's claim makes the cache one agent's, like its queue.
	if err := a.claim(origin); err != nil {
		return err
	}
	cur, dirty, err := a.cacheModes.Mode(name)
	if err != nil {
		return fmt.Errorf("actuate: cache %s: %w", name, err)
	}
	if cur == mode {
		return nil
	}
	if cur == CacheWriteback {
		return fmt.Errorf("actuate: cache %s is in writeback mode, which the agent never governs: %w", name, ErrCacheUnsafe)
	}
	if mode == CachePassthrough && dirty > 0 {
		return fmt.Errorf("actuate: cache %s holds %d dirty blocks; passthrough needs a clean cache: %w", name, dirty, ErrCacheUnsafe)
	}
	rec, ok := a.caches[name]
	if !ok {
		rec = &CacheOriginal{Name: name, Origin: origin, Mode: cur, RecordedAt: time.Now().UTC()}
		if err := a.writeCache(rec, true); err != nil {
			return fmt.Errorf("actuate: cache %s: record the original mode first: %w", name, err)
		}
		a.caches[name] = rec
	}
	rec.Applied = mode
	if err := a.cacheModes.SetMode(name, mode); err != nil {
		return fmt.Errorf("actuate: cache %s: %w", name, err)
	}
	// The record's Applied field tells a later revert which mode was
	// ours; a failure to write it leaves the original intact.
	if err := a.writeCache(rec, false); err != nil {
		return &RecordError{Device: name, Op: "update", Path: a.cachePath(name), Err: err}
	}
	return nil
}

// RevertCache puts dm-cache name back in its recorded mode and removes
// its record (see RevertAll for the errors: ErrDeviceGone, *LeftError,
// *RecordError). A cache without a record is left alone.
func (a *Actuator) RevertCache(name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	rec, ok := a.caches[name]
	if !ok {
		return nil
	}
	return a.revertCache(rec)
}

// revertCaches puts every recorded cache back in its original mode and
// removes its record, into re; it returns the caches restored.
func (a *Actuator) revertCaches(re *RevertError) []string {
	var done []string
	for _, name := range slices.Sorted(maps.Keys(a.caches)) {
		if re.sortCache(cacheDir+"/"+name, a.revertCache(a.caches[name])) {
			done = append(done, cacheDir+"/"+name)
		}
	}
	return done
}

// sortCache files a cache's revert error (nil: restored) under name into
// e, as RevertError's lists define them, and reports whether the cache is
// restored: a *LeftError is left, a restore whose record stays
// (*RecordError, Restored) is done with its record kept, ErrDeviceGone is
// gone, anything else failed.
func (e *RevertError) sortCache(name string, err error) bool {
	var lerr *LeftError
	var rerr *RecordError
	switch {
	case err == nil:
		return true
	case errors.As(err, &lerr):
		e.Left = append(e.Left, DeviceError{name, err})
	case errors.As(err, &rerr) && rerr.Restored:
		e.RecordKept = append(e.RecordKept, DeviceError{name, err})
		return true
	case errors.Is(err, ErrDeviceGone):
		e.Gone = append(e.Gone, DeviceError{name, err})
	default:
		e.Failed = append(e.Failed, DeviceError{name, err})
	}
	return false
}

// revertCache restores one cache's original mode, unless another writer
// set a mode that is neither ours nor the original (then it is left and
// the record dropped, *LeftError), and removes the record.
func (a *Actuator) revertCache(rec *CacheOriginal) error {
	var left error
	if a.cacheModes == nil {
		return fmt.Errorf("actuate: cache %s: no dm-cache tool configured to restore mode %s: %w", rec.Name, rec.Mode, ErrNotAllowed)
	}
	cur, _, err := a.cacheModes.Mode(rec.Name)
	switch {
	case err != nil:
		return fmt.Errorf("actuate: cache %s: %w", rec.Name, err)
	case cur == rec.Mode:
	case rec.Applied != "" && cur != rec.Applied:
		left = &LeftError{Device: cacheDir + "/" + rec.Name, Left: []string{fmt.Sprintf(
			"mode left at %s: changed by another writer since shadowtune set %s (original %s)", cur, rec.Applied, rec.Mode)}}
	default:
		if err := a.cacheModes.SetMode(rec.Name, rec.Mode); err != nil {
			return fmt.Errorf("actuate: cache %s: restore mode %s: %w", rec.Name, rec.Mode, err)
		}
	}
	if err := removeStateFile(a.stateDir, cacheName(rec.Name)); err != nil {
		return &RecordError{Device: rec.Name, Op: "remove", Path: a.cachePath(rec.Name), Err: err, Restored: true}
	}
	delete(a.caches, rec.Name)
	return left
}

// forgetCache drops the record of dm-cache name: when the cache is gone
// (or force), or the record is bad. Called with a.mu held.
func (a *Actuator) forgetCache(name string, force bool) error {
	key := cacheDir + "/" + name
	_, isBad := a.bad[key]
	if _, ok := a.caches[name]; !ok && !isBad {
		return nil
	}
	if !isBad && !force {
		if a.cacheModes == nil {
			return fmt.Errorf("actuate: forget %s: no dm-cache tool to check that it is gone; force to drop the record", key)
		}
		if _, _, err := a.cacheModes.Mode(name); !errors.Is(err, ErrDeviceGone) {
			return fmt.Errorf("actuate: forget %s: %w (recorded in %s): revert it to put its original mode back, or force",
				key, ErrNotGone, a.cachePath(name))
		}
	}
	if err := removeStateFile(a.stateDir, cacheName(name)); err != nil {
		return fmt.Errorf("actuate: remove cache record: %w", err)
	}
	delete(a.caches, name)
	delete(a.bad, key)
	return nil
}
