package actuate

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Record statuses of List.
const (
	// StatusPresent: the recorded device is there; a revert restores it.
	StatusPresent = "present"
	// StatusGone: the device is gone or another device has its name; a
	// revert skips it; forget the record.
	StatusGone = "gone"
	// StatusBad: the state file cannot be loaded; fix or forget it.
	StatusBad = "bad"
)

// RecordStatus is one state file as List sees it.
type RecordStatus struct {
	Device      string     `json:"device"`
	File        string     `json:"file"`
	Status      string     `json:"status"`            // StatusPresent, StatusGone or StatusBad
	Problem     string     `json:"problem,omitempty"` // why gone or bad
	Dev         string     `json:"dev,omitempty"`     // MAJOR:MINOR when recorded
	DiskSeq     uint64     `json:"diskseq,omitempty"`
	RecordedAt  *time.Time `json:"recorded_at,omitempty"`
	Original    *State     `json:"original,omitempty"`
	Interrupted bool       `json:"interrupted,omitempty"` // a change did not finish
	// Owner is the device's claim, if a claim file exists.
	Owner *Owner `json:"owner,omitempty"`
	// CacheMode is, for a dm-cache record ("dm-cache/NAME"), the mode a
	// revert restores.
	CacheMode string `json:"cache_mode,omitempty"`
}

// Owner is the holder of a device's claim.
type Owner struct {
	StateDir string `json:"state_dir"`
	PID      int    `json:"pid"`
	Live     bool   `json:"live"` // the process still holds the claim
}

// List reads the records of o.StateDir without locking it or writing
// anything (an agent may be running on it), and tells for each whether
// its device is there, gone or replaced, or whether the file is bad, and
// who owns the device. A missing state directory lists nothing.
func List(o Options) ([]RecordStatus, error) {
	if o.StateDir == "" {
		return nil, errors.New("actuate: no state directory")
	}
	st := o.Store
	if st == nil {
		st = SysfsStore{Root: o.HostRoot}
	}
	a := &Actuator{store: st, stateDir: o.StateDir, claimDir: claimDirFor(o, st), bootID: bootIDOf(st), pageKiB: 4}
	if _, err := os.Stat(o.StateDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	recs, bad, err := loadRecords(o.StateDir, false)
	if err != nil {
		return nil, err
	}
	var out []RecordStatus
	for _, dev := range slices.Sorted(maps.Keys(recs)) {
		r := recs[dev]
		at := r.RecordedAt
		st := r.State.clone()
		rs := RecordStatus{Device: dev, File: statePath(o.StateDir, dev), Status: StatusPresent, Dev: r.MajorMinor,
			DiskSeq: r.DiskSeq, RecordedAt: &at, Original: &st, Interrupted: r.Interrupted != nil}
		if err := a.checkIdentity(dev, r); err != nil {
			rs.Status, rs.Problem = StatusGone, err.Error()
		}
		if sd, pid, live, err := OwnerOf(a.claimDir, r.MajorMinor); err == nil && sd != "" {
			rs.Owner = &Owner{StateDir: sd, PID: pid, Live: live}
		}
		out = append(out, rs)
	}
	for _, dev := range slices.Sorted(maps.Keys(bad)) {
		out = append(out, RecordStatus{Device: dev, File: statePath(o.StateDir, dev), Status: StatusBad, Problem: bad[dev].Error()})
	}
	out = append(out, listCaches(o)...)
	slices.SortFunc(out, func(x, y RecordStatus) int {
		if x.Device < y.Device {
			return -1
		}
		if x.Device > y.Device {
			return 1
		}
		return 0
	})
	return out, nil
}

func claimDirFor(o Options, st Store) string {
	if o.ClaimDir != "" {
		return o.ClaimDir
	}
	if cd, ok := st.(interface{ ClaimDir() string }); ok {
		return cd.ClaimDir()
	}
	return filepath.Join(hostRootOf(o.HostRoot), DefaultClaimDir)
}

// listCaches lists the dm-cache records, named "dm-cache/NAME", with the
// mode a revert restores: gone when o.Caches reports the device gone,
// else present.
func listCaches(o Options) []RecordStatus {
	recs, bad := loadCaches(o.StateDir)
	var out []RecordStatus
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		r := recs[name]
		at := r.RecordedAt
		rs := RecordStatus{Device: cacheDir + "/" + name, File: filepath.Join(o.StateDir, cacheDir, name+stateSuffix),
			Status: StatusPresent, RecordedAt: &at, CacheMode: r.Mode}
		if o.Caches != nil {
			if _, _, err := o.Caches.Mode(name); errors.Is(err, ErrDeviceGone) {
				rs.Status, rs.Problem = StatusGone, err.Error()
			}
		}
		out = append(out, rs)
	}
	for _, k := range slices.Sorted(maps.Keys(bad)) {
		out = append(out, RecordStatus{Device: k, File: filepath.Join(o.StateDir, k+stateSuffix), Status: StatusBad, Problem: bad[k].Error()})
	}
	return out
}
