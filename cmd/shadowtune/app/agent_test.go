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
		"--host-root string",
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
