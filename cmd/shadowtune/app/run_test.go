package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// Robustness of `shadowtune run`, through Main: exit statuses, one-line
// errors, and that nothing is changed when the run cannot proceed.

// fakeSysfs is the fake /sys tree of agent/sysfs (loop3, sda, nvme0n1, …).
const fakeSysfs = "../../../agent/sysfs/testdata/sys"

// reexecEnv makes the test binary run Main with its arguments instead of
// the tests (TestMain): the SIGKILL test runs `shadowtune run` as a child
// process without building the binary.
const reexecEnv = "SHADOWTUNE_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fakeHost copies the fake sysfs tree into a new host root and returns the
// root (ROOT/sys/block/...).
func fakeHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir(fakeSysfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fakeSysfs, p)
		dst := filepath.Join(root, "sys", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// treeOf returns every file under root: path → mode and content.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = info.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// chmodFiles makes every regular file under root read-only (0444).
func chmodFiles(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// policy returns a StorageTuning document with the given spec (YAML, indented
// by two spaces under spec:).
func policy(spec string) string {
	return "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: test\nspec:\n" + spec
}

// checkOneLineError checks that a failed run printed exactly one error line
// naming want, and nothing on stdout.
func checkOneLineError(t *testing.T, stdout, stderr string, code, wantCode int, want string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit %d, want %d (stderr %q)", code, wantCode, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout not empty: %q", stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "shadowtune: error: ") {
		t.Errorf("stderr is not one error line: %q", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not name %q", stderr, want)
	}
	if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") {
		t.Errorf("stack trace: %q", stderr)
	}
}

// stateRecords lists the actuator's records of original settings in dir.
func stateRecords(t *testing.T, dir string) []string {
	t.Helper()
	recs, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestRunRejectsBadPolicies(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		// A flow sequence never closed: the parser notices on line 8.
		{"yaml syntax", policy("  mode: Apply\n  devices:\n    include: [loop3\n  evaluation:\n    window: 2s\n"), "policy.yaml:8: "},
		{"unknown field", policy("  mode: Apply\n  devices:\n    inclde: [loop3]\n"), `policy.yaml: unknown field "spec.devices.inclde"`},
		{"invalid scheduler", policy("  mode: Apply\n  schedulers:\n    candidates: [none, cfq]\n"),
			`policy.yaml: spec.schedulers.candidates[1]: Unsupported value: "cfq"`},
		{"invalid default scheduler", policy("  mode: Apply\n  schedulers:\n    default: cfq\n"),
			`policy.yaml: spec.schedulers.default: Invalid value: "cfq"`},
		{"window too short", policy("  mode: Apply\n  evaluation:\n    window: 10ms\n"), "policy.yaml: spec.evaluation.window: "},
		{"wrong kind", strings.Replace(policy("  mode: Apply\n"), "kind: StorageTuning", "kind: NodeStorageState", 1),
			`policy.yaml: kind: `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := c.doc
			cfg := writeFile(t, "policy.yaml", doc)
			host := fakeHost(t)
			before := treeOf(t, host)
			state := filepath.Join(t.TempDir(), "state")
			out, errOut, code := run(t, "run", "--config", cfg, "--host-root", host, "--state-dir", state,
				"--metrics-bind-address", "0", "--duration", "5s")
			checkOneLineError(t, out, errOut, code, ExitUsage, c.want)
			if !strings.Contains(errOut, cfg) {
				t.Errorf("stderr %q does not name the file %s", errOut, cfg)
			}
			if d := loopdev.Diff(before, treeOf(t, host)); d != "" {
				t.Errorf("host tree changed:\n%s", d)
			}
			if _, err := os.Stat(state); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("state directory created for a policy that was rejected (%v)", err)
			}
		})
	}
}

func TestRunSelectingNoDevice(t *testing.T) {
	cfg := writeFile(t, "policy.yaml", policy("  mode: Apply\n  devices:\n    include: [\"nosuchdev*\"]\n"))
	hosts := []string{fakeHost(t)}
	if os.Geteuid() == 0 {
		hosts = append(hosts, "") // this machine's own /sys
	}
	for _, host := range hosts {
		var before map[string]string
		if host != "" {
			before = treeOf(t, host)
		}
		state := filepath.Join(t.TempDir(), "state")
		out, errOut, code := run(t, "run", "--config", cfg, "--host-root", host, "--state-dir", state,
			"--metrics-bind-address", "0", "--duration", "5s")
		checkOneLineError(t, out, errOut, code, ExitUsage, cfg+": agent: the policy selects no device on this host")
		if host != "" {
			if d := loopdev.Diff(before, treeOf(t, host)); d != "" {
				t.Errorf("host tree changed:\n%s", d)
			}
		}
		if recs := stateRecords(t, state); len(recs) > 0 {
			t.Errorf("records written: %v", recs)
		}
	}
}

func TestRunRevertWithEmptyStateDir(t *testing.T) {
	for _, state := range []string{t.TempDir(), filepath.Join(t.TempDir(), "never-created")} {
		out, errOut, code := run(t, "run", "--revert", "--state-dir", state)
		if code != ExitOK || out != "restored 0 device(s): []\n" || errOut != "" {
			t.Errorf("--revert --state-dir %s: exit %d, stdout %q, stderr %q; want 0, \"restored 0 device(s): []\"", state, code, out, errOut)
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	cfg := writeFile(t, "policy.yaml", policy("  mode: Apply\n  devices:\n    include: [loop3]\n"))
	host := fakeHost(t)
	before := treeOf(t, host)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown tracer", []string{"--config", cfg, "--tracer", "nosuch"}, `--tracer: want auto, ebpf or tracefs, got "nosuch"`},
		{"unknown output", []string{"--config", cfg, "--output", "yaml"}, `--output: want table or json, got "yaml"`},
		{"no config", nil, "--config is required"},
		{"missing config", []string{"--config", filepath.Join(t.TempDir(), "nosuch.yaml")}, "nosuch.yaml: open: no such file or directory"},
		{"bad duration", []string{"--config", cfg, "--duration", "soon"}, "invalid argument"},
		{"bad metrics address", []string{"--config", cfg, "--metrics-bind-address", "nosuch:address:1"}, "--metrics-bind-address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			args := append([]string{"run", "--host-root", host, "--state-dir", state}, c.args...)
			out, errOut, code := run(t, args...)
			checkOneLineError(t, out, errOut, code, ExitUsage, c.want)
			if _, err := os.Stat(state); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("state directory created (%v)", err)
			}
		})
	}
	if d := loopdev.Diff(before, treeOf(t, host)); d != "" {
		t.Errorf("host tree changed:\n%s", d)
	}
}

// TestRunOnReadOnlySysfs runs Apply mode against a host root whose sysfs
// cannot be written: the fake tree with every file 0444 and, as root (who
// ignores file modes), mounted read-only. Without root the tracer cannot
// start, and the run fails with one line saying so. As root, the fake
// loop3 is given the dev_t of a loop device of the test under fio load,
// so that the agent traces real requests, decides, and tries to apply;
// every attempt must fail with a clear error in the report, and the tree
// must be left exactly as it was. The read-ahead bounds pin the advice at
// 1024 KiB (the fake's depth is 128), so the agent always has a change to
// try once two windows agree, whichever scheduler the simulation prefers
// (on a busy host it can prefer the current one, and then no scheduler
// write is tried at all).
func TestRunOnReadOnlySysfs(t *testing.T) {
	host := fakeHost(t)
	cfg := writeFile(t, "policy.yaml", policy("  mode: Apply\n  devices:\n    include: [loop3]\n  evaluation:\n    window: 1s\n    cpuBudgetPercent: 50\n"+
		"  readAhead:\n    minKiB: 1024\n    maxKiB: 1024\n"))
	state := filepath.Join(t.TempDir(), "state")
	if os.Geteuid() != 0 {
		chmodFiles(t, host)
		before := treeOf(t, host)
		out, errOut, code := run(t, "run", "--config", cfg, "--host-root", host, "--state-dir", state,
			"--metrics-bind-address", "0", "--duration", "3s", "-o", "json")
		checkOneLineError(t, out, errOut, code, ExitFailure, "start tracer: ")
		if d := loopdev.Diff(before, treeOf(t, host)); d != "" {
			t.Errorf("host tree changed:\n%s", d)
		}
		return
	}
	fio := loopdev.NeedFio(t)
	loopdev.LockHeavyIO(t)
	name := loopdev.New(t, 64<<20) // the fake loop3 is 64 MiB too
	realBefore := loopdev.SnapshotQueue(t, name)
	dev, err := os.ReadFile(filepath.Join("/sys/block", name, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "sys/block/loop3/dev"), dev, 0o644); err != nil {
		t.Fatal(err)
	}
	chmodFiles(t, host)
	ro := t.TempDir()
	if out, err := exec.Command("mount", "--bind", host, ro).CombinedOutput(); err != nil {
		need.Missing(t, "bind mounts", "cannot bind-mount: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", ro).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", ro, err, out)
		}
	})
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
		need.Missing(t, "bind mounts", "cannot make the bind mount read-only: %v: %s", err, strings.TrimSpace(string(out)))
	}
	before := treeOf(t, host)
	stopFio := startFio(t, fio, name, "--rw=randread", "--bs=4k", "--ioengine=libaio", "--iodepth=4", "--numjobs=2")
	// --quiet: only errors are logged, and the failed changes are errors.
	out, errOut, code := run(t, "run", "--config", cfg, "--host-root", ro, "--state-dir", state,
		"--metrics-bind-address", "0", "--duration", "5s", "-o", "json", "--quiet")
	stopFio()
	t.Logf("exit %d; stderr:\n%s", code, errOut)
	if code != ExitOK {
		t.Fatalf("exit %d, want 0 with the failures in the report", code)
	}
	st := decodeRunReport(t, out)
	if len(st.Devices) != 1 || st.Devices[0].Name != "loop3" {
		t.Fatalf("report devices %+v, want loop3", st.Devices)
	}
	d := st.Devices[0]
	t.Logf("loop3 (the test's %s): %d requests, candidates %+v, current %+v, changes %d, lastError %q", name, d.TotalRequests, d.Candidates,
		d.Current, d.Changes, d.LastError)
	wantErr := filepath.Join(ro, "sys/block/loop3/queue/")
	if len(d.Candidates) == 0 {
		t.Errorf("no window was evaluated (%d requests traced): the apply path went untested", d.TotalRequests)
	} else if !strings.Contains(d.LastError, wantErr) || !strings.Contains(d.LastError, "read-only file system") ||
		!strings.Contains(d.LastError, "rolled back") {
		t.Errorf("report lastError %q: want the write to %s… failing on a read-only file system, rolled back", d.LastError, wantErr)
	}
	if !strings.Contains(errOut, `"msg"="apply" "error"="actuate: write `) || !strings.Contains(errOut, "read-only file system") {
		t.Errorf("the log (--quiet: errors only) does not show the failed change: %q", errOut)
	}
	if strings.Contains(errOut, `"level"=0`) {
		t.Errorf("--quiet logged more than errors: %q", errOut)
	}
	if d.Changes != 0 || d.Current.Scheduler != "none" || d.Current.ReadAheadKiB != 128 {
		t.Errorf("report claims a change: %+v", d)
	}
	if diff := loopdev.Diff(before, treeOf(t, host)); diff != "" {
		t.Errorf("read-only host tree changed:\n%s", diff)
	}
	if diff := loopdev.Diff(realBefore, loopdev.SnapshotQueue(t, name)); diff != "" {
		t.Errorf("the real %s changed, though the agent was given another host root:\n%s", name, diff)
	}
	if recs := stateRecords(t, state); len(recs) > 0 {
		t.Errorf("records left: %v", recs)
	}
}

// TestRunKilledThenRevert SIGKILLs `shadowtune run` in Apply mode on a loop
// device under fio load, once as soon as it has recorded the device's
// original settings (so possibly in the middle of its first change), once
// as soon as the change shows in sysfs. The device must then be either as
// it was or changed with its originals on record, and `run --revert` must
// put back every queue attribute exactly.
func TestRunKilledThenRevert(t *testing.T) {
	need.Root(t, "creates a loop device, traces it with eBPF and changes its settings")
	fio := loopdev.NeedFio(t)
	loopdev.LockHeavyIO(t)
	name := loopdev.New(t, 256<<20)
	orig := loopdev.SnapshotQueue(t, name)
	// The read-ahead range excludes the device's depth: a change the agent
	// must make (the policy's bounds), whatever the scheduler predictions.
	cfg := writeFile(t, "policy.yaml", policy(fmt.Sprintf(
		"  mode: Apply\n  devices:\n    include: [%s]\n  evaluation:\n    window: 1s\n    cpuBudgetPercent: 50\n"+
			"  readAhead:\n    minKiB: 1024\n    maxKiB: 1024\n", name)))
	for _, when := range []string{"recorded", "changed"} {
		t.Run(when, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			record := filepath.Join(state, name+".json")
			killAt := func() bool {
				if when == "recorded" {
					_, err := os.Stat(record)
					return err == nil
				}
				return loopdev.Diff(orig, loopdev.SnapshotQueue(t, name)) != ""
			}
			stopFio := startFio(t, fio, name, "--rw=randread", "--bs=4k", "--ioengine=libaio", "--iodepth=4", "--numjobs=2")
			child := killAfter(t, killAt, "run", "--config", cfg, "--state-dir", state, "--metrics-bind-address", "0",
				"--duration", "60s")
			stopFio()
			t.Logf("killed shadowtune run %s; its output:\n%s", when, child)
			checkKilled(t, name, orig, record)

			out, errOut, code := run(t, "run", "--revert", "--state-dir", state)
			if code != ExitOK || out != fmt.Sprintf("restored 1 device(s): [%s]\n", name) {
				t.Errorf("run --revert: exit %d, stdout %q, stderr %q; want 0, restored [%s]", code, out, errOut, name)
			}
			if d := loopdev.Diff(orig, loopdev.SnapshotQueue(t, name)); d != "" {
				t.Errorf("/sys/block/%s/queue after run --revert differs from before the run:\n%s", name, d)
			}
			if recs := stateRecords(t, state); len(recs) > 0 {
				t.Errorf("records left after --revert: %v", recs)
			}
			// A second revert finds nothing to do.
			if out, _, code := run(t, "run", "--revert", "--state-dir", state); code != ExitOK || out != "restored 0 device(s): []\n" {
				t.Errorf("second run --revert: exit %d, stdout %q", code, out)
			}
		})
	}
}

// killAfter runs `shadowtune ARGS` as a child process (the test binary, see
// TestMain), polls cond every millisecond, SIGKILLs the child as soon as
// cond holds and returns the child's output. It fails t if the child exits
// first or cond does not hold within 30 s.
func killAfter(t *testing.T, cond func() bool, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), reexecEnv+"=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// A tracefs tracer would leave its instance behind.
	t.Cleanup(func() { _ = os.Remove(fmt.Sprintf("/sys/kernel/tracing/instances/shadowtune-%d", cmd.Process.Pid)) })
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("shadowtune run exited (%v) before the kill point:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("kill point not reached in 30 s (%v):\n%s", <-exited, out.String())
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("shadowtune run: %v, want killed by SIGKILL\n%s", err, out.String())
	}
	return out.String()
}

// checkKilled checks a device after its agent was killed: either as it
// was, or changed with its originals on record in record.
func checkKilled(t *testing.T, name string, orig map[string]string, record string) {
	t.Helper()
	killed := loopdev.SnapshotQueue(t, name)
	sched := loopdev.Current(killed["scheduler"])
	if !slices.Contains([]string{"none", "mq-deadline", "bfq", "kyber"}, sched) {
		t.Errorf("after SIGKILL the scheduler of %s is %q", name, killed["scheduler"])
	}
	if _, err := strconv.Atoi(strings.TrimSpace(killed["read_ahead_kb"])); err != nil {
		t.Errorf("after SIGKILL read_ahead_kb of %s is %q", name, killed["read_ahead_kb"])
	}
	var rec struct {
		Original struct {
			Scheduler   string `json:"scheduler"`
			ReadAheadKB int    `json:"read_ahead_kb"`
		} `json:"original"`
		InProgress json.RawMessage `json:"in_progress"`
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("no record of %s's originals after SIGKILL: %v", name, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("record %s: %v\n%s", record, err, b)
	}
	if rec.Original.Scheduler != loopdev.Current(orig["scheduler"]) ||
		strconv.Itoa(rec.Original.ReadAheadKB) != strings.TrimSpace(orig["read_ahead_kb"]) {
		t.Errorf("recorded originals %+v, the device had %s and read_ahead_kb %s", rec.Original, orig["scheduler"], orig["read_ahead_kb"])
	}
	if changed := loopdev.Diff(orig, killed); changed == "" {
		t.Logf("killed before the change reached %s (journal %s)", name, orDash(string(rec.InProgress)))
	} else {
		t.Logf("killed with %s changed (journal %s):\n%s", name, orDash(string(rec.InProgress)), changed)
	}
}

// startFio runs fio on /dev/NAME (a device of the test) until the returned
// function is called (at most a minute).
func startFio(t *testing.T, fio, name string, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, fio, append([]string{"--name=load", "--filename=/dev/" + name, "--direct=1",
		"--time_based", "--runtime=60", "--output-format=terse"}, args...)...)
	// fio stops its job processes on SIGINT; killing only the parent would
	// leave them running, holding the output pipe.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		cancel()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("fio: %v\n%s", err, out.String())
		}
	}
	t.Cleanup(stop)
	return stop
}

// decodeRunReport decodes the JSON report of `run -o json` strictly: an
// unknown key anywhere fails the test, so every device entry is exactly a
// v1alpha1.DeviceState, the NodeStorageState's own schema.
func decodeRunReport(t *testing.T, out string) agent.Status {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var st agent.Status
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("report does not decode strictly into agent.Status (devices: v1alpha1.DeviceState): %v\n%s", err, out)
	}
	return st
}

// TestRunRowDefaultsChanged: a device's changed defaults show in its row,
// with the verdict of each judged knob.
func TestRunRowDefaultsChanged(t *testing.T) {
	d := v1alpha1.DeviceState{Name: "sda", DefaultsChanged: &v1alpha1.DefaultsChange{Knobs: []v1alpha1.KnobChange{
		{Knob: "read_ahead_kb", Old: "128", New: "2560", Verdict: v1alpha1.VerdictSlower, ChangePercent: "+117.4"},
		{Knob: "nr_requests", Old: "128", New: "256"},
	}}}
	row := runRow(d)
	want := "defaults changed: read_ahead_kb 128 → 2560 (Slower, +117.4 %), nr_requests 128 → 256"
	if last := row[len(row)-1]; !strings.Contains(last, want) {
		t.Errorf("last cell %q, want it to contain %q", last, want)
	}
}
