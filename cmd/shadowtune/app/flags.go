package app

import (
	"time"

	"fmt"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// The conventions every command follows:
//   - -o/--output is always an output format (table or json);
//   - a file a command writes is named with --out-file.
//
// model learn, model train, trace record and trace convert took their
// output file as -o/--output before; addOutFileFlag keeps that spelling
// working there as a hidden, deprecated alias of --out-file. The warning is
// written to stderr by the command itself rather than by pflag's
// MarkDeprecated: cobra prints flag deprecations on the command's output
// stream, which is where 'model learn -o -' writes the model.

// deprecatedOutputWarning is printed on stderr when a command that writes a
// file is given -o/--output.
const deprecatedOutputWarning = "shadowtune: warning: -o/--output FILE is deprecated here and will be removed: use --out-file FILE (-o/--output names an output format elsewhere)"

// addOutFileFlag defines --out-file on cmd, bound to p with default def,
// and the old -o/--output spelling as its hidden deprecated alias. The two
// exclude each other; required makes one of them required.
func addOutFileFlag(cmd *cobra.Command, p *string, def, usage string, required bool) {
	fl := cmd.Flags()
	fl.StringVar(p, "out-file", def, usage)
	fl.StringVarP(p, "output", "o", def, "deprecated: use --out-file")
	_ = fl.MarkHidden("output")
	_ = cmd.MarkFlagFilename("out-file")
	cmd.MarkFlagsMutuallyExclusive("out-file", "output")
	if required {
		cmd.MarkFlagsOneRequired("out-file", "output")
	}
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		// Both given: cobra refuses the pair, in one line, after this.
		if c.Flags().Changed("output") && !c.Flags().Changed("out-file") {
			fmt.Fprintln(c.ErrOrStderr(), deprecatedOutputWarning)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// Values of the enum flags, for shell completion.
var (
	outputFormats = []string{"table", "json"}
	// deviceClasses are the classes of a model learned from a trace;
	// throttled needs one that shows the caps (model.EstimateThrottle),
	// so model train, which runs at depth 1, offers only trainClasses.
	deviceClasses = []string{"hdd", "ssd", "nvme", "throttled"}
	trainClasses  = []string{"auto", "hdd", "ssd", "nvme"}
	tracerKinds   = []string{tracer.KindAuto, tracer.KindEBPF, tracer.KindTracefs}
)

// traceFormatNames lists the trace formats by name.
func traceFormatNames() []string {
	var names []string
	for _, f := range trace.Formats() {
		names = append(names, f.Name)
	}
	return names
}

// completeEnum registers a shell completion of flag to one of values (and
// no file names).
func completeEnum(cmd *cobra.Command, flag string, values ...string) {
	if err := cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(fmt.Sprintf("completion of --%s: %v", flag, err)) // a programming error: the flag is not defined
	}
}

// completeZapFlags registers completions for the zap logging flags that
// controller-runtime's zap.Options binds (agent, operator).
func completeZapFlags(cmd *cobra.Command) {
	completeEnum(cmd, "zap-log-level", "debug", "info", "error", "panic")
	completeEnum(cmd, "zap-stacktrace-level", "info", "error", "panic")
	completeEnum(cmd, "zap-encoder", "json", "console")
	completeEnum(cmd, "zap-time-encoding", "epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")
}

// traceSampleUsage documents --trace-sample of run and agent.
const followOpenFilesUsage = "opt-in: bring the files already open on a disk to each read_ahead_kb the agent writes, through pidfd_getfd and fadvise on other processes' descriptors (the kernel gives a file the device's read-ahead only when it is opened); needs the host's PID namespace"

const traceSampleUsage = "the traced part of a settled device's window, whose tracing is paused for the rest to cost the application less; every window is still evaluated (0: trace every window whole)"

// traceSample maps --trace-sample to agent.Options.TraceSample, where 0
// takes the default and a negative value traces windows whole.
func traceSample(flag time.Duration) time.Duration {
	if flag <= 0 {
		return -1
	}
	return flag
}
