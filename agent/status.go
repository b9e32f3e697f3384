package agent

// The agent's status: the API's own device entries (v1alpha1.DeviceState),
// filled from a window's report.

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/window"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/engine"
)

// Status is the agent's view of its devices after a window: the host
// report of `shadowtune run -o json`, and what the cluster agent turns
// into its NodeStorageState status.
type Status struct {
	// Mode is the policy's mode; with several policies (Options.Policies),
	// Apply when any device is governed in Apply mode, else Observe.
	Mode    string   `json:"mode"`
	Tracer  string   `json:"tracer"`
	Notes   []string `json:"notes,omitempty"`
	Windows int      `json:"windows"`
	// UncleanRestart is when this agent started and found that the
	// previous run on its state directory had ended without a clean
	// shutdown (killed: out of memory, SIGKILL; a node crash); nil when it
	// had not.
	UncleanRestart *metav1.Time `json:"uncleanRestart,omitempty"`
	// Devices are the governed devices, in the NodeStorageState's schema.
	Devices []v1alpha1.DeviceState `json:"devices"`
	// Ungoverned are the host's other tunable disks, which no policy
	// selects: not traced, never changed, reported with their identity and
	// current setting only (Options.Policies only; virtual devices such as
	// loop devices are left out unless a policy governs them).
	Ungoverned []v1alpha1.DeviceState `json:"ungoverned,omitempty"`
}

// MarshalStatus encodes a status as indented JSON.
func MarshalStatus(st Status) ([]byte, error) { return json.MarshalIndent(st, "", "  ") }

// topCandidates returns the n fastest candidates of the report by the
// measure the decision ranks them by (rank, with each scheduler's
// dispatch charge: Report.Predicted), fastest first (ties by name), the
// current setting always included; predicted service times in µs, gains
// in percent of the current setting's measure.
func topCandidates(r *engine.Report, rank engine.Rank, n int) []v1alpha1.CandidateResult {
	type ranked struct {
		o    engine.Outcome
		pred float64
	}
	outs := make([]ranked, len(r.Outcomes))
	for i, o := range r.Outcomes {
		outs[i] = ranked{o, r.Predicted(rank, o)}
	}
	slices.SortStableFunc(outs, func(a, b ranked) int {
		if c := cmp.Compare(a.pred, b.pred); c != 0 {
			return c
		}
		return cmp.Compare(a.o.Candidate.Name(), b.o.Candidate.Name())
	})
	var cur float64
	at := -1
	for i, o := range outs {
		if o.o.Candidate.Name() == r.Current {
			cur, at = o.pred, i
		}
	}
	if len(outs) > n {
		if at >= n {
			outs = append(outs[:n-1], outs[at])
		} else {
			outs = outs[:n]
		}
	}
	out := make([]v1alpha1.CandidateResult, len(outs))
	for i, o := range outs {
		gain := 0.0
		if cur > 0 {
			gain = 100 * (cur - o.pred) / cur
		}
		out[i] = v1alpha1.CandidateResult{Name: CandidateSpec(o.o.Candidate),
			PredictedServiceTimeMicros: max(o.o.Result.TotalServiceNs/1000, 0), PredictedGainPercent: v1alpha1.FormatPercent(gain)}
	}
	return out
}

// CandidateSpec returns a candidate in the CLI's syntax, which
// engine.ParseCandidate reads back: "bfq", "bfq:slice_idle=0",
// "mq-deadline:fifo_batch=8,read_expire=100+redcap".
func CandidateSpec(c engine.Candidate) string {
	s := c.Scheduler
	if len(c.Tunables) > 0 {
		s += ":" + c.Tunables.String()
	}
	if c.Cache {
		s += "+redcap"
	}
	return s
}

// recommendationOf is the status of a window's recommendation.
func recommendationOf(rep window.Report, readAhead bool) *v1alpha1.Recommendation {
	t := rep.Target
	rec := &v1alpha1.Recommendation{Scheduler: t.Candidate.Scheduler, Tunables: tunablesText(t.Candidate.Tunables),
		Reason: rep.Reason, GainPercent: v1alpha1.FormatPercent(0)}
	if readAhead {
		rec.ReadAheadKiB = int32(t.ReadAheadKiB)
	}
	if r := rep.Report; r != nil {
		if r.Decision.Switch && rep.Reason == string(r.Decision.Reason) {
			rec.GainPercent = v1alpha1.FormatPercent(r.Decision.ImprovementPct)
		}
		rec.Redcap = r.ADA != nil && r.ADA.On
	}
	return rec
}

// tunablesText writes tunables as sysfs text.
func tunablesText(t engine.Tunables) map[string]string {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[k] = strconv.FormatInt(v, 10)
	}
	return out
}

// ungoverned are the status entries of the host's other tunable disks:
// identity and current setting, read from sysfs now (a disk that is gone
// is left out).
func ungoverned(hostRoot string, others []sysfs.Device) []v1alpha1.DeviceState {
	var out []v1alpha1.DeviceState
	for _, o := range others {
		sd, err := sysfs.Read(hostRoot, o.Name)
		if err != nil {
			continue // gone
		}
		out = append(out, v1alpha1.DeviceState{
			Name: sd.Name, Class: v1alpha1.DeviceClass(sd.Class().String()),
			MajorMinor: sd.MajorMinor, Model: sd.Model, Serial: sd.Serial, WWN: sd.WWN,
			SizeBytes: int64(min(sd.SizeBytes, 1<<63-1)), Rotational: sd.Rotational,
			Current: v1alpha1.DeviceSettings{Scheduler: sd.Scheduler, Tunables: sd.Tunables, ReadAheadKiB: int32(sd.ReadAheadKiB)},
		})
	}
	return out
}
