package plot

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/plot/svgcheck"
)

func TestCDFs(t *testing.T) {
	meas := make([]float64, 5000)
	pred := make([]float64, 5000)
	for i := range meas {
		meas[i] = float64(i) / 500
		pred[i] = 1 + float64(i)/600
	}
	c := CDFChart{
		Title: "model eval: demerit 0.123 ms", XLabel: "service time (ms)",
		Series: []Series{{Name: "measured", Values: meas}, {Name: "predicted", Values: pred}},
	}
	var a, b bytes.Buffer
	if err := CDFs(&a, c); err != nil {
		t.Fatal(err)
	}
	doc := svgcheck.Check(t, a.Bytes(), c.Title, []string{"measured", "predicted"})
	for i := range c.Series {
		if n := doc.Curves(Color(i), 100); n != 1 {
			t.Errorf("series %d: %d curves in its colour, want 1", i, n)
		}
	}
	if err := CDFs(&b, c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same input drew two different SVGs")
	}
	if a.Len() > 400<<10 {
		t.Errorf("SVG of two 5000-value CDFs is %d bytes: not thinned to MaxCDFPoints", a.Len())
	}

	c.LogX = true
	c.Series[0].Values = append([]float64{0}, meas[1:]...)
	var l bytes.Buffer
	if err := CDFs(&l, c); err != nil {
		t.Fatal(err)
	}
	svgcheck.Check(t, l.Bytes(), c.Title, []string{"measured", "predicted"})
}

func TestCDFsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    CDFChart
		want error
	}{
		{"no series", CDFChart{Title: "x"}, ErrNoData},
		{"empty series", CDFChart{Series: []Series{{Name: "a"}}}, ErrNoData},
		{"unsorted", CDFChart{Series: []Series{{Name: "a", Values: []float64{2, 1}}}}, ErrUnsorted},
		{"NaN", CDFChart{Series: []Series{{Name: "a", Values: []float64{1, math.NaN()}}}}, nil},
		{"log of zeros", CDFChart{LogX: true, Series: []Series{{Name: "a", Values: []float64{0, 0}}}}, nil},
	} {
		err := CDFs(&bytes.Buffer{}, tc.c)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCDFPointsThinned(t *testing.T) {
	v := make([]float64, 10*MaxCDFPoints+7)
	for i := range v {
		v[i] = float64(i)
	}
	xys, err := cdfPoints(v, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(xys) != MaxCDFPoints+1 {
		t.Fatalf("%d points, want %d", len(xys), MaxCDFPoints+1)
	}
	if xys[0].Y != 0 || xys[1].X != v[0] || xys[len(xys)-1].X != v[len(v)-1] || xys[len(xys)-1].Y != 1 {
		t.Errorf("curve runs from %v to %v, want from (0, 0) to (%v, 1)", xys[0], xys[len(xys)-1], v[len(v)-1])
	}
}

func TestTimeline(t *testing.T) {
	nan := math.NaN()
	devs := []DeviceTimeline{
		{
			Device: "sda",
			Windows: []TimelineWindow{
				{Seconds: 30, Setting: "mq-deadline, 128 KiB", GainPercent: nan, ModelErrorPercent: nan},
				{Seconds: 60, Setting: "mq-deadline, 128 KiB", GainPercent: 14.5, ModelErrorPercent: 9},
				{Seconds: 90, Setting: "bfq, 128 KiB", GainPercent: 0.5, ModelErrorPercent: 7.5},
				{Seconds: 120, Setting: "mq-deadline, 128 KiB", GainPercent: 1, ModelErrorPercent: 7},
			},
			Events: []TimelineEvent{
				{Seconds: 61, Label: "mq-deadline → bfq"},
				{Seconds: 95, Label: "bfq → mq-deadline (regression)", Revert: true},
			},
		},
		{
			Device:  "nvme0n1",
			Windows: []TimelineWindow{{Seconds: 30, Setting: "none, 128 KiB", GainPercent: 0, ModelErrorPercent: 3}},
		},
	}
	var buf bytes.Buffer
	title := "shadowtune run: Apply, 4 windows"
	if err := Timeline(&buf, title, devs); err != nil {
		t.Fatal(err)
	}
	doc := svgcheck.Check(t, buf.Bytes(), title, []string{
		"setting", "predicted gain of the best candidate (%)", "model error (%)", "change", "revert",
		"mq-deadline, 128 KiB", "bfq, 128 KiB", "sda: setting", "nvme0n1: %",
	})
	// sda has a setting line (colour 0), a gain line (0) and a
	// model-error line (1) of at least 3 points; its change and revert
	// are marked in both panels, each with a legend swatch.
	if n := doc.Curves(Color(0), 3); n != 2 {
		t.Errorf("%d setting and gain lines, want 2", n)
	}
	if n := doc.Curves(Color(1), 3); n != 1 {
		t.Errorf("%d model-error lines, want 1", n)
	}
	if n := doc.Curves(changeColor, 2); n != 2*2 {
		t.Errorf("%d change marks (with the legends'), want 4", n)
	}
	if n := doc.Curves(revertColor, 2); n != 2*2 {
		t.Errorf("%d revert marks (with the legends'), want 4", n)
	}

	if err := Timeline(&bytes.Buffer{}, "t", nil); !errors.Is(err, ErrNoData) {
		t.Errorf("no device: got %v, want ErrNoData", err)
	}
	if err := Timeline(&bytes.Buffer{}, "t", []DeviceTimeline{{Device: "sda"}}); !errors.Is(err, ErrNoData) {
		t.Errorf("no window: got %v, want ErrNoData", err)
	}

	many := make([]DeviceTimeline, MaxTimelineDevices+3)
	for i := range many {
		many[i] = DeviceTimeline{Device: fmt.Sprintf("sd%c", 'a'+i), Windows: devs[1].Windows}
	}
	buf.Reset()
	if err := Timeline(&buf, "many", many); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), fmt.Sprintf("first %d of %d devices", MaxTimelineDevices, len(many))) {
		t.Error("the title does not say that devices were left out")
	}
}

func TestDotPlot(t *testing.T) {
	c := DotPlotChart{
		Title: "agent overhead", XLabel: "pair", YLabel: "IOPS with/without the agent",
		Values:     []float64{0.991, 0.987, 1.002, 0.979, 0.995},
		Marked:     []bool{false, false, false, true, false},
		MarkedName: "disturbed pair",
		Median:     0.991, MedianName: "median 0.991",
		Lo: 0.979, Hi: 1.002, IntervalName: "95 % interval of the median",
		Target: 0.98, TargetName: "target ≥ 0.98",
	}
	var buf bytes.Buffer
	if err := DotPlot(&buf, c); err != nil {
		t.Fatal(err)
	}
	svgcheck.Check(t, buf.Bytes(), c.Title, []string{c.YLabel, c.MarkedName, c.MedianName, c.IntervalName, c.TargetName})
	if err := DotPlot(&bytes.Buffer{}, DotPlotChart{Values: []float64{math.NaN()}}); !errors.Is(err, ErrNoData) {
		t.Errorf("no finite value: got %v, want ErrNoData", err)
	}
}

// TestCommittedPictures: every picture committed under docs/img is a
// well-formed SVG with a title and at least one curve, so a truncated or
// hand-broken file is caught.
func TestCommittedPictures(t *testing.T) {
	files, err := filepath.Glob("../../docs/img/*.svg")
	if err != nil || len(files) == 0 {
		t.Fatalf("no pictures in docs/img: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := svgcheck.Parse(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(doc.Texts) == 0 || len(doc.Paths) == 0 {
			t.Errorf("%s: %d texts and %d stroked paths, want a title and a curve", f, len(doc.Texts), len(doc.Paths))
		}
	}
}
