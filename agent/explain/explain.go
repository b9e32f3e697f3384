// Package explain writes the windows kept for replay (the agent's
// Options.ExplainDir): the requests, the model and the report of every
// window whose simulation decided a scheduler switch (made, awaiting
// confirmation or held back) or predicted one that it did not reproduce
// the window well enough to make, so that the prediction can be examined
// and replayed with `shadowtune simulate` after the fact. The device's
// controller (agent/window) hands them over through the function Hook
// returns (window.Controller.SetExplain).
package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/fsutil"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Keep is how many windows a directory keeps per device: the newest;
// older ones are removed as new ones are written. A window is at most
// Policy.MaxSimulated requests (about 10 bytes each in the native trace)
// plus its model, so the directory stays bounded.
const Keep = 16

// Suffixes of one kept window's files, after DEVICE-TIME.
const (
	explainTrace  = ".trace"       // the simulated requests, native format
	explainModel  = ".model.json"  // the model they were simulated with
	explainReport = ".report.json" // every candidate's outcome and the decision
)

// Writer writes kept windows to Dir and logs to Log those it cannot.
type Writer struct {
	Dir string
	Log logr.Logger
}

// Hook returns the controller's explain function for device dev, or nil
// when no directory is set. A window that cannot be written is logged and
// the decision goes on.
func (x Writer) Hook(dev string) func(time.Time, []trace.Request, *model.Model, engine.Report) {
	if x.Dir == "" {
		return nil
	}
	return func(now time.Time, reqs []trace.Request, m *model.Model, er engine.Report) {
		if err := x.save(dev, now, reqs, m, er); err != nil {
			x.Log.Error(err, "keep the window of a switch decision", "device", dev)
		}
	}
}

// save writes DIR/DEV-TIME{.trace,.model.json,.report.json}, TIME being
// now in UTC to the millisecond, and then removes the device's windows
// beyond the newest Keep. Errors: the directory or a file could not
// be written (wrapped with its path; fsutil.WriteAtomic makes the
// directory).
func (x Writer) save(dev string, now time.Time, reqs []trace.Request, m *model.Model, er engine.Report) error {
	base := filepath.Join(x.Dir, dev+"-"+now.UTC().Format("20060102T150405.000Z"))
	writeTrace := func(w io.Writer) error {
		tw, err := trace.NewNativeWriter(w, trace.WriterOptions{})
		if err != nil {
			return err
		}
		for i := range reqs {
			if err := tw.Write(&reqs[i]); err != nil {
				return err
			}
		}
		return tw.Close()
	}
	// Without the per-request response times and the cache's contents:
	// the decision's figures, not the window again.
	er.CacheContents = nil
	er.Outcomes = slices.Clone(er.Outcomes)
	for i := range er.Outcomes {
		er.Outcomes[i].Result.ResponseNs = nil
	}
	writeReport := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(er)
	}
	for _, f := range []struct {
		suffix string
		write  func(io.Writer) error
	}{{explainTrace, writeTrace}, {explainModel, m.Save}, {explainReport, writeReport}} {
		if err := fsutil.WriteAtomic(base+f.suffix, 0o644, f.write); err != nil {
			return fmt.Errorf("%s: %w", base+f.suffix, err)
		}
	}
	return x.prune(dev)
}

// prune removes dev's kept windows beyond the newest Keep (their
// names sort by time).
func (x Writer) prune(dev string) error {
	traces, err := filepath.Glob(filepath.Join(x.Dir, dev+"-*"+explainTrace))
	if err != nil {
		return err
	}
	// Another device's name may extend this one's (sda, sda1): keep only
	// names whose remainder is a time.
	traces = slices.DeleteFunc(traces, func(p string) bool {
		ts := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), dev+"-"), explainTrace)
		_, err := time.Parse("20060102T150405.000Z", ts)
		return err != nil
	})
	slices.Sort(traces)
	for _, p := range traces[:max(len(traces)-Keep, 0)] {
		base := strings.TrimSuffix(p, explainTrace)
		for _, s := range []string{explainTrace, explainModel, explainReport} {
			if err := os.Remove(base + s); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}
