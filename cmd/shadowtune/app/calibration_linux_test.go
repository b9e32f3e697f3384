package app

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestRunKilledDuringCalibration (issue 44: a loop device used by a killed
// agent's scheduler-cost calibration came back to its next user on a
// non-default scheduler): `shadowtune run` is SIGKILLed while its
// calibration device is on another scheduler than it had. The device must
// not be free with that scheduler; `run --revert` puts the scheduler back
// and frees the device.
func TestRunKilledDuringCalibration(t *testing.T) {
	loopdev.NeedLoop(t, "creates loop devices and runs the agent's calibration")
	name := loopdev.New(t, 64<<20)
	cfg := writeFile(t, "policy.yaml", policy(fmt.Sprintf(
		"  mode: Observe\n  devices:\n    include: [%s]\n  evaluation:\n    window: 1s\n", name)))
	// Mended by `run --revert`, then by the agent's next start.
	for _, mend := range [][]string{
		{"run", "--revert"},
		{"run", "--config", cfg, "--metrics-bind-address", "0", "--duration", "1s"},
	} {
		t.Run(mend[1], func(t *testing.T) { killDuringCalibration(t, cfg, mend) })
	}
}

// killDuringCalibration SIGKILLs `shadowtune run --config cfg` once its
// calibration device is on another scheduler, checks that the device is
// not free on that scheduler, runs `shadowtune MEND --state-dir STATE`,
// and checks that the device is free on its scheduler again.
func killDuringCalibration(t *testing.T, cfg string, mend []string) {
	state := filepath.Join(t.TempDir(), "state")
	recPath := filepath.Join(state, "node", "schedcost-loop.json")
	var rec struct{ Device, Scheduler string }
	changed := func() bool {
		b, err := os.ReadFile(recPath)
		if err != nil || json.Unmarshal(b, &rec) != nil {
			return false
		}
		cur, err := os.ReadFile(filepath.Join("/sys/block", rec.Device, "queue/scheduler"))
		return err == nil && loopdev.Current(string(cur)) != rec.Scheduler
	}
	out := killAfter(t, changed, "run", "--config", cfg, "--state-dir", state, "--metrics-bind-address", "0", "--duration", "60s")
	t.Logf("killed shadowtune run during its calibration on %s; its output:\n%s", rec.Device, out)
	sched := func() string {
		b, err := os.ReadFile(filepath.Join("/sys/block", rec.Device, "queue/scheduler"))
		if err != nil {
			t.Fatal(err)
		}
		return loopdev.Current(string(b))
	}
	bound := func() bool {
		_, err := os.Stat(filepath.Join("/sys/block", rec.Device, "loop"))
		return err == nil
	}
	t.Cleanup(func() {
		if bound() {
			_, _, _ = run(t, "run", "--revert", "--state-dir", state)
		} else if sched() != rec.Scheduler {
			_ = os.WriteFile(filepath.Join("/sys/block", rec.Device, "queue/scheduler"), []byte(rec.Scheduler), 0)
		}
	})
	if s := sched(); !bound() && s != rec.Scheduler {
		t.Fatalf("%s is free for its next user on scheduler %s, not the %s it had", rec.Device, s, rec.Scheduler)
	}
	stdout, stderr, code := run(t, append(mend, "--state-dir", state)...)
	if code != ExitOK {
		t.Errorf("%v: exit %d, stdout %q, stderr %q", mend, code, stdout, stderr)
	}
	if s := sched(); bound() || s != rec.Scheduler {
		t.Errorf("after %v: %s bound %v on %s; want free on %s", mend, rec.Device, bound(), s, rec.Scheduler)
	}
	if _, err := os.Stat(recPath); !os.IsNotExist(err) {
		t.Errorf("the calibration record is kept after %v: %v", mend, err)
	}
}
