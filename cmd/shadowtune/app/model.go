package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/plot"
	"github.com/shadowtune/shadowtune/internal/trace"
)

func newModelCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Learn and evaluate disk models",
		Example: `  shadowtune model eval --trace testdata/traces/disksim/atlas10k.trace --format disksim
  shadowtune model learn --trace testdata/traces/disksim/atlas10k.trace --format disksim --out-file atlas10k.json
  sudo shadowtune model train --device /dev/sdb --duration 2m`,
	}
	cmd.AddCommand(newModelEvalCommand(), newModelLearnCommand(), newModelTrainCommand())
	return cmd
}

func newModelEvalCommand() *cobra.Command {
	var f modelEvalFlags
	cmd := &cobra.Command{
		Use:   "eval --trace FILE --format FMT",
		Short: "Measure the disk model's accuracy on a trace with measured service times",
		Long: `Learn the table model on the first part of a trace that carries measured
service times, predict each request of the rest, and report the accuracy:
the per-1000-request window error of total predicted vs measured service
time (KDSim §6), the total error, mean measured and predicted service time,
and the Ruemmler–Wilkes demerit figure (RMS horizontal distance between the
measured and predicted service-time CDFs).

--mode online predicts each test request and then learns it (as the agent
runs); frozen only predicts. --predict mean returns the cell mean (the
papers' choice); sample draws one of the cell's last 64 measured times with
a seeded generator, which reproduces the spread of service times and so
usually gives a smaller demerit.

--plot FILE.svg draws the two service-time CDFs, with the demerit in the
title (see docs/pictures.md).`,
		Example: `  # the accuracy table of docs/performance.md, one row
  shadowtune model eval --trace testdata/traces/disksim/atlas10k.trace --format disksim

  # frozen model, sampled predictions, JSON, and the two CDFs drawn
  shadowtune model eval --trace testdata/traces/disksim/atlas10k.trace --format disksim \
      --mode frozen --predict sample -o json --plot atlas10k.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runModelEval(cmd.OutOrStdout(), &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.path, "trace", "", "trace with measured service times (required)")
	fl.StringVar(&f.format, "format", "", "trace format: "+trace.FormatNames()+" (required)")
	fl.Float64Var(&f.frac, "train-fraction", 0.5, "leading fraction of the trace to learn from")
	fl.StringVar(&f.mode, "mode", "online", "online (learn each test request after predicting it) or frozen")
	fl.StringVar(&f.predict, "predict", "mean", "mean (cell mean) or sample (seeded draw from the cell's stored times)")
	fl.StringVar(&f.class, "device-class", "hdd", "device class: hdd, ssd, nvme, or throttled (caps estimated from the trace)")
	fl.Int64Var(&f.seed, "seed", 1, "seed for --predict sample")
	fl.DurationVar(&f.threshold, "hit-threshold", 0, "fixed HDD read hit/miss threshold, e.g. 1ms (default: derived from the trace when bimodal, else 1 ms)")
	fl.StringVarP(&f.output, "output", "o", "table", "output: table or json")
	fl.StringVar(&f.plotPath, "plot", "", "draw the measured and predicted service-time CDFs"+plotFlagUsage)
	_ = cmd.MarkFlagFilename("plot", "svg")
	completeEnum(cmd, "format", traceFormatNames()...)
	completeEnum(cmd, "mode", "online", "frozen")
	completeEnum(cmd, "predict", "mean", "sample")
	completeEnum(cmd, "device-class", deviceClasses...)
	completeEnum(cmd, "output", outputFormats...)
	addMaxRequestsFlag(fl, &f.maxRequests, defaultMaxModelRequests)
	_ = cmd.MarkFlagRequired("trace")
	_ = cmd.MarkFlagRequired("format")
	return cmd
}

func printEval(w io.Writer, path string, r model.EvalResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "trace\t%s\n", path)
	fmt.Fprintf(tw, "model\t%s, %s, predict %s\n", r.Class, r.Mode, r.Predict)
	if r.Throttle != nil {
		fmt.Fprintf(tw, "caps\t%s (estimated on the training part)\n", r.Throttle)
	}
	fmt.Fprintf(tw, "requests\t%d train, %d test (%d windows of 1000)\n", r.TrainRequests, r.TestRequests, r.Windows)
	fmt.Fprintf(tw, "window error\tmean %.2f %%, median %.2f %%, max %.2f %%\n", r.WindowErrorPct.Mean, r.WindowErrorPct.Median, r.WindowErrorPct.Max)
	fmt.Fprintf(tw, "total error\t%+.2f %%\n", r.TotalErrorPct)
	fmt.Fprintf(tw, "mean service time\tmeasured %.3f ms, predicted %.3f ms\n", r.MeanMeasuredMs, r.MeanPredictedMs)
	fmt.Fprintf(tw, "demerit\t%.3f ms\n", r.DemeritMs)
	return tw.Flush()
}

func newModelLearnCommand() *cobra.Command {
	var (
		path, format, class, out string
		capacity                 uint64
		maxRequests              int
	)
	cmd := &cobra.Command{
		Use:   "learn --trace FILE --format FMT --out-file MODEL.json",
		Short: "Learn a disk model from a trace with measured service times and save it",
		Long: `Learn the table model from a whole trace with measured service times and
write it as JSON, atomically, to --out-file (or standard output); 'shadowtune
simulate --model FILE' loads it. (-o/--output FILE still works here, as a
deprecated alias of --out-file.)`,
		Example: `  shadowtune model learn --trace testdata/traces/disksim/atlas10k.trace --format disksim --out-file atlas10k.json
  shadowtune simulate --trace testdata/traces/disksim/atlas10k.trace --format disksim --model atlas10k.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := model.ParseClass(class)
			if err != nil {
				return badInputf("--device-class: %w", err)
			}
			reqs, err := readTrace(format, path, maxRequests)
			if err != nil {
				return err
			}
			m, err := model.Fit(reqs, model.FitOptions{Class: cl, CapacitySectors: capacity})
			if err != nil {
				return badInputf("%s: %w", path, err)
			}
			_, err = writeAtomically(out, cmd.OutOrStdout(), func(w io.Writer) (int64, error) {
				return 1, m.Save(w)
			})
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&path, "trace", "", "trace with measured service times (required)")
	fl.StringVar(&format, "format", "", "trace format: "+trace.FormatNames()+" (required)")
	fl.StringVar(&class, "device-class", "hdd", "device class: hdd, ssd, nvme, or throttled (caps estimated from the trace)")
	fl.Uint64Var(&capacity, "capacity-sectors", 0, "device size in 512-byte sectors (default: the largest sector in the trace)")
	addOutFileFlag(cmd, &out, "-", "model file to write, or - for standard output", false)
	addMaxRequestsFlag(fl, &maxRequests, defaultMaxModelRequests)
	_ = cmd.MarkFlagRequired("trace")
	_ = cmd.MarkFlagRequired("format")
	completeEnum(cmd, "format", traceFormatNames()...)
	completeEnum(cmd, "device-class", deviceClasses...)
	return cmd
}

// modelEvalFlags are the flags of `model eval`.
type modelEvalFlags struct {
	path, format, mode, predict, class, output string
	plotPath                                   string
	frac                                       float64
	seed                                       int64
	maxRequests                                int
	threshold                                  time.Duration
}

// runModelEval runs `model eval` with its flags, writing to out.
func runModelEval(out io.Writer, f *modelEvalFlags) error {
	if f.output != "table" && f.output != "json" {
		return badInputf("--output: want table or json, got %q", f.output)
	}
	em, err := model.ParseEvalMode(f.mode)
	if err != nil {
		return badInputf("--mode: %w", err)
	}
	pm, err := model.ParsePredictMode(f.predict)
	if err != nil {
		return badInputf("--predict: %w", err)
	}
	cl, err := model.ParseClass(f.class)
	if err != nil {
		return badInputf("--device-class: %w", err)
	}
	if !(f.frac > 0 && f.frac < 1) {
		return badInputf("--train-fraction: must be between 0 and 1 (exclusive), got %g", f.frac)
	}
	if err := checkPlotPath(f.plotPath); err != nil {
		return err
	}
	reqs, err := readTrace(f.format, f.path, f.maxRequests)
	if err != nil {
		return err
	}
	res, err := model.Evaluate(reqs, model.EvalOptions{
		TrainFraction: f.frac, Mode: em, Predict: pm, Class: cl, Seed: f.seed, HitThreshold: f.threshold,
		KeepSorted: f.plotPath != "",
	})
	if err != nil {
		if errors.Is(err, model.ErrNoServiceTimes) {
			return badInputf("%s: %w", f.path, err)
		}
		return badInput(err)
	}
	if f.plotPath != "" {
		chart := evalCDFChart(f.path, &res)
		if err := writePlot(f.plotPath, func(w io.Writer) error { return plot.CDFs(w, chart) }); err != nil {
			return err
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return printEval(out, f.path, res)
}
