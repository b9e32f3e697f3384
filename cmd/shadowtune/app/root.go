// Package app implements the shadowtune command line (cobra); only
// cmd/shadowtune (package main) imports it.
package app

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/internal/version"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command failed for a reason other than its input
	ExitUsage   = 2 // bad flags, arguments or input files
)

// inputError marks an error caused by the user's input (flags, files,
// trace contents); it exits with ExitUsage.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// badInput wraps err as an input error.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return inputError{err}
}

// badInputf formats an input error.
func badInputf(format string, args ...any) error {
	return inputError{fmt.Errorf(format, args...)}
}

// NewRootCommand returns the shadowtune command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "shadowtune",
		Short: "Tune Linux block storage by shadow simulation",
		Long: `shadowtune records the block I/O of a disk, learns a model of the disk,
replays the recorded I/O in virtual time under every alternative setting
(I/O scheduler and tunables, read-ahead, a block cache) and recommends or
applies the setting predicted to be fastest.`,
		Example: `  # what-if on a shipped real trace, no root needed
  shadowtune simulate --trace testdata/traces/blkreplay/linux-webserver-2.load.gz --format blkreplay

  # the agent on this host, as root: observe (or apply) per a StorageTuning policy
  shadowtune run --config examples/storagetuning-observe.yaml --duration 1m

  # shell completion (flags with a fixed set of values complete to them)
  source <(shadowtune completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	root.AddCommand(
		newSimulateCommand(),
		newRunCommand(),
		newAgentCommand(),
		newModelCommand(),
		newTraceCommand(),
		newOperatorCommand(),
		newCleanupCommand(),
		newStateCommand(),
		newVersionCommand(),
		newBenchPlotCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: "  shadowtune version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String())
			return err
		},
	}
}

// Main runs the command line with args and returns the exit status. Errors
// are printed as one line on stderr: "shadowtune: error: ...".
func Main(args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "shadowtune: error: %s\n", errorLine(err.Error(), MaxErrorBytes))
	var in inputError
	if errors.As(err, &in) || isCobraUsageError(err) {
		return ExitUsage
	}
	return ExitFailure
}

// MaxErrorBytes bounds the message Main prints after "shadowtune: error: ",
// in bytes: an error that quotes a huge input (a 100 MB field value, a
// binary line) is cut, so that the error stays one readable line.
const MaxErrorBytes = 512

// errorLine folds msg onto one line (newlines become "; ") and cuts it to
// at most limit bytes, at a UTF-8 boundary, ending it with "… (N more
// bytes)" when it was cut.
func errorLine(msg string, limit int) string {
	msg = strings.ReplaceAll(strings.TrimSpace(msg), "\r", "")
	msg = strings.ReplaceAll(msg, "\n", "; ")
	if len(msg) <= limit {
		return msg
	}
	// Leave room for the suffix, which is at most 40 bytes.
	cut := max(limit-40, 0)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", msg[:cut], len(msg)-cut)
}

// isCobraUsageError recognises cobra's own argument and command errors,
// which it does not type.
func isCobraUsageError(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "required flag", "invalid argument",
		"at least one of the flags in the group", "none of the others can be"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
