package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/explain"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

type runFlags struct {
	config, output, metricsAddr, stateDir, hostRoot, tracerKind string
	hostToolsRoot, plot, explainDir                             string
	duration, traceSample                                       time.Duration
	keep, revert, quiet, followOpenFiles                        bool
	verbosity                                                   int
}

func newRunCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --config storagetuning.yaml",
		Short: "Run the tuning loop on this host: trace, learn, simulate, decide, apply (as root)",
		Long: `Run the whole shadowtune loop on this host, without Kubernetes. It
discovers the block devices the StorageTuning policy selects and traces their
requests (eBPF, or a private tracefs instance). It learns each device's disk
model online, and every window simulates the window under every allowed
candidate. Then it decides. In Apply mode it changes the device (recording the
original values first), verifies the change against the next windows, and
reverts a real regression.

It prints a live table per window, or with --output json a final report. It
stops after --duration, or on Ctrl-C/SIGTERM. In Apply mode it then restores
every device it changed, unless --keep is given. 'shadowtune run --revert'
restores every device recorded in the state directory and exits.

--plot FILE.svg draws, at exit, a timeline of the run: per device the
setting of each window, the predicted gain and the model error, with the
changes and reverts marked (the last 10,000 windows; see docs/pictures.md).`,
		Example: `  # observe for a minute: one line per device per window, then the final table
  sudo shadowtune run --config examples/storagetuning-observe.yaml --duration 1m

  # apply, keep the settings at exit, draw the run's timeline
  sudo shadowtune run --config policy.yaml --keep --plot run.svg

  # a final JSON report only
  sudo shadowtune run --config policy.yaml --duration 5m -o json

  # after a crash: put back every device recorded in the state directory
  sudo shadowtune run --revert`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "StorageTuning policy (YAML, apiVersion storage.shadowtune.io/v1alpha1)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: run until interrupted)")
	fl.StringVarP(&f.output, "output", "o", "table", "table (live, per window) or json (final report)")
	fl.BoolVar(&f.keep, "keep", false, "Apply mode: leave the applied settings in place at exit")
	fl.BoolVar(&f.revert, "revert", false, "restore every device recorded in --state-dir and exit")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", metrics.DefaultBindAddress, `address of /metrics, /healthz and /readyz ("0" disables)`)
	fl.StringVar(&f.stateDir, "state-dir", agent.DefaultStateDir, "where original settings and learned models are kept")
	fl.StringVar(&f.hostRoot, "host-root", "", "prefix of the host's /sys (e.g. /host in a container)")
	fl.StringVar(&f.hostToolsRoot, "host-tools-root", "", hostToolsRootUsage)
	fl.StringVar(&f.tracerKind, "tracer", tracer.KindAuto, "auto, ebpf or tracefs")
	fl.DurationVar(&f.traceSample, "trace-sample", agent.DefaultTraceSample, traceSampleUsage)
	fl.BoolVar(&f.followOpenFiles, "follow-open-files", false, followOpenFilesUsage)
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "log only errors")
	fl.IntVarP(&f.verbosity, "verbose", "v", 0, "log more: 1 adds each window's read-ahead evidence, decision and costs, and what it showed of a token bucket's caps")
	fl.StringVar(&f.plot, "plot", "", "at exit, draw a timeline of the windows (setting, predicted gain, model error, changes, reverts)"+plotFlagUsage)
	fl.StringVar(&f.explainDir, "explain-dir", "", fmt.Sprintf("keep there the windows whose simulation decided a scheduler switch (or predicted one it did not reproduce the window well enough to make), for replay with 'shadowtune simulate': "+
		"DEVICE-TIME.trace (native), .model.json and .report.json, the newest %d per device", explain.Keep))
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagFilename("plot", "svg")
	_ = cmd.MarkFlagDirname("state-dir")
	_ = cmd.MarkFlagDirname("explain-dir")
	_ = cmd.MarkFlagDirname("host-tools-root")
	completeEnum(cmd, "output", outputFormats...)
	completeEnum(cmd, "tracer", tracerKinds...)
	return cmd
}

func runRun(parent context.Context, stdout, stderr io.Writer, f *runFlags) error {
	if parent == nil {
		parent = context.Background()
	}
	// --quiet logs only errors: funcr writes Info at V(0) only when the
	// verbosity is at least 0, and Error always.
	verbosity := f.verbosity
	if f.quiet {
		verbosity = -1
	}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(stderr, prefix, args) }, funcr.Options{Verbosity: verbosity})
	if f.revert {
		return runRevert(stdout, log, f)
	}
	if err := checkRunFlags(f); err != nil {
		return err
	}
	st, err := v1alpha1.LoadStorageTuningFile(f.config)
	if err != nil {
		return badInput(err)
	}
	if os.Geteuid() != 0 && f.hostRoot == "" {
		return errors.New("shadowtune run traces block devices and changes their settings: it must run as root")
	}

	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}

	m, setReady, stopMetrics, err := serveMetrics(f.metricsAddr, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	opts := agent.Options{
		HostRoot: f.hostRoot, StateDir: f.stateDir, Spec: st.Spec, Tracer: f.tracerKind,
		Metrics: m, Log: log, Keep: f.keep, Ready: setReady, MemoryLimit: memoryLimit(), Caches: cacheTool(log, f.hostToolsRoot),
		ExplainDir: f.explainDir, TraceSample: traceSample(f.traceSample), FollowOpenFiles: f.followOpenFiles,
	}
	var timeline *runTimeline
	if f.plot != "" {
		timeline = newRunTimeline(time.Now(), maxPlotWindows)
	}
	if f.output == "table" || timeline != nil {
		live := &runStream{w: stdout}
		opts.OnWindow = func(s agent.Status) {
			now := time.Now()
			if timeline != nil {
				timeline.add(s, now)
			}
			if f.output == "table" {
				live.window(s, now)
			}
		}
	}
	final, err := agent.Run(ctx, opts)
	if timeline != nil {
		if perr := timeline.write(f.plot); perr != nil {
			if err == nil {
				return perr
			}
			log.Error(perr, "run --plot")
		}
	}
	if err != nil {
		if errors.Is(err, agent.ErrNoDevice) {
			return badInputf("%s: %w", f.config, err)
		}
		return err
	}
	if f.output == "json" {
		b, err := agent.MarshalStatus(final)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	fmt.Fprintln(stdout, "final:")
	printRunTable(stdout, final)
	return nil
}

// checkRunFlags refuses bad flags of run (not --revert) with one line.
func checkRunFlags(f *runFlags) error {
	if f.config == "" {
		return badInputf("--config is required (or --revert)")
	}
	if f.output != "table" && f.output != "json" {
		return badInputf("--output: want table or json, got %q", f.output)
	}
	switch f.tracerKind {
	case tracer.KindAuto, tracer.KindEBPF, tracer.KindTracefs:
	default:
		return badInputf("--tracer: want auto, ebpf or tracefs, got %q", f.tracerKind)
	}
	return checkPlotPath(f.plot)
}

// serveMetrics serves /metrics, /healthz and /readyz on addr ("0": not
// served) from a new registry; it returns the agent's metrics, the
// readiness setter, and a stop function that logs the server's error.
func serveMetrics(addr string, log logr.Logger) (*metrics.Metrics, func(error), func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg)
	if err != nil {
		return nil, nil, nil, err
	}
	var ready atomic.Pointer[error]
	notStarted := errors.New("tracer not started")
	ready.Store(&notStarted)
	srv, err := metrics.Listen(addr, reg, func() error { return *ready.Load() }, log)
	if err != nil {
		return nil, nil, nil, badInputf("--metrics-bind-address: %w", err)
	}
	srvDone := make(chan error, 1)
	srvCtx, stopSrv := context.WithCancel(context.Background())
	go func() { srvDone <- srv.Serve(srvCtx) }()
	stop := func() {
		stopSrv()
		if err := <-srvDone; err != nil {
			log.Error(err, "metrics server")
		}
	}
	return m, func(err error) { ready.Store(&err) }, stop, nil
}

// runColumns are the columns of run's live lines and final table.
var runColumns = []string{"DEVICE", "CLASS", "CURRENT", "READ-AHEAD", "BEST", "GAIN", "RA ADVICE", "RA WASTE", "MODEL ERR", "REQS", "DROPPED", "LAST CHANGE"}

// runRow is one device's cells under runColumns; the last cell carries the
// window's notes (error, skipped, gone, verification, counterfactual,
// defaults changed, OtherWriter) after the last change.
func runRow(d v1alpha1.DeviceState) []string {
	last := "-"
	if d.LastChangeTime != nil {
		last = d.LastChangeTime.Format(time.TimeOnly) + " " + d.LastChange
	}
	var win v1alpha1.WindowState
	if d.Window != nil {
		win = *d.Window
	}
	note := ""
	switch {
	case win.Error != "":
		note = "  error: " + win.Error
	case win.Skipped != "":
		note = "  skipped: " + win.Skipped
	}
	if d.Gone != "" {
		note += "  gone: " + d.Gone
	}
	if v := d.LastVerification; v != nil {
		note += fmt.Sprintf("  %s %s: %s %s measured vs %s", strings.ToLower(v.Outcome), v.Change, v.Measured, v.Unit, v.Baseline)
	}
	if cf := d.Counterfactual; cf != nil {
		note += fmt.Sprintf("  counterfactual error %s pts over %d change(s)", cf.ErrorPercent, cf.Checks)
		if cf.HoldUntil != nil {
			note += ", switches held until " + cf.HoldUntil.UTC().Format(time.RFC3339)
		}
	}
	if dc := d.DefaultsChanged; dc != nil {
		note += "  defaults changed: " + judgedDefaults(dc)
	}
	if ow := d.OtherWriter; ow != nil {
		note += "  OtherWriter: " + ow.Change
		if ow.Writer != "" {
			note += " by " + ow.Writer
		}
		if ow.Yielded {
			note += " (yielded)"
		}
	}
	return []string{
		d.Name, string(d.Class), d.Current.Scheduler, fmt.Sprintf("%d KiB", d.Current.ReadAheadKiB),
		orDash(win.Best), orZero(win.BestGainPercent) + "%", fmt.Sprintf("%d KiB", win.ReadAheadAdviceKiB),
		raWaste(d.ReadAhead), orZero(d.ModelErrorPercent) + "%", requestsCell(win), fmt.Sprint(d.EventsDropped), last + note,
	}
}

// judgedDefaults renders a defaults change with its verdicts:
// "read_ahead_kb 128 → 2560 (Slower, +117.4 %), scheduler none →
// mq-deadline".
func judgedDefaults(dc *v1alpha1.DefaultsChange) string {
	parts := make([]string, len(dc.Knobs))
	for i, k := range dc.Knobs {
		parts[i] = k.Describe()
		if k.Verdict != "" {
			parts[i] += fmt.Sprintf(" (%s, %s %%)", k.Verdict, k.ChangePercent)
		}
	}
	return strings.Join(parts, ", ")
}

// requestsCell is the REQS cell: the window's traced requests, marked
// "sampled" when only its last part was traced (agent.md, Sampled
// tracing).
func requestsCell(w v1alpha1.WindowState) string {
	if w.Sampled {
		return fmt.Sprintf("%d sampled", w.Requests)
	}
	return fmt.Sprint(w.Requests)
}

// raWaste is the RA WASTE cell: the window's read-ahead waste, or "-"
// when it was not measured.
func raWaste(e *v1alpha1.ReadAheadEvidence) string {
	if e == nil || e.WastePercent == "" {
		return "-"
	}
	return e.WastePercent + "%"
}

// printRunTable prints the whole table of one status: run's final table.
func printRunTable(w io.Writer, s agent.Status) {
	fmt.Fprintf(w, "window %d  mode %s  tracer %s  %s\n", s.Windows, s.Mode, s.Tracer, time.Now().Format(time.TimeOnly))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(runColumns, "\t"))
	for _, d := range s.Devices {
		fmt.Fprintln(tw, strings.Join(runRow(d), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// runStream prints run's live output: the mode and tracer and the column
// header once (again only if the mode or tracer changes), then one line per
// device per window, in fixed-width columns so that the lines of later
// windows stay aligned under the header without reprinting it.
type runStream struct {
	w            io.Writer
	mode, tracer string
	started      bool
}

// runStreamWidths are the minimum widths of WINDOW, TIME and runColumns
// (the last column is not padded); a wider value pushes its line's later
// columns right and no other line's.
var runStreamWidths = []int{6, 8, 8, 5, 11, 10, 11, 6, 9, 8, 9, 9, 7}

func (r *runStream) window(s agent.Status, now time.Time) {
	if !r.started || s.Mode != r.mode || s.Tracer != r.tracer {
		if r.started {
			fmt.Fprintln(r.w)
		}
		r.started, r.mode, r.tracer = true, s.Mode, s.Tracer
		fmt.Fprintf(r.w, "mode %s  tracer %s\n", s.Mode, s.Tracer)
		r.line(append([]string{"WINDOW", "TIME"}, runColumns...))
	}
	for _, d := range s.Devices {
		r.line(append([]string{fmt.Sprint(s.Windows), now.Format(time.TimeOnly)}, runRow(d)...))
	}
}

func (r *runStream) line(cells []string) {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		fmt.Fprintf(&b, "%-*s  ", runStreamWidths[i], c)
	}
	fmt.Fprintln(r.w, strings.TrimRight(b.String(), " "))
}

// orZero is a status percentage for the table: "0.0" when unset.
func orZero(pct string) string {
	if pct == "" {
		return "0.0"
	}
	return pct
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
