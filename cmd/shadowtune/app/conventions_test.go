package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// walk calls fn on every command of the tree except cobra's own (help,
// completion).
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	if c.Name() == "help" || c.Name() == "completion" || c.Name() == cobra.ShellCompRequestCmd || c.Name() == cobra.ShellCompNoDescRequestCmd {
		return
	}
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// TestEveryCommandHasExamples: every command, group and hidden ones
// included, has an Examples section naming itself.
func TestEveryCommandHasExamples(t *testing.T) {
	walk(NewRootCommand(), func(c *cobra.Command) {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example", c.CommandPath())
			return
		}
		if !strings.Contains(c.Example, c.CommandPath()) && !strings.Contains(c.Example, "shadowtune "+c.Name()) {
			t.Errorf("%q: no example runs it:\n%s", c.CommandPath(), c.Example)
		}
	})
}

// TestOutputIsAlwaysAFormat: wherever -o/--output is visible it is a
// format (table or json), and a file a command writes is --out-file; the
// old -o FILE spelling survives only hidden.
func TestOutputIsAlwaysAFormat(t *testing.T) {
	walk(NewRootCommand(), func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "output" || f.Hidden {
				return
			}
			if f.Shorthand != "o" || (f.DefValue != "table" && f.DefValue != "json") {
				t.Errorf("%s --output: shorthand %q, default %q; want -o and a format", c.CommandPath(), f.Shorthand, f.DefValue)
			}
			if _, ok := c.GetFlagCompletionFunc("output"); !ok {
				t.Errorf("%s --output: no completion", c.CommandPath())
			}
		})
		if f := c.LocalFlags().Lookup("out-file"); f != nil {
			if f.Shorthand != "" {
				t.Errorf("%s --out-file has the shorthand -%s", c.CommandPath(), f.Shorthand)
			}
			if old := c.LocalFlags().Lookup("output"); old == nil || !old.Hidden {
				t.Errorf("%s: the deprecated -o/--output alias of --out-file is missing or visible", c.CommandPath())
			}
		}
	})
}

// TestEnumFlagsComplete: every flag with a fixed set of values completes
// to exactly those values.
func TestEnumFlagsComplete(t *testing.T) {
	want := map[string][]string{
		"simulate --format":          traceFormatNames(),
		"simulate --redcap":          {"on", "off", "both"},
		"simulate --cache-model":     {"redcap", "smq"},
		"simulate --loop":            {"auto", "open", "closed"},
		"simulate --predict":         {"mean", "sample"},
		"simulate --device-class":    {"hdd", "ssd", "nvme", "throttled"},
		"simulate --output":          {"table", "json"},
		"simulate --candidates":      {"none", "mq-deadline", "bfq", "kyber"},
		"run --output":               {"table", "json"},
		"run --tracer":               {"auto", "ebpf", "tracefs"},
		"agent --tracer":             {"auto", "ebpf", "tracefs"},
		"agent --zap-encoder":        {"json", "console"},
		"operator --zap-log-level":   {"debug", "info", "error", "panic"},
		"model eval --mode":          {"online", "frozen"},
		"model eval --output":        {"table", "json"},
		"model learn --format":       traceFormatNames(),
		"model train --device-class": {"auto", "hdd", "ssd", "nvme"},
		"model train --tracer":       {"auto", "ebpf", "tracefs"},
		"trace convert --from":       traceFormatNames(),
		"trace convert --to":         traceFormatNames(),
		"trace record --tracer":      {"auto", "ebpf", "tracefs"},
		"state list --output":        {"table", "json"},
	}
	for spec, values := range want {
		words := strings.Fields(spec)
		flag := strings.TrimPrefix(words[len(words)-1], "--")
		args := append(append([]string{cobra.ShellCompRequestCmd}, words[:len(words)-1]...), "--"+flag, "")
		out, errOut, code := run(t, args...)
		if code != ExitOK {
			t.Errorf("%s: exit %d: %s", spec, code, errOut)
			continue
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := lines[:len(lines)-1] // the last line is the directive
		if strings.Join(got, ",") != strings.Join(values, ",") {
			t.Errorf("%s completes to %q, want %q", spec, got, values)
		}
		if lines[len(lines)-1] != ":4" { // ShellCompDirectiveNoFileComp
			t.Errorf("%s: directive %s, want :4 (no file names)", spec, lines[len(lines)-1])
		}
	}
}

// TestCleanupHidden: the chart hook's command is not in the top-level help,
// and still runs.
func TestCleanupHidden(t *testing.T) {
	out, _, code := run(t, "--help")
	if code != ExitOK || strings.Contains(out, "cleanup") || strings.Contains(out, "bench-plot") {
		t.Errorf("top-level help (exit %d) lists a hook or helper command:\n%s", code, out)
	}
	if !strings.Contains(out, "simulate") || !strings.Contains(out, "Examples:") {
		t.Errorf("top-level help lacks its commands or examples:\n%s", out)
	}
	_, errOut, code := run(t, "cleanup")
	if code != ExitUsage || !strings.Contains(errOut, "--agent-daemonset") {
		t.Errorf("cleanup without flags: exit %d, %q; want 2 naming --agent-daemonset", code, errOut)
	}
}

// TestOutFileAndDeprecatedAlias: --out-file writes the file; -o FILE, the
// old spelling, writes the same file with a warning on stderr only; the two
// together are refused.
func TestOutFileAndDeprecatedAlias(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	out, errOut, code := run(t, "model", "learn", "--trace", atlas, "--format", "disksim", "--out-file", a)
	if code != ExitOK || out != "" || errOut != "" {
		t.Fatalf("--out-file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = run(t, "model", "learn", "--trace", atlas, "--format", "disksim", "-o", b)
	if code != ExitOK || out != "" || !strings.Contains(errOut, "deprecated") || !strings.Contains(errOut, "--out-file") {
		t.Fatalf("-o FILE: exit %d, stdout %q, stderr %q; want 0, nothing on stdout, a deprecation warning", code, out, errOut)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ab) == 0 || !bytes.Equal(ab, bb) {
		t.Errorf("--out-file and -o wrote different models (%d and %d bytes)", len(ab), len(bb))
	}
	// To standard output with the old spelling: the model only on stdout.
	out, errOut, code = run(t, "model", "learn", "--trace", atlas, "--format", "disksim", "--output", "-")
	if code != ExitOK || out != string(ab) || !strings.Contains(errOut, "deprecated") {
		t.Errorf("--output -: exit %d, stdout %d bytes (want %d), stderr %q", code, len(out), len(ab), errOut)
	}
	_, errOut, code = run(t, "trace", "convert", "--from", "disksim", "-i", atlas, "-o", a, "--out-file", b)
	if code != ExitUsage || strings.Count(errOut, "\n") != 1 {
		t.Errorf("-o and --out-file together: exit %d, %q; want 2, one line", code, errOut)
	}
	_, errOut, code = run(t, "trace", "record", "--device", "loop0")
	if code != ExitUsage || !strings.Contains(errOut, "out-file") {
		t.Errorf("trace record without --out-file: exit %d, %q; want 2 naming --out-file", code, errOut)
	}
}

// TestRunStreamHeaderOnce: run's live output prints the mode, tracer and
// column header once, then one aligned line per device per window.
func TestRunStreamHeaderOnce(t *testing.T) {
	var b bytes.Buffer
	r := &runStream{w: &b}
	at := time.Date(2026, 11, 21, 15, 30, 44, 0, time.UTC)
	st := func(win int, cur string) agent.Status {
		return agent.Status{Mode: "Apply", Tracer: "ebpf", Windows: win, Devices: []v1alpha1.DeviceState{
			{Name: "loop0", Class: "ssd", Current: v1alpha1.DeviceSettings{Scheduler: cur, ReadAheadKiB: 2560},
				Window: &v1alpha1.WindowState{Best: "kyber", BestGainPercent: "19.8", ReadAheadAdviceKiB: 108, Requests: 980109}},
			{Name: "loop1", Class: "ssd", Current: v1alpha1.DeviceSettings{Scheduler: "none", ReadAheadKiB: 128}},
		}}
	}
	for w := 1; w <= 3; w++ {
		r.window(st(w, "mq-deadline"), at.Add(time.Duration(w)*5*time.Second))
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2+3*2 {
		t.Fatalf("%d lines, want 2 + 3 windows × 2 devices:\n%s", len(lines), b.String())
	}
	if lines[0] != "mode Apply  tracer ebpf" || strings.Count(b.String(), "DEVICE") != 1 || !strings.HasPrefix(lines[1], "WINDOW  TIME") {
		t.Errorf("want the mode line and one header first:\n%s", b.String())
	}
	col := strings.Index(lines[1], "BEST")
	for _, l := range lines[2:] {
		if len(l) <= col || !strings.HasPrefix(l[col:], "kyber") && !strings.HasPrefix(l[col:], "-") {
			t.Errorf("column BEST (at %d) not aligned in %q", col, l)
		}
	}
	if !strings.HasPrefix(lines[4], "2       15:30:54  loop0") {
		t.Errorf("window 2's first line: %q", lines[4])
	}
	// A tracer fallback prints the header again, once.
	s := st(4, "kyber")
	s.Tracer = "tracefs"
	r.window(s, at)
	if strings.Count(b.String(), "WINDOW  TIME") != 2 || !strings.Contains(b.String(), "\nmode Apply  tracer tracefs\n") {
		t.Errorf("after the tracer changed:\n%s", b.String())
	}
}
