package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func newTraceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Work with block traces",
		Example: `  shadowtune trace formats
  sudo shadowtune trace record --device /dev/loop7 --duration 30s --out-file rec.st
  shadowtune trace convert --from native --to fio-iolog --target /dev/loop7 -i rec.st --out-file rec.iolog`,
	}
	cmd.AddCommand(newTraceConvertCommand(), newTraceFormatsCommand(), newTraceRecordCommand())
	return cmd
}

func newTraceFormatsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "formats",
		Short:   "List the trace formats shadowtune reads and writes",
		Example: "  shadowtune trace formats",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			for _, f := range trace.Formats() {
				rw := "read"
				if f.NewWriter != nil {
					rw = "read/write"
				}
				if _, err := fmt.Fprintf(w, "%-10s %-10s %s\n", f.Name, rw, f.Doc); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newTraceConvertCommand() *cobra.Command {
	var (
		in, out, from, to, target string
		head                      int
	)
	cmd := &cobra.Command{
		Use:   "convert --from FMT --to FMT -i IN --out-file OUT",
		Short: "Convert a trace between formats",
		Long: `Convert a trace between formats. gzip input is read transparently.
It streams: memory stays constant whatever the length of the trace.
--head N converts only the first N requests (a sample of a trace too long
for 'simulate' or 'model eval', whose --max-requests bounds their memory).
Writing the fio-iolog format produces a version 3 iolog that
'fio --read_iolog=FILE' replays against --target.

The output file is written to a temporary name beside it and renamed into
place only when the whole trace converted, so a bad input leaves no partial
output behind. (-o/--output FILE still works, as a deprecated alias of --out-file.)`,
		Example: `  # a DiskSim trace to the native format, and back
  shadowtune trace convert --from disksim --to native -i testdata/traces/disksim/atlas10k.trace --out-file atlas10k.st
  shadowtune trace convert --from native --to disksim -i atlas10k.st --out-file atlas10k.trace

  # the first 100,000 requests of a long trace, for simulate
  shadowtune trace convert --from blkreplay -i big.load.gz --head 100000 --out-file sample.st

  # a recorded trace as a fio iolog, replayed by fio on another disk
  shadowtune trace convert --from native --to fio-iolog --target /dev/loop7 -i rec.st --out-file rec.iolog
  fio --name=replay --read_iolog=rec.iolog`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wf, err := trace.Lookup(to)
			if err != nil {
				return badInput(err)
			}
			if wf.NewWriter == nil {
				return badInputf("trace format %q cannot be written", to)
			}
			if head < 0 {
				return badInputf("--head: must be ≥ 0, got %d", head)
			}
			r, c, err := trace.OpenFile(from, in)
			if err != nil {
				return badInput(err)
			}
			defer c.Close()
			r = trace.Head(r, head)
			n, err := writeAtomically(out, cmd.OutOrStdout(), func(dst io.Writer) (int64, error) {
				tw, err := wf.NewWriter(dst, trace.WriterOptions{Target: target})
				if err != nil {
					return 0, err
				}
				n, err := trace.Convert(r, tw)
				if err == nil && n == 0 {
					// Fail inside the write: the temporary file is
					// discarded and an existing output stays as it was.
					err = badInputf("%s: %v", in, trace.ErrEmpty)
				}
				return n, err
			})
			if err != nil {
				var pe *trace.ParseError
				if errors.As(err, &pe) {
					return badInput(err)
				}
				return err
			}
			if out != "-" {
				fmt.Fprintf(cmd.ErrOrStderr(), "converted %d requests from %s (%s) to %s (%s)\n", n, in, from, out, to)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&in, "input", "i", "", "input trace file (required)")
	addOutFileFlag(cmd, &out, "-", "output file, or - for standard output", false)
	f.StringVar(&from, "from", "", "input format: "+trace.FormatNames()+" (required)")
	f.StringVar(&to, "to", "native", "output format")
	f.IntVar(&head, "head", 0, "convert only the first N requests (0: all)")
	f.StringVar(&target, "target", "", "device or file named in formats that name one (fio-iolog); default /dev/sdX")
	_ = cmd.MarkFlagRequired("input")
	_ = cmd.MarkFlagRequired("from")
	completeEnum(cmd, "from", traceFormatNames()...)
	completeEnum(cmd, "to", traceFormatNames()...)
	return cmd
}

// writeAtomically runs write against path through a temporary file that
// is renamed into place (mode 0644, fsynced) once write succeeded, or
// against stdout when path is "-". write returns the number of records it
// wrote; callers that refuse an empty output check it themselves (and
// then remove the file), so an idle recording still gives an empty trace.
func writeAtomically(path string, stdout io.Writer, write func(io.Writer) (int64, error)) (int64, error) {
	if path == "-" {
		bw := bufio.NewWriterSize(stdout, 256<<10)
		n, err := write(bw)
		if err != nil {
			return n, err
		}
		return n, bw.Flush()
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+strings.TrimPrefix(base, ".")+".tmp-*")
	if err != nil {
		return 0, badInputf("create output: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 256<<10)
	n, err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, fmt.Errorf("rename output: %w", err)
	}
	ok = true
	return n, nil
}
