//go:build linux

package tracer

import "golang.org/x/sys/unix"

// Monotonic returns CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns
// and of the "mono" trace clock, on which [Info].Base is expressed.
func Monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
