//go:build linux && amd64

package tracer

import (
	"maps"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// TestWriterProbeNamesTheWriter: another process (sh) writes a loop
// device's queue/scheduler, read_ahead_kb and an iosched tunable, and
// (a child of this test) a tunable with writev and pwritev; the probe names
// it, the attribute and the value each time. Writes by this process are
// not recorded. A probe that cannot load is a missing part: the test is
// skipped, or fails under CI=true.
//
// With SHADOWTUNE_TEST_WRITER_DEVICE=NAME it writes that disk's queue
// settings (a scratch disk; they are put back) instead of a new loop
// device's, and a probe that cannot load fails the test: the VM lab runs
// it so on its Debian guest, whose kernel has kprobes and fentry.
func TestWriterProbeNamesTheWriter(t *testing.T) {
	var dev *loopdev.Dev
	scratch := os.Getenv("SHADOWTUNE_TEST_WRITER_DEVICE")
	if scratch != "" {
		snap := loopdev.SnapshotQueue(t, scratch)
		t.Cleanup(func() { loopdev.RestoreQueue(t, scratch, snap) })
		dev = &loopdev.Dev{Name: scratch, Queue: maps.Clone(snap)}
	} else {
		dev = loopdev.NewForTest(t, 64<<20)
	}
	p, err := NewWriterProbe()
	if err != nil && scratch != "" {
		t.Fatal(err)
	}
	if err != nil {
		need.Missing(t, "writer probe", "%v", err)
	}
	need.Have(t, "writer probe")
	defer p.Close()
	t.Logf("writer probe: %s", p.Mechanism())
	q := "/sys/block/" + dev.Name + "/queue/"
	sched := loopdev.OtherScheduler(t, dev.Name, "bfq", "kyber", "mq-deadline")
	tunable := map[string]string{"bfq": "slice_idle", "kyber": "read_lat_nsec", "mq-deadline": "fifo_batch"}[sched]
	tunValue := map[string]string{"bfq": "0", "kyber": "1000000", "mq-deadline": "8"}[sched]
	for _, c := range []struct{ file, value, attr string }{
		{"scheduler", sched, "scheduler"},
		{"read_ahead_kb", "64", "read_ahead_kb"},
		{"iosched/" + tunable, tunValue, tunable},
	} {
		t0 := Monotonic()
		if out, err := exec.Command("sh", "-c", "echo "+c.value+" > "+q+c.file).CombinedOutput(); err != nil {
			t.Fatalf("write %s: %v: %s", c.file, err, out)
		}
		w, ok := p.Last(dev.Name)
		if !ok || w.Comm != "sh" || w.Attr != c.attr || w.Value != c.value || w.PID == 0 || w.At < t0 {
			t.Fatalf("after sh wrote %s=%s: last writer %+v (%v)", c.file, c.value, w, ok)
		}
		if !strings.HasPrefix(w.String(), "sh (pid ") {
			t.Errorf("String() = %q", w.String())
		}
	}
	for _, how := range []string{"writev", "pwritev"} {
		t0 := Monotonic()
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterProbeChild$", "-test.count=1")
		want := map[string]string{"writev": "32", "pwritev": "48"}[how]
		cmd.Env = append(os.Environ(), writerChildEnv+"="+how+":"+q+"read_ahead_kb:"+want)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the %s child: %v: %s", how, err, out)
		}
		if w, ok := p.Last(dev.Name); !ok || w.Attr != "read_ahead_kb" || w.Value != want || w.PID == uint32(os.Getpid()) || w.At < t0 {
			t.Errorf("after the child's %s of read_ahead_kb=%s: last writer %+v (%v)", how, want, w, ok)
		}
	}
	before, _ := p.Last(dev.Name)
	loopdev.RestoreQueue(t, dev.Name, dev.Queue) // this process writes
	if w, _ := p.Last(dev.Name); w != before {
		t.Errorf("this process's own writes were recorded: %+v", w)
	}
}

// writerChildEnv makes the test binary TestWriterProbeNamesTheWriter's
// child: "HOW:FILE:VALUE" writes VALUE to FILE with HOW (writev or
// pwritev).
const writerChildEnv = "SHADOWTUNE_TEST_WRITER_CHILD"

// TestWriterProbeChild is the child of TestWriterProbeNamesTheWriter: a
// process other than the probe's that writes with writev or pwritev.
func TestWriterProbeChild(t *testing.T) {
	arg := os.Getenv(writerChildEnv)
	if arg == "" {
		t.Skip("the child of TestWriterProbeNamesTheWriter")
	}
	parts := strings.SplitN(arg, ":", 3)
	f, err := os.OpenFile(parts[1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	iov := [][]byte{[]byte(parts[2] + "\n")}
	if parts[0] == "writev" {
		_, err = unix.Writev(int(f.Fd()), iov)
	} else {
		_, err = unix.Pwritev(int(f.Fd()), iov, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriterProbeSyscallCost measures what the probe adds to a system
// call (getppid, a million times), with SHADOWTUNE_TRACER_BENCH=1: the
// syscall tracepoint's cost is paid by every system call of the host.
func TestWriterProbeSyscallCost(t *testing.T) {
	if os.Getenv("SHADOWTUNE_TRACER_BENCH") == "" {
		t.Skip("set SHADOWTUNE_TRACER_BENCH=1 to measure the writer probe's cost per system call")
	}
	const n = 1_000_000
	per := func() time.Duration {
		best := time.Duration(math.MaxInt64)
		for range 5 {
			t0 := time.Now()
			for range n {
				unix.Getppid()
			}
			best = min(best, time.Since(t0)/n)
		}
		return best
	}
	without := per()
	p, err := NewWriterProbe()
	if err != nil {
		t.Fatal(err)
	}
	with := per()
	p.Close()
	t.Logf("getppid: %v without the probe, %v with it (%s): +%v a call", without, with, p.Mechanism(), with-without)
}
