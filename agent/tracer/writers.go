package tracer

import (
	"fmt"
	"time"
)

// Writer is a process that wrote one of a disk's queue settings through
// sysfs (/sys/block/DEV/queue/* or queue/iosched/*), as WriterProbe saw
// it.
type Writer struct {
	// PID is the writer's process (thread group) id; TID its thread.
	PID, TID uint32
	// Comm is the thread's command name (at most 15 bytes).
	Comm string
	// CgroupID is the writer's cgroup v2 id (the inode number of its
	// cgroup directory under /sys/fs/cgroup); 0 when unknown.
	CgroupID uint64
	// Attr is the file written ("scheduler", "read_ahead_kb",
	// "slice_idle"); Value the first bytes written (at most 31).
	Attr, Value string
	// At is when it wrote, CLOCK_MONOTONIC ns (Monotonic's clock).
	At int64
}

// String is "bash (pid 4242, cgroup 1234) wrote scheduler=bfq".
func (w Writer) String() string {
	return fmt.Sprintf("%s (pid %d, cgroup %d) wrote %s=%s", w.Comm, w.PID, w.CgroupID, w.Attr, w.Value)
}

// Age is how long ago, at the monotonic time now (ns), the write was.
func (w Writer) Age(now int64) time.Duration { return time.Duration(now - w.At) }
