package app

import (
	goflag "flag"
	"path/filepath"
	"strings"
	"testing"
)

func TestAgentFlags(t *testing.T) {
	out, errOut, code := run(t, "agent", "--help")
	if code != ExitOK {
		t.Fatalf("agent --help: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"--node-name string", "(default $NODE_NAME)",
		"--host-root string", "--host-tools-root string",
		`--state-dir string`, `(default "/var/lib/shadowtune")`,
		"--metrics-bind-address string", `(default ":9464")`,
		"--health-probe-bind-address string", `(default ":9465")`,
		"--tracer string", `(default "auto")`,
		"--kubeconfig string",
		"--metrics-secure", "--zap-log-level",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("agent --help does not show %q:\n%s", want, out)
		}
	}
}

// TestHostToolsRootFlag: every command that reads or switches dm-caches
// (the agent, run and its --revert, state) can use the host's tools.
func TestHostToolsRootFlag(t *testing.T) {
	for _, args := range [][]string{{"agent"}, {"run"}, {"state", "list"}, {"state", "forget"}} {
		out, errOut, code := run(t, append(args, "--help")...)
		if code != ExitOK || !strings.Contains(out, "--host-tools-root string") || !strings.Contains(out, "the host's own dmsetup and lvm") {
			t.Errorf("%v --help (exit %d, stderr %q) does not show --host-tools-root:\n%s", args, code, errOut, out)
		}
	}
}

func TestAgentRejectsBadFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	kubeconfig := filepath.Join(t.TempDir(), "nosuch")
	// --kubeconfig is controller-runtime's global flag: put it back.
	t.Cleanup(func() { _ = goflag.CommandLine.Set("kubeconfig", "") })
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no node name", []string{"--host-root", t.TempDir()}, "--node-name (or $NODE_NAME) is required"},
		{"unknown tracer", []string{"--node-name", "n", "--host-root", t.TempDir(), "--tracer", "nosuch"},
			`--tracer: want auto, ebpf or tracefs, got "nosuch"`},
		{"missing kubeconfig", []string{"--node-name", "n", "--host-root", t.TempDir(), "--kubeconfig", kubeconfig}, "kubeconfig"},
		{"unknown flag", []string{"--node-name", "n", "--leader-elect"}, "unknown flag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := run(t, append([]string{"agent"}, c.args...)...)
			checkOneLineError(t, out, errOut, code, ExitUsage, c.want)
		})
	}
}
