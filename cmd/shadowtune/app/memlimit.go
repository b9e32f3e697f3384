package app

import (
	"io"
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// goMemLimitRatio is the share of the cgroup's memory limit given to the
// Go runtime as its soft limit (GOMEMLIMIT): the rest is for memory the
// runtime does not count, charged to the same cgroup: the eBPF maps and
// ring buffer (about 14 MB for the page-cache probe alone) and the page
// cache of the state directory. At 0.9 the agent was OOM-killed under a
// 128 MiB limit (`make bench-agent-memory`).
const goMemLimitRatio = 0.75

// memoryLimit reads the memory limit of the process's cgroup (v1 or v2,
// automemlimit's FromCgroup), sets the Go runtime's soft limit to
// goMemLimitRatio of it (unless GOMEMLIMIT is set in the environment),
// and returns it in bytes; 0 when there is no limit or it cannot be read.
func memoryLimit() int64 {
	limit, err := memlimit.FromCgroup()
	if err != nil || limit == 0 || limit > 1<<62 {
		return 0
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A failure leaves the runtime without a soft limit: more GC headroom,
	// nothing else.
	_, _ = memlimit.Set(memlimit.WithRatio(goMemLimitRatio),
		memlimit.WithProvider(memlimit.Limit(limit)), memlimit.WithLogger(quiet))
	return int64(limit)
}
