//go:build !e2e

// Run by make test, not by make e2e: it runs e2e/cluster down, which would
// stop the cluster the e2e tests run on.

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// TestClusterDownRemovesKeys (issue 44): `e2e/cluster down` removes the
// cluster's key material (pki/ with the CA key, the kubeconfigs that
// embed client keys) and keeps the logs; `down --keep-keys` keeps the keys
// and says where; a bad argument changes nothing. It runs down on a state
// directory of its own, with no cluster in it.
func TestClusterDownRemovesKeys(t *testing.T) {
	need.Root(t, "e2e/cluster down runs as root")
	// down also removes what any e2e cluster leaves on the host (its
	// cgroups, its bridge): not while one runs.
	if m, _ := filepath.Glob("/sys/fs/cgroup/*/shadowtune-e2e"); len(m) > 0 {
		need.Missing(t, "a host without a running e2e cluster", "e2e/cluster down would stop it (%v)", m)
	}
	keys := []string{"pki/ca.key", "pki/ca.crt", "pki/admin.key", "pki/sa.key", "kubeconfig", "conf/kubelet.kubeconfig", "conf/scheduler.kubeconfig"}
	kept := []string{"logs/etcd.log", "conf/containerd.toml"}
	for _, c := range []struct {
		args     []string
		ok       bool
		keysGone bool
		say      string
	}{
		{nil, true, true, "removed the cluster's key material: "},
		{[]string{"--keep-keys"}, true, false, "kept the cluster's key material (--keep-keys): "},
		{[]string{"--bogus"}, false, false, "down: unknown argument '--bogus'"},
		{[]string{"--keep-keys", "--purge"}, false, false, "--keep-keys and --purge contradict each other"},
	} {
		t.Run(strings.Join(append([]string{"down"}, c.args...), " "), func(t *testing.T) {
			state := t.TempDir()
			for _, f := range append(append([]string{}, keys...), kept...) {
				p := filepath.Join(state, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("./cluster", append([]string{"down"}, c.args...)...)
			cmd.Env = append(os.Environ(), "SHADOWTUNE_E2E_DIR="+state)
			out, err := cmd.CombinedOutput()
			t.Logf("e2e/cluster down %v: %v\n%s", c.args, err, out)
			if (err == nil) != c.ok {
				t.Errorf("exit: %v, want success %v", err, c.ok)
			}
			if !strings.Contains(string(out), c.say) {
				t.Errorf("output lacks %q", c.say)
			}
			if c.say == "kept the cluster's key material (--keep-keys): " && !strings.Contains(string(out), filepath.Join(state, "pki/ca.key")) {
				t.Errorf("output does not say where the CA key is")
			}
			for _, f := range keys {
				_, err := os.Stat(filepath.Join(state, f))
				if gone := os.IsNotExist(err); gone != c.keysGone {
					t.Errorf("%s: gone %v, want %v", f, gone, c.keysGone)
				}
			}
			for _, f := range kept {
				if _, err := os.Stat(filepath.Join(state, f)); err != nil {
					t.Errorf("%s was not kept: %v", f, err)
				}
			}
		})
	}
}
