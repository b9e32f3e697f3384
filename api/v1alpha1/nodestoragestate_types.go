package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HeartbeatInterval is the longest time between two status writes of a
// running agent (NodeStorageStateStatus.LastHeartbeatTime).
const HeartbeatInterval = 60 * time.Second

// Quiet periods after which a node (and the policies governing its
// devices) stop reporting Degraded: OOMKillDegradedFor after the agent
// container was last killed for lack of memory (AgentOOMKill.Time),
// CPUBudgetDegradedFor after a window was last skipped for the CPU budget
// (DeviceState.LastCPUBudgetSkipTime).
const (
	OOMKillDegradedFor   = 10 * HeartbeatInterval
	CPUBudgetDegradedFor = HeartbeatInterval
)

// NodeLabel is the label carrying the node name on a NodeStorageState.
const NodeLabel = Group + "/node"

// Limits of the NodeStorageState schema, sized to keep one object well
// under etcd's 1.5 MiB.
const (
	// MaxNodeDevices is the most devices one NodeStorageState reports.
	MaxNodeDevices = 256
	// MaxDeviceCandidates is the most candidates reported per device: the
	// fastest ones, current setting included.
	MaxDeviceCandidates = 8
)

// NodeStorageStateSpec is written by the operator.
type NodeStorageStateSpec struct {
	// grant, when set, allows the agent to change the listed devices until
	// the grant expires. Without a valid grant, an agent in Apply mode only
	// reports.
	// +optional
	Grant *RolloutGrant `json:"grant,omitempty"`
}

// RolloutGrant is the operator's permission to change devices of one node.
type RolloutGrant struct {
	// devices are the kernel names of the devices that may change.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	Devices []string `json:"devices,omitempty"`

	// until is when the grant expires; the agent makes no change after it.
	Until metav1.Time `json:"until"`

	// policy is the name of the StorageTuning the grant is for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`

	// generation is the policy's metadata.generation the grant is for; a
	// grant for an older generation is void.
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`
}

// NodeStorageStateStatus is written by the node agent.
type NodeStorageStateStatus struct {
	// observedGeneration is the generation of this object (its grant) the
	// agent last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastHeartbeatTime is when the agent last wrote this status. The agent
	// writes at most once per window when something changed and at least
	// once a minute; the operator treats a node whose heartbeat is older
	// as not reporting.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// conditions are Ready (tracing, models ready, not degraded),
	// TracingActive (block I/O is being recorded), ModelReady (every
	// governed device has a disk model good enough to decide with),
	// Applied (every granted change is applied and verified) and Degraded
	// (events dropped, a write to sysfs failed, a change was reverted or
	// another writer changed a device).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// deviceCount is the number of entries in devices.
	// +optional
	DeviceCount int32 `json:"deviceCount"`
	// governedDevices is the number of devices some policy governs.
	// +optional
	GovernedDevices int32 `json:"governedDevices"`
	// pendingDevices is the number of governed devices whose recommendation
	// differs from their current setting.
	// +optional
	PendingDevices int32 `json:"pendingDevices"`
	// appliedDevices is the number of devices whose current setting
	// shadowtune applied.
	// +optional
	AppliedDevices int32 `json:"appliedDevices"`

	// lastUncleanRestartTime is when the agent last started and found that
	// its previous run had ended without a clean shutdown (killed: out of
	// memory, SIGKILL, a node crash). For the next 10 minutes the node
	// reports Degraded, reason "UncleanRestart".
	// +optional
	LastUncleanRestartTime *metav1.Time `json:"lastUncleanRestartTime,omitempty"`

	// agentOOMKill is the agent container's last restart after being
	// killed for lack of memory (its pod's lastState.terminated.reason
	// "OOMKilled"), as the agent read it from its own pod. For 10 minutes
	// after that kill the node and the policies governing its devices
	// report Degraded, reason "AgentOOMKilled".
	// +optional
	AgentOOMKill *AgentOOMKill `json:"agentOOMKill,omitempty"`

	// devices are the node's block devices, by kernel name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Devices []DeviceState `json:"devices,omitempty"`
}

// AgentOOMKill is an out-of-memory kill of the agent container.
type AgentOOMKill struct {
	// pod is the agent pod's name.
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
	// restartCount is the agent container's restart count after the kill.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`
	// time is when the killed container ended.
	Time metav1.Time `json:"time"`
}

// DeviceClass is the kind of a device's disk model: from queue/rotational
// and the transport at first, then by measurement.
// +kubebuilder:validation:Enum=hdd;ssd;nvme;throttled
type DeviceClass string

// Device classes; they choose the disk model (internal/model).
const (
	DeviceClassHDD  DeviceClass = "hdd"
	DeviceClassSSD  DeviceClass = "ssd"
	DeviceClassNVMe DeviceClass = "nvme"
	// DeviceClassThrottled is a device behind a token bucket (a cloud
	// volume's IOPS and bandwidth caps), found by measurement; its caps
	// are in DeviceState.Throttle.
	DeviceClassThrottled DeviceClass = "throttled"
)

// DeviceThrottle is the token bucket the agent measured in front of a
// device.
type DeviceThrottle struct {
	// iops is the request cap, reads and writes together, requests per
	// second; 0 when no request cap was seen.
	// +kubebuilder:validation:Minimum=0
	// +optional
	IOPS int64 `json:"iops,omitempty"`
	// bytesPerSecond is the bandwidth cap; 0 when none was seen.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`
}

// TracerKind is how the agent records a device's block I/O.
// +kubebuilder:validation:Enum=ebpf;tracefs;none
type TracerKind string

// Tracers.
const (
	TracerEBPF    TracerKind = "ebpf"
	TracerTracefs TracerKind = "tracefs"
	TracerNone    TracerKind = "none"
)

// DeviceState is what the agent knows about one device.
type DeviceState struct {
	// name is the kernel name ("sda", "nvme0n1").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// majorMinor is the device number, "MAJOR:MINOR".
	// +kubebuilder:validation:Pattern=`^[0-9]+:[0-9]+$`
	// +kubebuilder:validation:MaxLength=24
	// +optional
	MajorMinor string `json:"majorMinor,omitempty"`
	// model is device/model.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Model string `json:"model,omitempty"`
	// serial is the serial number, when the device reports one.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Serial string `json:"serial,omitempty"`
	// wwn is the world wide name, when the device reports one.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	WWN string `json:"wwn,omitempty"`
	// sizeBytes is the capacity in bytes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// rotational is queue/rotational.
	// +optional
	Rotational bool `json:"rotational,omitempty"`
	// class is the disk model's class: hdd, ssd, nvme, or throttled for
	// a device measured behind a token bucket.
	// +optional
	Class DeviceClass `json:"class,omitempty"`
	// throttle is the token bucket measured in front of a throttled
	// device.
	// +optional
	Throttle *DeviceThrottle `json:"throttle,omitempty"`

	// current is the setting the device has now.
	// +optional
	Current DeviceSettings `json:"current,omitempty"`
	// original is the setting found before shadowtune first changed the
	// device; it is put back on revert, on Observe and on uninstall.
	// +optional
	Original *DeviceSettings `json:"original,omitempty"`

	// governedBy is the name of the StorageTuning that governs the device,
	// empty when none does.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	GovernedBy string `json:"governedBy,omitempty"`
	// mode is the mode of the policy that governs the device (Observe or
	// Apply); empty when no policy governs it.
	// +optional
	Mode TuningMode `json:"mode,omitempty"`
	// paused is true while the governing policy is paused: no new change
	// is made.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// awaitingGrant is true in Apply mode while a recommended change waits
	// for the operator's grant.
	// +optional
	AwaitingGrant bool `json:"awaitingGrant,omitempty"`
	// verifyingWindows is the number of windows left to verify the last
	// change against its prediction; 0 when no change is being verified.
	// +kubebuilder:validation:Minimum=0
	// +optional
	VerifyingWindows int32 `json:"verifyingWindows,omitempty"`
	// modelCalibrated is true once the device's disk model was trained or
	// calibrated on a loaded window; before, decisions use the default
	// model of the device's class.
	// +optional
	ModelCalibrated bool `json:"modelCalibrated,omitempty"`

	// candidates are the fastest simulated candidates of the last window,
	// the current setting included; at most 8.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Candidates []CandidateResult `json:"candidates,omitempty"`

	// recommendation is the decision of the last window.
	// +optional
	Recommendation *Recommendation `json:"recommendation,omitempty"`

	// applied is the last setting the agent applied.
	// +optional
	Applied *AppliedSetting `json:"applied,omitempty"`
	// changes counts the changes the agent made to the device (reverts
	// not included).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Changes int32 `json:"changes,omitempty"`
	// lastChangeTime is when the agent last wrote a setting to the device
	// (a change or a revert); lastChange says what it wrote, from → to.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// lastChange says what the last write changed, from → to, and for a
	// revert why.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastChange string `json:"lastChange,omitempty"`
	// cpuBudgetSkips counts the windows not evaluated because the
	// evaluations were over spec.evaluation.cpuBudgetPercent. While the
	// last of them is recent the node reports Degraded
	// (reason "CPUBudgetExceeded").
	// +kubebuilder:validation:Minimum=0
	// +optional
	CPUBudgetSkips int32 `json:"cpuBudgetSkips,omitempty"`
	// lastCPUBudgetSkipTime is when a window was last skipped for the CPU
	// budget.
	// +optional
	LastCPUBudgetSkipTime *metav1.Time `json:"lastCPUBudgetSkipTime,omitempty"`
	// lastError is the last error of any window (it is not cleared by a
	// later window).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`
	// window is what the last window found.
	// +optional
	Window *WindowState `json:"window,omitempty"`
	// readAhead is the evidence behind the last read-ahead decision.
	// +optional
	ReadAhead *ReadAheadEvidence `json:"readAhead,omitempty"`
	// corrections are the factors learned by verifying changes on this
	// device, by which each candidate's predicted time is multiplied
	// before candidates are compared; at most 16.
	// +listType=map
	// +listMapKey=candidate
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Corrections []LearnedCorrection `json:"corrections,omitempty"`
	// lastVerification is the outcome of the last verified change.
	// +optional
	LastVerification *Verification `json:"lastVerification,omitempty"`
	// counterfactual is how well the simulation predicted this device's
	// verified scheduler changes: each change's predicted time ratio (new
	// setting over previous) against the measured one.
	// +optional
	Counterfactual *CounterfactualState `json:"counterfactual,omitempty"`
	// cache is the dm-cache in front of the device, when there is one
	// and the policy has spec.cache.enabled: its mode, counters and the
	// last decision about it.
	// +optional
	Cache *CacheState `json:"cache,omitempty"`
	// gone says why the device is no longer traced: it was removed, or
	// another device took its name (a new major:minor or diskseq); empty
	// while it is there. Nothing is carried over to a device that takes
	// the name.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Gone string `json:"gone,omitempty"`
	// otherWriter is set once something other than the agent changed a
	// setting the agent governs on the device.
	// +optional
	OtherWriter *OtherWriterState `json:"otherWriter,omitempty"`
	// defaultsChanged is set when the agent, at its start, found the
	// device's queue defaults (its settings before any change of the
	// agent's) different from those it read at its previous start on the
	// same disk: a kernel or node-image upgrade, or a distribution's rule,
	// changed them.
	// +optional
	DefaultsChanged *DefaultsChange `json:"defaultsChanged,omitempty"`

	// modelErrorPercent is the disk model's mean absolute error on the
	// device's measured service times, percent, decimal string ("12.5").
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	ModelErrorPercent string `json:"modelErrorPercent,omitempty"`

	// deviceVariationPercent is how much the device's own measured
	// service time varied over the same groups of 1,000 requests as
	// modelErrorPercent: the median distance of a group's total from the
	// window's mean group total, percent, decimal string ("4.2"). Where it
	// is above a model error limit, no model of a device of fixed speed
	// meets that limit (a shared host's CPUs or disks change the device's
	// speed from group to group).
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	DeviceVariationPercent string `json:"deviceVariationPercent,omitempty"`

	// thrashGuard is the thrash guard's state.
	// +optional
	ThrashGuard ThrashGuardState `json:"thrashGuard,omitempty"`

	// tracer records the device's I/O: ebpf, tracefs or none.
	// +optional
	Tracer TracerKind `json:"tracer,omitempty"`

	// reverts counts the changes the agent put back because verification
	// measured a regression, since the agent started.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Reverts int32 `json:"reverts,omitempty"`
	// lastRevertTime is when the last such revert happened. While it is
	// within the regression back-off, the node reports Degraded and the
	// operator halts the policy's roll-out.
	// +optional
	LastRevertTime *metav1.Time `json:"lastRevertTime,omitempty"`

	// eventsDropped is the number of block I/O events the tracer lost
	// since the agent started.
	// +kubebuilder:validation:Minimum=0
	// +optional
	EventsDropped int64 `json:"eventsDropped,omitempty"`
	// eventsLost is the number of requests the tracer saw but could not
	// deliver (see the tracer's documentation) since the agent started.
	// +kubebuilder:validation:Minimum=0
	// +optional
	EventsLost int64 `json:"eventsLost,omitempty"`
	// totalRequests is the number of the device's requests traced since
	// the agent started. Like window.requests, the NodeStorageState leaves
	// it 0.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalRequests int64 `json:"totalRequests,omitempty"`
	// unlearnedRequests is the number of the device's requests traced
	// since the agent started that arrived while it was evaluating a
	// window and were dropped, unlearned, to bound its memory;
	// totalRequests does not include them. Like totalRequests, the
	// NodeStorageState leaves it 0 (the window's note says it).
	// +kubebuilder:validation:Minimum=0
	// +optional
	UnlearnedRequests int64 `json:"unlearnedRequests,omitempty"`
}

// DeviceSettings is a device's block-stack setting as read from sysfs.
type DeviceSettings struct {
	// scheduler is queue/scheduler's selected entry; any string the kernel
	// reports.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Scheduler string `json:"scheduler,omitempty"`
	// tunables are the scheduler's queue/iosched/* values, as text.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Tunables map[string]string `json:"tunables,omitempty"`
	// readAheadKiB is queue/read_ahead_kb.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReadAheadKiB int32 `json:"readAheadKiB,omitempty"`
}

// CandidateResult is the simulated result of one candidate over the last
// window.
type CandidateResult struct {
	// name is the candidate, in the CLI's syntax
	// ("bfq:slice_idle=0", "mq-deadline+redcap").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// predictedServiceTimeMicros is the total simulated service time of the
	// window, µs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PredictedServiceTimeMicros int64 `json:"predictedServiceTimeMicros"`
	// predictedGainPercent is the improvement over the current setting in
	// the measure the decision ranks candidates by (what the application
	// waits for, with the scheduler's dispatch charge), percent, decimal
	// string ("4.2", "-56.3"). Candidates are listed fastest first by it.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	PredictedGainPercent string `json:"predictedGainPercent,omitempty"`
}

// CacheState is a dm-cache in front of a governed device: on
// (writethrough) or off (passthrough), with what its counters measured
// over the last window.
type CacheState struct {
	// name is the cache's device-mapper name.
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// mode is the cache's I/O mode: writethrough (on), passthrough (off)
	// or writeback (never set by the agent; such a cache is not governed).
	// +kubebuilder:validation:Enum=writethrough;passthrough;writeback
	Mode string `json:"mode"`
	// blockBytes is the cache's block size, bytes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BlockBytes int64 `json:"blockBytes,omitempty"`
	// sizeBytes is the cache's capacity, bytes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// readHitPercent is the share of the window's reads the cache served,
	// percent, decimal string; empty when it served none or was off.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	ReadHitPercent string `json:"readHitPercent,omitempty"`
	// predictedReadHitPercent is the share of the reads that the simulated
	// cache served: while off, in the last simulated window; while on, in
	// the window that the switch on rested on, to set beside
	// readHitPercent; percent, decimal string; empty when not simulated.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	PredictedReadHitPercent string `json:"predictedReadHitPercent,omitempty"`
	// gainPercent is what the last decision rested on: while off, the
	// simulated reduction of the window's I/O time with the cache; while
	// on, the origin time the cache's read hits saved less what its
	// promotions cost, from its counters; percent, decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	GainPercent string `json:"gainPercent,omitempty"`
	// gainMeasured is true when gainPercent comes from the cache's own
	// counters, false when it was simulated.
	// +optional
	GainMeasured bool `json:"gainMeasured,omitempty"`
	// meanReadMicroseconds is the mean response time of the reads the
	// application issued to the cache device in the last window (its
	// stat file: read ticks over reads completed), µs; 0 without reads.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MeanReadMicroseconds int64 `json:"meanReadMicroseconds,omitempty"`
	// verifyingWindows is how many windows remain before the last switch
	// is judged by that response time against the window before it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	VerifyingWindows int32 `json:"verifyingWindows,omitempty"`
	// dirtyBlocks is the cache's dirty block count (0 in writethrough).
	// +kubebuilder:validation:Minimum=0
	// +optional
	DirtyBlocks int64 `json:"dirtyBlocks,omitempty"`
	// reason says why the mode is what it is, in one line.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Reason string `json:"reason,omitempty"`
	// lastChange says what the agent last changed, "passthrough ->
	// writethrough: predicted 61.0 % less I/O time ...".
	// +kubebuilder:validation:MaxLength=512
	// +optional
	LastChange string `json:"lastChange,omitempty"`
	// lastChangeTime is when the agent last switched the cache.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
}

// ReadAheadEvidence is what one window measured of a device's read-ahead.
type ReadAheadEvidence struct {
	// wastePercent is the share of the pages read into the page cache
	// from the device's files that were evicted without being read or
	// mapped, percent, decimal string; empty when not measured (no
	// page-cache probe, or too few pages).
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	WastePercent string `json:"wastePercent,omitempty"`
	// usedPages counts the pages (4 KiB) read or mapped for the first
	// time in the window since they entered the page cache.
	// +kubebuilder:validation:Minimum=0
	// +optional
	UsedPages int64 `json:"usedPages,omitempty"`
	// wastedPages counts the pages (4 KiB) evicted in the window without
	// ever being read or mapped.
	// +kubebuilder:validation:Minimum=0
	// +optional
	WastedPages int64 `json:"wastedPages,omitempty"`
	// readAheadSharePercent is the share of the window's read sectors the
	// kernel issued as read-ahead, percent, decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	ReadAheadSharePercent string `json:"readAheadSharePercent,omitempty"`
	// sequentialStreams is the number of processes that issued read-ahead
	// in the window.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SequentialStreams int32 `json:"sequentialStreams,omitempty"`
	// rule is the read-ahead rule that decided: the policy's bounds, too
	// few pages resolved to judge (the depth is kept), read-ahead wasted
	// (a lower depth serves the readers), sequential demand (a higher one
	// does), or keep.
	// +kubebuilder:validation:Enum=PolicyBounds;NoWasteEvidence;ReadAheadWasted;SequentialDemand;Keep
	// +optional
	Rule string `json:"rule,omitempty"`
}

// LearnedCorrection is the factor learned for one candidate on a device.
type LearnedCorrection struct {
	// candidate is the candidate's name, in the CLI's syntax.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Candidate string `json:"candidate"`
	// factor multiplies the candidate's predicted time (above 1: it was
	// measured slower than predicted), decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Factor string `json:"factor"`
}

// Verification is the outcome of the verification of a change: the
// windows after it measured against what the previous setting would have
// taken.
type Verification struct {
	// change is what was verified ("none -> bfq", "read_ahead_kb 2560 -> 16").
	// +kubebuilder:validation:MaxLength=512
	Change string `json:"change"`
	// outcome is Verified, Reverted, Superseded (a read-ahead change
	// whose readers did not read again, or that a change the other way
	// replaced), or NotVerified (a read-ahead change with no measure of
	// its readers at the old depth, before or after it).
	// +kubebuilder:validation:Enum=Verified;Reverted;Superseded;NotVerified
	Outcome string `json:"outcome"`
	// baseline is what the previous setting would have taken (simulated,
	// scaled by the model's measured bias) or, for read-ahead, took
	// before the change, in unit, decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Baseline string `json:"baseline,omitempty"`
	// predicted is what the new setting was predicted to take, in unit,
	// decimal string; empty for read-ahead, which is not simulated.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Predicted string `json:"predicted,omitempty"`
	// measured is what the new setting took, in unit, decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Measured string `json:"measured,omitempty"`
	// unit is the unit of baseline, predicted and measured: "ms" of
	// application wait for a scheduler change, "µs per used page" of
	// device time for read-ahead.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Unit string `json:"unit,omitempty"`
}

// CounterfactualState is a device's counterfactual error: over its
// verified scheduler changes, how far the predicted time ratio of the new
// setting to the previous one was from the measured ratio (the time the
// new setting took over what the previous one would have taken, its
// simulated time scaled by the model's measured bias).
type CounterfactualState struct {
	// checks is the number of verified changes counted.
	// +kubebuilder:validation:Minimum=0
	Checks int32 `json:"checks"`
	// errorPercent is the mean absolute error of the predicted ratio,
	// percentage points, decimal string ("12.5").
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	ErrorPercent string `json:"errorPercent"`
	// wrongSigns counts the changes predicted faster that measured slower
	// by more than the margin, or the reverse.
	// +kubebuilder:validation:Minimum=0
	// +optional
	WrongSigns int32 `json:"wrongSigns,omitempty"`
	// lastPredictedRatio is the last change's predicted ratio, new over
	// previous (below 1: faster), decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	LastPredictedRatio string `json:"lastPredictedRatio,omitempty"`
	// lastMeasuredRatio is the last change's measured ratio, new over
	// previous, decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	LastMeasuredRatio string `json:"lastMeasuredRatio,omitempty"`
	// lastCheckTime is when the last change's verification ended.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`
	// holdUntil is set while the error exceeds the policy's margin: until
	// then (the policy's back-off after the last check) the device does
	// not switch on predictions alone, and its recommendation's reason
	// says so when a switch is predicted.
	// +optional
	HoldUntil *metav1.Time `json:"holdUntil,omitempty"`
}

// Recommendation is the decision of one window for one device.
type Recommendation struct {
	// scheduler is the recommended scheduler.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Scheduler string `json:"scheduler,omitempty"`
	// tunables are the recommended tunables, sysfs names and text values.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Tunables map[string]string `json:"tunables,omitempty"`
	// readAheadKiB is the recommended read-ahead depth, 0 when read-ahead
	// is not tuned.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReadAheadKiB int32 `json:"readAheadKiB,omitempty"`
	// redcap reports whether the simulated REDCAP cache would be on.
	// +optional
	Redcap bool `json:"redcap,omitempty"`
	// gainPercent is the predicted improvement, percent, decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	GainPercent string `json:"gainPercent,omitempty"`
	// reason is the decision rule's reason, e.g.
	// "BelowMargin", "ThrashGuardTripped".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
}

// AppliedSetting is a setting the agent applied.
type AppliedSetting struct {
	// scheduler is the scheduler written.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Scheduler string `json:"scheduler,omitempty"`
	// tunables are the tunables written.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Tunables map[string]string `json:"tunables,omitempty"`
	// readAheadKiB is the read-ahead depth written, 0 when unchanged.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReadAheadKiB int32 `json:"readAheadKiB,omitempty"`
	// at is when it was written.
	At metav1.Time `json:"at"`
}

// ThrashGuardState is the thrash guard's state for one device.
type ThrashGuardState struct {
	// changes counts changes decided in consecutive checks.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Changes int32 `json:"changes,omitempty"`
	// quietChecks counts consecutive checks predicting no change while
	// pinned.
	// +kubebuilder:validation:Minimum=0
	// +optional
	QuietChecks int32 `json:"quietChecks,omitempty"`
	// pinned reports whether the default scheduler is pinned.
	// +optional
	Pinned bool `json:"pinned,omitempty"`
}

// OtherWriterState is the last change to a device's setting that the
// agent did not make.
type OtherWriterState struct {
	// time is when the agent saw the change (at the start of a window).
	Time metav1.Time `json:"time"`
	// change says what changed, from → to ("scheduler kyber -> bfq").
	// +kubebuilder:validation:MaxLength=1024
	Change string `json:"change"`
	// writer names the process that wrote it, when the agent could see it
	// ("bash (pid 4242, cgroup /user.slice)"); empty when not known.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Writer string `json:"writer,omitempty"`
	// yielded is true when the agent stopped changing the device
	// (spec.otherWriters Yield): it leaves the other writer's value in
	// place, at exit too.
	// +optional
	Yielded bool `json:"yielded,omitempty"`
}

// DefaultsChange is a change of a device's queue defaults between two
// starts of the agent (agent/sentinel).
type DefaultsChange struct {
	// knobs are the queue attributes whose defaults differ.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	Knobs []KnobChange `json:"knobs"`
	// with names the kernel and node-image changes between the two starts
	// ("kernel 6.16.1 → 6.17.2"), or says that neither changed; empty when
	// the host was not known.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	With string `json:"with,omitempty"`
	// since is when the agent read the earlier defaults.
	Since metav1.Time `json:"since"`
	// detectedTime is when the later start found the change.
	DetectedTime metav1.Time `json:"detectedTime"`
}

// KnobChange is one queue attribute's default, before and after.
type KnobChange struct {
	// knob is the attribute under /sys/block/DEV/queue: scheduler,
	// read_ahead_kb, nr_requests, max_sectors_kb, wbt_lat_usec or
	// rotational.
	// +kubebuilder:validation:MaxLength=32
	Knob string `json:"knob"`
	// old is its value at the earlier start, as sysfs prints it (the
	// scheduler by name).
	// +kubebuilder:validation:MaxLength=64
	Old string `json:"old"`
	// new is its value at the later start.
	// +kubebuilder:validation:MaxLength=64
	New string `json:"new"`
	// verdict judges the new default against the old on the agent's
	// latest evidence: Slower when the device time it predicts for the
	// same work is above the old default's by more than the policy's
	// margin, NotSlower otherwise. read_ahead_kb is judged on the
	// readers' page-cache evidence (the read-ahead road's costs), the
	// scheduler on the simulation of the window's requests under both.
	// Empty until a window has judged it, and for the knobs the agent
	// does not model.
	// +kubebuilder:validation:Enum=Slower;NotSlower
	// +optional
	Verdict KnobVerdict `json:"verdict,omitempty"`
	// changePercent is that predicted device time at the new default
	// over the old one's, less one, percent, decimal string ("+312.5":
	// slower; "-4.1": faster).
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[-+]?[0-9]+(\.[0-9]+)?$`
	// +optional
	ChangePercent string `json:"changePercent,omitempty"`
}

// KnobVerdict is a changed default's verdict: Slower or NotSlower.
type KnobVerdict string

const (
	// VerdictSlower is a new default predicted slower by the margin.
	VerdictSlower KnobVerdict = "Slower"
	// VerdictNotSlower is one that is not.
	VerdictNotSlower KnobVerdict = "NotSlower"
)

// WindowState is what the agent's last window of a device found.
type WindowState struct {
	// requests is the number of the window's traced requests. The
	// NodeStorageState leaves it 0, so that a busy device does not force
	// a status write every window; the agent's host report
	// (`shadowtune run -o json`) carries it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Requests int64 `json:"requests,omitempty"`
	// best is the candidate the window's simulation found fastest.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Best string `json:"best,omitempty"`
	// bestGainPercent is Best's predicted improvement over the current
	// setting, percent, decimal string ("12.5").
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +optional
	BestGainPercent string `json:"bestGainPercent,omitempty"`
	// readAheadAdviceKiB is the read-ahead depth the window advises, KiB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReadAheadAdviceKiB int32 `json:"readAheadAdviceKiB,omitempty"`
	// sampled says the window was traced for its last part only (the
	// agent's --trace-sample, 1 s by default): the device was settled,
	// with nothing decided, pending or being verified in the windows
	// before, so the agent traced less of it to cost the application
	// less. Every window is still evaluated.
	// +optional
	Sampled bool `json:"sampled,omitempty"`
	// skipped says why the window was not evaluated.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Skipped string `json:"skipped,omitempty"`
	// note is what calibration or the gate noted in the window.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Note string `json:"note,omitempty"`
	// error is the window's error, if any.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Error string `json:"error,omitempty"`
	// applyError is the window's failure to change the device, if any.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	ApplyError string `json:"applyError,omitempty"`
	// dispatchCharges is, by scheduler, the factor the window multiplied
	// its candidates' predicted time by for the scheduler's CPU time per
	// request beyond none's, as measured on the node, at the window's
	// request rate (1 + rate × cost ÷ CPUs; docs/agent.md). Empty when
	// nothing was charged.
	// +listType=map
	// +listMapKey=scheduler
	// +kubebuilder:validation:MaxItems=8
	// +optional
	DispatchCharges []DispatchCharge `json:"dispatchCharges,omitempty"`
}

// DispatchCharge is the factor a window charged one scheduler for its
// CPU cost per request.
type DispatchCharge struct {
	// scheduler is the scheduler's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Scheduler string `json:"scheduler"`
	// factor multiplies the predicted time of the scheduler's candidates
	// (1 or more), decimal string.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Factor string `json:"factor"`
}

// Condition types of NodeStorageState.
const (
	// NodeConditionReady summarises the others: tracing active, model
	// ready, not degraded.
	NodeConditionReady = "Ready"
	// NodeConditionTracingActive: block I/O is being recorded.
	NodeConditionTracingActive = "TracingActive"
	// NodeConditionModelReady: every governed device has a disk model
	// good enough to decide with.
	NodeConditionModelReady = "ModelReady"
	// NodeConditionApplied: every granted change is applied and verified.
	NodeConditionApplied = "Applied"
	// NodeConditionDegraded: something needs attention (events dropped, a
	// write to sysfs failed, a change was reverted).
	NodeConditionDegraded = "Degraded"
)

// Condition reasons of NodeStorageState.
const (
	ReasonTracingEBPF       = "EBPF"
	ReasonTracingTracefs    = "Tracefs"
	ReasonTracerUnavailable = "TracerUnavailable"
	ReasonLearning          = "Learning"
	ReasonModelTrained      = "ModelTrained"
	ReasonDefaultModel      = "DefaultModel"
	ReasonApplied           = "Applied"
	ReasonAwaitingGrant     = "AwaitingGrant"
	ReasonGrantExpired      = "GrantExpired"
	ReasonObserveOnly       = "ObserveOnly"
	ReasonNothingToApply    = "NothingToApply"
	ReasonReverted          = "Reverted"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonEventsDropped     = "EventsDropped"
	ReasonAgentReady        = "AgentReady"
	ReasonOtherWriter       = "OtherWriter"
	ReasonCPUBudgetExceeded = "CPUBudgetExceeded"
	ReasonUncleanRestart    = "UncleanRestart"
	// ReasonAgentOOMKilled: the agent container was killed for lack of
	// memory within OOMKillDegradedFor (NodeStorageState and StorageTuning
	// Degraded).
	ReasonAgentOOMKilled = "AgentOOMKilled"
)

// NodeStorageState is one node's storage state: the operator's grant in
// spec, the agent's per-device report in status. Its name is the node's
// name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nss,categories=shadowtune
// +kubebuilder:printcolumn:name="Devices",type=integer,JSONPath=`.status.deviceCount`
// +kubebuilder:printcolumn:name="Governed",type=integer,JSONPath=`.status.governedDevices`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingDevices`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedDevices`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatTime`,description="When the agent last wrote the status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].message`,priority=1,description="What needs attention"
type NodeStorageState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is written by the operator: the roll-out grant.
	// +optional
	Spec NodeStorageStateSpec `json:"spec,omitempty"`
	// status is written by the node's agent: its devices, their
	// simulation results, recommendations and changes.
	// +optional
	Status NodeStorageStateStatus `json:"status,omitempty"`
}

// NodeStorageStateList is a list of NodeStorageState.
//
// +kubebuilder:object:root=true
type NodeStorageStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeStorageState `json:"items"`
}
