package train

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func TestFioArgs(t *testing.T) {
	ro := fioArgs("/tmp/x.iolog", "/dev/loop9", true, 1500*time.Millisecond)
	for _, want := range []string{"--filename=/dev/loop9", "--read_iolog=/tmp/x.iolog", "--ioengine=psync", "--direct=1",
		"--iodepth=1", "--replay_no_stall=1", "--runtime=1500ms", "--output-format=json", "--readonly"} {
		if !slices.Contains(ro, want) {
			t.Errorf("read-only fio args %q lack %s", ro, want)
		}
	}
	if rw := fioArgs("/tmp/x.iolog", "/dev/loop9", false, time.Second); slices.Contains(rw, "--readonly") {
		t.Errorf("read-write fio args %q carry --readonly", rw)
	}
}

func TestParseFioJSON(t *testing.T) {
	ok := `note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{
  "fio version" : "fio-3.33",
  "jobs" : [ { "jobname" : "train", "error" : 0, "job_runtime" : 700,
      "read" : { "io_bytes" : 4096, "total_ios" : 19390 }, "write" : { "total_ios" : 12 } } ]
}`
	r, err := parseFioJSON([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if r.Reads != 19390 || r.Writes != 12 || r.Runtime != 700*time.Millisecond {
		t.Errorf("parsed %+v", r)
	}
	for name, in := range map[string]string{
		"empty":     "",
		"truncated": `{"jobs": [`,
		"no job":    `{"jobs": []}`,
		"job error": `{"jobs": [{"error": 5, "read": {"total_ios": 3}}]}`,
	} {
		if _, err := parseFioJSON([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := parseFioJSON([]byte(`{"jobs": [{"error": 5}]}`)); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Errorf("job error: %v, want the errno named", err)
	}
}

// TestIologRoundTrip: the log fio replays holds exactly the planned
// requests, aimed at the device.
func TestIologRoundTrip(t *testing.T) {
	p, err := NewPlanner(PlanOptions{CapacitySectors: 1 << 21, Writes: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	reqs := p.Next(3000)
	path := filepath.Join(t.TempDir(), "round.iolog")
	if err := writeIolog(path, "/dev/loop9", reqs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		if f := strings.Fields(line); len(f) < 3 || f[1] != "/dev/loop9" {
			t.Fatalf("line %q does not target /dev/loop9", line)
		}
	}
	got, err := trace.ReadFile("fio-iolog", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("read back %d requests, wrote %d", len(got), len(reqs))
	}
	for i := range reqs {
		if got[i].Op != reqs[i].Op || got[i].Sector != reqs[i].Sector || got[i].Sectors != reqs[i].Sectors {
			t.Fatalf("request %d: read back %+v, wrote %+v", i, got[i], reqs[i])
		}
	}
}

func TestLookFio(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := LookFio("")
	if err == nil || !strings.Contains(err.Error(), "install fio") {
		t.Errorf("no fio in PATH: %v, want a message saying to install fio", err)
	}
}
