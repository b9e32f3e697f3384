package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/plot"
)

// plotFlagUsage is the help of every command's --plot flag, after what it
// draws.
const plotFlagUsage = " to this SVG file (written whole, or not at all)"

// checkPlotPath validates a --plot value before any work is done: empty
// (no picture), or a file name ending in .svg in an existing directory.
func checkPlotPath(path string) error {
	if path == "" {
		return nil
	}
	if !strings.EqualFold(filepath.Ext(path), ".svg") {
		return badInputf("--plot: want a file name ending in .svg, got %q", path)
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return badInputf("--plot: %w", err)
	} else if !st.IsDir() {
		return badInputf("--plot: %s is not a directory", dir)
	}
	return nil
}

// writePlot writes the SVG that draw produces to path, atomically.
func writePlot(path string, draw func(io.Writer) error) error {
	_, err := writeAtomically(path, nil, func(w io.Writer) (int64, error) {
		return 1, draw(w)
	})
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return nil
}

// nsToMs converts sorted times in ns to ms, for a CDF.
func nsToMs(ns []int64) []float64 {
	out := make([]float64, len(ns))
	for i, v := range ns {
		out[i] = float64(v) / 1e6
	}
	return out
}

// evalCDFChart is the picture of `model eval --plot`: the measured and
// predicted service-time CDFs of the test requests, the demerit in the
// title.
func evalCDFChart(path string, r *model.EvalResult) plot.CDFChart {
	return plot.CDFChart{
		Title: fmt.Sprintf("%s: demerit %.3f ms (%s model, %s, predict %s)",
			filepath.Base(path), r.DemeritMs, r.Class, r.Mode, r.Predict),
		XLabel: fmt.Sprintf("service time (ms), %d test requests", len(r.Sorted.MeasuredNs)),
		Series: []plot.Series{
			{Name: "measured", Values: nsToMs(r.Sorted.MeasuredNs)},
			{Name: "predicted", Values: nsToMs(r.Sorted.PredictedNs)},
		},
	}
}

// simulateCDFChart is the picture of `simulate --plot`: each candidate's
// response-time CDF (from its exact quantiles), the current setting and
// the recommendation named in the legend.
func simulateCDFChart(out simulateReport, rep engine.Report) plot.CDFChart {
	c := plot.CDFChart{
		Title: fmt.Sprintf("%s: response times per candidate (%s loop, %s model)",
			filepath.Base(out.Trace), out.Loop, out.Model.Source),
		XLabel: fmt.Sprintf("response time (ms, log scale), %d requests", out.Requests),
		LogX:   true,
	}
	rec := out.Recommendation
	for _, o := range rep.Outcomes {
		name := o.Candidate.Name()
		current, recommended := name == rec.Current, name == rec.Scheduler
		switch {
		case current && recommended:
			name += " (current, recommended)"
		case current:
			name += " (current)"
		case recommended:
			name += " (recommended)"
		}
		// One colour per scheduler and tunables; with REDCAP dashed.
		base := o.Candidate
		base.Cache = false
		c.Series = append(c.Series, plot.Series{
			Name: name, Values: nsToMs(o.Result.ResponseQuantilesNs),
			Group: base.Name(), Dashed: o.Candidate.Cache,
		})
	}
	return c
}
