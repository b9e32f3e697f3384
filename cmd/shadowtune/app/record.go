package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// recordOptions are the flags of "shadowtune trace record".
type recordOptions struct {
	devices  []string      // --device, as given
	duration time.Duration // --duration
	out      string        // --out-file, "-" for standard output
	kind     string        // --tracer
}

// newTraceRecordCommand returns "shadowtune trace record".
func newTraceRecordCommand() *cobra.Command {
	var o recordOptions
	cmd := &cobra.Command{
		Use:   "record --device DEV --duration D --out-file FILE",
		Short: "Record the block requests of a disk into a native trace",
		Long: `Record every block request of one or more disks for a while and write them
as a native trace: arrival (insert), dispatch (issue) and completion times
in ns, start sector and length in 512-byte sectors, operation, flags and
the submitting thread.

DEV is a device path (/dev/nvme0n1, /dev/disk/by-id/...), a kernel name
(loop3) or major:minor; it must be a whole disk, not a partition.

The eBPF tracer is used if the kernel allows it (root, BTF); otherwise
(or with --tracer tracefs) the kernel's block trace events are read from
a private tracefs instance, with microsecond times. Tracing stops after
--duration or at SIGINT/SIGTERM; the trace is written to a temporary
name beside FILE and renamed into place when complete. (-o/--output FILE
still works, as a deprecated alias of --out-file.)`,
		Example: `  # 30 s of a loop device, then a what-if on what was recorded
  sudo shadowtune trace record --device /dev/loop7 --duration 30s --out-file rec.st
  shadowtune simulate --trace rec.st --format native

  # two disks, tracefs only, to standard output
  sudo shadowtune trace record --device sda --device 259:0 --tracer tracefs --out-file - > rec.st`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTraceRecord(cmd, o) },
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.devices, "device", nil, "disk to trace: /dev/NAME, NAME or MAJ:MIN (repeatable; required)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to trace")
	addOutFileFlag(cmd, &o.out, "", "output file (native format), or - for standard output (required)", true)
	f.StringVar(&o.kind, "tracer", tracer.KindAuto, "tracer: auto (ebpf, else tracefs), ebpf or tracefs")
	_ = cmd.MarkFlagRequired("device")
	completeEnum(cmd, "tracer", tracerKinds...)
	return cmd
}

// runTraceRecord records o.devices for o.duration (or until SIGINT or
// SIGTERM) into o.out, reporting on cmd's standard error.
func runTraceRecord(cmd *cobra.Command, o recordOptions) error {
	devs, names, err := o.resolve()
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	tr, err := tracer.New(tracer.Options{Devices: devs, Kind: o.kind})
	if err != nil {
		return err
	}
	defer tr.Close()
	printTracerNotes(stderr, tr.Info())
	base := cmd.Context()
	if base == nil {
		base = context.Background()
	}
	ctx, stop := signal.NotifyContext(base, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	fmt.Fprintf(stderr, "recording %s for %v with the %s tracer\n", strings.Join(names, ", "), o.duration, tr.Kind())
	start := time.Now()
	n, err := writeAtomically(o.out, cmd.OutOrStdout(), func(w io.Writer) (int64, error) {
		return recordNative(ctx, cancel, tr, w)
	})
	if err != nil {
		return err
	}
	st := tr.Stats()
	fmt.Fprintf(stderr, "recorded %d requests in %.1f s with the %s tracer to %s; dropped %d, lost %d\n",
		n, time.Since(start).Seconds(), tr.Kind(), o.out, st.Dropped, st.Lost)
	if st.Dropped > 0 {
		what := "requests (ring buffer full)"
		if tr.Kind() == tracer.KindTracefs {
			what = "trace events (trace buffer overrun)"
		}
		fmt.Fprintf(stderr, "warning: the kernel dropped %d %s: the trace is incomplete\n", st.Dropped, what)
	}
	return nil
}

// resolve checks the options and resolves the devices: their numbers
// (tracer.Options.Devices) and names for the report, "NAME (MAJ:MIN)",
// each device once.
func (o recordOptions) resolve() (devs []uint32, names []string, err error) {
	if len(o.devices) == 0 {
		return nil, nil, badInputf("--device is required")
	}
	if o.duration <= 0 {
		return nil, nil, badInputf("--duration must be positive, got %v", o.duration)
	}
	if !slices.Contains([]string{tracer.KindAuto, tracer.KindEBPF, tracer.KindTracefs}, o.kind) {
		return nil, nil, badInputf("--tracer must be auto, ebpf or tracefs, got %q", o.kind)
	}
	for _, d := range o.devices {
		dev, name, err := tracer.ResolveDevice(d)
		if err != nil {
			return nil, nil, badInput(err)
		}
		if !slices.Contains(devs, dev) {
			devs = append(devs, dev)
			names = append(names, fmt.Sprintf("%s (%s)", name, tracer.DevString(dev)))
		}
	}
	return devs, names, nil
}

// printTracerNotes reports why eBPF is not used, if it is not, and the
// tracer's notes (but the eBPF one, then reported already).
func printTracerNotes(stderr io.Writer, info tracer.Info) {
	if info.EBPFError != nil {
		fmt.Fprintf(stderr, "ebpf tracer unavailable: %v; using tracefs\n", info.EBPFError)
	}
	for _, n := range info.Notes {
		if info.EBPFError == nil || !strings.HasPrefix(n, "ebpf unavailable") {
			fmt.Fprintf(stderr, "note: %s\n", n)
		}
	}
}

// recordNative runs tr until ctx ends, writing every request to w as a
// native trace, and returns the number of requests written. A write error
// cancels ctx (cancel) and ends the recording.
func recordNative(ctx context.Context, cancel context.CancelFunc, tr tracer.Tracer, w io.Writer) (int64, error) {
	tw, err := trace.NewNativeWriter(w, trace.WriterOptions{})
	if err != nil {
		return 0, err
	}
	var n int64
	var werr error
	rerr := tr.Run(ctx, func(batch []trace.Request) {
		for i := range batch {
			if werr != nil {
				return
			}
			if werr = tw.Write(&batch[i]); werr != nil {
				cancel()
				return
			}
			n++
		}
	})
	return n, errors.Join(rerr, werr, tw.Close())
}
