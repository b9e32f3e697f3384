package explain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/window/controllertest"
	"github.com/shadowtune/shadowtune/agent/window/windowtest"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestKeepsSwitchWindows: a window that decides a switch is kept
// whole (its simulated requests read back equal, its model loads, its
// report names the decision); a window that decides none is not kept.
func TestKeepsSwitchWindows(t *testing.T) {
	dir := t.TempDir()
	c := controllertest.New(t, false)
	c.SetExplain(Writer{Dir: dir, Log: logr.Discard()}.Hook("sdz"))
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	reqs := windowtest.FIFOWindow(1, 2000, 4, 4, 0, 1)
	rep, err := controllertest.Step(c, reqs, now)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Report.Decision.Switch {
		t.Fatalf("a deep random queue on an HDD under none should decide a switch: %s", rep.Report.Decision.Message)
	}
	base := filepath.Join(dir, "sdz-20261128T090000.000Z")

	f, err := os.Open(base + explainTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := trace.ReadAll(mustNativeReader(t, f))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != rep.Report.Requests {
		t.Fatalf("kept %d requests, the window simulated %d", len(got), rep.Report.Requests)
	}
	if want := reqs[len(reqs)-len(got):]; !slices.Equal(got, want) {
		t.Fatalf("kept requests differ from the simulated ones: first %+v, want %+v", got[0], want[0])
	}

	mf, err := os.Open(base + explainModel)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	if _, err := model.Load(mf); err != nil {
		t.Fatalf("kept model: %v", err)
	}

	b, err := os.ReadFile(base + explainReport)
	if err != nil {
		t.Fatal(err)
	}
	var er engine.Report
	if err := json.Unmarshal(b, &er); err != nil {
		t.Fatalf("kept report: %v", err)
	}
	if er.Decision.Target != rep.Report.Decision.Target || len(er.Outcomes) != len(rep.Report.Outcomes) {
		t.Fatalf("kept report: decision %q, %d outcomes; want %q, %d", er.Decision.Target, len(er.Outcomes),
			rep.Report.Decision.Target, len(rep.Report.Outcomes))
	}

	// A window that decides no switch (the setting the last one chose)
	// is not kept.
	c2 := controllertest.New(t, false)
	dir2 := t.TempDir()
	c2.SetExplain(Writer{Dir: dir2, Log: logr.Discard()}.Hook("sdz"))
	c2.Current.Candidate.Scheduler = rep.Report.Decision.Target
	rep2, err := controllertest.Step(c2, reqs, now)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Report.Decision.Switch {
		t.Fatalf("under %s the same window still decides a switch (%s): the test's window no longer checks a window without one",
			c2.Current.Candidate.Scheduler, rep2.Report.Decision.Message)
	}
	if ents, _ := os.ReadDir(dir2); len(ents) != 0 {
		t.Fatalf("a window without a switch decision was kept: %d files", len(ents))
	}
}

func mustNativeReader(t *testing.T, f *os.File) trace.Reader {
	t.Helper()
	r, err := trace.NewNativeReader(f.Name(), f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExplainPrune: only the newest Keep windows of a device stay,
// and another device whose name extends this one's keeps its own.
func TestExplainPrune(t *testing.T) {
	dir := t.TempDir()
	x := Writer{Dir: dir, Log: logr.Discard()}
	m := model.Default(model.SSD, 1<<21)
	reqs := windowtest.FIFOWindow(2, 10, 1, 1, 0, 1)
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	if err := x.save("sda1", t0, reqs, m, engine.Report{}); err != nil {
		t.Fatal(err)
	}
	for i := range Keep + 3 {
		if err := x.save("sda", t0.Add(time.Duration(i)*time.Second), reqs, m, engine.Report{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, suffix := range []string{explainTrace, explainModel, explainReport} {
		kept, _ := filepath.Glob(filepath.Join(dir, "sda-*"+suffix))
		if len(kept) != Keep {
			t.Fatalf("sda: %d %s files kept, want %d", len(kept), suffix, Keep)
		}
		slices.Sort(kept)
		if want := filepath.Join(dir, "sda-20261128T090003.000Z"+suffix); kept[0] != want {
			t.Fatalf("oldest kept %s, want %s", kept[0], want)
		}
		if other, _ := filepath.Glob(filepath.Join(dir, "sda1-*"+suffix)); len(other) != 1 {
			t.Fatalf("sda1's window was removed with sda's: %v", other)
		}
	}
}
