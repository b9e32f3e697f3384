package app

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/internal/plot"
)

// newBenchPlotCommand is `shadowtune bench-plot`, hidden: hack/bench-agent.sh
// calls it at its end to draw bin/bench-agent.svg from its report.
func newBenchPlotCommand() *cobra.Command {
	var input, out string
	cmd := &cobra.Command{
		Use:    "bench-plot --input bench-agent.txt --plot bench-agent.svg",
		Short:  "Draw the agent-overhead benchmark's per-pair IOPS ratios (hack/bench-agent.sh)",
		Hidden: true,
		Long: `Read the report of hack/bench-agent.sh (make bench-agent) and draw a dot
plot of its per-pair IOPS ratios (with/without the agent), disturbed pairs
hollow, with the median ratio, its 95 % bootstrap interval and the target.`,
		Example: `  shadowtune bench-plot --input bin/bench-agent.txt --plot bin/bench-agent.svg`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPlotPath(out); err != nil {
				return err
			}
			if out == "" {
				return badInputf("--plot is required")
			}
			fh, err := os.Open(input)
			if err != nil {
				return badInputf("--input: %w", err)
			}
			defer fh.Close()
			rep, err := parseBenchAgent(fh)
			if err != nil {
				return badInputf("--input %s: %w", input, err)
			}
			chart := rep.chart()
			return writePlot(out, func(w io.Writer) error { return plot.DotPlot(w, chart) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&input, "input", "", "report of hack/bench-agent.sh (required)")
	fl.StringVar(&out, "plot", "", "draw the dot plot"+plotFlagUsage+" (required)")
	_ = cmd.MarkFlagRequired("input")
	_ = cmd.MarkFlagRequired("plot")
	_ = cmd.MarkFlagFilename("plot", "svg")
	return cmd
}

// benchAgentReport is what bench-plot reads from hack/bench-agent.sh's
// report: the per-pair with/without IOPS ratios, which pairs a busy host
// disturbed, and the median ratio with its 95 % bootstrap interval.
type benchAgentReport struct {
	ratios    []float64
	disturbed []bool
	median    float64
	lo, hi    float64 // 0, 0: no interval in the report
	target    float64 // lowest acceptable ratio, 0.98 for "at most 2% lower"
}

var (
	// A row of the per-pair table: pair, IOPS off, IOPS on, ratio, … and
	// " *" at the end of a disturbed pair.
	benchRow      = regexp.MustCompile(`^\s*(\d+)\s+[\d,]+\s+[\d,]+\s+(\d+\.\d+)\s`)
	benchMedian   = regexp.MustCompile(`^median on/off ratio (\d+\.\d+)`)
	benchInterval = regexp.MustCompile(`95% bootstrap interval of the median ratio (\d+\.\d+)-(\d+\.\d+) over`)
	benchTarget   = regexp.MustCompile(`target at most (\d+(?:\.\d+)?)% lower`)
)

// parseBenchAgent reads a report of hack/bench-agent.sh. It needs the
// per-pair table; without a median line the median is computed from the
// ratios, and without an interval line none is drawn.
func parseBenchAgent(r io.Reader) (benchAgentReport, error) {
	var rep benchAgentReport
	rep.median = math.NaN()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	inTable := false
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "pair ") && strings.Contains(line, "on/off"):
			inTable = true
			continue
		case trimmed == "":
			inTable = false
		}
		if m := benchRow.FindStringSubmatch(line); inTable && m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			rep.ratios = append(rep.ratios, v)
			rep.disturbed = append(rep.disturbed, strings.HasSuffix(strings.TrimRight(line, " "), "*"))
			continue
		}
		if m := benchMedian.FindStringSubmatch(trimmed); m != nil {
			rep.median, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := benchTarget.FindStringSubmatch(line); m != nil && rep.target == 0 {
			pct, _ := strconv.ParseFloat(m[1], 64)
			rep.target = 1 - pct/100
		}
		if m := benchInterval.FindStringSubmatch(line); m != nil {
			rep.lo, _ = strconv.ParseFloat(m[1], 64)
			rep.hi, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	if len(rep.ratios) == 0 {
		return rep, fmt.Errorf("no per-pair table (a report of hack/bench-agent.sh has a line starting with \"pair\" and one row per pair)")
	}
	if math.IsNaN(rep.median) {
		s := slices.Sorted(slices.Values(rep.ratios))
		rep.median = (s[(len(s)-1)/2] + s[len(s)/2]) / 2
	}
	return rep, nil
}

// chart is the dot plot of the report.
func (r benchAgentReport) chart() plot.DotPlotChart {
	c := plot.DotPlotChart{
		Title:  fmt.Sprintf("agent overhead: fio IOPS with/without shadowtune run, %d pairs", len(r.ratios)),
		XLabel: "pair", YLabel: "IOPS ratio with/without the agent",
		Values: r.ratios, Marked: r.disturbed, MarkedName: "pair disturbed by other load (*)",
		Median: r.median, MedianName: fmt.Sprintf("median %.4f", r.median),
		Lo: r.lo, Hi: r.hi,
		IntervalName: fmt.Sprintf("95 %% bootstrap interval of the median %.4f–%.4f", r.lo, r.hi),
	}
	if r.target > 0 {
		c.Target, c.TargetName = r.target, fmt.Sprintf("target ≥ %.2f", r.target)
	}
	return c
}
