package actuate

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
	"github.com/shadowtune/shadowtune/internal/sched"
)

// The crash tests run Apply in a child process (this test binary, running
// TestCrashChild) that SIGKILLs itself at a crash point, then check that a
// new Actuator on the same state directory reverts exactly.

const (
	envCrashRoot   = "SHADOWTUNE_CRASH_ROOT"  // fake tree, or "" with envCrashReal for real sysfs
	envCrashReal   = "SHADOWTUNE_CRASH_REAL"  // "1": use SysfsStore{Root: ""}
	envCrashState  = "SHADOWTUNE_CRASH_STATE" // state directory
	envCrashPoint  = "SHADOWTUNE_CRASH_POINT" // the hook point to die at
	envCrashDev    = "SHADOWTUNE_CRASH_DEV"
	envCrashSet    = "SHADOWTUNE_CRASH_SETTINGS" // JSON []Setting applied in order
	envCrashClaims = "SHADOWTUNE_CRASH_CLAIMS"   // claim directory ("" : the Store's default)
)

// TestCrashChild is the child's body; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	stateDir := os.Getenv(envCrashState)
	if stateDir == "" {
		t.Skip("helper process for the crash tests")
	}
	var st Store = actuatetest.New(os.Getenv(envCrashRoot))
	if os.Getenv(envCrashReal) == "1" {
		st = SysfsStore{}
	}
	a, err := open(Options{Store: st, StateDir: stateDir, ClaimDir: os.Getenv(envCrashClaims)}, true)
	if err != nil {
		t.Fatal(err)
	}
	point := os.Getenv(envCrashPoint)
	a.hook = func(p string) {
		if p == point {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns
		}
	}
	var settings []Setting
	if err := json.Unmarshal([]byte(os.Getenv(envCrashSet)), &settings); err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if _, err := a.Apply(os.Getenv(envCrashDev), s); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("crash point %q never reached", point)
}

// runCrashChild runs the child and checks it died of SIGKILL.
func runCrashChild(t *testing.T, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child did not crash: %v\n%s", err, out)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exited with %v, not SIGKILL:\n%s", err, out)
	}
}

func settingsJSON(t *testing.T, s ...Setting) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCrashDuringApply(t *testing.T) {
	first := Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0, "low_latency": 0}, ReadAheadKiB: 512}
	second := Setting{Scheduler: "kyber", Tunables: sched.Tunables{"read_lat_nsec": 500000}, ReadAheadKiB: 1024}
	tests := []struct {
		name        string
		settings    []Setting // all but the last are applied cleanly first
		point       string
		interrupted bool
	}{
		{"after recording originals", []Setting{first}, "recorded", false},
		{"after the journal", []Setting{first}, "journaled", true},
		{"after switching the scheduler", []Setting{first}, "wrote " + AttrScheduler, true},
		{"after the first tunable", []Setting{first}, "wrote queue/iosched/low_latency", true},
		{"after read-ahead", []Setting{first}, "wrote " + AttrReadAhead, true},
		// The second change crashes: Revert must reach the true original
		// (mq-deadline), not bfq, the state just before that change.
		{"second change, after its switch", []Setting{first, second}, "wrote " + AttrScheduler, true},
		{"second change, mid-way", []Setting{first, second}, "wrote queue/iosched/read_lat_nsec", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for _, s := range tc.settings[:len(tc.settings)-1] {
				if _, err := e.a.Apply("sda", s); err != nil {
					t.Fatal(err)
				}
			}
			e.a.Close()
			runCrashChild(t, envCrashRoot+"="+e.root, envCrashState+"="+e.stateDir, envCrashPoint+"="+tc.point,
				envCrashDev+"=sda", envCrashSet+"="+settingsJSON(t, tc.settings[len(tc.settings)-1]))

			a := e.open(t)
			if got := slices.Equal(a.Interrupted(), []string{"sda"}); got != tc.interrupted {
				t.Errorf("Interrupted = %v, want sda: %v", a.Interrupted(), tc.interrupted)
			}
			o, ok := a.Originals()["sda"]
			if !ok {
				t.Fatal("no original recorded")
			}
			if o.State.Scheduler != "mq-deadline" || o.State.ReadAheadKiB != 128 || o.State.Tunables["fifo_batch"] != "16" {
				t.Errorf("original overwritten: %+v", o.State)
			}
			nWrites := len(e.fake.Writes())
			if err := a.Revert("sda"); err != nil {
				t.Fatalf("Revert after crash: %v", err)
			}
			if tc.point == "recorded" && len(e.fake.Writes()) != nWrites {
				t.Errorf("revert of an untouched device wrote %v", e.fake.Writes()[nWrites:])
			}
			e.assertPristine(t, "sda", "nvme0n1", "vda", "loop3")
			if len(a.Originals()) != 0 || len(a.Interrupted()) != 0 {
				t.Errorf("records left: %v", a.Originals())
			}
		})
	}
}

// TestCrashThenApply: after a crash mid-change, the next Apply first puts
// the device back as before the interrupted change.
func TestCrashThenApply(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	runCrashChild(t, envCrashRoot+"="+e.root, envCrashState+"="+e.stateDir,
		envCrashPoint+"=wrote queue/iosched/slice_idle", envCrashDev+"=vda",
		envCrashSet+"="+settingsJSON(t, Setting{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}, ReadAheadKiB: 512}))
	a := e.open(t)
	res, err := a.Apply("vda", Setting{Tunables: sched.Tunables{"fifo_batch": 32}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Before.Scheduler != "mq-deadline" || res.After.Tunables["fifo_batch"] != "32" || res.After.ReadAheadKiB != 8192 {
		t.Errorf("Apply after crash: %+v", res)
	}
	if len(a.Interrupted()) != 0 {
		t.Errorf("Interrupted = %v", a.Interrupted())
	}
	if err := a.Revert("vda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "vda")
}
