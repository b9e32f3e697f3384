package agent

// The agent's memory, bounded by its container's limit (issue 16 item 7):
// the work of a window grows with the requests simulated per device
// (Policy.MaxSimulated), so the agent sizes it to the memory limit it is
// given instead of being OOM-killed under a busy node. Options.MemoryLimit
// is the limit (the cgroup's memory.max, read by the command); the Go
// runtime's soft limit is set from it by the command as well.

import "fmt"

// Measured memory of the agent (`make bench-agent-memory`; figures in
// docs/performance.md, "Agent memory"): under the example policy's 13
// candidates (tunables, every one also with REDCAP) and ~400,000 IOPS, the
// Go heap's live size after a collection was 56 MiB at 16,384 simulated
// requests, 120 MiB at 45,056 and 133 MiB at 65,536: 1.6–2.3 KiB per
// simulated request, and about 24 MiB without any. To that come the eBPF
// maps and ring buffer, charged to the agent's memory cgroup, and the
// binary's resident pages.
const (
	// AgentBaseBytes is the agent's memory with no device window: the
	// base heap, the eBPF maps and ring buffer, the binary.
	AgentBaseBytes = 64 << 20
	// BytesPerSimulatedRequest is the memory per simulated request of a
	// device's window (Policy.MaxSimulated), the heaviest policy's.
	BytesPerSimulatedRequest = 2048
	// memoryHeadroom is the share of the limit the plan fills; the rest
	// is left for the garbage collector's headroom.
	memoryHeadroom = 0.7
	// minSimulated is the fewest requests a window is simulated over,
	// whatever the limit: fewer say too little to decide on.
	minSimulated = 4096
	// maxSimulated is Policy.MaxSimulated's default.
	maxSimulated = 65536
)

// memoryPlan is how many requests per window each device simulates under
// a memory limit.
type memoryPlan struct {
	// MaxSimulated is the requests simulated per device window.
	MaxSimulated int
	// Note says what the plan did, for the status ("" when the default
	// fits or there is no limit).
	Note string
}

// planMemory sizes the windows of devices devices to limit bytes (0: no
// limit): the default MaxSimulated when it fits, else the most that fits,
// down to minSimulated; below that the note says the limit is too small.
func planMemory(limit int64, devices int) memoryPlan {
	if limit <= 0 || devices <= 0 {
		return memoryPlan{MaxSimulated: maxSimulated}
	}
	avail := int64(float64(limit)*memoryHeadroom) - AgentBaseBytes
	per := avail / int64(devices) / BytesPerSimulatedRequest
	switch {
	case per >= maxSimulated:
		return memoryPlan{MaxSimulated: maxSimulated}
	case per >= minSimulated:
		return memoryPlan{MaxSimulated: int(per), Note: fmt.Sprintf(
			"memory limit %d MiB for %d device(s): each window is simulated over its newest %d requests (default %d)",
			limit>>20, devices, per, maxSimulated)}
	}
	need := float64(AgentBaseBytes+int64(devices)*minSimulated*BytesPerSimulatedRequest) / memoryHeadroom
	return memoryPlan{MaxSimulated: minSimulated, Note: fmt.Sprintf(
		"memory limit %d MiB is too small for %d device(s): at least %d MiB is needed; each window is simulated over its newest %d requests",
		limit>>20, devices, int64(need)>>20, minSimulated)}
}
