//go:build linux && amd64

package tracer

import (
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestWriterProbeNamesTheWriter: another process (sh) writes a loop
// device's queue/scheduler, read_ahead_kb and an iosched tunable; the
// probe names it, the attribute and the value each time. Writes by this
// process are not recorded.
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
		// Kernels without kprobes whose BPF trampolines cannot attach here
		// (this project's 6.18 test machines: CONFIG_KPROBES off, and
		// ftrace closed to root, so fentry is refused): nothing can name a
		// writer. The VM lab runs this test on its Debian guest.
		t.Skipf("no writer probe on this kernel: %v", err)
	}
	defer p.Close()
	q := "/sys/block/" + dev.Name + "/queue/"
	for _, c := range []struct{ file, value, attr string }{
		{"scheduler", "bfq", "scheduler"},
		{"read_ahead_kb", "64", "read_ahead_kb"},
		{"iosched/slice_idle", "0", "slice_idle"},
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
	before, _ := p.Last(dev.Name)
	loopdev.RestoreQueue(t, dev.Name, dev.Queue) // this process writes
	if w, _ := p.Last(dev.Name); w != before {
		t.Errorf("this process's own writes were recorded: %+v", w)
	}
}
