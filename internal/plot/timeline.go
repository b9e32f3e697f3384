package plot

import (
	"fmt"
	"image/color"
	"io"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// MaxTimelineDevices is the most devices Timeline draws (two panels
// each); the title says how many more there were.
const MaxTimelineDevices = 8

// TimelineWindow is what one window of `shadowtune run` found on one
// device.
type TimelineWindow struct {
	// Seconds is when the window ended, in seconds since the run started.
	Seconds float64
	// Setting is the device's setting from the window's end on, once the
	// window's decision is applied, e.g. "mq-deadline, 128 KiB"
	// (scheduler and read-ahead); each distinct setting gets a level of
	// the step line.
	Setting string
	// GainPercent is the predicted gain of the window's best candidate
	// over the current setting, percent; NaN when the window has none.
	GainPercent float64
	// ModelErrorPercent is the disk model's error on the measured service
	// times, percent; NaN when not known yet.
	ModelErrorPercent float64
}

// TimelineEvent is a write of the agent to a device: a change, or a
// revert of a change that verification measured as a regression.
type TimelineEvent struct {
	// Seconds is when it happened, in seconds since the run started.
	Seconds float64
	// Label says what was written (from → to).
	Label string
	// Revert tells a revert from a change.
	Revert bool
}

// DeviceTimeline is the timeline of one device.
type DeviceTimeline struct {
	Device  string
	Windows []TimelineWindow
	Events  []TimelineEvent
}

// Timeline writes an SVG document to w with two panels per device, over a
// common x axis in seconds since the run started: the setting per window as
// a step line (one labelled level per setting), and the predicted gain and
// the model error per window in percent. Changes are marked by green
// vertical lines, reverts by red dashed ones, in both panels. At most
// MaxTimelineDevices devices are drawn; each needs at least one window.
func Timeline(w io.Writer, title string, devs []DeviceTimeline) error {
	if len(devs) == 0 {
		return fmt.Errorf("timeline %q: %w", title, ErrNoData)
	}
	shown := devs
	if len(shown) > MaxTimelineDevices {
		shown = shown[:MaxTimelineDevices]
		title = fmt.Sprintf("%s (first %d of %d devices)", title, MaxTimelineDevices, len(devs))
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, d := range shown {
		if len(d.Windows) == 0 {
			return fmt.Errorf("timeline %q: device %s: %w", title, d.Device, ErrNoData)
		}
		for _, win := range d.Windows {
			if !finite(win.Seconds) {
				return fmt.Errorf("timeline %q: device %s: window time %v is not finite", title, d.Device, win.Seconds)
			}
			xmin, xmax = min(xmin, win.Seconds), max(xmax, win.Seconds)
		}
		for _, e := range d.Events {
			if finite(e.Seconds) {
				xmin, xmax = min(xmin, e.Seconds), max(xmax, e.Seconds)
			}
		}
	}
	if xmax == xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	var plots []*gplot.Plot
	for i, d := range shown {
		t := ""
		if i == 0 {
			t = title
		}
		sp, err := settingPanel(t, d, xmin, xmax)
		if err != nil {
			return fmt.Errorf("timeline %q: device %s: %w", title, d.Device, err)
		}
		pp, err := percentPanel(d, xmin, xmax)
		if err != nil {
			return fmt.Errorf("timeline %q: device %s: %w", title, d.Device, err)
		}
		plots = append(plots, sp, pp)
	}
	return writeSVG(w, 18*vg.Centimeter, vg.Length(len(plots))*6*vg.Centimeter, plots...)
}

var (
	changeColor = color.RGBA{0x00, 0x9E, 0x73, 0xff}
	revertColor = color.RGBA{0xD5, 0x1E, 0x00, 0xff}
)

// settingPanel draws the device's setting per window as a step line over
// one level per distinct setting, in order of first use.
func settingPanel(title string, d DeviceTimeline, xmin, xmax float64) (*gplot.Plot, error) {
	level := map[string]int{}
	var names []string
	xys := make(plotter.XYs, 0, len(d.Windows)+1)
	for _, win := range d.Windows {
		l, ok := level[win.Setting]
		if !ok {
			l = len(names)
			level[win.Setting] = l
			names = append(names, win.Setting)
		}
		xys = append(xys, plotter.XY{X: win.Seconds, Y: float64(l)})
	}
	p := newPlot(title, "", d.Device+": setting")
	p.X.Min, p.X.Max = xmin, xmax
	// Room above the levels for the legend.
	p.Y.Min, p.Y.Max = -0.5, float64(len(names))-0.5+max(1, 0.5*float64(len(names)))
	ticks := make([]gplot.Tick, len(names))
	for i, n := range names {
		ticks[i] = gplot.Tick{Value: float64(i), Label: n}
	}
	p.Y.Tick.Marker = gplot.ConstantTicks(ticks)
	// A window's setting holds from its end on, until the next window's
	// end (post-step).
	l, err := line(xys, 0, vg.Points(2))
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PostStep
	p.Add(l)
	p.Legend.Add("setting", l)
	if err := addEvents(p, d.Events, p.Y.Min, p.Y.Max); err != nil {
		return nil, err
	}
	return p, nil
}

// percentPanel draws the predicted gain and the model error per window,
// percent; windows without a value are left out of their line.
func percentPanel(d DeviceTimeline, xmin, xmax float64) (*gplot.Plot, error) {
	p := newPlot("", "time since start (s)", d.Device+": %")
	p.X.Min, p.X.Max = xmin, xmax
	ymin, ymax := 0.0, 1.0
	series := []struct {
		name string
		get  func(TimelineWindow) float64
	}{
		{"predicted gain of the best candidate (%)", func(w TimelineWindow) float64 { return w.GainPercent }},
		{"model error (%)", func(w TimelineWindow) float64 { return w.ModelErrorPercent }},
	}
	for i, s := range series {
		var xys plotter.XYs
		for _, win := range d.Windows {
			if v := s.get(win); finite(v) {
				xys = append(xys, plotter.XY{X: win.Seconds, Y: v})
				ymin, ymax = min(ymin, v), max(ymax, v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err // the caller names the chart
		}
		l.Color, l.Width = Color(i), vg.Points(1.2)
		sc.Color, sc.Shape, sc.Radius = Color(i), draw.CircleGlyph{}, vg.Points(1.5)
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
	}
	// Room above the lines for the legend.
	pad := (ymax - ymin) * 0.05
	p.Y.Min, p.Y.Max = ymin-pad, ymax+(ymax-ymin)*0.6
	if err := addEvents(p, d.Events, p.Y.Min, p.Y.Max); err != nil {
		return nil, err
	}
	return p, nil
}

// addEvents marks changes and reverts as vertical lines from ymin to ymax,
// with one legend entry for each kind present.
func addEvents(p *gplot.Plot, evs []TimelineEvent, ymin, ymax float64) error {
	var legendChange, legendRevert bool
	for _, e := range evs {
		if !finite(e.Seconds) {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: e.Seconds, Y: ymin}, {X: e.Seconds, Y: ymax}})
		if err != nil {
			return err // the caller names the chart
		}
		l.Width = vg.Points(1)
		name := "change"
		l.Color = changeColor
		if e.Revert {
			name = "revert"
			l.Color = revertColor
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		if e.Revert && !legendRevert || !e.Revert && !legendChange {
			p.Legend.Add(name, l)
			legendRevert = legendRevert || e.Revert
			legendChange = legendChange || !e.Revert
		}
	}
	return nil
}
