package actuate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/shadowtune/shadowtune/agent/counterfactual"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/internal/statefs"
)

// DeviceMemo is what the agent remembers of a device between runs, so
// that its pacing holds across restarts: minDwell counts from the last
// change, and the thrash guard keeps its count, its pin and its backoffs.
// It is kept in STATEDIR/memo/DEV.json (written like the records:
// temporary file, fsync, rename, fsync of the directory), with the
// device's identity; a memo of another device (replaced, or not the same
// disk after a reboot, see "Identity" in the package documentation) is
// not returned.
type DeviceMemo struct {
	// LastChange is when the agent last wrote a setting to the device
	// (zero: never).
	LastChange time.Time `json:"last_change,omitzero"`
	// GuardChanges is the thrash guard's count of consecutive changes.
	GuardChanges int `json:"guard_changes"`
	// GuardQuietChecks is the thrash guard's count of checks without a
	// change since the last one.
	GuardQuietChecks int `json:"guard_quiet_checks"`
	// Pinned is true when the thrash guard pinned the device's setting.
	Pinned bool `json:"pinned"`
	// Backoff maps a candidate setting's name to the time before which
	// it must not be tried again.
	Backoff map[string]time.Time `json:"backoff,omitempty"`
	// Corrections maps a candidate setting's name to the factor learned
	// from verifying it on this device (measured ÷ predicted, relative to
	// the setting it replaced).
	Corrections map[string]float64 `json:"corrections,omitempty"`
	// Counterfactual is the device's counterfactual error over its
	// verified changes (agent/counterfactual).
	Counterfactual counterfactual.Record `json:"counterfactual,omitzero"`
	// Unverified is true from just before the agent writes a change
	// whose verification starts until that verification ends: a run
	// that ends between the two leaves a change nobody verified, which
	// the next start puts back (RestoreUnverified).
	Unverified bool `json:"unverified,omitempty"`
	// Defaults are the device's queue defaults the agent read at its
	// last start (agent/sentinel), with the time it first read those
	// values; nil before any.
	Defaults *sentinel.Seen `json:"defaults,omitempty"`
	// PreviousDefaults are the defaults before a change a start found,
	// while Defaults still differ from them; nil when none does.
	PreviousDefaults *sentinel.Seen `json:"previousDefaults,omitempty"`
}

type memoFile struct {
	Version  int    `json:"version"`
	Device   string `json:"device"`
	Dev      string `json:"dev"`
	DiskSeq  uint64 `json:"diskseq,omitempty"`
	BootID   string `json:"boot_id,omitempty"`
	StableID string `json:"stable_id,omitempty"`
	// SavedAt is when the memo was written.
	SavedAt time.Time  `json:"saved_at"`
	Memo    DeviceMemo `json:"memo"`
}

const memoDir = "memo"

// memoName is dev's memo, relative to the state directory.
func memoName(dev string) string { return memoDir + "/" + dev + stateSuffix }

func (a *Actuator) memoPath(dev string) string { return filepath.Join(a.stateDir, memoName(dev)) }

// SaveDeviceState writes m as dev's memo, atomically and durably,
// replacing the previous one. Errors: ErrInvalidSetting for a bad name,
// ErrDeviceGone, or the state directory's write error (e.g. ENOSPC,
// EROFS), wrapped once.
func (a *Actuator) SaveDeviceState(dev string, m DeviceMemo) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	if !validAttrName(dev) {
		return fmt.Errorf("actuate: device name %q: %w", dev, ErrInvalidSetting)
	}
	id, err := a.identity(dev)
	if err != nil {
		return err
	}
	f := memoFile{Version: StateVersion, Device: dev, Dev: id.majorMinor, DiskSeq: id.diskSeq, BootID: a.bootID,
		StableID: id.stableID, SavedAt: time.Now().UTC(), Memo: m}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("actuate: encode memo of %s: %w", dev, err)
	}
	return writeFileAtomic(a.stateDir, memoName(dev), append(b, '\n'), false)
}

// LoadDeviceState returns dev's memo and true; false (and no error) when
// there is none, or when it was saved for another device that had the
// name (see DeviceMemo). A memo that cannot be read or parsed (or a
// symlink in its place) is an error naming the file (ErrCorruptState).
func (a *Actuator) LoadDeviceState(dev string) (DeviceMemo, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !validAttrName(dev) {
		return DeviceMemo{}, false, fmt.Errorf("actuate: device name %q: %w", dev, ErrInvalidSetting)
	}
	path := a.memoPath(dev)
	b, err := statefs.ReadFile(a.stateDir, memoName(dev), maxRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return DeviceMemo{}, false, nil
	}
	if err != nil {
		return DeviceMemo{}, false, fmt.Errorf("actuate: memo %s: %w: %w", path, ErrCorruptState, err)
	}
	var f memoFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return DeviceMemo{}, false, fmt.Errorf("actuate: memo %s: %w: %w", path, ErrCorruptState, err)
	}
	switch {
	case f.Version != StateVersion:
		return DeviceMemo{}, false, fmt.Errorf("actuate: memo %s: %w: version %d, this agent reads version %d", path, ErrCorruptState, f.Version, StateVersion)
	case f.Device != dev:
		return DeviceMemo{}, false, fmt.Errorf("actuate: memo %s: %w: records device %q", path, ErrCorruptState, f.Device)
	case f.Memo.GuardChanges < 0 || f.Memo.GuardQuietChecks < 0:
		return DeviceMemo{}, false, fmt.Errorf("actuate: memo %s: %w: negative guard count", path, ErrCorruptState)
	}
	id, err := a.identity(dev)
	if err != nil {
		return DeviceMemo{}, false, err
	}
	rec := &Original{Device: dev, MajorMinor: f.Dev, DiskSeq: f.DiskSeq, BootID: f.BootID, StableID: f.StableID}
	if ok, _ := a.sameDevice(rec, id); !ok {
		return DeviceMemo{}, false, nil
	}
	return f.Memo, true, nil
}
