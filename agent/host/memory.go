package host

// The agent's memory, bounded by its container's limit (issue 16 item 7):
// the work of a window grows with the requests simulated per device
// (Policy.MaxSimulated), so the agent sizes it to the memory limit it is
// given instead of being OOM-killed under a busy node.
// agent.Options.MemoryLimit is the limit (the cgroup's memory.max, read by
// the command); the Go runtime's soft limit is set from it by the command
// as well.

import "fmt"

// The agent's memory is a base plus a part that grows with the requests
// each device's window simulates. AgentBaseBytes and
// BytesPerSimulatedRequest (bytes) are those two terms as `make bench-agent-memory` measures them
// under the heaviest policy (docs/performance.md, "Agent memory"); the
// eBPF maps and ring buffer, charged to the agent's memory cgroup, and the
// binary's resident pages are in the base.
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

// MemoryPlan is how many requests per window each device simulates under
// a memory limit.
type MemoryPlan struct {
	// MaxSimulated is the requests simulated per device window.
	MaxSimulated int
	// Note says what the plan did, for the status ("" when the default
	// fits or there is no limit).
	Note string
}

// PlanMemory sizes the windows of devices devices to limit bytes (0: no
// limit): the default MaxSimulated (65536 requests) when it fits, else the
// most that fits, down to 4096 requests; below that the note says the
// limit is too small. It returns no error: the plan always has a size.
func PlanMemory(limit int64, devices int) MemoryPlan {
	if limit <= 0 || devices <= 0 {
		return MemoryPlan{MaxSimulated: maxSimulated}
	}
	avail := int64(float64(limit)*memoryHeadroom) - AgentBaseBytes
	per := avail / int64(devices) / BytesPerSimulatedRequest
	switch {
	case per >= maxSimulated:
		return MemoryPlan{MaxSimulated: maxSimulated}
	case per >= minSimulated:
		return MemoryPlan{MaxSimulated: int(per), Note: fmt.Sprintf(
			"memory limit %d MiB for %d device(s): each window is simulated over its newest %d requests (default %d)",
			limit>>20, devices, per, maxSimulated)}
	}
	need := float64(AgentBaseBytes+int64(devices)*minSimulated*BytesPerSimulatedRequest) / memoryHeadroom
	return MemoryPlan{MaxSimulated: minSimulated, Note: fmt.Sprintf(
		"memory limit %d MiB is too small for %d device(s): at least %d MiB is needed; each window is simulated over its newest %d requests",
		limit>>20, devices, int64(need)>>20, minSimulated)}
}
