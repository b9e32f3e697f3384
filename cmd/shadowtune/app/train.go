package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/modelfile"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/agent/train"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/statefs"
)

type trainFlags struct {
	device, out, stateDir, class, tracerKind, fio string
	duration                                      time.Duration
	allowWrite                                    bool
	sizes                                         []int
	seed                                          uint64
}

// newModelTrainCommand returns "shadowtune model train".
func newModelTrainCommand() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train --device DEV --duration D [--out-file MODEL.json] [--allow-write]",
		Short: "Train a device's disk model offline with fio (as root)",
		Long: `Train the disk model of one device offline (DESIGN §3): issue requests spread
uniformly over the model's cells — request sizes × inter-request distance
columns × read/write — with fio, one at a time (psync, iodepth 1, O_DIRECT,
back to back), while tracing the device; learn every traced request with the
service time the block layer measured (dispatch to completion); and save the
model.

Without --allow-write it only reads (fio also runs with --readonly). With
--allow-write it also writes, which DESTROYS THE DATA ON THE DEVICE; it is
refused unless the disk and its partitions are unmounted, not swap and not
held by device-mapper, md or another program, and the kernel grants an
exclusive claim on it for the whole run.

DEV is a device path (/dev/sdb, /dev/disk/by-id/...), a kernel name (sdb) or
major:minor; it must be a whole disk. The model is written atomically to
--out-file (-o/--output FILE is its deprecated alias),
by default to the file 'shadowtune run --state-dir DIR' loads the device's
model from (DIR/models/NAME[-SERIAL].json), so that the agent starts with
the trained model. Needs root and fio. Ctrl-C stops early and keeps what was
learned.`,
		Example: `  # reads only; the model goes where 'shadowtune run' loads it from
  sudo shadowtune model train --device /dev/sdb --duration 2m

  # an SSD, two request sizes, the model to standard output
  sudo shadowtune model train --device nvme1n1 --duration 30s --device-class nvme --sizes-kib 4,64 --out-file -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTrain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.device, "device", "", "whole disk to train: /dev/NAME, NAME or MAJ:MIN (required)")
	fl.DurationVar(&f.duration, "duration", 0, "training time, e.g. 2m (required; the papers: 2 min for a 64 GB SSD, 80–100 min for a 400 GB HDD)")
	addOutFileFlag(cmd, &f.out, "", "model file to write, or - for standard output (default: the agent's model file under --state-dir)", false)
	fl.BoolVar(&f.allowWrite, "allow-write", false, "also train writes: destroys the data on the device; refused if it is in use")
	fl.StringVar(&f.stateDir, "state-dir", agent.DefaultStateDir, "state directory of 'shadowtune run' (where the default --out-file goes)")
	fl.StringVar(&f.class, "device-class", "auto", "model class: auto (from sysfs, checked against the measured reads), hdd, ssd or nvme")
	fl.StringVar(&f.tracerKind, "tracer", tracer.KindAuto, "tracer: auto (ebpf, else tracefs), ebpf or tracefs")
	fl.IntSliceVar(&f.sizes, "sizes-kib", nil, "request sizes in KiB (default 4,8,16,…,1024 up to the device's largest request, and that)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the request plan")
	fl.StringVar(&f.fio, "fio", "fio", "fio binary")
	_ = cmd.MarkFlagRequired("device")
	_ = cmd.MarkFlagRequired("duration")
	_ = cmd.MarkFlagDirname("state-dir")
	completeEnum(cmd, "device-class", trainClasses...)
	completeEnum(cmd, "tracer", tracerKinds...)
	return cmd
}

func runTrain(parent context.Context, stdout, stderr io.Writer, f *trainFlags) error {
	if f.duration <= 0 {
		return badInputf("--duration must be positive, got %v", f.duration)
	}
	var class model.Class
	if f.class != "auto" {
		c, err := model.ParseClass(f.class)
		if err != nil || c == model.Throttled {
			return badInputf("--device-class: want auto, hdd, ssd or nvme, got %q (a throttled device's caps show only at depth: the agent finds them)", f.class)
		}
		class = c
	}
	switch f.tracerKind {
	case tracer.KindAuto, tracer.KindEBPF, tracer.KindTracefs:
	default:
		return badInputf("--tracer: want auto, ebpf or tracefs, got %q", f.tracerKind)
	}
	for _, s := range f.sizes {
		if s <= 0 || s%4 != 0 {
			return badInputf("--sizes-kib: %d is not a positive multiple of 4 KiB", s)
		}
	}
	if f.out == "" && f.stateDir == "" {
		return badInputf("-o or --state-dir is required")
	}
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()

	report := stdout
	if f.out == "-" {
		report = stderr
	}
	res, err := train.Run(ctx, train.Options{
		Device: f.device, Duration: f.duration, AllowWrite: f.allowWrite, Class: class,
		Tracer: f.tracerKind, SizesKiB: f.sizes, Seed: f.seed, Fio: f.fio, Log: stderr,
	})
	if err != nil {
		var de *train.DeviceError
		if errors.As(err, &de) {
			return badInput(err)
		}
		return err
	}
	out := f.out
	if out == "" {
		// Into the agent's state directory, as the agent writes there
		// (package statefs: never through a symbolic link).
		out = modelfile.Path(f.stateDir, res.Device)
		if err := statefs.WriteFile(f.stateDir, modelfile.Name(res.Device), 0o644, res.Model.Save); err != nil {
			return err
		}
	} else if _, err := writeAtomically(out, stdout, func(w io.Writer) (int64, error) {
		return 1, res.Model.Save(w)
	}); err != nil {
		return err
	}
	printTrainSummary(report, res, out)
	return nil
}

func printTrainSummary(w io.Writer, r *train.Result, out string) {
	class := r.Class.String()
	if r.ClassNote != "" {
		class += " (" + r.ClassNote + ")"
	}
	ops := "reads"
	if r.Writes {
		ops = "reads and writes"
	}
	sizes := make([]string, len(r.SizesSectors))
	for i, s := range r.SizesSectors {
		sizes[i] = fmt.Sprint(s / 2)
	}
	fmt.Fprintf(w, "device %s (%s, %s), class %s\n", r.Name, tracer.DevString(r.Dev), humanBytes(r.Device.SizeBytes), class)
	fmt.Fprintf(w, "trained %.1f s in %d fio round(s) (%s, psync, iodepth 1, O_DIRECT), %s tracer\n",
		r.Elapsed.Seconds(), r.Rounds, r.FioVersion, r.Tracer)
	fmt.Fprintf(w, "plan: %s; sizes %s KiB × %d distance columns = %d cells; %d of them filled\n",
		ops, strings.Join(sizes, ","), r.Columns, r.PlannedCells, r.CoveredCells)
	fmt.Fprintf(w, "requests: fio completed %d reads, %d writes; traced %d, learned %d, other %d; tracer dropped %d, lost %d\n",
		r.FioReads, r.FioWrites, r.Traced, r.Learned, r.Other, r.Dropped, r.Lost)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TABLE\tREQUESTS\tCELLS FILLED\tMEAN SERVICE (µs)\t")
	for _, t := range r.Tables {
		mean := "-"
		if t.Requests > 0 {
			mean = fmt.Sprintf("%.1f", float64(t.MeanServiceNs)/1e3)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t\n", t.Name, t.Requests, t.Cells, mean)
	}
	tw.Flush()
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: the model holds what was learned until then")
	}
	if missed := r.Dropped + r.Lost; missed > 0 {
		done := max(r.FioReads+r.FioWrites, 1)
		pct := 100 * float64(missed) / float64(done)
		level := "note"
		if pct > 1 {
			level = "warning"
		}
		fmt.Fprintf(w, "%s: the tracer missed %d of %d requests (%.2f %%); the model learned from the rest\n", level, missed, done, pct)
	}
	fmt.Fprintf(w, "model written to %s\n", out)
}

func humanBytes(b uint64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(b)/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", b>>20)
}
