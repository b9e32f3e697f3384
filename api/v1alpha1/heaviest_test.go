package v1alpha1

import (
	"os"
	"strings"
	"testing"
)

const heaviestFile = "../../hack/testdata/storagetuning-heaviest.yaml"

// TestHeaviestPolicy checks the claim of the policy that `make
// bench-agent-memory POLICY=heaviest` measures (issue 16): the CRD accepts
// it, and the CRD refuses each way of asking for more work per window (one
// more tunable range or step, a longer window, more CPU, a larger cache).
func TestHeaviestPolicy(t *testing.T) {
	srv := newCRDServer(t, storageTuningCRDFile)
	data, err := os.ReadFile(heaviestFile)
	if err != nil {
		t.Fatal(err)
	}
	if errs := srv.create(yamlObject(t, string(data))); len(errs) > 0 {
		t.Fatalf("%s is refused: %v", heaviestFile, errs.ToAggregate())
	}
	st, err := LoadStorageTuningFile(heaviestFile)
	if err != nil {
		t.Fatal(err)
	}
	perSched := map[TunableSchedulerName]int{}
	for _, r := range st.Spec.Tunables {
		perSched[r.Scheduler]++
		if r.Steps == nil || *r.Steps != MaxTunableSteps {
			t.Errorf("%s/%s: steps %v, want %d", r.Scheduler, r.Name, r.Steps, MaxTunableSteps)
		}
	}
	// kyber has two tunables; the others take the most ranges allowed.
	if perSched["mq-deadline"] != 4 || perSched["bfq"] != 4 || perSched["kyber"] != 2 {
		t.Errorf("tunable ranges per scheduler %v, want mq-deadline 4, bfq 4, kyber 2", perSched)
	}
	if len(st.Spec.Schedulers.Candidates) != 4 {
		t.Errorf("candidates %v, want all four schedulers", st.Spec.Schedulers.Candidates)
	}

	more := map[string]func(string) string{
		"a fifth mq-deadline range": func(s string) string {
			return strings.Replace(s, "  readAhead:", "    - {scheduler: mq-deadline, name: front_merges, min: 0, max: 1, steps: 2}\n  readAhead:", 1)
		},
		"a fifth step":          func(s string) string { return strings.Replace(s, "max: 1000, steps: 4", "max: 1000, steps: 5", 1) },
		"a longer window":       func(s string) string { return strings.Replace(s, "window: 5m", "window: 6m", 1) },
		"more CPU":              func(s string) string { return strings.Replace(s, "cpuBudgetPercent: 100", "cpuBudgetPercent: 101", 1) },
		"a larger cache":        func(s string) string { return strings.Replace(s, "memoryBudget: 64Gi", "memoryBudget: 65Gi", 1) },
		"a third kyber tunable": func(s string) string { return strings.Replace(s, "name: write_lat_nsec", "name: async_depth", 1) },
	}
	for name, edit := range more {
		doc := edit(string(data))
		if doc == string(data) {
			t.Errorf("%s: the edit matched nothing", name)
			continue
		}
		if errs := srv.create(yamlObject(t, doc)); len(errs) == 0 {
			t.Errorf("%s is accepted: the heaviest policy is not the heaviest", name)
		}
	}
}
