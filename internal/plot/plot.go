// Package plot draws shadowtune's pictures as SVG with gonum/plot: the
// service- or response-time CDFs of `shadowtune model eval --plot` and
// `shadowtune simulate --plot` ([CDFs]), the per-window timeline of
// `shadowtune run --plot` ([Timeline]) and the per-pair dot plot of
// `make bench-agent` ([DotPlot]).
//
// Every function takes plain numbers in the unit its type documents (ms,
// µs, percent, seconds since the start of a run), writes one SVG document
// to w and draws the same picture for the same input. Text is kept as SVG
// <text> (fonts are not embedded), so titles and legends stay searchable.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// palette is the Okabe–Ito colour-blind-safe palette (black left out),
// in the order series are coloured.
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0x99, 0x99, 0x99, 0xff}, // grey
	{0xF0, 0xE4, 0x42, 0xff}, // yellow
}

// Color returns the colour of the i-th series. The palette repeats after
// eight series; the repeats are drawn dashed, then dotted.
func Color(i int) color.RGBA { return palette[i%len(palette)] }

// dashes returns the dash pattern of the i-th series: solid for the first
// round of the palette, then dashed, then dotted.
func dashes(i int) []vg.Length {
	switch (i / len(palette)) % 3 {
	case 1:
		return []vg.Length{vg.Points(6), vg.Points(3)}
	case 2:
		return []vg.Length{vg.Points(1.5), vg.Points(2)}
	}
	return nil
}

// Errors returned for unusable input.
var (
	ErrNoData   = errors.New("plot: nothing to draw")
	ErrUnsorted = errors.New("plot: CDF values must be sorted ascending")
)

// sans is the typeface of all text: Liberation Sans, metrically
// compatible with Arial and Helvetica, which an SVG viewer without it
// substitutes (gonum/plot lays text out with the font's metrics).
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// newPlot returns a plot with shadowtune's common look: title, axis
// labels, light grid, legend at the top left
// (where a CDF, low at small x, leaves room).
func newPlot(title, x, y string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	for _, a := range []*gplot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 9)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font = font.From(sans, 9)
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{0xe0}
	g.Horizontal.Color = color.Gray{0xe0}
	p.Add(g)
	return p
}

// writeSVG draws plots stacked in one column on a w × h SVG canvas and
// writes it to out.
func writeSVG(out io.Writer, w, h vg.Length, plots ...*gplot.Plot) error {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	if len(plots) == 1 {
		plots[0].Draw(dc)
	} else {
		rows := make([][]*gplot.Plot, len(plots))
		for i, p := range plots {
			rows[i] = []*gplot.Plot{p}
		}
		t := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
			PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter}
		canvases := gplot.Align(rows, t, dc)
		for i, p := range plots {
			p.Draw(canvases[i][0])
		}
	}
	if _, err := c.WriteTo(out); err != nil {
		return fmt.Errorf("plot: write SVG: %w", err)
	}
	return nil
}

// line returns a line plotter through xys in the i-th series' style.
func line(xys plotter.XYs, i int, width vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err // the caller names the chart
	}
	l.Color = Color(i)
	l.Width = width
	l.Dashes = dashes(i)
	return l, nil
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
