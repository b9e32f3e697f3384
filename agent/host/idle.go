package host

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStat is the file of the kernel's CPU counters. It is read in the
// agent's own /proc, not under the host-root prefix: its counters are the
// node's in any PID namespace, and the host root need not hold /proc (the
// chart mounts the node's /sys there).
const ProcStat = "/proc/stat"

// IdleMeter measures the share of the CPUs' time spent idle between two
// reads of the kernel's CPU counters (the "cpu" line of /proc/stat:
// user, nice, system, idle, iowait, irq, softirq, steal, in USER_HZ
// ticks; guest time is already in user and nice). The counters are the
// node's, in any PID namespace.
type IdleMeter struct {
	path        string // /proc/stat, or a test's file
	idle, total uint64
	primed      bool
}

// NewIdleMeter returns a meter of the counters at path (ProcStat, or a
// test's file); its first Share only primes it.
func NewIdleMeter(path string) IdleMeter { return IdleMeter{path: path} }

// Share returns the idle share of the CPU ticks since the last call, in
// [0, 1], or -1 on the first call and when the counters cannot be read or
// did not move (no error is returned: -1 is "unknown").
func (m *IdleMeter) Share() float64 {
	idle, total, err := readCPUTicks(m.path)
	if err != nil {
		m.primed = false
		return -1
	}
	defer func() { m.idle, m.total, m.primed = idle, total, true }()
	if !m.primed || total <= m.total || idle < m.idle {
		return -1
	}
	return min(float64(idle-m.idle)/float64(total-m.total), 1)
}

// readCPUTicks returns the idle (idle + iowait) and total ticks of path's
// "cpu" line. Errors: path unreadable, or no well-formed "cpu" line.
func readCPUTicks(path string) (idle, total uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("%s: empty", path)
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("%s:1: want the \"cpu\" line with at least 4 counters, got %q", path, sc.Text())
	}
	// user nice system idle iowait irq softirq steal; guest and
	// guest_nice (fields 9 and 10) are counted in user and nice already.
	for i, s := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s:1: counter %d: %w", path, i+1, err)
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, nil
}
