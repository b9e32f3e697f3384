package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

func TestModelTrainBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no device", []string{"model", "train", "--duration", "1s"}, ExitUsage, "required flag"},
		{"no duration", []string{"model", "train", "--device", "loop0"}, ExitUsage, "required flag"},
		{"zero duration", []string{"model", "train", "--device", "loop0", "--duration", "0s"}, ExitUsage, "--duration must be positive"},
		{"bad class", []string{"model", "train", "--device", "loop0", "--duration", "1s", "--device-class", "tape"}, ExitUsage, "--device-class"},
		{"bad size", []string{"model", "train", "--device", "loop0", "--duration", "1s", "--sizes-kib", "4,6"}, ExitUsage, "--sizes-kib: 6"},
		{"bad tracer", []string{"model", "train", "--device", "loop0", "--duration", "1s", "--tracer", "strace"}, ExitUsage, "--tracer"},
		{"no fio", []string{"model", "train", "--device", "loop0", "--duration", "1s", "--fio", "/nonexistent/fio"}, ExitFailure, "install fio"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := run(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line containing %q", code, stderr, c.code, c.want)
			}
		})
	}
}

func TestModelTrainNoSuchDevice(t *testing.T) {
	need.Root(t, "training refuses to start otherwise")
	fio := loopdev.NeedFio(t)
	_, stderr, code := run(t, "model", "train", "--fio", fio, "--device", "/dev/nonexistent-disk", "--duration", "1s", "--out-file", filepath.Join(t.TempDir(), "m.json"))
	if code != ExitUsage || !strings.Contains(stderr, "nonexistent-disk") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestModelTrainLoop trains a loop device through the command line, into
// the state directory the agent loads models from, and to stdout.
func TestModelTrainLoop(t *testing.T) {
	fio := loopdev.NeedFio(t)
	name := loopdev.New(t, 64<<20)
	state := t.TempDir()
	stdout, stderr, code := run(t, "model", "train", "--fio", fio, "--device", "/dev/"+name, "--duration", "2s", "--state-dir", state)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	path := filepath.Join(state, "models", name+".json")
	for _, want := range []string{"device " + name + " (", "read-miss", "CELLS FILLED", "MEAN SERVICE (µs)", "model written to " + path} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Config().CapacitySectors; got != 64<<11 {
		t.Errorf("model capacity %d sectors, want the device's %d (the agent loads only a model of its size)", got, 64<<11)
	}

	stdout, stderr, code = run(t, "model", "train", "--device", name, "--duration", "1s", "--out-file", "-", "--device-class", "ssd", "--sizes-kib", "4,64")
	if code != ExitOK {
		t.Fatalf("-o -: exit %d: %s", code, stderr)
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(stdout), &js); err != nil || js["class"] != "ssd" {
		t.Errorf("-o -: stdout is not the ssd model (%v): %.200s", err, stdout)
	}
	if !strings.Contains(stderr, "sizes 4,64 KiB") || !strings.Contains(stderr, "model written to -") {
		t.Errorf("-o -: the summary belongs on stderr: %s", stderr)
	}
}
