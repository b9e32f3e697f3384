package schedcost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// TestMeasure measures the schedulers on this machine's kernel: bfq, the
// scheduler with the most work per request (BFQ's documentation: ~1.9 µs
// a request against mq-deadline's ~0.7 µs), costs more CPU a request than
// none, and the private loop device is gone afterwards.
func TestMeasure(t *testing.T) {
	loopdev.NeedLoop(t, "attaches a loop device")
	before := memLoops(t)
	lo, err := attachMemLoop()
	if err != nil {
		t.Fatal(err)
	}
	if n := memLoops(t); n != before+1 {
		_ = lo.close()
		t.Fatalf("%d loop devices over a memfd while one is attached, want %d", n, before+1)
	}
	schedFile := filepath.Join("/sys/block", lo.name, "queue/scheduler")
	_, sched, err := offeredSchedulers(schedFile)
	if err != nil {
		t.Fatal(err)
	}
	_ = lo.close()
	// Three rounds: the last phase is not none's (rounds alternate in
	// direction), so a scheduler left behind would show.
	rec := t.TempDir()
	c, err := Measure(context.Background(), "", Options{Rounds: 3, StateDir: rec})
	if errors.Is(err, ErrContended) {
		// A busy machine: the measurement declines, and leaves nothing.
		t.Logf("contended: %v", err)
		if after := memLoops(t); after != before {
			t.Errorf("%d loop devices over a memfd after, want %d", after, before)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s, %d CPUs: none %.0f ns a request on the submission path; beyond none %v ns", c.Kernel, c.CPUs, c.NoneNs,
		c.PerRequestNs)
	if !c.Usable(Kernel(), c.CPUs) || c.NoneNs <= 0 {
		t.Errorf("measurement %+v is not usable on this kernel", c)
	}
	if _, ok := c.PerRequestNs["bfq"]; ok && c.PerRequestNs["bfq"] <= 0 {
		t.Errorf("bfq measured at no cost beyond none: %v", c.PerRequestNs)
	}
	if after := memLoops(t); after != before {
		t.Errorf("%d loop devices over a memfd before, %d after: the calibration's was not detached", before, after)
	}
	if _, err := os.Stat(filepath.Join(rec, recordName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of the loop device's scheduler is left after it was put back: %v", err)
	}
	// The lowest free loop device, as a moment ago, unless another
	// process took it meanwhile.
	if c.Device == lo.name {
		if _, now, err := offeredSchedulers(schedFile); err != nil || now != sched {
			t.Errorf("%s left with scheduler %q (%v), it had %q", c.Device, now, err, sched)
		}
	} else {
		t.Logf("measured on %s, not %s: its scheduler is not checked", c.Device, lo.name)
	}
	if _, err := Measure(context.Background(), t.TempDir(), Options{}); err == nil {
		t.Error("a host root without /sys: no error")
	}
	if after := memLoops(t); after != before {
		t.Errorf("after a failed measurement %d loop devices over a memfd, want %d", after, before)
	}
}

// memLoops counts the loop devices whose backing file is a memfd of this
// package in this process ("/memfd:NAME (deleted)"): other test binaries
// running alongside may be calibrating too.
func memLoops(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "/memfd:"+memPrefix()) {
			n++
		}
	}
	return n
}

// TestMeasureDeclinesWhenContended: with more busy processes than CPUs
// beside it, the readers wait for a CPU longer than MaxWaitRatio allows,
// and Measure returns ErrContended instead of scattered figures.
func TestMeasureDeclinesWhenContended(t *testing.T) {
	loopdev.NeedLoop(t, "attaches a loop device")
	n := 2 * runtime.NumCPU()
	for range n {
		// Other processes, as on a node: busy goroutines of this one
		// would hold the Go runtime's Ps, and the readers would wait in
		// Go's scheduler, not the kernel's.
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	_, err := Measure(context.Background(), "", Options{Rounds: 2})
	if !errors.Is(err, ErrContended) {
		t.Fatalf("measured beside %d busy processes: %v, want ErrContended", n, err)
	}
	// It gives up after 2 × 4 contended phases (4 schedulers at most),
	// not after all 3 × Rounds rounds (24 phases).
	var contended, phases int
	msg := err.Error()
	if _, serr := fmt.Sscanf(msg[strings.LastIndex(msg, "measure: ")+len("measure: "):], "%d phases of %d", &contended, &phases); serr != nil {
		t.Fatalf("%v: %v", err, serr)
	}
	if contended > 8 || phases > 12 {
		t.Errorf("%v: ran %d phases, %d contended; want it to give up after 8 contended", err, phases, contended)
	}
}

// TestMeasureRecoversLeftover: a record left by a Measure that did not
// finish puts the scheduler back on its loop device while the device is
// still detached, and is dropped; a bad record is an error naming it.
func TestMeasureRecoversLeftover(t *testing.T) {
	loopdev.NeedLoop(t, "changes a free loop device's scheduler")
	lo, err := attachMemLoop()
	if err != nil {
		t.Fatal(err)
	}
	name := lo.name
	_ = lo.close()
	schedFile := filepath.Join("/sys/block", name, "queue/scheduler")
	offered, orig, err := offeredSchedulers(schedFile)
	if err != nil {
		t.Fatal(err)
	}
	other := ""
	for _, s := range offered {
		if s != orig {
			other = s
			break
		}
	}
	if other == "" {
		need.Missing(t, "a second scheduler", "%s offers only %s", name, orig)
	}
	// As a Measure killed during its phases leaves it.
	dir := t.TempDir()
	if err := writeRecord(dir, loopRecord{Device: name, Scheduler: orig}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(schedFile, []byte(other), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(schedFile, []byte(orig), 0) })
	if err := recoverLeftover("", dir); err != nil {
		t.Fatal(err)
	}
	if _, now, _ := offeredSchedulers(schedFile); now != orig {
		t.Errorf("%s has %s after the recovery, want %s", name, now, orig)
	}
	if _, err := os.Stat(filepath.Join(dir, recordName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record is kept after the recovery: %v", err)
	}
	path := filepath.Join(dir, recordName)
	if err := os.WriteFile(path, []byte(`{"device":"sda","scheduler":"none"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := recoverLeftover("", dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a record naming sda: %v, want an error naming %s", err, path)
	}
}
