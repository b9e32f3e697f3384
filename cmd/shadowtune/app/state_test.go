package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
)

// changedHost is a fake host whose devs had read_ahead_kb changed by an
// actuator with state directory state (closed again: a finished run
// with --keep, or a crash).
func changedHost(t *testing.T, devs ...string) (host, state string) {
	t.Helper()
	host, state = fakeHost(t), filepath.Join(t.TempDir(), "state")
	a, err := actuate.NewWithStore(actuatetest.New(host), state)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, dev := range devs {
		if _, err := a.Apply(dev, actuate.Setting{ReadAheadKiB: 64}); err != nil {
			t.Fatal(err)
		}
	}
	return host, state
}

func readAhead(t *testing.T, host, dev string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(host, "sys/block", dev, "queue/read_ahead_kb"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Issue 16, findings 2 and 3: a gone device and a bad record never block
// the revert of the others; the output says which were skipped and why,
// and the exit status says whether some were not restored.
func TestRunRevertSkipsGoneAndBadRecords(t *testing.T) {
	host, state := changedHost(t, "sda", "nvme0n1", "loop3")
	if err := os.RemoveAll(filepath.Join(host, "sys/block/loop3")); err != nil { // losetup -d
		t.Fatal(err)
	}
	out, errOut, code := run(t, "run", "--revert", "--host-root", host, "--state-dir", state)
	if code != ExitOK || !strings.HasPrefix(out, "restored 2 device(s): [nvme0n1 sda]\n") ||
		!strings.Contains(out, "skipped loop3: gone or replaced") || errOut != "" {
		t.Fatalf("run --revert with a gone device: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := readAhead(t, host, "sda"); got != "128" {
		t.Errorf("sda read_ahead_kb %s, want its original 128", got)
	}

	// A corrupt record and a symlinked one: the others are restored, each
	// bad file is named, and the exit status is 1.
	host, state = changedHost(t, "sda", "vda")
	garbage := filepath.Join(state, "loop2.json")
	if err := os.WriteFile(garbage, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(state, "zram0.json")
	if err := os.Symlink("/etc/hostname", link); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, "run", "--revert", "--host-root", host, "--state-dir", state)
	if code != ExitFailure || !strings.HasPrefix(out, "restored 2 device(s): [sda vda]\n") ||
		!strings.Contains(out, "not restored loop2: ") || !strings.Contains(out, garbage) ||
		!strings.Contains(out, "not restored zram0: ") || !strings.Contains(out, link) ||
		!strings.Contains(errOut, "2 device(s) not restored: loop2, zram0") {
		t.Fatalf("run --revert with bad records: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, dev := range []string{"sda", "vda"} {
		if got := readAhead(t, host, dev); got == "64" {
			t.Errorf("%s not restored", dev)
		}
	}
}

func TestStateListAndForget(t *testing.T) {
	host, state := changedHost(t, "sda", "loop3")
	if err := os.WriteFile(filepath.Join(host, "sys/block/loop3/diskseq"), []byte("99\n"), 0o644); err != nil { // another loop3
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "loop2.json"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "state", "list", "--host-root", host, "--state-dir", state, "-o", "json")
	if code != ExitOK {
		t.Fatalf("state list: exit %d, %s", code, errOut)
	}
	var recs []actuate.RecordStatus
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("state list -o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, r := range recs {
		got[r.Device] = r.Status
	}
	want := map[string]string{"loop2": actuate.StatusBad, "loop3": actuate.StatusGone, "sda": actuate.StatusPresent}
	if len(got) != len(want) || got["loop2"] != want["loop2"] || got["loop3"] != want["loop3"] || got["sda"] != want["sda"] {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	out, _, code = run(t, "state", "list", "--host-root", host, "--state-dir", state)
	if code != ExitOK || !strings.HasPrefix(out, "DEVICE") || !strings.Contains(strings.Join(strings.Fields(out), " "), "loop3 gone 7:3") {
		t.Errorf("state list table: exit %d\n%s", code, out)
	}
	if _, _, code := run(t, "state", "list", "--state-dir", state, "-o", "yaml"); code != ExitUsage {
		t.Errorf("-o yaml: exit %d", code)
	}

	// A present device is not forgotten without --force.
	out, errOut, code = run(t, "state", "forget", "sda", "--host-root", host, "--state-dir", state)
	checkOneLineError(t, out, errOut, code, ExitFailure, "still there")
	for _, dev := range []string{"loop3", "loop2"} {
		out, errOut, code = run(t, "state", "forget", dev, "--host-root", host, "--state-dir", state)
		if code != ExitOK || !strings.HasPrefix(out, "forgot "+dev) {
			t.Errorf("state forget %s: exit %d, %q %q", dev, code, out, errOut)
		}
	}
	out, _, code = run(t, "state", "forget", "loop3", "--host-root", host, "--state-dir", state)
	if code != ExitOK || !strings.HasPrefix(out, "no record of loop3") {
		t.Errorf("second forget: exit %d, %q", code, out)
	}
	if recs := stateRecords(t, state); len(recs) != 1 || filepath.Base(recs[0]) != "sda.json" {
		t.Errorf("records left: %v", recs)
	}
	out, errOut, code = run(t, "run", "--revert", "--host-root", host, "--state-dir", state)
	if code != ExitOK || out != "restored 1 device(s): [sda]\n" {
		t.Errorf("revert after forget: exit %d, %q %q", code, out, errOut)
	}
}

// TestRunRevertNeverBlocks (issue 44, F6/F7): FIFOs at a record, at the
// run marker, the scheduler costs, a model and a memo, and a character
// device (/dev/zero's numbers, as root) at a record, must not block
// `run --revert` or make it read without end: the good record is
// restored, each bad one named, exit 1.
func TestRunRevertNeverBlocks(t *testing.T) {
	host, state := changedHost(t, "sda")
	for _, rel := range []string{"nvme0n1.json", "agent.run", "node/scheduler-costs.json", "models/sda.json", "memo/sda.json"} {
		p := filepath.Join(state, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(state, "vda.json"), syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := run(t, "run", "--revert", "--host-root", host, "--state-dir", state)
		done <- result{out, errOut, code}
	}()
	select {
	case r := <-done:
		if r.code != ExitFailure || !strings.HasPrefix(r.out, "restored 1 device(s): [sda]\n") ||
			!strings.Contains(r.out, "not restored nvme0n1: ") || !strings.Contains(r.out, "named pipe") {
			t.Errorf("run --revert: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
		}
		if os.Geteuid() == 0 && !strings.Contains(r.out, "not restored vda: ") {
			t.Errorf("the character device at vda.json is not named: %q", r.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run --revert blocked for 30 s on its state directory")
	}
	if got := readAhead(t, host, "sda"); got != "128" {
		t.Errorf("sda read_ahead_kb %s, want its original 128", got)
	}
}
