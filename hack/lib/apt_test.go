// Package lib holds the shell functions the hack/ scripts source; its
// test runs them with stand-ins for apt-get, dpkg-query and systemctl.
package lib

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stubs are the stand-ins: apt-get records its arguments and, like a
// package's maintainer script through invoke-rc.d, asks the policy
// whether it may start the service; dpkg-query says nothing is installed
// and that the package ships prometheus.service; systemctl records.
var stubs = map[string]string{
	"apt-get": `#!/bin/sh
echo "apt-get $*" >>"$LOG"
[ "$1" = install ] || exit 0
if "$POLICY" prometheus start; then echo "service started" >>"$LOG"; else echo "policy said $?" >>"$LOG"; fi
`,
	"dpkg-query": `#!/bin/sh
case "$1" in
-W) exit 1 ;;
-L) echo /usr/bin/promtool; echo /lib/systemd/system/prometheus.service ;;
esac
`,
	"systemctl": `#!/bin/sh
echo "systemctl $*" >>"$LOG"
`,
}

func runApt(t *testing.T, policy string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	cmd := exec.Command("bash", "-c", `. ./apt.sh && apt_install_quiet prometheus && echo "policy after: $(cat "$POLICY" 2>/dev/null || echo none)" >>"$LOG"`)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "LOG="+log, "POLICY="+policy, "APT_POLICY_RC_D="+policy)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt_install_quiet: %v\n%s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAptInstallQuiet: the install has no recommended packages, the
// policy keeps the package's service from starting during it and is
// removed afterwards, and the service is disabled at boot.
func TestAptInstallQuiet(t *testing.T) {
	got := runApt(t, filepath.Join(t.TempDir(), "policy-rc.d"))
	for _, want := range []string{
		"apt-get install -y -qq --no-install-recommends prometheus\n",
		"policy said 101\n",
		"systemctl disable prometheus.service\n",
		"policy after: none\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
}

// TestAptInstallQuietKeepsPolicy: a policy of the host's that allows
// starts is moved aside for the install and put back unchanged.
func TestAptInstallQuietKeepsPolicy(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy-rc.d")
	const host = "#!/bin/sh\n# the host's\nexit 0\n"
	if err := os.WriteFile(policy, []byte(host), 0o755); err != nil {
		t.Fatal(err)
	}
	got := runApt(t, policy)
	if !strings.Contains(got, "policy said 101\n") || strings.Contains(got, "service started") {
		t.Errorf("the service could start during the install:\n%s", got)
	}
	if b, err := os.ReadFile(policy); err != nil || string(b) != host {
		t.Errorf("the host's policy was not put back: %q, %v", b, err)
	}
}
