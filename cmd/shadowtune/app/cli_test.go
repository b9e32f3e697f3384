package app

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

const (
	webserver = "../../../testdata/traces/blkreplay/linux-webserver-2.load.gz"
	shared    = "../../../testdata/traces/blkreplay/windows-shared-server.load.gz"
	atlas     = "../../../testdata/traces/disksim/atlas10k.trace"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return o.String(), e.String(), code
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadInputExitsTwoWithOneLine(t *testing.T) {
	garbage := writeFile(t, "garbage.trace", "R Hit 10 8 100 100\nthis is not a trace line\n")
	negative := writeFile(t, "neg.trace", "R Hit 10 -8 100 100\n")
	empty := writeFile(t, "empty.trace", "")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown format", []string{"simulate", "--trace", atlas, "--format", "nosuch"}, `unknown trace format "nosuch"`},
		{"missing file", []string{"simulate", "--trace", "/nonexistent/x", "--format", "disksim"}, "no such file"},
		{"empty trace", []string{"simulate", "--trace", empty, "--format", "disksim"}, "holds no requests"},
		{"negative size", []string{"simulate", "--trace", negative, "--format", "disksim"}, "neg.trace:1: field 4 (bcount)"},
		{"garbage line", []string{"simulate", "--trace", garbage, "--format", "disksim"}, "garbage.trace:2:"},
		{"no latency for eval", []string{"model", "eval", "--trace", shared, "--format", "blkreplay"}, "no measured service times"},
		{"unknown scheduler", []string{"simulate", "--trace", atlas, "--format", "disksim", "--candidates", "cfq"}, `unknown scheduler "cfq"`},
		{"bad tunable", []string{"simulate", "--trace", atlas, "--format", "disksim", "--candidate", "bfq:nosuch=1"}, "nosuch"},
		{"bad redcap", []string{"simulate", "--trace", atlas, "--format", "disksim", "--redcap", "maybe"}, "--redcap"},
		{"bad margin", []string{"simulate", "--trace", atlas, "--format", "disksim", "--margin", "80"}, "margin"},
		{"no costs measured", []string{"simulate", "--trace", atlas, "--format", "disksim", "--dispatch-costs", "/nonexistent"}, "--dispatch-costs: no measured costs in /nonexistent/node/scheduler-costs.json"},
		{"negative cpus", []string{"simulate", "--trace", atlas, "--format", "disksim", "--dispatch-costs", "prior", "--cpus", "-1"}, "--cpus must be ≥ 0"},
		{"bad fraction", []string{"model", "eval", "--trace", atlas, "--format", "disksim", "--train-fraction", "1.5"}, "--train-fraction"},
		{"unknown flag", []string{"simulate", "--nosuch"}, "unknown flag"},
		{"missing required", []string{"simulate", "--format", "disksim"}, "required flag"},
		{"unknown command", []string{"nosuch"}, "unknown command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := run(t, c.args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", code, ExitUsage, errOut)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "shadowtune: error: ") {
				t.Errorf("stderr is not one error line: %q", errOut)
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q does not name %q", errOut, c.want)
			}
			if strings.Contains(errOut, "goroutine") || strings.Contains(errOut, "panic") {
				t.Errorf("stack trace: %q", errOut)
			}
		})
	}
}

func keys(m map[string]any) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

func TestSimulateJSONIsStable(t *testing.T) {
	out, errOut, code := run(t, "simulate", "--trace", atlas, "--format", "disksim", "--redcap", "both", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"requests", "candidates", "recommendation"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	if doc["requests"].(float64) != 10000 {
		t.Errorf("requests = %v", doc["requests"])
	}
	cands := doc["candidates"].([]any)
	if len(cands) != 8 {
		t.Fatalf("%d candidates, want 4 schedulers × REDCAP on/off", len(cands))
	}
	for _, c := range cands {
		m := c.(map[string]any)
		for _, k := range []string{"name", "totalServiceTimeUs", "meanResponseTimeUs", "p99ResponseTimeUs", "simulatedRequests"} {
			if _, ok := m[k]; !ok {
				t.Errorf("candidate lacks %q: %v", k, keys(m))
			}
		}
		if m["simulatedRequests"].(float64) != 10000 {
			t.Errorf("%v simulated %v requests", m["name"], m["simulatedRequests"])
		}
		if m["totalServiceTimeUs"].(float64) <= 0 {
			t.Errorf("%v: no service time", m["name"])
		}
	}
	rec := doc["recommendation"].(map[string]any)
	for _, k := range []string{"scheduler", "switch", "improvementPct", "readAheadKiB"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("recommendation lacks %q: %v", k, keys(rec))
		}
	}
	if doc["model"].(map[string]any)["source"] != "trace" {
		t.Errorf("a DiskSim trace carries service times; the model should be learned from it: %v", doc["model"])
	}
	if doc["loop"] != "closed" {
		t.Errorf("loop = %v, want closed for a trace with pids and completions", doc["loop"])
	}
}

// TestSimulateDispatchCosts: with --dispatch-costs each candidate's total
// is charged its scheduler's CPU cost, and VS CURRENT compares the charged
// totals; none is never charged.
func TestSimulateDispatchCosts(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "node"), 0o700); err != nil {
		t.Fatal(err)
	}
	costs := `{"kernel":"k","cpus":2,"perRequestNs":{"mq-deadline":2000000,"bfq":4000000},"time":"2026-11-25T09:00:00Z"}`
	if err := os.WriteFile(filepath.Join(state, "node", "scheduler-costs.json"), []byte(costs), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "simulate", "--trace", atlas, "--format", "disksim", "--current", "none",
		"--candidates", "none,mq-deadline,bfq", "--dispatch-costs", state, "--cpus", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Candidates []struct {
			Name                                             string
			TotalServiceTimeUs, VsCurrentPct, DispatchCharge float64
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var none float64
	for _, c := range doc.Candidates {
		if c.Name == "none" {
			none = c.TotalServiceTimeUs
		}
	}
	for _, c := range doc.Candidates {
		want := 100 * (c.TotalServiceTimeUs*max(c.DispatchCharge, 1) - none) / none
		if math.Abs(c.VsCurrentPct-want) > 1e-6 || (c.Name == "none") != (c.DispatchCharge == 0) {
			t.Errorf("%s: vsCurrentPct %.4f, charge %.4f; want %.4f, charged unless none", c.Name, c.VsCurrentPct, c.DispatchCharge, want)
		}
	}
	if len(doc.Candidates) != 3 || doc.Candidates[2].DispatchCharge <= doc.Candidates[1].DispatchCharge {
		t.Errorf("bfq's 4 ms should be charged more than mq-deadline's 2 ms: %+v", doc.Candidates)
	}
}

func TestSimulateIsDeterministic(t *testing.T) {
	args := []string{"simulate", "--trace", shared, "--format", "blkreplay", "-o", "json", "--predict", "sample", "--seed", "7"}
	a, _, _ := run(t, args...)
	b, _, _ := run(t, args...)
	strip := func(s string) map[string]any {
		var d map[string]any
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			t.Fatal(err)
		}
		delete(d, "run") // timings
		return d
	}
	if !reflect.DeepEqual(strip(a), strip(b)) {
		t.Fatal("two runs with the same seed differ")
	}
}

func TestModelEvalJSON(t *testing.T) {
	out, errOut, code := run(t, "model", "eval", "--trace", atlas, "--format", "disksim", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"trainRequests", "testRequests", "windowErrorPct", "totalErrorPct", "meanMeasuredMs", "meanPredictedMs", "demeritMs"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	we := doc["windowErrorPct"].(map[string]any)
	for _, k := range []string{"mean", "median", "max"} {
		if _, ok := we[k]; !ok {
			t.Errorf("windowErrorPct lacks %q", k)
		}
	}
	if doc["trainRequests"].(float64) != 5000 || doc["testRequests"].(float64) != 5000 {
		t.Errorf("split %v/%v, want 5000/5000", doc["trainRequests"], doc["testRequests"])
	}
}

func TestModelLearnThenSimulate(t *testing.T) {
	dir := t.TempDir()
	mpath := filepath.Join(dir, "atlas.json")
	if _, e, code := run(t, "model", "learn", "--trace", atlas, "--format", "disksim", "--out-file", mpath); code != 0 {
		t.Fatalf("learn: exit %d: %s", code, e)
	}
	out, e, code := run(t, "simulate", "--trace", atlas, "--format", "disksim", "--model", mpath, "-o", "json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, e)
	}
	if !strings.Contains(out, `"source": "file"`) {
		t.Error("simulate did not use the model file")
	}
	bad := writeFile(t, "bad.json", `{"version": 99}`)
	if _, e, code := run(t, "simulate", "--trace", atlas, "--format", "disksim", "--model", bad); code != ExitUsage || !strings.Contains(e, "version") {
		t.Errorf("bad model: exit %d, %q", code, e)
	}
}

func TestTraceConvertRoundTrip(t *testing.T) {
	dir := t.TempDir()
	native := filepath.Join(dir, "atlas.st")
	if _, e, code := run(t, "trace", "convert", "--from", "disksim", "--to", "native", "-i", atlas, "--out-file", native); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, e)
	}
	back := filepath.Join(dir, "atlas.trace")
	if _, e, code := run(t, "trace", "convert", "--from", "native", "--to", "disksim", "-i", native, "--out-file", back); code != 0 {
		t.Fatalf("convert back: exit %d: %s", code, e)
	}
	a, _, _ := run(t, "model", "eval", "--trace", atlas, "--format", "disksim", "-o", "json")
	b, _, _ := run(t, "model", "eval", "--trace", back, "--format", "disksim", "-o", "json")
	if a != b {
		t.Error("model eval differs after disksim → native → disksim")
	}
	fio := filepath.Join(dir, "atlas.iolog")
	if _, e, code := run(t, "trace", "convert", "--from", "native", "--to", "fio-iolog", "--target", "/dev/loop7", "-i", native, "--out-file", fio); code != 0 {
		t.Fatalf("convert to fio: exit %d: %s", code, e)
	}
	data, err := os.ReadFile(fio)
	if err != nil || !strings.HasPrefix(string(data), "fio version 3 iolog\n") || !strings.Contains(string(data), "/dev/loop7") {
		t.Errorf("fio iolog: %v %q", err, string(data[:min(len(data), 80)]))
	}
}

func TestTraceConvertLeavesNothingOnBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, "bad.trace", "R Hit 10 8 100 100\nW Hit x 8 1 1\n")
	out := filepath.Join(dir, "out.st")
	_, e, code := run(t, "trace", "convert", "--from", "disksim", "--to", "native", "-i", bad, "--out-file", out)
	if code != ExitUsage || !strings.Contains(e, "bad.trace:2:") {
		t.Fatalf("exit %d, %q", code, e)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "shadowtune ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestTraceConvertKeepsExistingOutputOnEmptyOrBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.st")
	if err := os.WriteFile(out, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := writeFile(t, "empty.trace", "")
	bad := writeFile(t, "bad.trace", "R Hit 10 8 100 100\nW Hit x 8 1 1\n")
	for _, in := range []string{empty, bad} {
		_, e, code := run(t, "trace", "convert", "--from", "disksim", "--to", "native", "-i", in, "--out-file", out)
		if code != ExitUsage {
			t.Fatalf("%s: exit %d (%s)", in, code, e)
		}
		if b, err := os.ReadFile(out); err != nil || string(b) != "precious" {
			t.Fatalf("%s: existing output changed: %q, %v", in, b, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestSimulateThrottled: --device-class throttled learns the caps from a
// recording of the VM lab's throttled disk (3,000 IOPS, 131,072,000 B/s)
// and reports them; a trace that shows none, and a trace without service
// times, are refused with one line.
func TestSimulateThrottled(t *testing.T) {
	phases := "../../../agent/testdata/virtio-throttled-phases.st.gz"
	out, errOut, code := run(t, "simulate", "--trace", phases, "--format", "native", "--device-class", "throttled",
		"--candidates", "none,mq-deadline", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Model struct {
			Class    string
			Throttle *struct{ IOPS, BytesPerSec float64 }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if th := doc.Model.Throttle; doc.Model.Class != "throttled" || th == nil ||
		math.Abs(th.IOPS-3000) > 300 || math.Abs(th.BytesPerSec-131072000) > 13107200 {
		t.Errorf("model %+v; want throttled at 3000 IOPS and 131.1 MB/s (±10 %%)", doc.Model)
	}
	for _, tc := range []struct{ name, trace, format, want string }{
		{"no cap shown", "../../../agent/testdata/virtio-throttled-3000iops.st.gz", "native", "shows no cap"},
		{"no service times", webserver, "blkreplay", "no measured service times"},
	} {
		_, errOut, code := run(t, "simulate", "--trace", tc.trace, "--format", tc.format, "--device-class", "throttled")
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line with %q", tc.name, code, errOut, tc.want)
		}
	}
}

// TestSimulateCacheModel: --cache-model smq simulates dm-cache's smq
// by its own rules (engine.SMQ) in place of REDCAP, with
// its block size and hit time in the report; bad cache flags are refused
// with one line naming the flag.
func TestSimulateCacheModel(t *testing.T) {
	cached := func(model string, extra ...string) (total, hitPct float64, cache map[string]any) {
		t.Helper()
		args := append([]string{"simulate", "--trace", webserver, "--format", "blkreplay", "--candidates", "none",
			"--current", "none", "--redcap", "both", "--cache-model", model, "-o", "json"}, extra...)
		out, errOut, code := run(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var doc struct {
			Cache      map[string]any
			Candidates []struct {
				Name               string
				TotalServiceTimeUs float64
				CacheHitPct        float64
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		for _, c := range doc.Candidates {
			if c.Name == "none+redcap" {
				return c.TotalServiceTimeUs, c.CacheHitPct, doc.Cache
			}
		}
		t.Fatalf("no cached candidate in %s", out)
		return 0, 0, nil
	}
	rt, rh, rc := cached("redcap")
	st, sh, sc := cached("smq", "--cache-block-kib", "32", "--cache-hit-us", "12")
	if rc["model"] != "redcap" || rc["blockKiB"] != 128.0 || sc["model"] != "smq" || sc["blockKiB"] != 32.0 || sc["hitUs"] != 12.0 {
		t.Errorf("cache reports: redcap %v, smq %v", rc, sc)
	}
	if rt == st || rh == sh || sh <= 0 {
		t.Errorf("redcap: %.0f µs, %.1f %% hits; smq: %.0f µs, %.1f %% hits; want two different simulations, smq hitting", rt, rh, st, sh)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cache-model", "lru"}, "--cache-model"},
		{[]string{"--cache-model", "smq", "--cache-block-kib", "48"}, "--cache-block-kib"},
		{[]string{"--cache-model", "smq", "--redcap-mib", "1", "--cache-block-kib", "2048"}, "holds no block"},
		{[]string{"--cache-hit-us", "-1"}, "--cache-hit-us"},
	} {
		args := append([]string{"simulate", "--trace", webserver, "--format", "blkreplay", "--redcap", "both"}, tc.args...)
		_, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s", tc.args, code, errOut, tc.want)
		}
	}
}
