package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Limits of the StorageTuning schema. The CRD markers below repeat the
// numbers (markers cannot name constants); Validate uses these.
const (
	// MaxDeviceGlobs is the most include or exclude globs.
	MaxDeviceGlobs = 32
	// MaxGlobLength is the longest glob, in bytes.
	MaxGlobLength = 64
	// MaxTunableRanges is the most entries in spec.tunables.
	MaxTunableRanges = 12
	// MaxTunableRangesPerScheduler bounds the candidates per scheduler to
	// MaxTunableSteps^MaxTunableRangesPerScheduler = 256 combinations.
	MaxTunableRangesPerScheduler = 4
	// MinTunableSteps and MaxTunableSteps bound TunableRange.steps.
	MinTunableSteps = 2
	MaxTunableSteps = 4
	// MinReadAheadKiB and MaxReadAheadKiB bound the read-ahead depths; both
	// bounds must be multiples of 4 KiB.
	MinReadAheadKiB = 4
	MaxReadAheadKiB = 65536
	// MaxMarginPercent is the largest switching margin.
	MaxMarginPercent = 50
	// MaxProvisionVolumes is the most entries in
	// spec.cache.provision.logicalVolumes.
	MaxProvisionVolumes = 16
	// FastDeviceRAM is spec.cache.provision.fastDevice's RAM disk.
	FastDeviceRAM = "ram"
)

// TuningMode says whether shadowtune only reports or also changes devices.
// +kubebuilder:validation:Enum=Observe;Apply
type TuningMode string

const (
	// ModeObserve simulates and reports; it never changes a device, and
	// switching a policy to Observe puts back every device it changed.
	ModeObserve TuningMode = "Observe"
	// ModeApply applies recommendations, gated by the roll-out policy.
	ModeApply TuningMode = "Apply"
)

// StorageTuningSpec is the policy.
//
// Optional fields take the schema's defaults, which Default also applies;
// after Default every pointer field that has a default is non-nil (only
// nodeSelector, devices.rotational and devices.minSizeBytes may stay nil).
//
// +kubebuilder:validation:XValidation:rule="!has(self.tunables) || !has(self.schedulers) || !has(self.schedulers.candidates) || self.tunables.all(t, t.scheduler in self.schedulers.candidates)",message="every tunables[].scheduler must be one of spec.schedulers.candidates",fieldPath=".tunables"
type StorageTuningSpec struct {
	// mode is Observe (simulate and report; the default) or Apply.
	// +kubebuilder:default=Observe
	// +optional
	Mode TuningMode `json:"mode,omitempty"`

	// nodeSelector selects the nodes this policy governs; unset or empty
	// selects every node. The API server checks its shape, the operators
	// and the values' presence; the operator checks the label syntax and
	// reports a bad selector in the Degraded condition.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && size(e.values) > 0))",message="matchExpressions[].values must not be empty for In and NotIn",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions[].values must be empty for Exists and DoesNotExist",fieldPath=".matchExpressions"
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// devices selects the block devices of a selected node.
	// +kubebuilder:default={}
	// +optional
	Devices DeviceSelector `json:"devices,omitempty"`

	// schedulers are the blk-mq schedulers the simulation compares.
	// +kubebuilder:default={}
	// +optional
	Schedulers SchedulerPolicy `json:"schedulers,omitempty"`

	// tunables are ranges of scheduler tunables to explore. A candidate is
	// a scheduler with one value of each of its ranges (the cartesian
	// product); tunables not named keep the kernel's
	// default. At most 4 ranges per scheduler, so at most 4^4 = 256
	// combinations per scheduler.
	// +kubebuilder:validation:MaxItems=12
	// +kubebuilder:validation:XValidation:rule="['mq-deadline', 'bfq', 'kyber'].all(s, self.filter(t, t.scheduler == s).size() <= 4)",message="at most 4 tunable ranges per scheduler"
	// +listType=map
	// +listMapKey=scheduler
	// +listMapKey=name
	// +optional
	Tunables []TunableRange `json:"tunables,omitempty"`

	// readAhead bounds the read-ahead depth the agent may recommend.
	// +kubebuilder:default={}
	// +optional
	ReadAhead ReadAheadPolicy `json:"readAhead,omitempty"`

	// cache configures the simulation of a REDCAP RAM cache, the governance
	// of a dm-cache in front of a governed device and, when provision is
	// set, the caches the agent attaches to LVM logical volumes.
	// +kubebuilder:default={}
	// +optional
	Cache CachePolicy `json:"cache,omitempty"`

	// evaluation configures the collect–simulate–decide loop.
	// +kubebuilder:default={}
	// +optional
	Evaluation EvaluationPolicy `json:"evaluation,omitempty"`

	// rollout gates how Apply mode changes reach the fleet.
	// +kubebuilder:default={}
	// +optional
	Rollout RolloutPolicy `json:"rollout,omitempty"`

	// priority decides between policies that select the same device: the
	// highest wins; on a tie, neither governs it and both report Conflict.
	// +kubebuilder:default=0
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// paused stops new changes; devices keep their current settings and
	// the simulation keeps reporting.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// otherWriters says what the agent does when something else (a udev
	// rule, TuneD, a cloud guest agent, an administrator) changes a
	// setting it governs: Yield (the default) hands the device back at
	// once (what is still the agent's own is restored, the other writer's
	// values stay) and stops changing it; Reclaim keeps governing it and
	// restores the original at exit as usual.
	// +kubebuilder:validation:Enum=Yield;Reclaim
	// +kubebuilder:default=Yield
	// +optional
	OtherWriters OtherWritersPolicy `json:"otherWriters,omitempty"`

	// sentinel configures what the agent does when a device's queue
	// defaults changed between two of its starts (a kernel or node-image
	// upgrade): it always reports and judges the change; this says
	// whether it may also undo it.
	// +kubebuilder:default={}
	// +optional
	Sentinel SentinelPolicy `json:"sentinel,omitempty"`
}

// SentinelPolicy is spec.sentinel.
type SentinelPolicy struct {
	// restorePreviousDefaults, in Apply mode, puts a device's previous
	// read_ahead_kb back when its new default is predicted slower by the
	// margin for the readers the page-cache evidence measured, while the
	// device is still at the new default; the change is verified like
	// any other, and the read-ahead road makes no other move until its
	// verdict. It needs spec.readAhead.enabled. In Observe mode, or
	// false (the default), a changed default is only reported and
	// judged.
	// +kubebuilder:default=false
	// +optional
	RestorePreviousDefaults *bool `json:"restorePreviousDefaults,omitempty"`
}

// OtherWritersPolicy is spec.otherWriters: Yield or Reclaim.
type OtherWritersPolicy string

const (
	// OtherWritersYield stops changing a device another writer changed.
	OtherWritersYield OtherWritersPolicy = "Yield"
	// OtherWritersReclaim keeps governing a device another writer changed.
	OtherWritersReclaim OtherWritersPolicy = "Reclaim"
)

// DeviceSelector selects block devices by kernel name, kind and size.
//
// A device is selected when its name matches an include glob (or include is
// empty), matches no exclude glob, and passes rotational and minSizeBytes
// (when set). Exclude wins over include. Globs use Go's path.Match syntax
// (*, ?, [a-z], [^0-9]) over the kernel name without /dev/, e.g. "sd*",
// "nvme*n1", "loop[0-9]*"; backslash escapes are not accepted.
type DeviceSelector struct {
	// include lists name globs; empty selects every device.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^([A-Za-z0-9_.:*?-]|\[\^?([A-Za-z0-9_.:](-[A-Za-z0-9_.:])?)+\])+$`
	// +listType=set
	// +optional
	Include []string `json:"include,omitempty"`

	// exclude lists name globs; a device matching one is never selected.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^([A-Za-z0-9_.:*?-]|\[\^?([A-Za-z0-9_.:](-[A-Za-z0-9_.:])?)+\])+$`
	// +listType=set
	// +optional
	Exclude []string `json:"exclude,omitempty"`

	// rotational, when set, selects only rotational (true) or only
	// non-rotational (false) devices (queue/rotational).
	// +optional
	Rotational *bool `json:"rotational,omitempty"`

	// minSizeBytes, when set, selects only devices at least this large.
	// A quantity: 107374182400, "100Gi" and "100G" are all accepted.
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="minSizeBytes must not be negative"
	// +optional
	MinSizeBytes *resource.Quantity `json:"minSizeBytes,omitempty"`
}

// SchedulerPolicy lists the schedulers to compare.
// +kubebuilder:validation:XValidation:rule="!has(self.default) || !has(self.candidates) || self.default in self.candidates",message="default must be one of the candidates",fieldPath=".default"
type SchedulerPolicy struct {
	// candidates are the schedulers the simulation compares; default all
	// four. Unique, not empty.
	// +kubebuilder:default={none,mq-deadline,bfq,kyber}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=set
	// +optional
	Candidates []SchedulerName `json:"candidates,omitempty"`

	// default is the scheduler the thrash guard pins after repeated
	// changes; one of the candidates. Default mq-deadline.
	// +kubebuilder:default=mq-deadline
	// +optional
	Default SchedulerName `json:"default,omitempty"`
}

// TunableRange is a range of one scheduler tunable, in sysfs name and units
// (queue/iosched/NAME: e.g. read_expire in ms, read_lat_nsec in ns), or of
// a queue attribute set with the scheduler (queue/nr_requests, in
// requests: how many requests the scheduler may hold, 4 to 2048). The
// candidate values are Steps values spread evenly from Min to Max, both
// included (Values). The names, units and bounds are the knob table's
// (api/knob).
//
// +kubebuilder:validation:XValidation:rule="self.scheduler == 'mq-deadline' ? self.name in ['read_expire', 'write_expire', 'fifo_batch', 'writes_starved', 'front_merges', 'nr_requests'] : self.scheduler == 'bfq' ? self.name in ['slice_idle', 'slice_idle_us', 'low_latency', 'back_seek_max', 'back_seek_penalty', 'fifo_expire_sync', 'fifo_expire_async', 'timeout_sync', 'max_budget', 'strict_guarantees', 'nr_requests'] : self.name in ['read_lat_nsec', 'write_lat_nsec', 'nr_requests']",message="name must be a tunable of the scheduler (mq-deadline: read_expire, write_expire, fifo_batch, writes_starved, front_merges, nr_requests; bfq: slice_idle, slice_idle_us, low_latency, back_seek_max, back_seek_penalty, fifo_expire_sync, fifo_expire_async, timeout_sync, max_budget, strict_guarantees, nr_requests; kyber: read_lat_nsec, write_lat_nsec, nr_requests)",fieldPath=".name"
// +kubebuilder:validation:XValidation:rule="self.min <= self.max",message="max must be greater than or equal to min",fieldPath=".max"
// +kubebuilder:validation:XValidation:rule="!(self.name in ['front_merges', 'low_latency', 'strict_guarantees']) || self.max <= 1",message="front_merges, low_latency and strict_guarantees take 0 or 1: max must be at most 1",fieldPath=".max"
// +kubebuilder:validation:XValidation:rule="(self.name != 'nr_requests' || (self.min >= 4 && self.max <= 2048))",message="nr_requests takes 4 to 2048: min and max must be in that range",fieldPath=".max"
type TunableRange struct {
	// scheduler is mq-deadline, bfq or kyber (none has no tunables); it
	// must be one of spec.schedulers.candidates.
	Scheduler TunableSchedulerName `json:"scheduler"`

	// name is the sysfs name of the tunable, or nr_requests.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`

	// min is the smallest value; default 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	// +optional
	Min int64 `json:"min,omitempty"`

	// max is the largest value; at least Min.
	// +kubebuilder:validation:Minimum=0
	Max *int64 `json:"max"`

	// steps is the number of values from Min to Max, both included: 2 to
	// 4, default 3. Min == Max gives one value.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=4
	// +kubebuilder:default=3
	// +optional
	Steps *int32 `json:"steps,omitempty"`
}

// ReadAheadPolicy is how the agent may set read_ahead_kb: it cuts the
// depth only where the page cache measures read-ahead pages going unused,
// restores it once they are used again, and keeps a depth outside
// [minKiB, maxKiB] inside that range.
// +kubebuilder:validation:XValidation:rule="!has(self.minKiB) || !has(self.maxKiB) || self.minKiB <= self.maxKiB",message="maxKiB must be greater than or equal to minKiB",fieldPath=".maxKiB"
type ReadAheadPolicy struct {
	// enabled lets the agent recommend (and in Apply mode set) the
	// read-ahead depth. Default true.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// minKiB is the smallest depth, KiB: 4 to 65536, a multiple of 4;
	// default 16.
	// +kubebuilder:validation:Minimum=4
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:MultipleOf=4
	// +kubebuilder:default=16
	// +optional
	MinKiB *int32 `json:"minKiB,omitempty"`

	// maxKiB is the largest depth, KiB: 4 to 65536, a multiple of 4, at
	// least minKiB; default 4096.
	// +kubebuilder:validation:Minimum=4
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:MultipleOf=4
	// +kubebuilder:default=4096
	// +optional
	MaxKiB *int32 `json:"maxKiB,omitempty"`
}

// CachePolicy configures the block cache: the simulated REDCAP RAM cache
// (DESIGN §6), a dm-cache in front of a governed device and, opt-in, the
// writethrough caches the agent attaches to LVM logical volumes
// (lvmcache(7)).
// +kubebuilder:validation:XValidation:rule="!has(self.provision) || (has(self.enabled) && self.enabled)",message="provision needs enabled: true",fieldPath=".provision"
type CachePolicy struct {
	// enabled simulates every candidate also with the cache, and reports
	// the result (recommendation.redcap). On a governed device that is the
	// origin of a dm-cache, the cache is simulated at its own size and block
	// size instead and, in Apply mode, turned on (writethrough) or off
	// (passthrough) by the simulation, the cache's counters and the
	// application's measured read response time; its original mode is put
	// back on revert. Default false.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// memoryBudget is the size of the simulated cache on a device without
	// a dm-cache: 1Mi to 64Gi, default 64Mi (the paper's 512 segments of
	// 128 KiB).
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('64Gi')) <= 0",message="memoryBudget must be between 1Mi and 64Gi"
	// +optional
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`

	// provision, when set, has the agent attach a writethrough cache
	// online to each of the listed LVM logical volumes that has none, in
	// Apply mode only, and detach it at exit, on revert and when the
	// policy no longer lists the volume or leaves Apply mode. A RAM cache
	// is lost in a power failure without losing data (writethrough): the
	// next start of the agent drops it from the volume group and the
	// volume is usable again. Needs enabled: true.
	// +optional
	Provision *CacheProvision `json:"provision,omitempty"`
}

// CacheProvision is spec.cache.provision: the LVM logical volumes the
// agent caches and the device the caches are put on (lvmcache(7), "dm-cache
// with cachevol").
// +kubebuilder:validation:XValidation:rule="!has(self.fastDevice) || self.fastDevice == 'ram' || size(self.logicalVolumes) == 1",message="a fastDevice path caches one logical volume",fieldPath=".logicalVolumes"
type CacheProvision struct {
	// logicalVolumes are the volumes to cache, as "VG/LV" (volume group
	// and logical volume names: letters, digits and + _ . -, not starting
	// with a hyphen or a period, at most 127 bytes each): 1 to 16 items,
	// no duplicates. A volume that is missing, inactive or already cached
	// by something else is left alone and reported in the status notes.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9+_][A-Za-z0-9+_.-]{0,126}/[A-Za-z0-9+_][A-Za-z0-9+_.-]{0,126}$`
	// +kubebuilder:validation:items:MaxLength=255
	// +listType=set
	LogicalVolumes []string `json:"logicalVolumes"`

	// fastDevice is where each cache is put: "ram" (the default), a RAM
	// disk of memoryBudget bytes per volume (a compressed zram disk for a
	// volume with 4096-byte logical blocks, else the brd disk /dev/ram0,
	// which serves one volume and is loaded by the agent when absent), or
	// the absolute path of an unused block device under /dev, which then
	// becomes a physical volume of the volume's group holding a cache of
	// up to memoryBudget bytes; it must not be a physical volume or hold a
	// signature. A path caches one volume. At most 128 bytes.
	// +kubebuilder:default=ram
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^(ram|/dev(/[A-Za-z0-9_+:-][A-Za-z0-9_.+:-]*)+)$`
	// +optional
	FastDevice string `json:"fastDevice,omitempty"`
}

// EvaluationPolicy configures collect–simulate–decide (DESIGN §6).
type EvaluationPolicy struct {
	// window is the length of one collect phase: 1s to 5m, default 5s.
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="window must be between 1s and 5m"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`

	// marginPercent is the predicted improvement, in whole percent of the
	// current setting's total service time, a candidate needs before the
	// agent switches to it: 0 to 50, default 5. An integer because CRDs
	// do not carry floats.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	// +kubebuilder:default=5
	// +optional
	MarginPercent *int32 `json:"marginPercent,omitempty"`

	// thrashGuard pins the default scheduler after repeated changes.
	// +kubebuilder:default={}
	// +optional
	ThrashGuard ThrashGuardPolicy `json:"thrashGuard,omitempty"`

	// cpuBudgetPercent is the CPU the simulation of one window may use, in
	// percent of one core over the window: 1 to 100, default 10. Candidates
	// beyond the budget are skipped (and reported).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=10
	// +optional
	CPUBudgetPercent *int32 `json:"cpuBudgetPercent,omitempty"`
}

// ThrashGuardPolicy holds the thrash guard's counts (DESIGN §6,
// internal/decide).
type ThrashGuardPolicy struct {
	// changes is the number of changes in consecutive checks after which
	// the default scheduler is pinned: 1 to 100, default 5.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=5
	// +optional
	Changes *int32 `json:"changes,omitempty"`

	// quietChecks is the number of consecutive checks predicting no change
	// that release the pin: 1 to 1000, default 7.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=7
	// +optional
	QuietChecks *int32 `json:"quietChecks,omitempty"`
}

// RolloutPolicy gates Apply mode across the fleet.
type RolloutPolicy struct {
	// maxUnavailable is how many selected nodes may be changing at once,
	// i.e. hold a grant whose change is not yet verified: a count (≥ 1) or
	// a percentage of the selected nodes ("1%" to "100%", rounded up, at
	// least one node). Default 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="maxUnavailable must be a count of at least 1 or a percentage from 1% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// minDwell is the least time a device keeps a setting before it may be
	// changed again: 0s to 24h, default 10m.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="minDwell must be between 0s and 24h"
	// +optional
	MinDwell *metav1.Duration `json:"minDwell,omitempty"`

	// toleratedRegressionPercent is how much slower than predicted, in
	// whole percent, a device may measure after a change before the change
	// is reverted: 0 to 100, default 5.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=5
	// +optional
	ToleratedRegressionPercent *int32 `json:"toleratedRegressionPercent,omitempty"`
}

// StorageTuningStatus is the fleet-wide result, written by the operator.
type StorageTuningStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready (the policy is reconciled, every selected node
	// reports and the roll-out is not halted), Progressing (a roll-out is
	// under way), Degraded (a change was put back after a measured
	// regression, which halts the roll-out; the node selector is
	// malformed; or, without halting the roll-out, an agent on a selected
	// node was killed for lack of memory in the last 10 minutes or skipped
	// windows for the CPU budget in the last minute) and Conflict (another policy selects some of the same
	// devices).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// matchedNodes is the number of nodes the policy selects.
	// +optional
	MatchedNodes int32 `json:"matchedNodes"`
	// matchedDevices is the number of devices it governs on them.
	// +optional
	MatchedDevices int32 `json:"matchedDevices"`
	// recommendedChanges is the number of devices whose recommendation
	// differs from their current setting.
	// +optional
	RecommendedChanges int32 `json:"recommendedChanges"`
	// changedDevices is the number of devices whose setting shadowtune
	// changed and keeps.
	// +optional
	ChangedDevices int32 `json:"changedDevices"`
	// revertedDevices is the number of governed devices whose agent put a
	// change back after measuring a regression (devices[].reverts > 0 in
	// their NodeStorageState).
	// +optional
	RevertedDevices int32 `json:"revertedDevices"`

	// settings counts governed devices by current scheduler; at most 8
	// entries.
	// +listType=map
	// +listMapKey=scheduler
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Settings []SchedulerCount `json:"settings,omitempty"`

	// predictedGainPercent is the mean predicted improvement of the
	// recommendations over the current settings, a decimal string with one
	// decimal ("7.5"); a string because CRDs do not carry floats.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	PredictedGainPercent string `json:"predictedGainPercent,omitempty"`

	// lastChangeTime is when a governed device was last changed.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// lastRevertTime is when a governed device's change was last put back
	// after a measured regression.
	// +optional
	LastRevertTime *metav1.Time `json:"lastRevertTime,omitempty"`

	// defaultsChanged summarises the governed devices whose queue defaults
	// changed between two starts of their agent (NodeStorageState
	// devices[].defaultsChanged): one entry per distinct change, the most
	// devices first; at most 8 entries.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	DefaultsChanged []DefaultsChangeCount `json:"defaultsChanged,omitempty"`
	// lastDefaultsChangeTime is when an agent last found a governed
	// device's defaults changed.
	// +optional
	LastDefaultsChangeTime *metav1.Time `json:"lastDefaultsChangeTime,omitempty"`
}

// DefaultsChangeCount is one change of queue defaults and where it was
// found.
type DefaultsChangeCount struct {
	// change lists the knobs' defaults, old → new ("read_ahead_kb 128 →
	// 4096").
	// +kubebuilder:validation:MaxLength=1024
	Change string `json:"change"`
	// with names the kernel and node-image changes that came with it
	// ("kernel 6.16.1 → 6.17.2").
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	With string `json:"with,omitempty"`
	// nodes is the number of nodes where it was found.
	// +kubebuilder:validation:Minimum=0
	Nodes int32 `json:"nodes"`
	// devices is the number of governed devices where it was found.
	// +kubebuilder:validation:Minimum=0
	Devices int32 `json:"devices"`
	// slowerDevices is the number of those whose agent judged a knob of
	// the change slower at its new default (the device's
	// defaultsChanged.knobs[].verdict), the predicted effect.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SlowerDevices int32 `json:"slowerDevices,omitempty"`
	// judgedDevices is the number of those whose agent judged a knob of
	// the change at all; the others have not had the evidence yet, or
	// changed only knobs the agent does not model.
	// +kubebuilder:validation:Minimum=0
	// +optional
	JudgedDevices int32 `json:"judgedDevices,omitempty"`
}

// SchedulerCount is the number of devices on one scheduler.
type SchedulerCount struct {
	// scheduler is the kernel's name of the scheduler.
	// +kubebuilder:validation:MaxLength=64
	Scheduler string `json:"scheduler"`
	// count is the number of devices.
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// Condition types of StorageTuning.
const (
	// ConditionReady: the policy is reconciled, every selected node
	// reports, and the roll-out is not halted by a regression (while it
	// is, Ready is False with Degraded's reason and message).
	ConditionReady = "Ready"
	// ConditionProgressing: a roll-out is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded: a governed device's change was put back after a
	// measured regression (the roll-out halts until the node recovers),
	// the node selector is malformed, or (the roll-out goes on) an agent of
	// a selected node was OOM-killed within OOMKillDegradedFor (reason
	// AgentOOMKilled) or a governed device's window was skipped for the CPU
	// budget within CPUBudgetDegradedFor (reason CPUBudgetExceeded). Nodes
	// not reporting show in Ready.
	ConditionDegraded = "Degraded"
	// ConditionConflict: another policy selects some of the same devices;
	// the one of higher spec.priority, then the first by name, governs them
	// (ComparePrecedence).
	ConditionConflict = "Conflict"
)

// Condition reasons of StorageTuning.
const (
	ReasonReconciled         = "Reconciled"
	ReasonNoMatchingNodes    = "NoMatchingNodes"
	ReasonNodesNotReporting  = "NodesNotReporting"
	ReasonObserving          = "Observing"
	ReasonRollingOut         = "RollingOut"
	ReasonRolloutComplete    = "RolloutComplete"
	ReasonPaused             = "Paused"
	ReasonRegressionReverted = "RegressionReverted"
	ReasonInvalidSelector    = "InvalidSelector"
	ReasonAsExpected         = "AsExpected"
	ReasonNoConflict         = "NoConflict"
	ReasonOverridden         = "Overridden"
	ReasonOverrides          = "Overrides"
	ReasonNotApplying        = "NotApplying"
	ReasonWaitingForDwell    = "WaitingForDwell"
)

// StorageTuning is a storage tuning policy: which devices of which nodes
// shadowtune simulates, what it may change, and how changes roll out.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=stune,categories=shadowtune
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.matchedNodes`
// +kubebuilder:printcolumn:name="Devices",type=integer,JSONPath=`.status.matchedDevices`
// +kubebuilder:printcolumn:name="Changed",type=integer,JSONPath=`.status.changedDevices`
// +kubebuilder:printcolumn:name="Gain",type=string,JSONPath=`.status.predictedGainPercent`,description="Mean predicted improvement, percent"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,description="Why the policy is or is not ready"
// +kubebuilder:printcolumn:name="Conflict",type=string,JSONPath=`.status.conditions[?(@.type=="Conflict")].status`,priority=1
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`,priority=1
type StorageTuning struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy: which devices of which nodes, what may change,
	// and how changes roll out. Required: a missing or null spec would
	// default to every disk of every node, the root disk included.
	// (An empty one, {}, is refused by shadowtune run --config; the API
	// server cannot tell it from a spec that sets only defaults.)
	// +kubebuilder:validation:Required
	Spec StorageTuningSpec `json:"spec"`
	// status is the fleet-wide result, written by the operator.
	// +optional
	Status StorageTuningStatus `json:"status,omitempty"`
}

// StorageTuningList is a list of StorageTuning.
//
// +kubebuilder:object:root=true
type StorageTuningList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageTuning `json:"items"`
}
