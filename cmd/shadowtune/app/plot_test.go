package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
