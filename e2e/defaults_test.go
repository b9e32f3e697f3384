//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// olderKernel is the kernel release checkDefaultsChanged writes into a
// device's memo, as if the node had run it at the agent's previous start.
const olderKernel = "6.16.0-e2e-before"

// checkDefaultsChanged shows the sentinel between two agent pods' lives:
// it makes the agent's memo of dev (on node, in Observe mode, so the agent
// does not write the memo again) record another read_ahead_kb and an older
// kernel, as an upgrade between two boots would leave it, and deletes the
// agent pod. The next pod must report the change in the device's status,
// with a DefaultsChanged event on the NodeStorageState, the policy must
// sum it up in its status, and the agent's metric must say which knob.
func (k *cluster) checkDefaultsChanged(t *testing.T, node, policy, dev string) {
	t.Helper()
	path := filepath.Join(agentStateDir(), "memo", dev+".json")
	var cur string
	eventually(t, time.Minute, "the agent kept "+dev+"'s defaults in its memo", func() error {
		var err error
		cur, err = rewriteMemoDefaults(path, "")
		return err
	})
	old := "128"
	if cur == old {
		old = "256"
	}
	if _, err := rewriteMemoDefaults(path, old); err != nil {
		t.Fatal(err)
	}
	pod := k.agentPod(node)
	k.kubectl("-n", namespace, "delete", "pod", pod.Name)
	want := v1alpha1.KnobChange{Knob: "read_ahead_kb", Old: old, New: cur}
	eventually(t, 3*time.Minute, "the next agent pod reports "+dev+"'s defaults changed", func() error {
		n, err := k.nss(node)
		if err != nil {
			return err
		}
		d := findDevice(n, dev)
		if d == nil || d.DefaultsChanged == nil {
			return fmt.Errorf("%s: %+v", dev, d)
		}
		c := d.DefaultsChanged
		if len(c.Knobs) != 1 || c.Knobs[0] != want || !strings.HasPrefix(c.With, "kernel "+olderKernel+" → ") {
			return fmt.Errorf("defaultsChanged %+v, want %+v with the kernel change", c, want)
		}
		return nil
	})
	eventually(t, time.Minute, "the DefaultsChanged events and the policy's summary", func() error {
		ev := k.kubectl("get", "events", "-A", "--field-selector", "reason=DefaultsChanged",
			"-o", `jsonpath={range .items[*]}{.involvedObject.kind}/{.involvedObject.name}: {.message}{"\n"}{end}`)
		for _, w := range []string{"NodeStorageState/" + node + ": " + dev + ": read_ahead_kb " + old + " → " + cur,
			"StorageTuning/" + policy + ": " + node + "/" + dev + ": defaults changed, read_ahead_kb " + old + " → " + cur} {
			if !strings.Contains(ev, w) {
				return fmt.Errorf("no event %q in:\n%s", w, ev)
			}
		}
		s := k.policy(policy).Status
		if len(s.DefaultsChanged) != 1 || s.DefaultsChanged[0].Change != "read_ahead_kb "+old+" → "+cur || s.DefaultsChanged[0].Devices != 1 ||
			s.DefaultsChanged[0].Nodes != 1 {
			return fmt.Errorf("policy status defaultsChanged %+v", s.DefaultsChanged)
		}
		return nil
	})
	series := `shadowtune_agent_defaults_changed{device="` + dev + `",knob="read_ahead_kb"} 1`
	eventually(t, time.Minute, "the agent's metric "+series, func() error {
		body, err := k.agentMetrics()
		if err != nil {
			return err
		}
		if !strings.Contains(body, series) {
			return fmt.Errorf("no %s among the agent's metrics", series)
		}
		return nil
	})
	k.show("defaults-changed", "get", "events", "-A", "--field-selector", "reason=DefaultsChanged")
	k.record("defaultsChanged", k.policy(policy).Status.DefaultsChanged)
}

// agentMetrics scrapes the node's agent as a scraper the chart allows
// does (metrics.secure): over HTTPS on the agent's host-network metrics
// port, with the token of a service account bound to the chart's
// metrics-reader ClusterRole, which the agent's filter checks with the
// API server (TokenReview, SubjectAccessReview). The agent's certificate
// is its own, self-signed: it is not verified.
func (k *cluster) agentMetrics() (string, error) {
	const sa = "e2e-metrics-scraper"
	if k.scrapeToken == "" {
		_, _ = k.run("kubectl", "-n", namespace, "create", "serviceaccount", sa)
		_, _ = k.run("kubectl", "create", "clusterrolebinding", sa, "--clusterrole="+release+"-metrics-reader",
			"--serviceaccount="+namespace+":"+sa)
		k.t.Cleanup(func() {
			_, _ = k.run("kubectl", "delete", "clusterrolebinding", sa, "--ignore-not-found")
			_, _ = k.run("kubectl", "-n", namespace, "delete", "serviceaccount", sa, "--ignore-not-found")
		})
		k.scrapeToken = strings.TrimSpace(k.kubectl("-n", namespace, "create", "token", sa))
	}
	req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:9464/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+k.scrapeToken)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the agent's self-signed certificate
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("scrape the agent: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("scrape the agent: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scrape the agent: %s: %s", resp.Status, b)
	}
	return string(b), nil
}

// rewriteMemoDefaults returns the read_ahead_kb an agent's memo file
// recorded at its last start; with ra set, it first records ra there and
// olderKernel as the kernel release.
func rewriteMemoDefaults(path, ra string) (recorded string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	memo, _ := f["memo"].(map[string]any)
	defaults, _ := memo["defaults"].(map[string]any)
	knobs, _ := defaults["knobs"].(map[string]any)
	host, _ := defaults["host"].(map[string]any)
	recorded, _ = knobs["read_ahead_kb"].(string)
	if recorded == "" || host == nil {
		return "", fmt.Errorf("%s records no defaults: %s", path, b)
	}
	if ra == "" {
		return recorded, nil
	}
	knobs["read_ahead_kb"], host["kernelRelease"] = ra, olderKernel
	if b, err = json.Marshal(f); err != nil {
		return "", err
	}
	return recorded, os.WriteFile(path, b, 0o600)
}
