package charts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// exportedMetrics returns the metric names the agent (agent/metrics) and the
// operator (operator/metrics) register, histograms with their series.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for prefix, file := range map[string]string{
		"shadowtune_agent_":    filepath.Join("..", "agent", "metrics", "metrics.go"),
		"shadowtune_operator_": filepath.Join("..", "operator", "metrics", "metrics.go"),
	} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`(?:\b(?:gauge|counter|g|c)\(|Name:\s*)"([a-z_]+)"`)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			out[prefix+m[1]] = true
			if strings.HasSuffix(m[1], "_seconds") && strings.Contains(string(src), "NewHistogramVec") {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					out[prefix+m[1]+s] = true
				}
			}
		}
	}
	if len(out) < 20 || !out["shadowtune_agent_device_setting_info"] || !out["shadowtune_operator_policy_ready"] {
		t.Fatalf("metric names found in the code: %v", out)
	}
	return out
}

var metricName = regexp.MustCompile(`\bshadowtune_[a-z_]+`)

// checkMetricNames fails for every shadowtune_* name in expr that neither
// the agent nor the operator exports.
func checkMetricNames(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: no shadowtune metric in %q", where, expr)
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s: %s is not a metric the agent or the operator exports", where, n)
		}
	}
}

// promtool returns promtool's path ($PROMTOOL, else from $PATH;
// hack/ensure-test-deps.sh installs it); without it the test is skipped, or
// fails when CI=true (package need).
func promtool(t *testing.T) string {
	t.Helper()
	return need.Tool(t, "promtool", "hack/ensure-test-deps.sh installs it")
}

// TestPrometheusRules renders the PrometheusRule, checks the rules with
// promtool check rules (annotation templates included), every alert's
// metrics against the code, and runs promtool test rules with
// testdata/prometheus-rules-test.yaml on the rules without annotations.
func TestPrometheusRules(t *testing.T) {
	if n := count(renderDefault(t))["PrometheusRule"]; n != 0 {
		t.Errorf("%d PrometheusRules by default", n)
	}
	objs := renderDefault(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=prometheus")
	var pr struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	for _, o := range objs {
		if o.Kind == "PrometheusRule" && o.Name == "shadowtune" {
			if err := yaml.Unmarshal(o.Raw, &pr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pr.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("labels %v", pr.Metadata.Labels)
	}
	known := exportedMetrics(t)
	var alerts []string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			alerts = append(alerts, name)
			checkMetricNames(t, name, r["expr"].(string), known)
			ann, _ := r["annotations"].(map[string]any)
			if ann["summary"] == nil || ann["description"] == nil {
				t.Errorf("%s: annotations %v, want summary and description", name, ann)
			}
		}
	}
	slices.Sort(alerts)
	want := []string{"ShadowtuneAgentStale", "ShadowtuneDefaultsChanged", "ShadowtuneDefaultsSlower", "ShadowtuneEvaluationSkippedCPUBudget", "ShadowtuneModelErrorHigh",
		"ShadowtuneOtherWriter", "ShadowtunePolicyNotReady", "ShadowtuneRevertStorm", "ShadowtuneTraceEventsDropped"}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}

	tool := promtool(t)
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write("full.yaml", pr.Spec)
	if out, err := exec.Command(tool, "check", "rules", full).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
		}
	}
	write("rules.yaml", pr.Spec)
	tests, err := os.ReadFile(filepath.Join("testdata", "prometheus-rules-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "test.yaml")
	if err := os.WriteFile(testFile, tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "test", "rules", testFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestDashboard: the ConfigMap carries the sidecar label and a dashboard
// that parses, has the expected panels, and queries only metrics the agent
// or the operator exports.
func TestDashboard(t *testing.T) {
	if n := count(renderDefault(t))["ConfigMap"]; n != 0 {
		t.Errorf("%d ConfigMaps by default", n)
	}
	var cm corev1.ConfigMap
	get(t, renderDefault(t, "--set", "dashboards.enabled=true"), "ConfigMap", "shadowtune-dashboard", &cm)
	if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != testNS {
		t.Errorf("ConfigMap %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(cm.Data["shadowtune.json"]), &raw); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(cm.Data["shadowtune.json"]), &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("title %q uid %q", dash.Title, dash.UID)
	}
	known := exportedMetrics(t)
	var titles, metrics []string
	for _, p := range dash.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkMetricNames(t, p.Title, q.Expr, known)
			metrics = append(metrics, metricName.FindAllString(q.Expr, -1)...)
		}
	}
	for _, want := range []string{"shadowtune_agent_device_setting_info", "shadowtune_agent_predicted_gain_ratio",
		"shadowtune_agent_model_window_error_ratio", "shadowtune_agent_window_real_service_seconds",
		"shadowtune_agent_window_simulated_service_seconds"} {
		if !slices.Contains(metrics, want) {
			t.Errorf("no panel shows %s (panels %q)", want, titles)
		}
	}
	var annotations []string
	for _, a := range dash.Annotations.List {
		checkMetricNames(t, "annotation "+a.Name, a.Expr, known)
		annotations = append(annotations, metricName.FindAllString(a.Expr, -1)...)
	}
	if !slices.Contains(annotations, "shadowtune_agent_setting_changes_total") || !slices.Contains(annotations, "shadowtune_agent_setting_reverts_total") {
		t.Errorf("annotations on %v, want changes and reverts", annotations)
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Equal(vars, []string{"datasource", "node", "device"}) {
		t.Errorf("variables %v", vars)
	}
}
