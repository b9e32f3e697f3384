package plot

import (
	"fmt"
	"io"
	"slices"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// MaxCDFPoints is the most points a CDF curve is drawn with: a longer
// sample is drawn through MaxCDFPoints of its order statistics, evenly
// spaced in rank, the smallest and the largest included (at this many
// the steps are finer than the line is wide, and the SVG stays small).
const MaxCDFPoints = 2000

// Series is one named sample drawn as an empirical CDF.
type Series struct {
	// Name labels the curve in the legend.
	Name string
	// Values are the sample, sorted ascending, in the chart's unit
	// (CDFChart.XLabel says which: ms for service times, µs for response
	// times). With n values the curve rises by 1/n at each.
	Values []float64
	// Group, when set, gives the curve the colour of the first series of
	// the same group (e.g. one colour per scheduler, with and without a
	// cache); other series take the next colour.
	Group string
	// Dashed draws the curve dashed.
	Dashed bool
}

// CDFChart describes a picture of empirical CDFs on common axes.
type CDFChart struct {
	// Title is drawn above the chart.
	Title string
	// XLabel names the quantity and its unit, e.g. "service time (ms)".
	XLabel string
	// LogX draws the x axis on a log scale (for times spanning several
	// decades). Values ≤ 0 are then not drawn, but still count in the
	// fraction the curve starts at.
	LogX bool
	// Series are the curves, in legend order.
	Series []Series
}

// CDFs writes c as an SVG document to w: one step curve per series of the
// fraction of its values ≤ x (y axis, 0–1) against x in c's unit. Every
// series needs at least one value, sorted ascending and finite; errors
// name the series.
func CDFs(w io.Writer, c CDFChart) error {
	if len(c.Series) == 0 {
		return fmt.Errorf("CDFs %q: %w", c.Title, ErrNoData)
	}
	p := newPlot(c.Title, c.XLabel, "fraction ≤ x")
	if c.LogX {
		p.X.Scale = gplot.LogScale{}
		p.X.Tick.Marker = gplot.LogTicks{Prec: -1}
	}
	p.Y.Min, p.Y.Max = 0, 1
	colour := map[string]int{}
	next := 0
	for _, s := range c.Series {
		xys, err := cdfPoints(s.Values, c.LogX)
		if err != nil {
			return fmt.Errorf("CDFs %q: series %q: %w", c.Title, s.Name, err)
		}
		i, ok := colour[s.Group]
		if !ok || s.Group == "" {
			i = next
			next++
			colour[s.Group] = i
		}
		l, err := line(xys, i, vg.Points(1.5))
		if err != nil {
			return fmt.Errorf("CDFs %q: series %q: %w", c.Title, s.Name, err)
		}
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(2.5)}
		}
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	return writeSVG(w, 16*vg.Centimeter, 10*vg.Centimeter, p)
}

// cdfPoints returns the points of the empirical CDF of the sorted sample
// v: (v[r], (r+1)/n) at up to MaxCDFPoints ranks r, preceded by (v[0], 0)
// (or, with logX, by the first positive value at the fraction of values
// ≤ 0), to be joined by post-steps.
func cdfPoints(v []float64, logX bool) (plotter.XYs, error) {
	n := len(v)
	if n == 0 {
		return nil, ErrNoData
	}
	for _, x := range v {
		if !finite(x) {
			return nil, fmt.Errorf("plot: value %v is not finite", x)
		}
	}
	if !slices.IsSorted(v) {
		return nil, ErrUnsorted
	}
	first := 0
	if logX {
		for first < n && v[first] <= 0 {
			first++
		}
		if first == n {
			return nil, fmt.Errorf("plot: no value > 0 to draw on a log scale")
		}
	}
	m := min(n-first, MaxCDFPoints)
	xys := make(plotter.XYs, 0, m+1)
	xys = append(xys, plotter.XY{X: v[first], Y: float64(first) / float64(n)})
	for j := range m {
		r := first
		if m > 1 {
			r = first + int((int64(j)*int64(n-1-first)+int64(m-1)/2)/int64(m-1))
		}
		xys = append(xys, plotter.XY{X: v[r], Y: float64(r+1) / float64(n)})
	}
	return xys, nil
}
