package schedcost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCostsOf(t *testing.T) {
	ph := func(reqs, cpuNs int64) phaseResult { return phaseResult{requests: reqs, cpuNs: cpuNs} }
	c, err := costsOf(map[string][]phaseResult{
		// medians: none 7 µs a request, mq-deadline 10 µs (even count:
		// the mean of the middle two), kyber below none (noise: 0).
		"none":        {ph(1000, 8e6), ph(1000, 7e6), ph(1000, 6e6)},
		"mq-deadline": {ph(1000, 9e6), ph(1000, 11e6), ph(500, 4e6), ph(1000, 12e6)},
		"kyber":       {ph(1000, 6.5e6)},
		"bfq":         {ph(0, 5e6), ph(1000, 12e6)}, // a phase without requests is left out
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"none": 0, "mq-deadline": 3000, "kyber": 0, "bfq": 5000}
	for s, w := range want {
		if got := c.PerRequestNs[s]; got != w {
			t.Errorf("%s: %g ns, want %g", s, got, w)
		}
	}
	if c.NoneNs != 7000 {
		t.Errorf("none's own cost %g ns, want 7000", c.NoneNs)
	}
	if _, err := costsOf(map[string][]phaseResult{"bfq": {ph(1, 1)}}); err == nil {
		t.Error("no none: no error")
	}
	if _, err := costsOf(map[string][]phaseResult{"none": {ph(1, 1)}, "bfq": {ph(0, 1)}}); err == nil ||
		!strings.Contains(err.Error(), "bfq") {
		t.Errorf("a scheduler without requests: %v, want an error naming it", err)
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	if c, err := Load(dir); err != nil || c.PerRequestNs != nil {
		t.Fatalf("nothing saved: %+v, %v; want zero, nil", c, err)
	}
	c := Costs{Kernel: "6.18.44", CPUs: 2, Time: time.Unix(1e9, 0).UTC(), NoneNs: 7000,
		PerRequestNs: map[string]float64{"none": 0, "bfq": 4400}}
	if err := Save(dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Usable("6.18.44", 2) || got.PerRequestNs["bfq"] != 4400 || !got.Time.Equal(c.Time) {
		t.Errorf("loaded %+v, saved %+v", got, c)
	}
	if got.Usable("6.19.0", 2) || got.Usable("6.18.44", 4) || (Costs{}).Usable("", 0) {
		t.Error("usable on another kernel, another CPU count, or unmeasured")
	}
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a corrupt file: %v, want an error naming %s", err, path)
	}
}
