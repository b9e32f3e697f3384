package plot

import (
	"fmt"
	"image/color"
	"io"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// DotPlotChart describes a dot plot of one value per item (a benchmark's
// per-pair ratios), with the median, an interval around it and a target.
type DotPlotChart struct {
	// Title is drawn above the chart; XLabel and YLabel name the axes
	// (with the unit, if any: a ratio has none).
	Title, XLabel, YLabel string
	// Values are drawn at x = 1, 2, …, in order. NaN values are left out.
	Values []float64
	// Marked, when as long as Values, draws the items it sets as hollow
	// dots in their own legend entry, MarkedName (e.g. pairs a noisy host
	// disturbed).
	Marked     []bool
	MarkedName string
	// Median is drawn as a horizontal line, MedianName in the legend.
	Median     float64
	MedianName string
	// Lo and Hi bound a shaded interval (e.g. the 95 % bootstrap interval
	// of the median), IntervalName in the legend; Lo = Hi = 0 draws none.
	Lo, Hi       float64
	IntervalName string
	// Target is drawn as a dashed horizontal line, TargetName in the
	// legend; 0 draws none.
	Target     float64
	TargetName string
}

// DotPlot writes c as an SVG document to w. It needs at least one finite
// value.
func DotPlot(w io.Writer, c DotPlotChart) error {
	var in, marked plotter.XYs
	ymin, ymax := c.Median, c.Median
	for i, v := range c.Values {
		if !finite(v) {
			continue
		}
		xy := plotter.XY{X: float64(i + 1), Y: v}
		if len(c.Marked) == len(c.Values) && c.Marked[i] {
			marked = append(marked, xy)
		} else {
			in = append(in, xy)
		}
		ymin, ymax = min(ymin, v), max(ymax, v)
	}
	if len(in)+len(marked) == 0 {
		return fmt.Errorf("dot plot %q: %w", c.Title, ErrNoData)
	}
	for _, v := range []float64{c.Lo, c.Hi, c.Target} {
		if v != 0 && finite(v) {
			ymin, ymax = min(ymin, v), max(ymax, v)
		}
	}
	pad := (ymax - ymin) * 0.1
	if pad == 0 {
		pad = 0.01
	}
	n := float64(len(c.Values))
	p := newPlot(c.Title, c.XLabel, c.YLabel)
	p.Legend.Left = false
	p.X.Min, p.X.Max = 0.5, n+0.5
	// Room above the dots for the legend.
	p.Y.Min, p.Y.Max = ymin-pad, ymax+pad+(ymax-ymin)*0.6
	if len(c.Values) <= 30 {
		ticks := make([]gplot.Tick, len(c.Values))
		for i := range ticks {
			ticks[i] = gplot.Tick{Value: float64(i + 1), Label: fmt.Sprint(i + 1)}
		}
		p.X.Tick.Marker = gplot.ConstantTicks(ticks)
	}
	if c.Lo != 0 || c.Hi != 0 {
		band, err := plotter.NewPolygon(plotter.XYs{{X: p.X.Min, Y: c.Lo}, {X: p.X.Max, Y: c.Lo}, {X: p.X.Max, Y: c.Hi}, {X: p.X.Min, Y: c.Hi}})
		if err != nil {
			return fmt.Errorf("dot plot %q: %w", c.Title, err)
		}
		c5 := Color(5)
		band.Color = color.NRGBA{R: c5.R, G: c5.G, B: c5.B, A: 0x50}
		band.Width = 0
		p.Add(band)
		p.Legend.Add(c.IntervalName, band)
	}
	hline := func(y float64, i int, dashed bool, name string) error {
		l, err := line(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}}, i, vg.Points(1.5))
		if err != nil {
			return fmt.Errorf("dot plot %q: %w", c.Title, err)
		}
		if dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	if err := hline(c.Median, 0, false, c.MedianName); err != nil {
		return err
	}
	if c.Target != 0 {
		if err := hline(c.Target, 1, true, c.TargetName); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		xys    plotter.XYs
		name   string
		hollow bool
	}{{in, c.YLabel, false}, {marked, c.MarkedName, true}} {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return fmt.Errorf("dot plot %q: %w", c.Title, err)
		}
		sc.Radius = vg.Points(3.5)
		sc.Color = color.Black // the dots stand out from the coloured lines
		sc.Shape = draw.CircleGlyph{}
		if s.hollow {
			sc.Shape = draw.RingGlyph{}
		}
		p.Add(sc)
		p.Legend.Add(s.name, sc)
	}
	return writeSVG(w, 16*vg.Centimeter, 10*vg.Centimeter, p)
}
