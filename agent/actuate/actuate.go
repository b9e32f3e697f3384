// Package actuate changes a block device's blk-mq scheduler, its tunables
// and its read-ahead through sysfs, and can always put the device back
// exactly as it was (DESIGN §7: "every change the agent makes is recorded
// with the value it replaced").
//
// Only these files are ever written by Apply, and only for devices passed
// to it:
//
//   - queue/scheduler: none, mq-deadline, bfq or kyber, if the kernel
//     offers it (block/elevator.c elv_iosched_store);
//   - queue/iosched/NAME: NAME in AllowedTunables(scheduler) and exposed
//     by the device's current scheduler (block/mq-deadline.c,
//     block/bfq-iosched.c, block/kyber-iosched.c);
//   - queue/read_ahead_kb: KiB, a multiple of the page size
//     (block/blk-sysfs.c queue_ra_store stores whole pages).
//
// Revert (and the rollback of a failed change) may also write back, with
// their recorded values, the attributes a scheduler switch resets: every
// writable queue/iosched/* file of the original scheduler (a new elevator
// instance starts from its defaults) and queue/nr_requests and
// queue/wbt_lat_usec (the kernel resets nr_requests on every switch, and
// bfq turns writeback throttling off while it runs). A value is written
// only when it differs from what is read, so an attribute left at its
// kernel default stays "default" (bfq's max_budget 0 stays automatic).
//
// Safety rules:
//
//   - Before the first change to a device, its original values are
//     written durably to a state file (see StateVersion); an existing
//     record is never overwritten, so after a crash Revert still restores
//     the true originals, not a half-applied state.
//   - Before each change a journal entry (the device's state just before,
//     and the target) is written to the same file, and cleared when the
//     change has been made and verified or rolled back. A crash (SIGKILL)
//     at any point leaves the journal; the next Apply on that device
//     first puts it back as it was before the interrupted change, and
//     Revert restores the originals regardless.
//   - A change writes the scheduler first (the tunables live in the new
//     scheduler's queue/iosched/ after the switch), then the tunables,
//     then read_ahead_kb, reads each value back and fails on a
//     difference. If any step fails, the device is rolled back to its
//     state before the change; both errors are reported (ChangeError).
//   - Revert restores the scheduler, then nr_requests and
//     wbt_lat_usec, then the scheduler's tunables, then read_ahead_kb,
//     reads everything back and removes the record only when every value
//     matches. It restores a knob only while it holds a value of
//     shadowtune's: the original, the value the last finished change
//     applied (Original.Applied) or the target of the journaled change
//     (written before the device is changed, so a crash between the two
//     writes is covered). Any other value is another writer's: it stays,
//     with the scheduler's tunables when the scheduler is the writer's,
//     and the revert reports it (*LeftError). Records without Applied
//     (older agents) restore every knob.
//   - A journal that cannot be written (full or read-only state file
//     system) blocks the change (*RecordError with NotChanged; the device
//     and the record stay as they were), unless the record already
//     accepts every value the change can leave, as a change back to the
//     original does: that change is made unjournaled.
//
// Ownership: one Actuator (one state directory) per device. Before it
// changes or reverts a device, an Actuator claims it host-wide (an flock
// on CLAIMDIR/MAJOR:MINOR.lock, see Claim); a second Actuator is refused
// with an *OwnedError naming the owner's state directory and pid, and
// writes nothing. Otherwise it would record the first one's change as the
// "original" and whichever reverted last would leave the device changed.
//
// Identity: a record is for one device, not for a name. A device is the
// recorded one when its MAJOR:MINOR matches and, within the boot it was
// recorded in (the kernel's boot_id), its diskseq matches: a loop device
// detached and another attached under its name (new diskseq) is a new
// device, never written with the old record's values (Revert returns
// ErrDeviceGone; forget the record). diskseq restarts at every boot, so
// across a reboot the disk's own identity decides: the same wwid (else
// serial) when the disk has one; without one, the same MAJOR:MINOR,
// except for loop, nbd, zram, ram, dm and md devices, which are new
// devices in every boot. A disk that comes back as itself after a reboot
// is restored to its recorded original.
//
// Records that are not trustworthy are never applied: a state file that
// cannot be parsed, has another version, holds a value that is not
// writable (a scheduler that is not a name, a tunable or queue value that
// is not an integer, read_ahead_kb outside [0, MaxReadAheadKiB]), or is a
// symlink or other non-regular file is reported naming the file and field
// (ErrCorruptState; New fails, Open loads the others and reports it in
// BadRecords and RevertAll). Before any write of a revert, the record is
// checked against the device (scheduler offered, tunables existing,
// read-ahead in whole pages): all or nothing per device.
//
// State writes: the original must be durable before a device's first
// change, and the journal before every change that writes a value the
// record does not hold yet. A revert restores the device first and only
// then removes the record (a read-only or full state file system leaves
// the record, *RecordError); a change made without its journal, or whose
// journal could not be cleared, reports Applied.RecordError; failed
// updates are retried at the next operation (Flush).
//
// Kernel behaviour this relies on (verified on Linux 6.18 loop devices by
// the integration tests): writing an unknown scheduler name fails with
// EINVAL; writing the current scheduler's name is a no-op that keeps its
// tunables; switching to another scheduler and back resets every
// iosched tunable to its default and nr_requests to the default depth
// (2 × min(tag depth, 128) with an elevator, the tag depth with none);
// bfq sets wbt_lat_usec to 0 while it runs unless the value was set by
// hand, and leaving bfq restores it (any write of a different value makes
// writeback throttling "manual" for the device's life, so Revert writes it
// only if it differs, which a round trip through bfq never needs);
// read_ahead_kb is rounded down to whole pages; millisecond
// tunables are stored in jiffies and read back rounded; mq-deadline
// clamps negative values to 0 silently; the scheduler's store returns
// EBUSY or ENOENT while the hardware queues are being updated.
package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/knob"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// Attribute files, relative to /sys/block/DEV.
const (
	AttrScheduler = "queue/scheduler"
	AttrReadAhead = "queue/read_ahead_kb"
	AttrIosched   = "queue/iosched" // directory
	attrDev       = "dev"
	attrDiskSeq   = "diskseq"
)

// queueSideEffects are the queue attributes a scheduler switch changes, in
// the order Revert restores them (before the tunables: mq-deadline's
// async_depth follows nr_requests): the knob table's SwitchChanged.
var queueSideEffects = knob.SwitchChanged()

func isQueueSideEffect(name string) bool { return slices.Contains(queueSideEffects, name) }

// allowed is the allowlist of writable tunables by scheduler, by their
// sysfs names, sorted: the tuned tunables of the knob table (api/knob).
var allowed = func() map[string][]string {
	m := map[string][]string{}
	for _, s := range knob.Schedulers() {
		m[s] = slices.Sorted(slices.Values(knob.Tunables(s)))
	}
	return m
}()

// allowedWith reports whether Setting.Tunables may set name with
// scheduler: one of its tunables, or a tuned queue attribute
// (nr_requests), which bounds a scheduler's requests and so is not set
// with none.
func allowedWith(scheduler, name string) bool {
	return slices.Contains(knob.Ranged(scheduler), name)
}

// Schedulers returns the schedulers Apply may select, sorted.
func Schedulers() []string {
	return slices.Sorted(maps.Keys(allowed))
}

// AllowedTunables returns the queue/iosched tunables Apply may write for
// the scheduler, sorted; nil for none or an unknown scheduler.
//
// mq-deadline: read_expire, write_expire (ms), fifo_batch (requests),
// writes_starved (count), front_merges (0/1). bfq: slice_idle (ms),
// slice_idle_us (µs; the same kernel value as slice_idle), low_latency,
// strict_guarantees (0/1), back_seek_max (KiB), back_seek_penalty,
// fifo_expire_sync, fifo_expire_async, timeout_sync (ms), max_budget
// (sectors; 0 = automatic). kyber: read_lat_nsec, write_lat_nsec (ns).
func AllowedTunables(scheduler string) []string {
	return slices.Clone(allowed[scheduler])
}

// Setting is a change to apply. A zero field leaves that attribute alone.
type Setting struct {
	// Scheduler is the elevator to select ("" keeps the current one).
	Scheduler string `json:"scheduler,omitempty"`
	// Tunables are queue/iosched values in the kernel's units, for
	// Scheduler (or the current scheduler when Scheduler is ""). Names not
	// given are left as the (possibly new) scheduler has them: after a
	// switch, that is the kernel's default.
	Tunables sched.Tunables `json:"tunables,omitempty"`
	// ReadAheadKiB is queue/read_ahead_kb, in KiB; 0 leaves it alone.
	ReadAheadKiB int `json:"read_ahead_kb,omitempty"`
	// Expect, when set, makes Apply a compare-and-swap: the device must
	// still have these values, or nothing is written (ErrOtherWriter).
	// The agent passes what it last saw, so that another writer's change
	// between its check and its write is never overwritten.
	Expect *Expected `json:"-"`
}

// Expected is what a device must have for an Apply with Setting.Expect to
// write: its scheduler ("" any) and read_ahead_kb (0 any, KiB).
type Expected struct {
	Scheduler    string
	ReadAheadKiB int
}

// IsZero reports whether s changes nothing.
func (s Setting) IsZero() bool {
	return s.Scheduler == "" && len(s.Tunables) == 0 && s.ReadAheadKiB == 0
}

// State is what the Actuator records of a device: the values Revert
// restores.
type State struct {
	// Scheduler is the current elevator; "" if the device has no
	// queue/scheduler (bio-based devices).
	Scheduler string `json:"scheduler"`
	// Tunables are all writable queue/iosched/* files of Scheduler, their
	// text trimmed of surrounding white space.
	Tunables map[string]string `json:"tunables,omitempty"`
	// Queue holds the queue attributes a scheduler switch resets
	// (nr_requests, wbt_lat_usec: knob.SwitchChanged), trimmed text;
	// absent ones are left out.
	Queue map[string]string `json:"queue,omitempty"`
	// ReadAheadKiB is queue/read_ahead_kb, KiB.
	ReadAheadKiB int `json:"read_ahead_kb"`
}

// Value returns the text of a Setting.Tunables name in s: a queue
// attribute of the knob table (nr_requests) from Queue, else the
// scheduler's tunable from Tunables; "" when s has none.
func (s State) Value(name string) string {
	if knob.IsQueue(name) {
		return s.Queue[name]
	}
	return s.Tunables[name]
}

func (s State) clone() State {
	s.Tunables = maps.Clone(s.Tunables)
	s.Queue = maps.Clone(s.Queue)
	return s
}

// Change is a journal entry: a change started and not yet finished.
type Change struct {
	StartedAt time.Time `json:"started_at"`
	Before    State     `json:"before"`
	Target    Setting   `json:"target"`
}

// Original is the record of a device the Actuator has changed.
type Original struct {
	Device     string // kernel name
	MajorMinor string // "dev" when recorded
	DiskSeq    uint64 // "diskseq" when recorded, 0 if absent
	// BootID is the kernel's boot_id when recorded ("" if unknown): a
	// diskseq means something only within one boot.
	BootID string
	// StableID is the disk's own identity when recorded (wwid, else
	// serial; "" if it has none, as loop devices).
	StableID   string
	RecordedAt time.Time // when the original was recorded
	State      State     // the device before the first change
	// Interrupted is the journal of a change that did not finish (the
	// agent died during Apply, or its rollback failed); nil otherwise.
	Interrupted *Change
	// Applied holds, for each knob (scheduler, tunable, read-ahead),
	// the value shadowtune's last finished change left on it, or the
	// original for a knob it never changed; nil in a record written
	// before it existed. A revert restores a knob only while it holds
	// the original, this value or the in-progress target: any other
	// value is another writer's and is left (see LeftError).
	Applied *State

	dirty bool // the file on disk is behind this record (a failed update)
}

func (o *Original) clone() Original {
	c := *o
	c.State = o.State.clone()
	if o.Interrupted != nil {
		ic := *o.Interrupted
		ic.Before = ic.Before.clone()
		ic.Target.Tunables = maps.Clone(ic.Target.Tunables)
		c.Interrupted = &ic
	}
	if o.Applied != nil {
		ap := o.Applied.clone()
		c.Applied = &ap
	}
	return c
}

// Applied reports a successful Apply.
type Applied struct {
	Device string
	// Before and After are the device's state just before and after the
	// change (After read back from sysfs).
	Before, After State
	// Written lists the files written, in order, relative to
	// /sys/block/DEV ("queue/scheduler", "queue/iosched/slice_idle", ...);
	// empty when the device already had the setting.
	Written []string
	// RecordError is non-nil when the device has the setting (the
	// change succeeded) but its state file could not be updated (a full
	// or read-only state file system): the journal was not written (a
	// change back to values the record holds) or not cleared. The
	// original record is intact either way. The Actuator retries the
	// update at its next operation (see Flush).
	RecordError *RecordError
}

// Actuator applies and reverts settings. It is safe for concurrent use;
// one mutex serialises all operations. Only one Actuator may use a state
// directory at a time (an exclusive flock on STATEDIR/.lock), and only one
// may own a device at a time (see Claim).
type Actuator struct {
	mu       sync.Mutex
	store    Store
	stateDir string
	claimDir string
	lock     *os.File
	records  map[string]*Original
	// bad are the state files that could not be loaded, by device name
	// (Open only; New fails on them): never applied, reported by
	// RevertAll until fixed or forgotten.
	bad    map[string]error
	claims map[string]*claim
	// claimsOff is why no claim can be taken (a read-only claim
	// directory), or nil.
	claimsOff error
	// caches are the records of the dm-caches whose mode was changed, by
	// device-mapper name; cacheModes switches them (nil: none governed).
	caches     map[string]*CacheOriginal
	cacheModes CacheModes
	// attached are the records of the caches attached to LVM logical
	// volumes, by "VG/LV"; volumes attaches and detaches them (nil: none).
	// recovered and recoverErrs are what Open recovered after a reboot.
	attached    map[string]*AttachedCache
	volumes     CacheVolumes
	recovered   []string
	recoverErrs []error
	pageKiB     int
	bootID      string
	// follower brings open files to each new read_ahead_kb (nil: none).
	follower ReadAheadFollower

	// hook, if set (tests only), is called at the crash points of Apply:
	// "recorded", "journaled", "wrote ATTR" and "rolled back".
	hook func(point string)
}

// Options configure Open.
type Options struct {
	// HostRoot prefixes /sys and the claim directory ("" is the real
	// root; "/host" when the host's / is mounted there in a container).
	HostRoot string
	// Store is the kernel's attribute files; nil is SysfsStore{Root:
	// HostRoot}.
	Store Store
	// StateDir keeps the records (required; created 0700 if needed). It
	// must outlive the agent process (a hostPath on the node).
	StateDir string
	// ClaimDir holds the host-wide device claims (see Claim); "" is
	// HostRoot + DefaultClaimDir, or for a Store with a ClaimDir() string
	// method (the fake kernel of package actuatetest), its ClaimDir().
	// Every Actuator on a host must use the same directory.
	ClaimDir string
	// Caches switches dm-cache modes (SetCacheMode); nil when the host
	// has no device-mapper tools. Records of caches are kept and reverted
	// with the others either way.
	Caches CacheModes
	// Volumes attaches caches to LVM logical volumes (AttachCache) and
	// takes them away; nil when the host has no LVM tools. Records of
	// attached caches are kept and reported either way.
	Volumes CacheVolumes
}

// New returns an Actuator for the block devices below hostRoot ("" for the
// real root) that keeps its records in stateDir (created 0700 if needed).
// stateDir must outlive the agent process (a hostPath on the node, not a
// container's scratch space), or a crash loses what must be reverted.
// New loads the records of a previous run; a corrupt record makes New fail
// (ErrCorruptState) rather than forget what must be reverted. Open loads
// the other records instead and reports the bad one (the agent should use
// Open).
func New(hostRoot, stateDir string) (*Actuator, error) {
	return open(Options{HostRoot: hostRoot, StateDir: stateDir}, true)
}

// NewWithStore is New with another Store (a fake kernel in tests).
func NewWithStore(st Store, stateDir string) (*Actuator, error) {
	return open(Options{Store: st, StateDir: stateDir}, true)
}

// Open returns an Actuator for o. Unlike New, a state file that cannot be
// loaded (corrupt, invalid values, a symlink or other non-regular file)
// does not make Open fail: that device is never changed or reverted by
// this Actuator, BadRecords and RevertAll report it (naming the file), and
// every other device is governed as usual. A state directory that is
// read-only is accepted: Apply then refuses to make a first change (it
// cannot record the original), while Revert still restores every device
// from its record and reports that the record could not be removed.
// Open also claims every recorded device it can (see Claim).
func Open(o Options) (*Actuator, error) { return open(o, false) }

func open(o Options, strict bool) (*Actuator, error) {
	if o.StateDir == "" {
		return nil, errors.New("actuate: no state directory")
	}
	st := o.Store
	if st == nil {
		st = SysfsStore{Root: o.HostRoot}
	}
	claimDir := claimDirFor(o, st)
	stateDir := o.StateDir
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("actuate: state directory: %w", err)
	}
	lock, err := lockDir(stateDir)
	if err != nil {
		return nil, err
	}
	recs, bad, err := loadState(stateDir)
	if err == nil && strict && len(bad) > 0 {
		err = bad[slices.Sorted(maps.Keys(bad))[0]]
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	page := os.Getpagesize() / 1024
	if page < 1 {
		page = 1
	}
	caches, cbad := loadCaches(stateDir)
	if strict && len(cbad) > 0 {
		lock.Close()
		return nil, cbad[slices.Sorted(maps.Keys(cbad))[0]]
	}
	attached, abad := loadAttached(stateDir)
	if strict && len(abad) > 0 {
		lock.Close()
		return nil, abad[slices.Sorted(maps.Keys(abad))[0]]
	}
	maps.Copy(bad, cbad)
	maps.Copy(bad, abad)
	a := &Actuator{store: st, stateDir: stateDir, claimDir: claimDir, lock: lock, records: recs, bad: bad,
		claims: map[string]*claim{}, pageKiB: page, bootID: bootIDOf(st), caches: caches, cacheModes: o.Caches,
		attached: attached, volumes: o.Volumes}
	a.healCaches()
	a.recoverAfterReboot()
	if !strict {
		for _, dev := range slices.Sorted(maps.Keys(recs)) {
			if a.checkIdentity(dev, recs[dev]) == nil {
				_ = a.claim(dev) // best effort: Apply and Revert claim again
			}
		}
	}
	return a, nil
}

func hostRootOf(r string) string {
	if r == "" {
		return "/"
	}
	return r
}

// Close releases every claim and the state directory. The records stay
// on disk.
func (a *Actuator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return nil
	}
	var errs []error
	for _, dev := range slices.Sorted(maps.Keys(a.claims)) {
		errs = append(errs, a.dropClaim(dev))
	}
	errs = append(errs, a.lock.Close())
	a.lock = nil
	return errors.Join(errs...)
}

// StateDir returns the state directory (absolute).
func (a *Actuator) StateDir() string { return a.stateDir }

// ClaimDir returns the claim directory.
func (a *Actuator) ClaimDir() string { return a.claimDir }

// BadRecords returns the state files Open could not load, by device name:
// each error names the file and what is wrong (ErrCorruptState). Such a
// device is neither changed nor reverted until the file is fixed or
// forgotten (Forget).
func (a *Actuator) BadRecords() map[string]error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.bad)
}

// Originals returns a copy of the records: for each changed device, its
// state before shadowtune's first change.
func (a *Actuator) Originals() map[string]Original {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]Original, len(a.records))
	for k, o := range a.records {
		out[k] = o.clone()
	}
	return out
}

// Original returns a copy of the record of dev (its state before
// shadowtune's first change) and true, or false when dev has no record
// (it has its original settings).
func (a *Actuator) Original(dev string) (Original, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.records[dev]
	if !ok {
		return Original{}, false
	}
	return o.clone(), true
}

// Read returns dev's current State as Revert would compare it: the
// scheduler, its writable tunables, the queue attributes a switch resets
// and read-ahead. It writes nothing.
func (a *Actuator) Read(dev string) (State, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !validAttrName(dev) {
		return State{}, fmt.Errorf("actuate: device name %q: %w", dev, ErrInvalidSetting)
	}
	return a.readState(dev)
}

// Interrupted returns, sorted, the devices with a change that did not
// finish (a crash during Apply, or a failed rollback). Revert them, or
// Apply again: Apply first puts such a device back as it was before the
// interrupted change.
func (a *Actuator) Interrupted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k, o := range a.records {
		if o.Interrupted != nil {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Forget drops the record of dev without touching the device: for a
// device that is gone for good or replaced by another (ErrDeviceGone),
// whose settings died with it, or for a state file that cannot be loaded
// (BadRecords). It refuses (ErrNotGone) a valid record of a device that is
// still there: Revert it instead, or ForceForget. The claim of dev is
// released unless it was taken with Claim. Forgetting a device without a
// record is a no-op.
func (a *Actuator) Forget(dev string) error { return a.forget(dev, false) }

// ForceForget is Forget even for a device that is still there: the device
// keeps whatever it has now, and nothing will put its original back.
// A dm-cache record is named "dm-cache/NAME" (see SetCacheMode), an
// attached cache's "dm-cache-attached/VG/LV" (see AttachCache).
func (a *Actuator) ForceForget(dev string) error { return a.forget(dev, true) }

// ErrNotGone is returned by Forget for a device that is still the recorded one.
var ErrNotGone = errors.New("the device is still there")

func (a *Actuator) forget(dev string, force bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	if name, ok := strings.CutPrefix(dev, cacheDir+"/"); ok {
		return a.forgetCache(name, force)
	}
	if key, ok := strings.CutPrefix(dev, attachedDir+"/"); ok {
		return a.forgetAttached(key, force)
	}
	if !validAttrName(dev) {
		return fmt.Errorf("actuate: device name %q: %w", dev, ErrInvalidSetting)
	}
	rec, isBad := a.records[dev], a.bad[dev] != nil
	if rec == nil && !isBad {
		return nil
	}
	if rec != nil && !force && a.checkIdentity(dev, rec) == nil {
		return fmt.Errorf("actuate: forget %s: %w (dev %s, recorded in %s): revert it to put its original back, or force",
			dev, ErrNotGone, rec.MajorMinor, statePath(a.stateDir, dev))
	}
	if err := removeState(a.stateDir, dev); err != nil {
		return err
	}
	delete(a.records, dev)
	delete(a.bad, dev)
	return a.settle(dev)
}

var errClosed = errors.New("actuate: actuator closed")

func (a *Actuator) at(point string) {
	if a.hook != nil {
		a.hook(point)
	}
}

// Apply changes dev (a whole disk's kernel name, e.g. "sda"; partitions
// have no queue of their own) to s. See the package documentation for the
// order, the verification and the rollback. On failure the error is an
// *AttrError, a *ChangeError, or a *RecordError (ErrRecordNotUpdated,
// NotChanged: the journal could not be written, nothing was changed);
// with errors.Is it matches the kind (ErrDeviceGone, ErrBusy, ErrReadOnly,
// ErrPermission, ErrRejected, ErrMismatch, ErrNotAllowed,
// ErrInvalidSetting, ErrRollback, ErrRecordNotUpdated).
func (a *Actuator) Apply(dev string, s Setting) (Applied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return Applied{}, errClosed
	}
	if !validAttrName(dev) {
		return Applied{}, fmt.Errorf("actuate: device name %q: %w", dev, ErrInvalidSetting)
	}
	if err := a.validate(s); err != nil {
		return Applied{}, err
	}
	a.flush()
	if err := a.bad[dev]; err != nil {
		return Applied{}, fmt.Errorf("actuate: %s: its state file cannot be loaded, so its original is unknown; fix or forget it first: %w", dev, err)
	}
	rec := a.records[dev]
	if err := a.checkIdentity(dev, rec); err != nil {
		return Applied{}, err
	}
	if err := a.claim(dev); err != nil {
		return Applied{}, err
	}
	defer func() { _ = a.settle(dev) }() // a claim file left behind is retaken by the next claimer
	if err := a.finishInterrupted(dev, rec); err != nil {
		return Applied{}, err
	}
	before, err := a.readState(dev)
	if err != nil {
		return Applied{}, err
	}
	if err := a.check(dev, before, s); err != nil {
		return Applied{}, err
	}
	if err := expected(dev, before, s.Expect); err != nil {
		return Applied{}, err
	}
	res := Applied{Device: dev, Before: before, After: before}
	if !a.needsChange(dev, before, s) {
		return res, nil
	}

	created := false
	if rec == nil {
		id, err := a.identity(dev)
		if err != nil {
			return Applied{}, err
		}
		rec = &Original{Device: dev, MajorMinor: id.majorMinor, DiskSeq: id.diskSeq, BootID: a.bootID, StableID: id.stableID,
			RecordedAt: time.Now().UTC(), State: before.clone(),
			Applied: &State{Scheduler: before.Scheduler, Tunables: maps.Clone(before.Tunables), ReadAheadKiB: before.ReadAheadKiB}}
		// The original must be durable before the first change: no
		// record, no change.
		if err := writeState(a.stateDir, rec, true); err != nil {
			return Applied{}, err
		}
		a.records[dev] = rec
		created = true
		a.at("recorded")
	}
	jerr := a.journal(dev, rec, before, s, created)
	if jerr != nil && jerr.NotChanged {
		return Applied{}, jerr
	}
	journaled := jerr == nil
	if !journaled {
		res.RecordError = jerr
	}

	written, after, cause := a.change(dev, before, s)
	res.Written = written
	if cause != nil {
		return res, a.rollback(dev, rec, before, cause, created, journaled)
	}
	res.After = after
	rec.Interrupted = nil
	if journaled {
		// Unjournaled, the record is left as it is: it already accepts
		// every value the change made (see journal).
		rec.noteApplied(before, s, after)
		if err := writeState(a.stateDir, rec, false); err != nil {
			// The device has the setting, and the original is intact;
			// the journal on disk still says the change is in progress
			// (after a crash the next Apply would first undo it). The
			// Actuator rewrites the file at its next operation (or
			// Flush).
			rec.dirty = true
			res.RecordError = &RecordError{Device: dev, Path: statePath(a.stateDir, dev), Op: "clear the journal of", Err: err}
		}
	}
	return res, nil
}

// journal writes rec with the journal of the change of dev from before to
// s (its target is the value about to be written, which a revert then
// takes for shadowtune's) before anything is written to the device, and
// returns nil. When the write fails, it returns a *RecordError: with
// NotChanged set the change must not be made (a record created for it is
// dropped again); without, the record on disk already accepts every value
// the change can leave (Original.accepts: e.g. a change back to the
// original on a full state file system), so it may be made unjournaled.
func (a *Actuator) journal(dev string, rec *Original, before State, s Setting, created bool) *RecordError {
	mayGoOn := !created && rec.accepts(before, s)
	prev := rec.Applied
	if rec.Applied == nil { // a record of an older agent: from now on it says what is shadowtune's
		rec.Applied = &State{Scheduler: before.Scheduler, Tunables: maps.Clone(before.Tunables), ReadAheadKiB: before.ReadAheadKiB}
	}
	rec.Interrupted = &Change{StartedAt: time.Now().UTC(), Before: before.clone(),
		Target: Setting{Scheduler: s.Scheduler, Tunables: maps.Clone(s.Tunables), ReadAheadKiB: s.ReadAheadKiB}}
	err := writeState(a.stateDir, rec, false)
	if err == nil {
		a.at("journaled")
		return nil
	}
	rec.Interrupted, rec.Applied = nil, prev
	rerr := &RecordError{Device: dev, Path: statePath(a.stateDir, dev), Op: "journal", NotChanged: !mayGoOn, Err: err}
	if created {
		// The record was written for this change, which is not made.
		if err := removeState(a.stateDir, dev); err == nil {
			delete(a.records, dev)
		}
	}
	return rerr
}

// finishInterrupted finishes the rollback of dev's interrupted change, if
// its record has one, so that a new change starts from a known state.
func (a *Actuator) finishInterrupted(dev string, rec *Original) error {
	if rec == nil || rec.Interrupted == nil {
		return nil
	}
	if err := a.restorable(dev, rec.Interrupted.Before, "in_progress.before"); err != nil {
		return err
	}
	if err := a.restore(dev, rec.Interrupted.Before); err != nil {
		return fmt.Errorf("actuate: %s: putting back the state before an interrupted change: %w", dev, errors.Join(ErrRollback, err))
	}
	rec.Interrupted = nil
	if err := writeState(a.stateDir, rec, false); err != nil {
		// The device is as before the interrupted change; the journal on
		// disk says so too, harmlessly. Try later.
		rec.dirty = true
	}
	return nil
}

// rollback puts dev back to before after a failed change (cause) and
// returns the *ChangeError: a record created for this change is dropped,
// a journaled one cleared.
func (a *Actuator) rollback(dev string, rec *Original, before State, cause error, created, journaled bool) error {
	rbErr := a.restore(dev, before)
	a.at("rolled back")
	if rbErr == nil {
		rec.Interrupted = nil
		var serr error
		if created {
			// Nothing was changed after all: drop the new record.
			serr = removeState(a.stateDir, dev)
			if serr == nil {
				delete(a.records, dev)
			}
		} else if journaled {
			serr = writeState(a.stateDir, rec, false)
			if serr != nil {
				rec.dirty = true
			}
		}
		if serr != nil {
			cause = errors.Join(cause, serr)
		}
	}
	return &ChangeError{Device: dev, Cause: cause, Rollback: rbErr}
}

// flush rewrites the records whose last update failed (best effort).
func (a *Actuator) flush() error {
	var errs []error
	for _, dev := range slices.Sorted(maps.Keys(a.records)) {
		rec := a.records[dev]
		if !rec.dirty {
			continue
		}
		if err := writeState(a.stateDir, rec, false); err != nil {
			errs = append(errs, &RecordError{Device: dev, Path: statePath(a.stateDir, dev), Op: "update", Err: err})
			continue
		}
		rec.dirty = false
	}
	return errors.Join(errs...)
}

// Flush retries writing the state files whose last update failed (a full
// or read-only state file system): it returns nil when every record on
// disk is up to date, else a *RecordError per file. Every operation also
// retries first; the agent may call Flush every window.
func (a *Actuator) Flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	return a.flush()
}

// validate checks s on its own, before any I/O.
func (a *Actuator) validate(s Setting) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("actuate: %s: %w", fmt.Sprintf(format, args...), ErrInvalidSetting)
	}
	if s.Scheduler != "" {
		if _, ok := allowed[s.Scheduler]; !ok {
			return bad("scheduler %q is not one of %s", s.Scheduler, strings.Join(Schedulers(), ", "))
		}
	}
	if s.ReadAheadKiB < 0 {
		return bad("read_ahead_kb %d is negative", s.ReadAheadKiB)
	}
	if s.ReadAheadKiB > MaxReadAheadKiB {
		return bad("read_ahead_kb %d is above %d", s.ReadAheadKiB, MaxReadAheadKiB)
	}
	if s.ReadAheadKiB%a.pageKiB != 0 {
		return bad("read_ahead_kb %d is not a multiple of the %d KiB page (the kernel would round it down)", s.ReadAheadKiB, a.pageKiB)
	}
	for k, v := range s.Tunables {
		if v < 0 {
			return bad("tunable %s=%d is negative", k, v)
		}
		if row, ok := knob.Lookup("", k); ok && !row.Within(v) {
			return bad("%s=%d is outside [%d, %d], what the kernel keeps as written", k, v, row.Min, row.Max)
		}
	}
	if _, a1 := s.Tunables["slice_idle"]; a1 {
		if _, a2 := s.Tunables["slice_idle_us"]; a2 {
			return bad("set bfq's slice_idle or slice_idle_us, not both (they are one kernel value)")
		}
	}
	return nil
}

// check validates s against the device's current state, before any write.
func (a *Actuator) check(dev string, cur State, s Setting) error {
	target := cur.Scheduler
	if s.Scheduler != "" {
		if cur.Scheduler == "" {
			return &AttrError{Op: "write", Device: dev, Path: a.store.Path(dev, AttrScheduler), Value: s.Scheduler,
				Kind: ErrNotAllowed, Err: errors.New("the device has no scheduler (bio-based)")}
		}
		offered, err := a.offered(dev)
		if err != nil {
			return err
		}
		if !slices.Contains(offered, s.Scheduler) {
			return &AttrError{Op: "write", Device: dev, Path: a.store.Path(dev, AttrScheduler), Value: s.Scheduler,
				Kind: ErrNotAllowed, Err: fmt.Errorf("the kernel offers only %s", strings.Join(offered, ", "))}
		}
		target = s.Scheduler
	}
	for name := range s.Tunables {
		if !allowedWith(target, name) {
			return &AttrError{Op: "write", Device: dev, Path: a.store.Path(dev, tunableAttr(name)),
				Value: strconv.FormatInt(s.Tunables[name], 10), Kind: ErrNotAllowed,
				Err: fmt.Errorf("not an allowed tunable of %q (allowed: %s)", target, strings.Join(knob.Ranged(target), ", "))}
		}
	}
	return nil
}

// needsChange reports whether applying s would write anything. Tunables
// after a scheduler switch are compared with nothing: a switch is a change.
func (a *Actuator) needsChange(dev string, cur State, s Setting) bool {
	if s.Scheduler != "" && s.Scheduler != cur.Scheduler {
		return true
	}
	for k, v := range s.Tunables {
		if cur.Value(k) != strconv.FormatInt(v, 10) {
			return true
		}
	}
	return s.ReadAheadKiB != 0 && s.ReadAheadKiB != cur.ReadAheadKiB
}

// change makes the writes of s, each verified, and returns the files
// written and the state read back at the end.
func (a *Actuator) change(dev string, before State, s Setting) (written []string, after State, err error) {
	if s.Scheduler != "" && s.Scheduler != before.Scheduler {
		if err := a.writeScheduler(dev, s.Scheduler); err != nil {
			return written, State{}, err
		}
		written = append(written, AttrScheduler)
	}
	w, err := a.writeTunables(dev, s.Tunables)
	written = append(written, w...)
	if err != nil {
		return written, State{}, err
	}
	if s.ReadAheadKiB != 0 {
		w, err := a.setIfDiffers(dev, AttrReadAhead, strconv.Itoa(s.ReadAheadKiB))
		if w {
			written = append(written, AttrReadAhead)
		}
		if err != nil {
			return written, State{}, err
		}
	}
	// Read everything back once more: a later write may have changed an
	// earlier one (bfq's slice_idle and slice_idle_us are one value).
	after, err = a.readState(dev)
	if err != nil {
		return written, State{}, err
	}
	if s.Scheduler != "" && after.Scheduler != s.Scheduler {
		return written, after, a.mismatch(dev, AttrScheduler, s.Scheduler, after.Scheduler)
	}
	for name, v := range s.Tunables {
		if got := after.Value(name); got != strconv.FormatInt(v, 10) {
			return written, after, a.mismatch(dev, tunableAttr(name), strconv.FormatInt(v, 10), got)
		}
	}
	if s.ReadAheadKiB != 0 && after.ReadAheadKiB != s.ReadAheadKiB {
		return written, after, a.mismatch(dev, AttrReadAhead, strconv.Itoa(s.ReadAheadKiB), strconv.Itoa(after.ReadAheadKiB))
	}
	return written, after, nil
}

// writeTunables writes t, each value only where it differs, and returns
// the files written: the queue attributes first (queue/NAME), then the
// scheduler's tunables (queue/iosched/NAME), since mq-deadline's
// async_depth follows nr_requests (block/mq-deadline.c dd_depth_updated).
// A tunable the scheduler does not expose is ErrNotAllowed.
func (a *Actuator) writeTunables(dev string, t sched.Tunables) (written []string, err error) {
	var queue, iosched []string
	for _, name := range slices.Sorted(maps.Keys(t)) {
		if knob.IsQueue(name) {
			queue = append(queue, name)
		} else {
			iosched = append(iosched, name)
		}
	}
	var exposed []string
	for _, name := range slices.Concat(queue, iosched) {
		attr, v := tunableAttr(name), strconv.FormatInt(t[name], 10)
		if !knob.IsQueue(name) {
			if exposed == nil {
				if exposed, err = a.list(dev, AttrIosched); err != nil {
					return written, err
				}
			}
			if !slices.Contains(exposed, name) {
				return written, &AttrError{Op: "write", Device: dev, Path: a.store.Path(dev, attr), Value: v,
					Kind: ErrNotAllowed, Err: errors.New("the scheduler does not expose this tunable on this kernel")}
			}
		}
		w, err := a.setIfDiffers(dev, attr, v)
		if w {
			written = append(written, attr)
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// tunableAttr is the file of a Setting.Tunables name, relative to
// /sys/block/DEV: queue/NAME for a queue attribute of the knob table,
// else queue/iosched/NAME.
func tunableAttr(name string) string {
	if knob.IsQueue(name) {
		return "queue/" + name
	}
	return AttrIosched + "/" + name
}

func (a *Actuator) mismatch(dev, attr, want, got string) error {
	return &AttrError{Op: "verify", Device: dev, Path: a.store.Path(dev, attr), Value: want, Got: got, Kind: ErrMismatch}
}

// writeScheduler writes the scheduler and reads back the bracketed name.
func (a *Actuator) writeScheduler(dev, name string) error {
	if err := a.write(dev, AttrScheduler, name); err != nil {
		return err
	}
	_, cur, err := a.readScheduler(dev)
	if err != nil {
		return err
	}
	if cur != name {
		return a.mismatch(dev, AttrScheduler, name, cur)
	}
	return nil
}

// ReadAheadFollower brings the files open on a disk to the disk's new
// read-ahead (package agent/openfiles): the kernel copies read_ahead_kb
// into a file's own state when the file is opened, so a change reaches
// only files opened after it unless they are brought along. It does its
// own logging; a failure leaves the files as they were and the device's
// change in place.
type ReadAheadFollower interface {
	// FollowReadAhead is called after read_ahead_kb of disk was written
	// from fromKiB to toKiB and read back so.
	FollowReadAhead(disk string, fromKiB, toKiB int)
}

// SetReadAheadFollower makes every write of read_ahead_kb that reads back
// as written, by Apply, a rollback, Revert or RevertAll, call f (nil:
// none). Putting a device back to its recorded read-ahead then brings the
// same files back to it.
func (a *Actuator) SetReadAheadFollower(f ReadAheadFollower) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.follower = f
}

// setIfDiffers writes v to attr unless it already reads v, then reads it
// back. wrote reports whether a write was made. A write of read_ahead_kb
// that reads back as v is followed in open files (a.follower).
func (a *Actuator) setIfDiffers(dev, attr, v string) (wrote bool, err error) {
	cur, err := a.read(dev, attr)
	if err != nil {
		return false, err
	}
	if cur == v {
		return false, nil
	}
	if err := a.write(dev, attr, v); err != nil {
		return false, err
	}
	got, err := a.read(dev, attr)
	if err != nil {
		return true, err
	}
	if got != v {
		return true, a.mismatch(dev, attr, v, got)
	}
	a.followReadAhead(dev, attr, cur, v)
	return true, nil
}

// followBack brings the files open at the depth shadowtune applied back
// to want's, when read_ahead_kb already held want before the restore (cur:
// an earlier revert wrote it and was killed before the files followed),
// so that restore wrote nothing and followed nothing (a.mu held).
func (a *Actuator) followBack(dev string, rec *Original, cur, want State) {
	if a.follower == nil || rec.Applied == nil || want.ReadAheadKiB == leaveReadAhead ||
		cur.ReadAheadKiB != want.ReadAheadKiB || rec.Applied.ReadAheadKiB == want.ReadAheadKiB {
		return
	}
	a.follower.FollowReadAhead(dev, rec.Applied.ReadAheadKiB, want.ReadAheadKiB)
}

// followReadAhead calls the follower after read_ahead_kb of dev went from
// the value from to to (a.mu held).
func (a *Actuator) followReadAhead(dev, attr, from, to string) {
	if a.follower == nil || attr != AttrReadAhead {
		return
	}
	f, errF := strconv.Atoi(from)
	t, errT := strconv.Atoi(to)
	if errF == nil && errT == nil {
		a.follower.FollowReadAhead(dev, f, t)
	}
}

// Revert puts dev back to its recorded original state and then removes
// the record. It does nothing (nil) for a device without a record. A
// device that is gone, or whose name now belongs to another device,
// returns ErrDeviceGone, is not touched and keeps its record (see
// Forget). A device another Actuator owns returns an *OwnedError
// (ErrOwned), nothing written. A record that cannot be loaded
// (BadRecords) or whose values do not fit the device (a scheduler the
// kernel does not offer, a tunable the scheduler does not have, read-ahead
// out of range) returns ErrCorruptState and nothing is written. If any
// value cannot be restored or read back, the others are still restored,
// the record is kept and the error joins every failure. Revert does not
// write the state directory before restoring: when the device is restored
// but its record cannot be removed (a read-only or full state file
// system), the error is a *RecordError (ErrRecordNotUpdated) and the
// record is kept; reverting again verifies the device and retries. A
// value another writer set after shadowtune's change (neither the
// original, nor what shadowtune applied, nor the target of its change in
// progress) is left, with the tunables of a scheduler left so: the rest
// is restored, the record removed, and the error is a *LeftError
// (ErrOtherWriter) saying what was left, one line per knob.
func (a *Actuator) Revert(dev string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	a.flush()
	return a.revert(dev)
}

func (a *Actuator) revert(dev string) error {
	rec := a.records[dev]
	if rec == nil {
		return a.bad[dev]
	}
	if err := a.checkIdentity(dev, rec); err != nil {
		return err
	}
	return a.restoreRecord(dev, rec, "revert")
}

// restoreRecord claims dev, puts its recorded original back (checked
// against the device first, all or nothing) and removes the record. A
// knob another writer changed since shadowtune's change keeps its value
// (see Original.ownedState): the error is then a *LeftError naming each,
// and the revert is otherwise complete. what names the operation in
// errors; a record that cannot be removed is a *RecordError with
// Restored set.
func (a *Actuator) restoreRecord(dev string, rec *Original, what string) error {
	if err := a.claim(dev); err != nil {
		return err
	}
	defer func() { _ = a.settle(dev) }() // a claim file left behind is retaken by the next claimer
	if err := a.restorable(dev, rec.State, "original"); err != nil {
		return err
	}
	cur, err := a.readState(dev)
	if err != nil {
		return err
	}
	want, left := rec.ownedState(cur)
	if err := a.restore(dev, want); err != nil {
		return fmt.Errorf("actuate: %s %s: %w", what, dev, err)
	}
	a.followBack(dev, rec, cur, want)
	var lerr error
	if len(left) > 0 {
		lerr = &LeftError{Device: dev, Left: left}
	}
	if err := removeState(a.stateDir, dev); err != nil {
		return errors.Join(&RecordError{Device: dev, Path: statePath(a.stateDir, dev), Op: "remove", Restored: true, Err: err}, lerr)
	}
	delete(a.records, dev)
	return lerr
}

// RevertDetached puts dev's original back on a device whose medium went
// away while it was recorded, and drops the record: the kernel keeps the
// queue of a detached loop device, settings and all, for the next device
// attached under the name, so that device would otherwise inherit what
// shadowtune set. The queue must be the recorded one: the same MAJOR:MINOR
// in the same boot (its diskseq changes on detach and attach). Errors are
// Revert's; ErrDeviceGone when the queue is not the recorded one.
func (a *Actuator) RevertDetached(dev string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return errClosed
	}
	rec := a.records[dev]
	if rec == nil {
		return a.bad[dev]
	}
	id, err := a.identity(dev)
	if err != nil {
		return err
	}
	if id.majorMinor != rec.MajorMinor || rec.BootID == "" || rec.BootID != a.bootID {
		return &AttrError{Op: "read", Device: dev, Path: a.store.Path(dev, attrDev), Kind: ErrDeviceGone,
			Err: fmt.Errorf("now dev %s, recorded dev %s in boot %q (this boot %q): not the recorded queue", id.majorMinor, rec.MajorMinor, rec.BootID, a.bootID)}
	}
	return a.restoreRecord(dev, rec, "revert detached")
}

// RevertAll reverts every recorded device, in name order, then every
// recorded dm-cache (named "dm-cache/NAME", see SetCacheMode), and returns
// those restored (their original values read back). A failure on one
// device does not stop the others. The error is nil when every record was
// restored and removed, else a *RevertError that sorts the others: Gone
// (gone or replaced, untouched: not a failure of the revert, report them
// and Forget them), Failed (not restored: a write failed, a record that
// cannot be loaded or does not fit the device, a device another Actuator
// owns), RecordKept (restored, but the record could not be removed;
// these are in the returned list too) and Left (restored except the
// values another writer changed since, which were left, *LeftError;
// these are in the returned list too).
func (a *Actuator) RevertAll() ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return nil, errClosed
	}
	a.flush()
	var done []string
	re := &RevertError{}
	devs := slices.Sorted(maps.Keys(a.records))
	for dev := range a.bad {
		devs = append(devs, dev)
	}
	slices.Sort(devs)
	for _, dev := range devs {
		err := a.revert(dev)
		var rerr *RecordError
		var lerr *LeftError
		if errors.As(err, &lerr) {
			re.Left = append(re.Left, DeviceError{dev, lerr})
			if !errors.As(err, &rerr) {
				err = nil // restored, but for what was left
			}
		}
		switch {
		case err == nil:
			done = append(done, dev)
		case errors.As(err, &rerr) && rerr.Restored:
			done = append(done, dev)
			re.RecordKept = append(re.RecordKept, DeviceError{dev, err})
		case errors.Is(err, ErrDeviceGone):
			re.Gone = append(re.Gone, DeviceError{dev, err})
		default:
			re.Failed = append(re.Failed, DeviceError{dev, err})
		}
	}
	done = append(done, a.revertCaches(re)...)
	// After the modes: a mode record of an attached cache is put back
	// before the cache is taken away.
	done = append(done, a.revertAttachedAll(re)...)
	if len(re.Gone)+len(re.Failed)+len(re.RecordKept)+len(re.Left) == 0 {
		return done, nil
	}
	return done, re
}

// knownTunables are the writable queue/iosched files of each scheduler
// on Linux 5.x-6.x that a record may hold for a scheduler that is not
// current (when it is current, its files are checked instead): every
// tunable of the knob table, tuned or restored.
var knownTunables = func() map[string][]string {
	m := map[string][]string{}
	for _, s := range knob.Schedulers() {
		m[s] = slices.Sorted(slices.Values(knob.Recorded(s)))
	}
	return m
}()

// restorable checks a recorded State against the device's current
// options before anything is written: the scheduler is offered, every
// tunable exists (or is a known tunable of a scheduler that is not
// current), every queue attribute exists, read-ahead is whole pages in
// [0, MaxReadAheadKiB]. what names the record's field ("original").
func (a *Actuator) restorable(dev string, want State, what string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", what, field, fmt.Sprintf(format, args...)))
	}
	if err := want.check(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	offered, cur, err := a.readScheduler(dev)
	switch {
	case err == nil:
	case errors.Is(err, ErrNotAllowed):
		if want.Scheduler != "" {
			bad("scheduler", "%q, but the device has no scheduler (bio-based)", want.Scheduler)
		}
	default:
		return err
	}
	if want.Scheduler != "" && err == nil {
		if !slices.Contains(offered, want.Scheduler) {
			bad("scheduler", "%q is not offered by the kernel (offers %s)", want.Scheduler, strings.Join(offered, ", "))
		} else if want.Scheduler == cur && cur != "none" {
			exposed, err := a.list(dev, AttrIosched)
			if err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(want.Tunables)) {
				if !slices.Contains(exposed, k) {
					bad("tunables", "%s: %s has no such file", k, a.store.Path(dev, AttrIosched))
				}
			}
		} else if known, ok := knownTunables[want.Scheduler]; ok {
			for _, k := range slices.Sorted(maps.Keys(want.Tunables)) {
				if !slices.Contains(known, k) {
					bad("tunables", "%s is not a tunable of %s", k, want.Scheduler)
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.Queue)) {
		if _, err := a.read(dev, "queue/"+k); err != nil {
			bad("queue", "%s: %v", k, err)
		}
	}
	if want.ReadAheadKiB%a.pageKiB != 0 {
		bad("read_ahead_kb", "%d is not a multiple of the %d KiB page", want.ReadAheadKiB, a.pageKiB)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("actuate: %s: record %s does not fit the device, nothing written: %w: %w",
		dev, statePath(a.stateDir, dev), ErrCorruptState, errors.Join(errs...))
}

// restore puts dev into state want: the scheduler, then the queue
// attributes a switch resets, then the tunables, then read-ahead; each
// value is written only if it differs and is read back. It goes on after
// a failure (best effort) and finally compares the whole state. A
// Scheduler "" and ReadAheadKiB leaveReadAhead are left as they are.
func (a *Actuator) restore(dev string, want State) error {
	var errs []error
	if want.Scheduler != "" {
		if err := a.restoreScheduler(dev, want.Scheduler); err != nil {
			// nr_requests and the tunables belong to the scheduler:
			// without it, only read-ahead can still be put back.
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		for _, k := range queueSideEffects {
			if v, ok := want.Queue[k]; ok {
				if _, err := a.setIfDiffers(dev, "queue/"+k, v); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(want.Tunables)) {
			if _, err := a.setIfDiffers(dev, AttrIosched+"/"+k, want.Tunables[k]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if want.ReadAheadKiB != leaveReadAhead {
		if _, err := a.setIfDiffers(dev, AttrReadAhead, strconv.Itoa(want.ReadAheadKiB)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	got, err := a.readState(dev)
	if err != nil {
		return err
	}
	return a.compare(dev, want, got)
}

// restoreScheduler selects name unless it is already current.
func (a *Actuator) restoreScheduler(dev, name string) error {
	_, cur, err := a.readScheduler(dev)
	if err != nil {
		return err
	}
	if cur == name {
		return nil
	}
	return a.writeScheduler(dev, name)
}

// compare returns an error for each recorded value that got does not
// have (a Scheduler "" or ReadAheadKiB leaveReadAhead is not compared).
func (a *Actuator) compare(dev string, want, got State) error {
	var errs []error
	if want.Scheduler != "" && want.Scheduler != got.Scheduler {
		errs = append(errs, a.mismatch(dev, AttrScheduler, want.Scheduler, got.Scheduler))
	}
	for _, k := range slices.Sorted(maps.Keys(want.Queue)) {
		if got.Queue[k] != want.Queue[k] {
			errs = append(errs, a.mismatch(dev, "queue/"+k, want.Queue[k], got.Queue[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.Tunables)) {
		if got.Tunables[k] != want.Tunables[k] {
			errs = append(errs, a.mismatch(dev, AttrIosched+"/"+k, want.Tunables[k], got.Tunables[k]))
		}
	}
	if want.ReadAheadKiB != leaveReadAhead && want.ReadAheadKiB != got.ReadAheadKiB {
		errs = append(errs, a.mismatch(dev, AttrReadAhead, strconv.Itoa(want.ReadAheadKiB), strconv.Itoa(got.ReadAheadKiB)))
	}
	return errors.Join(errs...)
}

// readState reads the device's current State.
func (a *Actuator) readState(dev string) (State, error) {
	var st State
	_, cur, err := a.readScheduler(dev)
	switch {
	case err == nil:
		st.Scheduler = cur
	case errors.Is(err, ErrNotAllowed): // no queue/scheduler: a bio-based device
	default:
		return State{}, err
	}
	if st.Scheduler != "" && st.Scheduler != "none" {
		names, err := a.list(dev, AttrIosched)
		if err != nil {
			return State{}, err
		}
		st.Tunables = make(map[string]string, len(names))
		for _, n := range names {
			v, err := a.read(dev, AttrIosched+"/"+n)
			if err != nil {
				return State{}, err
			}
			st.Tunables[n] = v
		}
	}
	for _, k := range queueSideEffects {
		v, err := a.read(dev, "queue/"+k)
		switch {
		case err == nil:
			if st.Queue == nil {
				st.Queue = map[string]string{}
			}
			st.Queue[k] = v
		case errors.Is(err, ErrNotAllowed), errors.Is(err, ErrRejected):
			// Absent (bio-based), or wbt_lat_usec on a queue without
			// writeback throttling, whose show returns EINVAL.
		default:
			return State{}, err
		}
	}
	ra, err := a.read(dev, AttrReadAhead)
	if err != nil {
		return State{}, err
	}
	n, perr := strconv.Atoi(ra)
	if perr != nil || n < 0 {
		return State{}, &AttrError{Op: "read", Device: dev, Path: a.store.Path(dev, AttrReadAhead),
			Err: fmt.Errorf("%q is not a KiB count", ra)}
	}
	st.ReadAheadKiB = n
	return st, nil
}

// offered returns the schedulers queue/scheduler lists.
func (a *Actuator) offered(dev string) ([]string, error) {
	list, _, err := a.readScheduler(dev)
	return list, err
}

// readScheduler reads and parses queue/scheduler: the schedulers offered
// and the current one. Errors are those of reading the attribute (one
// wrapping ErrNotAllowed when the device has none: a bio-based device),
// or an *AttrError for content sysfs.ParseScheduler rejects.
func (a *Actuator) readScheduler(dev string) (list []string, current string, err error) {
	raw, err := a.read(dev, AttrScheduler)
	if err != nil {
		return nil, "", err
	}
	list, current, err = sysfs.ParseScheduler(raw)
	if err != nil {
		return nil, "", &AttrError{Op: "read", Device: dev, Path: a.store.Path(dev, AttrScheduler), Err: err}
	}
	return list, current, nil
}

type identity struct {
	majorMinor string
	diskSeq    uint64
	stableID   string
}

// stableIDAttrs are read, in order, for a disk's own identity: the
// first that exists and is not empty is the disk's stable ID.
var stableIDAttrs = []string{"wwid", "device/wwid", "serial", "device/serial"}

// identity reads the device's dev, diskseq and stable ID.
func (a *Actuator) identity(dev string) (identity, error) {
	mm, err := a.read(dev, attrDev)
	if err != nil {
		if errors.Is(err, ErrNotAllowed) {
			return identity{}, &AttrError{Op: "read", Device: dev, Path: a.store.Path(dev, attrDev), Kind: ErrDeviceGone,
				Err: errors.New("no such whole disk (a partition, or a device that went away)")}
		}
		return identity{}, err
	}
	id := identity{majorMinor: mm}
	if s, err := a.read(dev, attrDiskSeq); err == nil {
		id.diskSeq, _ = strconv.ParseUint(s, 10, 64)
	}
	for _, attr := range stableIDAttrs {
		if s, err := a.read(dev, attr); err == nil && s != "" {
			id.stableID = s
			break
		}
	}
	return id, nil
}

// bootIDOf returns the kernel's boot_id through the store (a method
// BootID() (string, error)), or /proc/sys/kernel/random/boot_id for the
// real sysfs (boot_id is not namespaced: a container sees the host's);
// "" if unknown.
func bootIDOf(st Store) string {
	var id string
	switch s := st.(type) {
	case interface{ BootID() (string, error) }:
		id, _ = s.BootID()
	case SysfsStore:
		b, err := os.ReadFile(filepath.Join(hostRootOf(s.Root), "proc/sys/kernel/random/boot_id"))
		if err != nil && s.Root != "" && s.Root != "/" {
			b, err = os.ReadFile("/proc/sys/kernel/random/boot_id")
		}
		if err == nil {
			id = string(b)
		}
	}
	return strings.TrimSpace(id)
}

// sameDevice decides whether the device now named like rec is the device
// rec was recorded for (see the package documentation, "Identity").
func (a *Actuator) sameDevice(rec *Original, id identity) (bool, string) {
	if id.majorMinor != rec.MajorMinor {
		return false, "another device number"
	}
	sameBoot := rec.BootID == "" || a.bootID == "" || rec.BootID == a.bootID
	if sameBoot {
		if rec.DiskSeq != 0 && id.diskSeq != 0 && id.diskSeq != rec.DiskSeq {
			return false, "another diskseq: the device was detached and another attached under its name"
		}
		return true, ""
	}
	// After a reboot diskseq restarts: the disk's own identity decides.
	switch {
	case rec.StableID != "" || id.stableID != "":
		if rec.StableID != id.stableID {
			return false, fmt.Sprintf("the machine rebooted and the disk's wwid/serial is now %q, recorded %q", id.stableID, rec.StableID)
		}
		return true, ""
	case isVolatile(rec.Device):
		return false, "the machine rebooted, and a " + rec.Device + " of a new boot is a new device"
	}
	return true, ""
}

// isVolatile reports whether devices of this kind never survive a reboot
// as the same disk: loop, nbd, zram, ram disks and device-mapper/md
// devices whose numbers are handed out at set-up time.
func isVolatile(dev string) bool {
	for _, p := range []string{"loop", "nbd", "zram", "ram", "dm-", "md"} {
		if strings.HasPrefix(dev, p) {
			return true
		}
	}
	return false
}

// checkIdentity returns ErrDeviceGone if dev does not exist, or if rec is
// not nil and dev is no longer the device rec was recorded for.
func (a *Actuator) checkIdentity(dev string, rec *Original) error {
	id, err := a.identity(dev)
	if err != nil {
		return err
	}
	if rec == nil {
		return nil
	}
	if ok, why := a.sameDevice(rec, id); !ok {
		return &AttrError{Op: "read", Device: dev, Path: a.store.Path(dev, attrDev), Kind: ErrDeviceGone,
			Err: fmt.Errorf("now dev %s diskseq %d, but the original was recorded at %s for dev %s diskseq %d: %s; a new device never inherits a setting (forget the record: shadowtune state forget %s)",
				id.majorMinor, id.diskSeq, rec.RecordedAt.Format(time.RFC3339), rec.MajorMinor, rec.DiskSeq, why, dev)}
	}
	return nil
}

// read reads an attribute, trimmed, with classified errors. A missing
// file is ErrDeviceGone if the device itself is gone, else ErrNotAllowed
// (the device does not have this attribute).
func (a *Actuator) read(dev, attr string) (string, error) {
	v, err := a.store.Read(dev, attr)
	if err != nil {
		return "", a.classify("read", dev, attr, "", err)
	}
	return strings.TrimSpace(v), nil
}

func (a *Actuator) write(dev, attr, v string) error {
	if err := a.store.Write(dev, attr, v); err != nil {
		return a.classify("write", dev, attr, v, err)
	}
	a.at("wrote " + attr)
	return nil
}

func (a *Actuator) list(dev, dir string) ([]string, error) {
	names, err := a.store.List(dev, dir)
	if err != nil {
		return nil, a.classify("read", dev, dir, "", err)
	}
	out := names[:0]
	for _, n := range names {
		if validAttrName(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (a *Actuator) classify(op, dev, attr, v string, err error) error {
	e := &AttrError{Op: op, Device: dev, Path: a.store.Path(dev, attr), Value: v, Err: err, Kind: kindOf(err)}
	if e.Kind == nil && errors.Is(err, fs.ErrNotExist) {
		_, serr := a.store.Read(dev, attrDev)
		var pe *fs.PathError
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			e.Kind = ErrDeviceGone
		case op == "write" && errors.As(err, &pe) && pe.Op == "write" && errors.Is(err, syscall.ENOENT):
			// The file exists and the kernel's store returned ENOENT:
			// elevator switching is blocked for now.
			e.Kind = ErrBusy
		default:
			e.Kind = ErrNotAllowed
		}
	}
	return e
}

// validAttrName accepts a single path element.
func validAttrName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00\n")
}
