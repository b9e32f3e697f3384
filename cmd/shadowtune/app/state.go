package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/openfiles"
	"github.com/shadowtune/shadowtune/agent/schedcost"
)

// newStateCommand is `shadowtune state`: the host operator's view of the
// agent's records of original settings.
func newStateCommand() *cobra.Command {
	var stateDir, hostRoot, hostToolsRoot, claimDir string
	cmd := &cobra.Command{
		Use:   "state",
		Short: "List or forget the records of original device settings kept in the state directory",
		Long: `The agent records a device's original settings in STATEDIR/DEV.json before its
first change, and removes the record when it has put them back. 'state list'
shows the records and whether each device is still there ("present": a revert
restores it), gone or replaced by another device ("gone": a revert skips it;
nothing the agent wrote is in effect on the new device), or unreadable ("bad").
'state forget DEVICE' removes the record of a gone device, or a bad file,
without touching any device.`,
		Example: `  sudo shadowtune state list
  sudo shadowtune state forget loop3`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&stateDir, "state-dir", agent.DefaultStateDir, "the agent's state directory")
	_ = cmd.MarkPersistentFlagDirname("state-dir")
	pf.StringVar(&hostRoot, "host-root", "", "prefix of the host's /sys (e.g. /host in a container)")
	pf.StringVar(&hostToolsRoot, "host-tools-root", "", hostToolsRootUsage)
	_ = cmd.MarkPersistentFlagDirname("host-tools-root")
	pf.StringVar(&claimDir, "claim-dir", "", "device claims (default HOST-ROOT"+actuate.DefaultClaimDir+")")
	opts := func() actuate.Options {
		o := actuate.Options{HostRoot: hostRoot, StateDir: stateDir, ClaimDir: claimDir}
		if t := cacheTool(logr.Discard(), hostToolsRoot); t != nil {
			o.Caches = t
		}
		return o
	}

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the recorded devices (read-only; safe while an agent runs)",
		Example: `  sudo shadowtune state list
  shadowtune state list --state-dir /tmp/st -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return badInputf("--output: want table or json, got %q", output)
			}
			recs, err := actuate.List(opts())
			if err != nil {
				return err
			}
			return printStateList(cmd.OutOrStdout(), recs, output)
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	completeEnum(list, "output", outputFormats...)

	var force bool
	forget := &cobra.Command{
		Use:   "forget DEVICE",
		Short: "Remove the record of a device that is gone or replaced, or a bad record, without touching any device",
		Example: `  # a loop device that was detached while changed
  sudo shadowtune state forget loop3

  # a device still present: keep its current settings, drop the record
  sudo shadowtune state forget sdb --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev := args[0]
			a, err := actuate.Open(opts())
			if err != nil {
				return err
			}
			defer a.Close()
			_, had := a.Original(dev)
			_, bad := a.BadRecords()[dev]
			if !had && !bad {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "no record of %s in %s\n", dev, a.StateDir())
				return err
			}
			if force {
				err = a.ForceForget(dev)
			} else {
				err = a.Forget(dev)
			}
			if errors.Is(err, actuate.ErrInvalidSetting) {
				return badInput(err)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "forgot %s: removed its record from %s\n", dev, a.StateDir())
			return err
		},
	}
	forget.Flags().BoolVar(&force, "force", false, "forget even a device that is still there (it keeps its current settings; nothing will restore its original)")
	cmd.AddCommand(list, forget)
	return cmd
}

func printStateList(w io.Writer, recs []actuate.RecordStatus, output string) error {
	if output == "json" {
		if recs == nil {
			recs = []actuate.RecordStatus{}
		}
		b, err := json.MarshalIndent(recs, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSTATUS\tDEV\tRECORDED\tORIGINAL\tOWNER\tPROBLEM")
	for _, r := range recs {
		recorded, orig, owner := "-", "-", "-"
		if r.RecordedAt != nil {
			recorded = r.RecordedAt.Format("2006-01-02T15:04:05Z07:00")
		}
		if r.Original != nil {
			orig = fmt.Sprintf("%s ra=%dKiB", orDash(r.Original.Scheduler), r.Original.ReadAheadKiB)
			if r.Interrupted {
				orig += " (change interrupted)"
			}
		}
		if r.CacheMode != "" {
			orig = "cache mode " + r.CacheMode
		}
		if r.Owner != nil {
			state := "exited"
			if r.Owner.Live {
				state = "running"
			}
			owner = fmt.Sprintf("%s pid %d (%s)", r.Owner.StateDir, r.Owner.PID, state)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Device, r.Status, orDash(r.Dev), recorded, orig, owner,
			orDash(oneLine(r.Problem)))
	}
	return tw.Flush()
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

// hostToolsRootUsage is the help of --host-tools-root.
const hostToolsRootUsage = "run the host's own dmsetup and lvm chrooted into this directory, where the host's root file system is mounted (e.g. /host in a container; default: dmsetup and lvm from PATH)"

// cacheTool is the dm-cache tool the agent and the revert use: dmsetup
// and lvm from PATH, or the host's, chrooted into hostToolsRoot when it
// is not "". It is nil when dmsetup is not installed (logged at level 1)
// or not found in hostToolsRoot (logged at level 0: it was asked for).
func cacheTool(log logr.Logger, hostToolsRoot string) dmcache.Caches {
	t, err := dmcache.NewGovernor(hostToolsRoot)
	if err != nil {
		if hostToolsRoot != "" {
			log.Info(err.Error())
		} else {
			log.V(1).Info(err.Error())
		}
		return nil
	}
	return t
}

// runRevert is `shadowtune run --revert`: restore every device recorded in
// f.stateDir. It prints the devices restored, then each one skipped and
// why; it fails (exit 1) when a device that is still there was not
// restored. A device gone or replaced is reported, not a failure: nothing
// written by the agent is in effect on it. With f.followOpenFiles the
// files open on a restored disk that follow its read-ahead are brought
// back with it (log says what was done, or why it could not be).
func runRevert(stdout io.Writer, log logr.Logger, f *runFlags) error {
	o := actuate.Options{HostRoot: f.hostRoot, StateDir: f.stateDir}
	if t := cacheTool(logr.Discard(), f.hostToolsRoot); t != nil {
		o.Caches = t
		o.Volumes, _ = t.(actuate.CacheVolumes)
	}
	a, err := actuate.Open(o)
	if err != nil {
		return err
	}
	defer a.Close()
	// Under the state directory's lock: a calibration device a killed
	// agent left bound on another scheduler is put back and freed; one
	// that cannot be is a device not restored (exit 1), reported last.
	calErr := schedcost.Recover(f.hostRoot, f.stateDir)
	var fo *openfiles.Follower
	if f.followOpenFiles {
		if fo, err = openfiles.New(f.hostRoot, f.stateDir, log.WithName("openfiles"), nil); err != nil {
			log.Info("read-ahead restored only for the files opened after it", "reason", err.Error())
			fo = nil
		} else {
			defer fo.Close()
			a.SetReadAheadFollower(fo)
		}
	}
	if lvs, errs := a.Recovered(); len(lvs)+len(errs) > 0 {
		fmt.Fprintf(stdout, "recovered %d volume(s) whose cache device was lost with the previous boot: %v\n", len(lvs), lvs)
		for _, e := range errs {
			fmt.Fprintf(stdout, "not recovered: %s\n", oneLine(e.Error()))
		}
	}
	done, err := a.RevertAll()
	if done == nil {
		done = []string{}
	}
	fmt.Fprintf(stdout, "restored %d device(s): %v\n", len(done), done)
	if err == nil {
		if calErr != nil {
			return fmt.Errorf("the calibration device not restored: %w", calErr)
		}
		return nil
	}
	var re *actuate.RevertError
	if !errors.As(err, &re) {
		return err
	}
	for _, d := range re.RecordKept {
		fmt.Fprintf(stdout, "restored %s, but its record stays: %s\n", d.Device, oneLine(d.Err.Error()))
	}
	for _, d := range re.Left {
		var left *actuate.LeftError
		if errors.As(d.Err, &left) {
			for _, l := range left.Left {
				fmt.Fprintf(stdout, "%s: %s\n", d.Device, l)
			}
		}
	}
	for _, d := range re.Gone {
		fmt.Fprintf(stdout, "skipped %s: gone or replaced, not touched (shadowtune state forget %s --state-dir %s): %s\n",
			d.Device, d.Device, a.StateDir(), oneLine(d.Err.Error()))
	}
	var failed []string
	for _, d := range re.Failed {
		fmt.Fprintf(stdout, "not restored %s: %s\n", d.Device, oneLine(d.Err.Error()))
		failed = append(failed, d.Device)
	}
	if calErr != nil {
		fmt.Fprintf(stdout, "not restored the calibration device: %s\n", oneLine(calErr.Error()))
		failed = append(failed, "the calibration device")
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d device(s) not restored: %s (see above)", len(failed), strings.Join(failed, ", "))
	}
	return nil
}
