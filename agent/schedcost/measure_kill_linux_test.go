package schedcost

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// killChildEnv makes the test binary TestMeasureKilled's child: a Measure
// recording its loop device in the directory it names, long enough to be
// killed in the middle.
const killChildEnv = "SHADOWTUNE_SCHEDCOST_KILL_CHILD"

// TestMeasureKilledChild is the child of TestMeasureKilled.
func TestMeasureKilledChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("the child of TestMeasureKilled")
	}
	_, err := Measure(context.Background(), "", Options{StateDir: dir, Rounds: 100, Phase: time.Second})
	t.Fatalf("Measure returned before it was killed: %v", err)
}

// TestMeasureKilled (issue 44: a loop device used by a killed agent's
// calibration came back to its next user on a non-default scheduler):
// the calibration is SIGKILLed while its loop device is on another
// scheduler than it had. The device must never be free for a next user
// with that scheduler: either still bound (nobody can take it) or back on
// its scheduler. The next start's recovery then puts it back and frees it.
func TestMeasureKilled(t *testing.T) {
	loopdev.NeedLoop(t, "attaches a loop device")
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMeasureKilledChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rec loopRecord
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, recordName)); err == nil && json.Unmarshal(b, &rec) == nil {
			if _, cur, err := offeredSchedulers(filepath.Join("/sys/block", rec.Device, "queue/scheduler")); err == nil && cur != rec.Scheduler {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no scheduler change within 30 s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	time.Sleep(100 * time.Millisecond) // the kernel's release of the child's descriptors
	schedFile := filepath.Join("/sys/block", rec.Device, "queue/scheduler")
	t.Cleanup(func() {
		// Whatever the outcome, leave the device as the calibration found
		// it and free.
		if recoverLeftover("", dir) != nil || loopBound(rec.Device) {
			t.Errorf("%s could not be put back and freed", rec.Device)
		}
	})
	_, cur, err := offeredSchedulers(schedFile)
	if err != nil {
		t.Fatal(err)
	}
	bound := loopBound(rec.Device)
	t.Logf("after the kill: %s bound %v, scheduler %s (it had %s)", rec.Device, bound, cur, rec.Scheduler)
	if !bound && cur != rec.Scheduler {
		t.Fatalf("%s is free for its next user with scheduler %s, not the %s it had", rec.Device, cur, rec.Scheduler)
	}
	if err := recoverLeftover("", dir); err != nil {
		t.Fatal(err)
	}
	if _, cur, _ := offeredSchedulers(schedFile); cur != rec.Scheduler || loopBound(rec.Device) {
		t.Errorf("after the recovery: %s bound %v, scheduler %s; want free on %s", rec.Device, loopBound(rec.Device), cur, rec.Scheduler)
	}
}

// loopBound reports whether the loop device name is attached to a file.
func loopBound(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/block", name, "loop"))
	return err == nil
}

// TestRecoverLeavesALiveCalibration: a record whose device is held by a
// live calibration (opened exclusively) is kept, and the device is neither
// changed nor detached.
func TestRecoverLeavesALiveCalibration(t *testing.T) {
	loopdev.NeedLoop(t, "attaches a loop device")
	lo, err := attachMemLoop()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lo.close() }()
	dir := t.TempDir()
	if err := writeRecord(dir, loopRecord{Device: lo.name, Scheduler: "none", Backing: lo.backing}); err != nil {
		t.Fatal(err)
	}
	err = Recover("", dir)
	if err == nil || !strings.Contains(err.Error(), "device or resource busy") {
		t.Errorf("Recover beside a live calibration: %v, want EBUSY", err)
	}
	if !loopBound(lo.name) {
		t.Errorf("%s was detached under a live calibration", lo.name)
	}
	if _, err := os.Stat(filepath.Join(dir, recordName)); err != nil {
		t.Errorf("the record was dropped: %v", err)
	}
}
