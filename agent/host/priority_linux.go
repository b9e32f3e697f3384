package host

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// backgroundNice is the nice value of the agent's loop thread: its online
// learning and window evaluations give way to the node's own work when
// the CPUs are contended (CFS weight 110 against 1024 at nice 0, about a
// tenth), and use idle CPU as before.
const backgroundNice = 10

// Background moves the calling goroutine, for the rest of its life, to an
// OS thread of its own at backgroundNice. Threads the Go runtime starts
// meanwhile come from its template thread and keep their normal priority
// (runtime.LockOSThread's contract), so the tracer's readers, which drain
// the kernel's buffers, are not slowed. It returns the error of
// setpriority(2) unwrapped, leaving the thread's priority as it was.
func Background() error {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice)
}
