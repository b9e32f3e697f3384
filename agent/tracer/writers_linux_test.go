//go:build linux && amd64

package tracer

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestWriterProbeNamesTheWriter: another process (sh) writes a loop
// device's queue/scheduler, read_ahead_kb and an iosched tunable; the
// probe names it, the attribute and the value each time. Writes by this
// process are not recorded.
func TestWriterProbeNamesTheWriter(t *testing.T) {
	dev := loopdev.NewForTest(t, 64<<20)
	p, err := NewWriterProbe()
	if err != nil {
		// Kernels without kprobes whose BPF trampolines cannot attach here
		// (this project's 6.18 test machines: CONFIG_KPROBES off, fentry
		// refused): nothing can name a writer. The VM lab's Debian kernel
		// has kprobes.
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
