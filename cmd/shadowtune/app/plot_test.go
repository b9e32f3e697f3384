package app

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/api/v1alpha1"

	"github.com/shadowtune/shadowtune/internal/plot"
	"github.com/shadowtune/shadowtune/internal/plot/svgcheck"
)

// texts returns the <text> elements of an SVG that start with prefix.
func texts(doc svgcheck.Doc, prefix string) []string {
	var out []string
	for _, s := range doc.Texts {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func TestModelEvalPlot(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "eval.svg")
	out, errOut, code := run(t, "model", "eval", "--trace", atlas, "--format", "disksim", "--plot", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	// The title carries the demerit the table printed.
	var demerit string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "demerit" {
			demerit = f[1]
		}
	}
	if demerit == "" {
		t.Fatalf("no demerit in %q", out)
	}
	title := "atlas10k.trace: demerit " + demerit + " ms (hdd model, online, predict mean)"
	doc := svgcheck.Check(t, b, title, []string{"measured", "predicted"})
	for i := range 2 {
		if n := doc.Curves(plot.Color(i), 100); n != 1 {
			t.Errorf("series %d: %d curves, want 1", i, n)
		}
	}
	// Same input, same picture.
	again := filepath.Join(dir, "again.svg")
	if _, errOut, code := run(t, "model", "eval", "--trace", atlas, "--format", "disksim", "--plot", again); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b2, _ := os.ReadFile(again); !bytes.Equal(b, b2) {
		t.Error("two runs drew different pictures")
	}
}

func TestSimulatePlot(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "sim.svg")
	_, errOut, code := run(t, "simulate", "--trace", atlas, "--format", "disksim", "--redcap", "both",
		"--candidates", "mq-deadline,bfq", "--plot", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	doc := svgcheck.Check(t, b, "atlas10k.trace: response times per candidate (closed loop, trace model)", nil)
	// Every candidate is in the legend (the current one marked), and has
	// a curve: one colour per scheduler, with and without REDCAP.
	for _, c := range []string{"mq-deadline", "mq-deadline+redcap", "bfq", "bfq+redcap"} {
		found := false
		for _, s := range doc.Texts {
			found = found || s == c || strings.HasPrefix(s, c+" (")
		}
		if !found {
			t.Errorf("no legend entry for %s in %q", c, doc.Texts)
		}
	}
	if got := texts(doc, "mq-deadline ("); len(got) != 1 || !strings.Contains(got[0], "current") {
		t.Errorf("current setting not marked: %q", got)
	}
	for i := range 2 {
		if n := doc.Curves(plot.Color(i), 100); n != 2 {
			t.Errorf("scheduler %d: %d curves, want 2 (without and with REDCAP)", i, n)
		}
	}
}

func TestPlotBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"eval png", []string{"model", "eval", "--trace", atlas, "--format", "disksim", "--plot", filepath.Join(dir, "x.png")}, "--plot: want a file name ending in .svg"},
		{"eval no dir", []string{"model", "eval", "--trace", atlas, "--format", "disksim", "--plot", "/nonexistent/x.svg"}, "--plot: "},
		{"run png", []string{"run", "--config", "nosuch.yaml", "--plot", "x.png"}, "--plot: want a file name ending in .svg"},
		{"bench-plot no input", []string{"bench-plot", "--input", filepath.Join(dir, "nosuch.txt"), "--plot", filepath.Join(dir, "b.svg")}, "--input: "},
		{"bench-plot png", []string{"bench-plot", "--input", filepath.Join(dir, "nosuch.txt"), "--plot", "b.png"}, "--plot: want a file name ending in .svg"},
		{"bench-plot no table", []string{"bench-plot", "--input", atlas, "--plot", filepath.Join(dir, "b.svg")}, "no per-pair table"},
		{"simulate png", []string{"simulate", "--trace", atlas, "--format", "disksim", "--plot", "x.png"}, "--plot: want a file name ending in .svg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := run(t, c.args...)
			if code != ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and one line naming %q", code, out, errOut, ExitUsage, c.want)
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("bad input left files: %v", ents)
	}
}

// status returns a one-device status as the agent reports a window.
func status(sched string, ra int32, gain, modelErr string, changed *time.Time, change string, reverts int32) agent.Status {
	d := v1alpha1.DeviceState{
		Name: "sda", Current: v1alpha1.DeviceSettings{Scheduler: sched, ReadAheadKiB: ra},
		ModelErrorPercent: modelErr, LastChange: change, Reverts: reverts,
		Window: &v1alpha1.WindowState{BestGainPercent: gain},
	}
	if gain != "" {
		d.Window.Best, d.Window.Requests = "bfq", 1000
	}
	if changed != nil {
		t := metav1.NewTime(*changed)
		d.LastChangeTime = &t
	}
	return agent.Status{Mode: "Apply", Windows: 1, Devices: []v1alpha1.DeviceState{d}}
}

func TestRunTimelinePlot(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	before, changed, reverted := start.Add(-time.Hour), at(61), at(95)
	tl := newRunTimeline(start, maxPlotWindows)
	tl.add(status("mq-deadline", 128, "", "", &before, "bfq → mq-deadline", 0), at(30))
	tl.add(status("mq-deadline", 128, "14.5", "9.0", &before, "bfq → mq-deadline", 0), at(60))
	tl.add(status("bfq", 256, "0.5", "7.5", &changed, "mq-deadline → bfq, read-ahead 128 → 256 KiB", 0), at(90))
	tl.add(status("mq-deadline", 128, "1.0", "7.0", &reverted, "bfq → mq-deadline (regression)", 1), at(120))
	empty := status("mq-deadline", 128, "0.0", "0.0", &reverted, "bfq → mq-deadline (regression)", 1)
	empty.Devices[0].Window = &v1alpha1.WindowState{Skipped: "0 requests (fewer than 100)"}
	tl.add(empty, at(150))
	backoff := status("mq-deadline", 128, "12.5", "3.0", &reverted, "bfq → mq-deadline (regression)", 1)
	backoff.Devices[0].Window.Skipped = "bfq regressed before; not retried until later"
	tl.add(backoff, at(180))

	title, devs := tl.chart()
	if len(devs) != 1 || len(devs[0].Windows) != 6 {
		t.Fatalf("timeline %+v", devs)
	}
	ev := devs[0].Events
	if len(ev) != 2 || ev[0].Seconds != 61 || ev[0].Revert || ev[1].Seconds != 95 || !ev[1].Revert {
		t.Fatalf("events %+v: want the change at 61 s and the revert at 95 s (not the change from before the run)", ev)
	}
	for _, i := range []int{0, 4} {
		if w := devs[0].Windows[i]; !math.IsNaN(w.GainPercent) || !math.IsNaN(w.ModelErrorPercent) {
			t.Errorf("window %d: unset or empty window's percentages read as %v, %v; want NaN", i, w.GainPercent, w.ModelErrorPercent)
		}
	}
	if w := devs[0].Windows[5]; w.GainPercent != 12.5 || w.ModelErrorPercent != 3 {
		t.Errorf("a window skipped after evaluating (back-off) lost its gain or model error: %+v", w)
	}
	if w := devs[0].Windows[2]; w.GainPercent != 0.5 || w.ModelErrorPercent != 7.5 || w.Setting != "bfq, 256 KiB" {
		t.Errorf("window 2: %+v", w)
	}
	svg := filepath.Join(t.TempDir(), "run.svg")
	if err := tl.write(svg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	svgcheck.Check(t, b, title, []string{"mq-deadline, 128 KiB", "bfq, 256 KiB", "setting",
		"predicted gain of the best candidate (%)", "model error (%)", "change", "revert"})

	// Nothing seen, nothing written.
	none := filepath.Join(t.TempDir(), "none.svg")
	if err := newRunTimeline(start, 10).write(none); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("a run without windows wrote %s (%v)", none, err)
	}
}

// The timeline keeps the last max windows, however many there were.
func TestRunTimelineBounded(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tl := newRunTimeline(start, 10)
	for i := range 95 {
		ch := start.Add(time.Duration(i)*time.Second + time.Second/2)
		tl.add(status("bfq", 128, "1.0", "5.0", &ch, "x", 0), start.Add(time.Duration(i+1)*time.Second))
		if n := len(tl.devs["sda"].Windows); n >= 20 {
			t.Fatalf("window %d: %d windows kept, want < 20", i, n)
		}
		if n := len(tl.devs["sda"].Events); n >= 20 {
			t.Fatalf("window %d: %d events kept, want < 20", i, n)
		}
	}
	title, devs := tl.chart()
	w := devs[0].Windows
	if len(w) != 10 || w[0].Seconds != 86 || w[9].Seconds != 95 {
		t.Fatalf("kept windows %v…%v (%d), want the last 10", w[0], w[len(w)-1], len(w))
	}
	if e := devs[0].Events; len(e) == 0 || e[0].Seconds < 86 {
		t.Errorf("events %v: want only those since the first kept window", e)
	}
	if !strings.Contains(title, "last 10 of 95 windows") {
		t.Errorf("title %q does not say windows were left out", title)
	}
}

// benchReport is the end of a report of hack/bench-agent.sh, as its
// python prints it (pair 4 disturbed).
const benchReport = `   pair 5 done
   BPF statistics run done

pair  IOPS off   IOPS on  on/off lat µs off/on agent CPU in evals evals  GCs  peak RSS    traced dropped        busy off/on, steal others: loop0 IOPS, CPU off/on
   1    41,234    40,911  0.9922       776/782      4.1%     2.9%     2    3   38.2MiB   409,110       0        52%/55% 0.0/0.0            0, 0% / 0, 0%  
   2    41,002    40,391  0.9851       780/792      4.3%     3.0%     2    3   38.4MiB   403,910       0        52%/55% 0.0/0.0            0, 0% / 0, 0%  
   3    40,876    40,760  0.9972       782/785      4.0%     2.8%     2    3   38.3MiB   407,600       0        51%/55% 0.0/0.0            0, 0% / 0, 0%  
   4    40,990    39,800  0.9710       781/804      4.2%     3.0%     2    4   38.5MiB   398,000       0        60%/66% 0.0/0.4      2,300, 1% / 2,900, 9% *
   5    41,100    40,820  0.9932       779/784      4.1%     2.9%     2    3   38.2MiB   408,200       0        52%/55% 0.0/0.0            0, 0% / 0, 0%  

IOPS without agent: median 41,002 (min 40,876, max 41,234, spread 0.9% of the median)
IOPS with agent:    median 40,760 (min 39,800, max 40,911, spread 2.7% of the median)
per-pair on/off:    0.9922 0.9851 0.9972 0.9710 0.9932
median on/off ratio 0.9922: with-agent IOPS 0.8% lower (target at most 2% lower: met)
  95% bootstrap interval of the median ratio 0.9851-0.9972 over 5 pairs; mean ratio 0.9877; ratio of the medians 0.9941; target shown met
`

func TestBenchPlot(t *testing.T) {
	rep, err := parseBenchAgent(strings.NewReader(benchReport))
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.9922, 0.9851, 0.9972, 0.9710, 0.9932}; !slices.Equal(rep.ratios, want) {
		t.Errorf("ratios %v, want %v", rep.ratios, want)
	}
	if want := []bool{false, false, false, true, false}; !slices.Equal(rep.disturbed, want) {
		t.Errorf("disturbed %v, want %v", rep.disturbed, want)
	}
	if rep.median != 0.9922 || rep.lo != 0.9851 || rep.hi != 0.9972 || math.Abs(rep.target-0.98) > 1e-12 {
		t.Errorf("median %v, interval %v-%v, target %v", rep.median, rep.lo, rep.hi, rep.target)
	}

	dir := t.TempDir()
	in := filepath.Join(dir, "bench-agent.txt")
	if err := os.WriteFile(in, []byte(benchReport), 0o600); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "bench-agent.svg")
	if _, errOut, code := run(t, "bench-plot", "--input", in, "--plot", svg); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	svgcheck.Check(t, b, "agent overhead: fio IOPS with/without shadowtune run, 5 pairs",
		[]string{"median 0.9922", "95 % bootstrap interval of the median 0.9851–0.9972", "target ≥ 0.98",
			"IOPS ratio with/without the agent", "pair disturbed by other load (*)"})

	// Without the summary lines: the median of the table, no interval.
	table := benchReport[:strings.Index(benchReport, "IOPS without")]
	rep, err = parseBenchAgent(strings.NewReader(table))
	if err != nil || rep.median != 0.9922 || rep.lo != 0 || rep.hi != 0 {
		t.Errorf("table only: %+v, %v", rep, err)
	}
}
