package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shadowtune/shadowtune/agent/schedcost"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/plot"
	"github.com/shadowtune/shadowtune/internal/readahead"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

type simulateFlags struct {
	tracePath, format string
	candidates        []string
	extra             []string
	current           string
	redcap            string
	modelPath         string
	class             string
	servers           int
	tags              int
	dispatchCosts     string
	cpus              int
	loop              string
	predict           string
	seed              int64
	margin            float64
	output            string
	raMin, raMax      int
	cacheMiB          int
	cacheModel        string
	cacheBlockKiB     int
	cacheHitUs        float64
	parallel          int
	maxRequests       int
	plot              string
}

func newSimulateCommand() *cobra.Command {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate --trace FILE --format FMT",
		Short: "Replay a trace under every candidate setting and recommend one (what-if)",
		Long: `Replay a recorded trace in virtual time under every candidate I/O scheduler
(and, with --redcap, with the REDCAP RAM cache on and off), using a disk model,
and print per candidate the total service time, the mean and p99 response
time and the number of requests simulated; then the recommendation: switch
or stay (DADS §4.2 rule: switch when T_best + T_change < (1 − margin)·T_current),
REDCAP on or off (KDSim §4.1 ADA), and the competitive read-ahead depth.

The disk model is, in order of preference: --model FILE; learned from the
trace itself when it carries measured service times; otherwise the
documented parametric default for --device-class.

--plot FILE.svg draws each candidate's response-time CDF (see
docs/pictures.md).`,
		Example: `  # a production web server's hour, open loop on the default HDD model
  shadowtune simulate --trace testdata/traces/blkreplay/linux-webserver-2.load.gz --format blkreplay

  # a trace with measured service times, closed loop on a model learned from it, REDCAP on and off
  shadowtune simulate --trace testdata/traces/disksim/atlas10k.trace --format disksim --redcap both

  # extra candidates with tunables, JSON output and the CDFs drawn
  shadowtune simulate --trace rec.st --format native --device-class ssd \
      --candidate 'bfq:slice_idle=0' --candidate 'mq-deadline:fifo_batch=8' -o json --plot cdf.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd.OutOrStdout(), &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.tracePath, "trace", "", "trace file (required; gzip is read transparently)")
	fl.StringVar(&f.format, "format", "", "trace format: "+trace.FormatNames()+" (required)")
	fl.StringSliceVar(&f.candidates, "candidates", sched.Names(), "schedulers to simulate, comma separated")
	fl.StringArrayVar(&f.extra, "candidate", nil, "an extra candidate with tunables, e.g. 'bfq:slice_idle=0' or 'mq-deadline:fifo_batch=8,read_expire=100' (repeatable)")
	fl.StringVar(&f.current, "current", "", "the setting in effect (default: mq-deadline, or none for nvme, as Linux picks)")
	fl.StringVar(&f.redcap, "redcap", "off", "simulate the REDCAP RAM cache: on, off or both")
	fl.IntVar(&f.cacheMiB, "redcap-mib", 64, "cache size in MiB (REDCAP: segments of 128 KiB; smq: blocks of --cache-block-kib)")
	fl.StringVar(&f.cacheModel, "cache-model", "redcap", "the cache --redcap simulates: redcap (KDSim's RAM cache of segments) or smq (dm-cache's smq policy, as calibrated in the VM lab)")
	fl.IntVar(&f.cacheBlockKiB, "cache-block-kib", 64, "smq: dm-cache's block size in KiB (a multiple of 32, up to 1 GiB)")
	fl.Float64Var(&f.cacheHitUs, "cache-hit-us", 0, "time to serve a read from the cache, µs: the cache device's read time (default: 1, a RAM copy)")
	fl.StringVar(&f.modelPath, "model", "", "trained disk model (JSON from 'shadowtune model learn')")
	fl.StringVar(&f.class, "device-class", "hdd", "device class for the default model and scheduler defaults: hdd, ssd, nvme, or throttled (caps estimated from the trace's service times)")
	fl.IntVar(&f.servers, "servers", 0, "requests the device serves in parallel, k (default: from the model, or learned from the trace)")
	fl.IntVar(&f.tags, "tags", -1, "requests the device accepts at once, its tag depth; beyond k they wait in the device, not the elevator (ssd and nvme models; default: the most the trace had outstanding; 0: one per server, as the papers' disks)")
	fl.StringVar(&f.dispatchCosts, "dispatch-costs", "", "charge each scheduler's CPU time per request beyond none's (engine.Options.DispatchCostNs): 'prior' (BFQ's documented figures) or the agent's state directory, whose node/scheduler-costs.json it measured (default: none charged, the papers' criterion)")
	fl.IntVar(&f.cpus, "cpus", 0, "CPUs that share the dispatch cost (default: this machine's, or the measured costs' own)")
	fl.StringVar(&f.loop, "loop", "auto", "replay: open (recorded arrivals), closed (dependent requests follow simulated completions), auto")
	fl.StringVar(&f.predict, "predict", "mean", "model predictions: mean (cell mean) or sample (seeded draw from the cell's last 64 times)")
	fl.Int64Var(&f.seed, "seed", 1, "seed for every random choice (same input and seed, same output)")
	fl.Float64Var(&f.margin, "margin", decide.DefaultMarginPct, "switch only when the gain exceeds this margin, %")
	fl.IntVar(&f.raMin, "read-ahead-min", readahead.DefaultMinKiB, "smallest read-ahead to recommend, KiB")
	fl.IntVar(&f.raMax, "read-ahead-max", readahead.DefaultMaxKiB, "largest read-ahead to recommend, KiB")
	fl.IntVar(&f.parallel, "parallel", 0, "candidates simulated at once (default: number of CPUs, fewer if more would not fit in 512 MiB)")
	fl.StringVarP(&f.output, "output", "o", "table", "output: table or json")
	fl.StringVar(&f.plot, "plot", "", "draw each candidate's response-time CDF"+plotFlagUsage)
	addMaxRequestsFlag(fl, &f.maxRequests, defaultMaxSimulateRequests)
	_ = cmd.MarkFlagRequired("trace")
	_ = cmd.MarkFlagRequired("format")
	_ = cmd.MarkFlagFilename("plot", "svg")
	completeEnum(cmd, "format", traceFormatNames()...)
	completeEnum(cmd, "candidates", sched.Names()...)
	completeEnum(cmd, "redcap", "on", "off", "both")
	completeEnum(cmd, "cache-model", "redcap", "smq")
	completeEnum(cmd, "device-class", deviceClasses...)
	completeEnum(cmd, "loop", "auto", "open", "closed")
	completeEnum(cmd, "predict", "mean", "sample")
	completeEnum(cmd, "output", outputFormats...)
	return cmd
}

// simulateCosts reads --dispatch-costs: no costs, schedcost.Prior, or
// the costs saved in a state directory; --cpus, when set, replaces their
// CPU count.
func simulateCosts(flag string, cpus int) (schedcost.Costs, error) {
	if cpus < 0 {
		return schedcost.Costs{}, badInput(fmt.Errorf("--cpus must be ≥ 0, got %d", cpus))
	}
	var c schedcost.Costs
	switch flag {
	case "":
		return c, nil
	case "prior":
		c = schedcost.Prior(runtime.NumCPU())
	default:
		var err error
		if c, err = schedcost.Load(flag); err != nil {
			return c, badInput(fmt.Errorf("--dispatch-costs: %w", err))
		}
		if len(c.PerRequestNs) == 0 {
			return c, badInput(fmt.Errorf("--dispatch-costs: no measured costs in %s", filepath.Join(flag, schedcost.FileName)))
		}
	}
	if cpus > 0 {
		c.CPUs = cpus
	}
	return c, nil
}

// simulateTags is the --tags flag's value, or by default the most
// requests the trace had outstanding at the device.
func simulateTags(flag int, reqs []trace.Request) int {
	if flag >= 0 {
		return flag
	}
	return model.MaxInFlight(reqs)
}

// simulateReport is the stable JSON output of `shadowtune simulate`.
type simulateReport struct {
	Trace       string    `json:"trace"`
	Format      string    `json:"format"`
	Requests    int       `json:"requests"`
	SpanSeconds float64   `json:"spanSeconds"`
	Loop        string    `json:"loop"`
	Model       modelInfo `json:"model"`
	// Cache is the simulated cache, when --redcap simulates one; the
	// candidates with "redcap": true (named NAME+redcap) carry it.
	Cache          *cacheInfo        `json:"cache,omitempty"`
	Candidates     []candidateReport `json:"candidates"`
	Recommendation recommendation    `json:"recommendation"`
	Run            runStats          `json:"run"`
}

type modelInfo struct {
	Source  string `json:"source"` // file, trace or default
	Class   string `json:"class"`
	Servers int    `json:"servers"`
	Predict string `json:"predict"`
	// Throttle is a throttled model's caps (model.Throttle).
	Throttle *model.Throttle `json:"throttle,omitempty"`
}

type candidateReport struct {
	Name               string  `json:"name"`
	Scheduler          string  `json:"scheduler"`
	Tunables           string  `json:"tunables"`
	Redcap             bool    `json:"redcap"`
	TotalServiceTimeUs float64 `json:"totalServiceTimeUs"`
	MeanResponseTimeUs float64 `json:"meanResponseTimeUs"`
	P99ResponseTimeUs  float64 `json:"p99ResponseTimeUs"`
	SimulatedRequests  int     `json:"simulatedRequests"`
	DeviceRequests     int     `json:"deviceRequests"`
	MergedRequests     int     `json:"mergedRequests"`
	MakespanSeconds    float64 `json:"makespanSeconds"`
	VsCurrentPct       float64 `json:"vsCurrentPct"`
	// DispatchCharge is the factor the candidate's scheduler's CPU cost
	// multiplied its total by (--dispatch-costs); absent when 1.
	DispatchCharge      float64 `json:"dispatchCharge,omitempty"`
	CacheHitPct         float64 `json:"cacheHitPct,omitempty"`
	CacheBypassedReads  uint64  `json:"cacheBypassedReads,omitempty"`
	CacheFetchedSectors uint64  `json:"cacheFetchedSectors,omitempty"`
}

type recommendation struct {
	Current        string       `json:"current"`
	Scheduler      string       `json:"scheduler"`
	Switch         bool         `json:"switch"`
	ImprovementPct float64      `json:"improvementPct"`
	Reason         string       `json:"reason"`
	Message        string       `json:"message"`
	ReadAheadKiB   int          `json:"readAheadKiB"`
	ReadAhead      readAheadWhy `json:"readAhead"`
	Redcap         *redcapRec   `json:"redcap,omitempty"`
}

type readAheadWhy struct {
	SwitchCostUs        float64 `json:"switchCostUs"`
	TransferMBPerSecond float64 `json:"transferMBPerSecond"`
	Concurrency         float64 `json:"concurrency"`
	Note                string  `json:"note,omitempty"`
}

type redcapRec struct {
	On               bool    `json:"on"`
	GainPct          float64 `json:"gainPct"`
	RedcapNsPerBlock float64 `json:"redcapNsPerBlock"`
	NormalNsPerBlock float64 `json:"normalNsPerBlock"`
}

type runStats struct {
	WallSeconds       float64 `json:"wallSeconds"`
	SimulateSeconds   float64 `json:"simulateSeconds"`
	SimulatedRequests int     `json:"simulatedRequests"`
	RequestsPerSecond float64 `json:"simulatedRequestsPerSecond"`
	SpeedupVsRealTime float64 `json:"speedupVsRealTime"`
	PeakRSSBytes      int64   `json:"peakRSSBytes"`
}

func runSimulate(stdout io.Writer, f *simulateFlags) error {
	start := time.Now()
	if f.output != "table" && f.output != "json" {
		return badInputf("--output: want table or json, got %q", f.output)
	}
	if err := checkPlotPath(f.plot); err != nil {
		return err
	}
	o, err := parseSimulateOptions(f)
	if err != nil {
		return err
	}

	reqs, err := readTrace(f.format, f.tracePath, f.maxRequests)
	if err != nil {
		return err
	}
	w, err := sim.NewWindow(reqs, o.loop)
	if err != nil {
		return badInput(err)
	}
	m, source, err := chooseModel(f.modelPath, reqs, o.class)
	if err != nil {
		return err
	}
	if f.servers > 0 {
		m.SetServers(f.servers)
	}

	// For --plot, each candidate keeps as many exact quantiles of its
	// response times as a CDF is drawn with: bounded, whatever the trace.
	quantiles := 0
	if f.plot != "" {
		quantiles = plot.MaxCDFPoints
	}
	costs, err := simulateCosts(f.dispatchCosts, f.cpus)
	if err != nil {
		return err
	}
	cc := cacheConfig(f, traceCapacity(reqs))
	simStart := time.Now()
	rep, err := engine.Evaluate(w, o.cands, engine.Options{
		DispatchCostNs: costs.PerRequestNs, CPUs: costs.CPUs,
		Model: m, Predict: o.predict, Seed: f.seed, Current: o.current,
		Cache:             cc,
		Decide:            o.decide,
		ReadAhead:         o.readAhead,
		Parallel:          simulateParallel(f.parallel, len(reqs)),
		ResponseQuantiles: quantiles,
		Tags:              simulateTags(f.tags, reqs),
	})
	if err != nil {
		return err
	}
	simSecs := time.Since(simStart).Seconds()

	out := buildSimulateReport(f, reqs, m, source, rep)
	if f.redcap != "off" {
		out.Cache = newCacheInfo(f, cc)
	}
	out.Run.SimulateSeconds = simSecs
	for _, c := range out.Candidates {
		out.Run.SimulatedRequests += c.SimulatedRequests
	}
	if simSecs > 0 {
		out.Run.RequestsPerSecond = float64(out.Run.SimulatedRequests) / simSecs
		out.Run.SpeedupVsRealTime = out.SpanSeconds / simSecs
	}
	out.Run.WallSeconds = time.Since(start).Seconds()
	out.Run.PeakRSSBytes = peakRSS()
	if f.plot != "" {
		chart := simulateCDFChart(out, rep)
		if err := writePlot(f.plot, func(w io.Writer) error { return plot.CDFs(w, chart) }); err != nil {
			return err
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printSimulateTable(stdout, out)
}

// simulateOptions are simulate's parsed flags.
type simulateOptions struct {
	class     model.Class
	loop      sim.Loop
	predict   model.PredictMode
	cands     []engine.Candidate
	current   engine.Candidate
	readAhead readahead.Bounds
	decide    decide.Config
}

// parseSimulateOptions parses and checks simulate's flags; a bad one is a
// one-line bad-input error naming it.
func parseSimulateOptions(f *simulateFlags) (simulateOptions, error) {
	var o simulateOptions
	var err error
	if o.class, err = model.ParseClass(f.class); err != nil {
		return simulateOptions{}, badInputf("--device-class: %w", err)
	}
	var ok bool
	if o.loop, ok = sim.ParseLoop(f.loop); !ok {
		return simulateOptions{}, badInputf("--loop: want auto, open or closed, got %q", f.loop)
	}
	if o.predict, err = model.ParsePredictMode(f.predict); err != nil {
		return simulateOptions{}, badInputf("--predict: %w", err)
	}
	if o.cands, err = parseCandidates(f.candidates, f.extra, f.redcap); err != nil {
		return simulateOptions{}, badInput(err)
	}
	cur := f.current
	if cur == "" {
		cur = "mq-deadline"
		if o.class == model.NVMe {
			cur = "none"
		}
	}
	if o.current, err = engine.ParseCandidate(cur); err != nil {
		return simulateOptions{}, badInputf("--current: %w", err)
	}
	if f.redcap == "on" {
		o.current.Cache = true
	}
	if err := checkCacheFlags(f); err != nil {
		return simulateOptions{}, err
	}
	o.readAhead = readahead.Bounds{MinKiB: f.raMin, MaxKiB: f.raMax}
	if err := o.readAhead.Validate(); err != nil {
		return simulateOptions{}, badInputf("--read-ahead-min/max: %w", err)
	}
	o.decide = decide.DefaultConfig(o.current.Name())
	o.decide.MarginPct = f.margin
	if err := o.decide.Validate(); err != nil {
		return simulateOptions{}, badInputf("--margin: %w", err)
	}
	return o, nil
}

// checkCacheFlags refuses bad cache flags with one line.
func checkCacheFlags(f *simulateFlags) error {
	switch {
	case f.cacheMiB < 1:
		return badInputf("--redcap-mib: must be ≥ 1, got %d", f.cacheMiB)
	case f.cacheModel != "redcap" && f.cacheModel != "smq":
		return badInputf("--cache-model: want redcap or smq, got %q", f.cacheModel)
	case f.cacheBlockKiB < 32 || f.cacheBlockKiB > 1<<20 || f.cacheBlockKiB%32 != 0:
		// dm-cache's rule (Documentation/admin-guide/device-mapper/cache.rst).
		return badInputf("--cache-block-kib: must be a multiple of 32 from 32 to 1048576, got %d", f.cacheBlockKiB)
	case f.cacheModel == "smq" && f.cacheMiB*1024 < f.cacheBlockKiB:
		return badInputf("--redcap-mib: %d MiB holds no block of %d KiB", f.cacheMiB, f.cacheBlockKiB)
	case f.cacheHitUs < 0 || math.IsNaN(f.cacheHitUs) || math.IsInf(f.cacheHitUs, 0):
		return badInputf("--cache-hit-us: must be a finite number ≥ 0, got %v", f.cacheHitUs)
	}
	return nil
}

// cacheConfig is the simulated cache of the flags for a device of
// capacitySectors: REDCAP's segments of 128 KiB (KDSim §7), or dm-cache's
// smq by its own rules (engine.SMQ).
func cacheConfig(f *simulateFlags, capacitySectors uint64) sim.CacheConfig {
	var c sim.CacheConfig
	if f.cacheModel == "smq" {
		blocks := uint64(f.cacheMiB) * 1024 / uint64(f.cacheBlockKiB)
		c = engine.SMQ(blocks, uint32(f.cacheBlockKiB*2), capacitySectors)
	} else {
		const seg = 256
		c = sim.CacheConfig{Segments: f.cacheMiB * 2048 / seg, SegmentSectors: seg}
	}
	if f.cacheHitUs > 0 {
		c.HitOverheadNs = int64(math.Round(f.cacheHitUs * 1e3))
	}
	return c
}

// cacheInfo describes the simulated cache in the report.
type cacheInfo struct {
	Model    string  `json:"model"` // redcap or smq
	MiB      int     `json:"mib"`
	BlockKiB int     `json:"blockKiB"` // REDCAP's segment or smq's block
	HitUs    float64 `json:"hitUs"`
}

func newCacheInfo(f *simulateFlags, c sim.CacheConfig) *cacheInfo {
	hit := c.HitOverheadNs
	if hit == 0 {
		hit = redcap.DefaultHitOverheadNs
	}
	return &cacheInfo{Model: f.cacheModel, MiB: f.cacheMiB, BlockKiB: int(c.SegmentSectors) / 2, HitUs: float64(hit) / 1e3}
}

func parseCandidates(names, extra []string, redcap string) ([]engine.Candidate, error) {
	var with []bool
	switch redcap {
	case "off":
		with = []bool{false}
	case "on":
		with = []bool{true}
	case "both":
		with = []bool{false, true}
	default:
		return nil, fmt.Errorf("--redcap: want on, off or both, got %q", redcap)
	}
	var out []engine.Candidate
	seen := map[string]bool{}
	for _, s := range append(append([]string(nil), names...), extra...) {
		if strings.TrimSpace(s) == "" {
			continue
		}
		c, err := engine.ParseCandidate(s)
		if err != nil {
			return nil, fmt.Errorf("--candidates: %w", err)
		}
		for _, cache := range with {
			c.Cache = cache
			if !seen[c.Name()] {
				seen[c.Name()] = true
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--candidates: no candidate given")
	}
	return out, nil
}

// traceCapacity is the device size a trace shows: its largest end sector
// (at least 1).
func traceCapacity(reqs []trace.Request) uint64 {
	capacity := uint64(1)
	for i := range reqs {
		capacity = max(capacity, reqs[i].End())
	}
	return capacity
}

// chooseModel loads --model, learns a model from the trace's measured
// service times, or falls back to the class default.
func chooseModel(path string, reqs []trace.Request, class model.Class) (*model.Model, string, error) {
	if path != "" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, "", badInputf("--model: %w", err)
		}
		defer fh.Close()
		m, err := model.Load(fh)
		if err != nil {
			return nil, "", badInputf("--model %s: %w", path, err)
		}
		return m, "file", nil
	}
	capacity := traceCapacity(reqs)
	measured := 0
	for i := range reqs {
		if reqs[i].HasService() {
			measured++
		}
	}
	if measured*2 >= len(reqs) {
		m, err := model.Fit(reqs, model.FitOptions{Class: class, CapacitySectors: capacity})
		if err != nil {
			return nil, "", badInput(err)
		}
		return m, "trace", nil
	}
	if class == model.Throttled {
		return nil, "", badInputf("--device-class throttled: the trace has no measured service times to estimate the caps from; give --model")
	}
	return model.Default(class, capacity), "default", nil
}

func buildSimulateReport(f *simulateFlags, reqs []trace.Request, m *model.Model, source string, rep engine.Report) simulateReport {
	out := simulateReport{
		Trace: f.tracePath, Format: f.format, Requests: rep.Requests,
		SpanSeconds: float64(reqs[len(reqs)-1].Arrival-reqs[0].Arrival) / 1e9,
		Loop:        rep.Loop.String(),
		Model:       modelInfo{Source: source, Class: m.Class().String(), Servers: m.Servers(), Predict: f.predict, Throttle: throttleOf(m)},
	}
	var curNs float64
	for _, o := range rep.Outcomes {
		if o.Candidate.Name() == rep.Current {
			curNs = rep.Predicted(engine.RankService, o)
		}
	}
	for _, o := range rep.Outcomes {
		r := o.Result
		c := candidateReport{
			Name: o.Candidate.Name(), Scheduler: o.Candidate.Scheduler, Tunables: r.Tunables.String(), Redcap: o.Candidate.Cache,
			TotalServiceTimeUs: float64(r.TotalServiceNs) / 1e3,
			MeanResponseTimeUs: r.MeanResponseNs / 1e3,
			P99ResponseTimeUs:  float64(r.P99ResponseNs) / 1e3,
			SimulatedRequests:  r.Simulated,
			DeviceRequests:     r.DeviceRequests,
			MergedRequests:     r.Merged,
			MakespanSeconds:    float64(r.MakespanNs) / 1e9,
		}
		if f := rep.DispatchFactor(o.Candidate.Scheduler); f != 1 {
			c.DispatchCharge = f
		}
		if curNs > 0 {
			c.VsCurrentPct = 100 * (rep.Predicted(engine.RankService, o) - curNs) / curNs
		}
		if st := r.CacheStats; st != nil {
			if parts := st.HitParts + st.WaitParts + st.MissParts; parts > 0 {
				c.CacheHitPct = 100 * float64(st.HitParts) / float64(parts)
			}
			c.CacheBypassedReads, c.CacheFetchedSectors = st.Bypasses, st.FetchedSectors
		}
		out.Candidates = append(out.Candidates, c)
	}
	d := rep.Decision
	target := d.Target
	if !d.Switch {
		target = rep.Current
	}
	out.Recommendation = recommendation{
		Current: rep.Current, Scheduler: target, Switch: d.Switch,
		ImprovementPct: d.ImprovementPct, Reason: string(d.Reason), Message: d.Message,
		ReadAheadKiB: rep.ReadAhead.KiB,
		ReadAhead: readAheadWhy{
			SwitchCostUs:        float64(rep.ReadAhead.Detail.SwitchNs) / 1e3,
			TransferMBPerSecond: rep.ReadAhead.Detail.TransferBytesPerSec / 1e6,
			Concurrency:         rep.Concurrency,
			Note:                rep.ReadAhead.Detail.Note,
		},
	}
	if rep.ADA != nil && rep.CacheGainPct != nil {
		out.Recommendation.Redcap = &redcapRec{
			On: rep.ADA.On, GainPct: *rep.CacheGainPct,
			RedcapNsPerBlock: rep.ADA.RedcapNsPerBlock, NormalNsPerBlock: rep.ADA.NormalNsPerBlock,
		}
	}
	return out
}

// throttleOf returns m's caps, nil when it has none.
func throttleOf(m *model.Model) *model.Throttle {
	if t := m.Throttle(); t.Enabled() {
		return &t
	}
	return nil
}

func printSimulateTable(w io.Writer, r simulateReport) error {
	class := r.Model.Class
	if t := r.Model.Throttle; t != nil {
		class += " at " + t.String()
	}
	fmt.Fprintf(w, "trace %s (%s): %d requests over %.1f s, %s-loop replay; model: %s (%s, k=%d, %s)\n\n",
		r.Trace, r.Format, r.Requests, r.SpanSeconds, r.Loop, r.Model.Source, class, r.Model.Servers, r.Model.Predict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	charged := slices.ContainsFunc(r.Candidates, func(c candidateReport) bool { return c.DispatchCharge != 0 })
	head := "CANDIDATE\tTOTAL SERVICE (µs)\tVS CURRENT\tMEAN RESP (µs)\tP99 RESP (µs)\tSIMULATED\tDEVICE REQS\t"
	if charged {
		head += "DISPATCH CHARGE\t"
	}
	fmt.Fprintln(tw, head)
	for _, c := range r.Candidates {
		fmt.Fprintf(tw, "%s\t%.0f\t%+.1f%%\t%.0f\t%.0f\t%d\t%d\t", c.Name, c.TotalServiceTimeUs, c.VsCurrentPct,
			c.MeanResponseTimeUs, c.P99ResponseTimeUs, c.SimulatedRequests, c.DeviceRequests)
		if charged {
			fmt.Fprintf(tw, "×%.3f\t", max(c.DispatchCharge, 1))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rec := r.Recommendation
	verb := "stay on " + rec.Current
	if rec.Switch {
		verb = fmt.Sprintf("switch %s -> %s", rec.Current, rec.Scheduler)
	}
	fmt.Fprintf(w, "\nrecommendation: %s (predicted improvement %.1f%%; %s)\n", verb, rec.ImprovementPct, rec.Message)
	if rc := rec.Redcap; rc != nil {
		state := "off"
		if rc.On {
			state = "on"
		}
		label := "redcap"
		if c := r.Cache; c != nil && c.Model == "smq" {
			label = fmt.Sprintf("dm-cache (smq, %d MiB in %d KiB blocks)", c.MiB, c.BlockKiB)
		}
		fmt.Fprintf(w, "%s: %s (ADA: %.0f vs %.0f ns per 4 KiB block with/without; total I/O time %+.1f%% with the cache)\n",
			label, state, rc.RedcapNsPerBlock, rc.NormalNsPerBlock, -rc.GainPct)
	}
	fmt.Fprintf(w, "read-ahead: %d KiB (switch cost %.0f µs × transfer %.0f MB/s, concurrency %.1f)\n",
		rec.ReadAheadKiB, rec.ReadAhead.SwitchCostUs, rec.ReadAhead.TransferMBPerSecond, rec.ReadAhead.Concurrency)
	_, err := fmt.Fprintf(w, "simulated %d requests in %.2f s (%.0f requests/s, %.0f× real time), peak RSS %.0f MiB\n",
		r.Run.SimulatedRequests, r.Run.SimulateSeconds, r.Run.RequestsPerSecond, r.Run.SpeedupVsRealTime, float64(r.Run.PeakRSSBytes)/(1<<20))
	return err
}

// peakRSS returns the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}
