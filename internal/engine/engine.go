// Package engine evaluates one recorded window under every candidate
// setting and decides: the collect → simulate → decide cycle of DADS §4.1,
// shared by `shadowtune simulate` and the node agent.
//
// Every candidate (elevator × tunables × REDCAP on/off) is simulated from an
// empty state over the same window with the same disk model, the current
// setting included (DESIGN §4: never compare a simulation with the real
// disk). The scheduler is chosen with the margin, switch-cost and
// thrash-guard rule (internal/decide, DADS §4.2); REDCAP with its
// activation–deactivation algorithm (KDSim §4.1); read-ahead with the
// competitive depth (internal/readahead, competitive prefetching §3).
//
// Units: times in ns, sectors of 512 bytes, read-ahead in KiB.
package engine

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/readahead"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Candidate is one setting of a device: an elevator with tunables, and
// REDCAP on or off.
type Candidate struct {
	Scheduler string
	Tunables  sched.Tunables
	Cache     bool
}

// Name returns the candidate's stable name: "bfq", "bfq(slice_idle=0)",
// "mq-deadline+redcap".
func (c Candidate) Name() string {
	s := c.Scheduler
	if len(c.Tunables) > 0 {
		s += "(" + c.Tunables.String() + ")"
	}
	if c.Cache {
		s += "+redcap"
	}
	return s
}

// Defaults returns the kernel's default of each tunable of the named
// scheduler (internal/sched: each scheduler's kernel file), the values a
// candidate that leaves a tunable out is simulated with; an unknown name
// is an error.
func Defaults(scheduler string) (map[string]int64, error) {
	return sched.Defaults(scheduler, sched.DefaultDevice)
}

// ParseCandidate parses "name", "name:k=v,k=v" or either with a "+redcap"
// suffix. Names and tunables are validated against the scheduler models
// (CheckCandidate).
func ParseCandidate(s string) (Candidate, error) {
	var c Candidate
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutSuffix(s, "+redcap"); ok {
		c.Cache, s = true, rest
	}
	name, tun, hasTun := strings.Cut(s, ":")
	c.Scheduler = name
	if _, err := sched.Defaults(name, sched.DefaultDevice); err != nil {
		return Candidate{}, err
	}
	if hasTun {
		t, err := sched.ParseTunables(tun)
		if err != nil {
			return Candidate{}, fmt.Errorf("candidate %q: %w", s, err)
		}
		c.Tunables = t
		if err := CheckCandidate(c); err != nil {
			return Candidate{}, fmt.Errorf("candidate %q: %w", s, err)
		}
	}
	return c, nil
}

// Options configure an evaluation.
type Options struct {
	// Model is the device's disk model (required). Each candidate gets its
	// own Disk state from it; the model itself is only read.
	Model *model.Model
	// Predict selects cell means or seeded sampling.
	Predict model.PredictMode
	// Seed seeds every random choice; the same window, options and seed
	// give the same report.
	Seed int64
	// Rotational is the device's queue/rotational flag as the elevator sees
	// it (bfq idles on rotational queues); nil derives it from the model's
	// class.
	Rotational *bool
	// MaxSectors is the device's largest request (queue/max_sectors_kb × 2);
	// 0 means 2560 (1280 KiB).
	MaxSectors uint32
	// Tags is the device's tag depth, the requests it accepts at once (the
	// sum of /sys/block/DEV/mq/*/nr_tags; sim.Config.Tags). For a model
	// that is not an HDD's, requests beyond the model's k servers then
	// wait in the device, not in the elevator. 0, and any HDD model, keep
	// the papers' device, which takes one request per server (DESIGN §3).
	Tags int
	// Cache configures REDCAP for candidates with Cache set.
	Cache redcap.Config
	// CacheWarm is what the cache candidates hold at the window's start:
	// the segments of the current setting's cache candidate at the end of
	// the window before (Report.CacheContents), least recently used first.
	// A cache judged from empty in every window misses what a real one
	// keeps from window to window: in the VM lab a 64 MiB dm-cache under
	// zipf reads hit 84 % of them, while a 5 s window simulated from empty
	// predicted half the gain. Its hotspots that had become hot copy their
	// misses at once, as smq's hotspot levels persist.
	CacheWarm CacheWarm
	// CacheFill, when set, makes Report.CacheContents the contents of the
	// current setting's cache candidate simulated from empty over the
	// window, not from CacheWarm: the next window is then judged with the
	// cache as one window of these reads fills it, as a real cache
	// switched on starts empty (dm-cache's smq fills its free blocks and
	// then keeps them: a window after the switch it holds what that
	// window brought in, not what an ever-warmer simulation selected over
	// many). It costs one more simulation of that candidate per window.
	// The cache's predicted gain (Report.CacheGainPct) then leaves out
	// its fill: the cache candidates run with sim.Config.FreeFill, their
	// promoted blocks in the cache at once with no request to the device.
	// Such a cache copies blocks in only while it has free ones, so the
	// fill is a one-off cost, at most the cache's size read once, and the
	// gain that lasts is that of the filled cache. Subtracting the copies'
	// time from a run that made them does not leave it out, because the
	// copies also change the reads' simulated times: in a window of the VM
	// lab's uniform reads (581 reads, 1.4 % read hits) the misses took
	// 12 % less time per read in the run with the copies, and the gain
	// came out at 13.6 %.
	CacheFill bool
	// ADA configures REDCAP's activation–deactivation algorithm.
	ADA redcap.ADAConfig
	// Current is the setting in effect; it is simulated even when not
	// listed among the candidates.
	Current Candidate
	// Decide configures the switching rule; Decide.Default names the
	// setting the thrash guard pins (default: Current).
	Decide decide.Config
	// Guard is the thrash-guard state carried from the previous window.
	Guard decide.State
	// ReadAhead bounds the competitive read-ahead depth.
	ReadAhead readahead.Bounds
	// Parallel bounds the candidates simulated at once (0: GOMAXPROCS).
	// With 1 they are simulated one after another in the caller's
	// goroutine, so an evaluation never takes more than one core (the
	// agent's setting).
	Parallel int
	// Rank is the measure the scheduler decision compares candidates by:
	// RankService (the zero value) or RankWait.
	Rank Rank
	// Corrections are learned factors, candidate name → factor (> 0), by
	// which the decision multiplies a candidate's measure before comparing:
	// the measured ÷ predicted ratio of that candidate from verified
	// changes on the device, relative to the model's error on the setting
	// it replaced. A candidate without an entry is not corrected. This is
	// how costs the model does not simulate, such as a scheduler's
	// per-request dispatch (CPU) cost on a fast device, are measured on the
	// node.
	Corrections map[string]float64
	// CounterfactualErrorPct is the device's counterfactual error that
	// holds now, percentage points (decide.Input.CounterfactualErrorPct;
	// 0: none).
	CounterfactualErrorPct float64
	// DispatchCostNs is each scheduler's CPU time per request beyond
	// none's, ns, as measured on the node (agent/schedcost); CPUs is the
	// number of CPUs that serve the block layer (0: runtime.NumCPU()). The
	// simulator charges no CPU, so the decision multiplies a candidate's
	// measure by DispatchFactor: the share of the CPUs its scheduler's
	// extra cost would take at the window's request rate. nil charges
	// nothing.
	DispatchCostNs map[string]float64
	CPUs           int
	// ResponseQuantiles, when > 0, keeps at most this many exact quantiles
	// of each candidate's response times in its Result
	// (sim.Config.ResponseQuantiles), for drawing their CDFs.
	ResponseQuantiles int
}

// Rank is a measure candidates are ranked by.
type Rank uint8

const (
	// RankService ranks by the total device service time of the window
	// (sim.Result.TotalServiceNs): DADS §4.2's criterion, which the papers'
	// trace studies use.
	RankService Rank = iota
	// RankWait ranks by what the window's processes wait for: the summed
	// response time of its reads and synchronous writes
	// (sim.Result.WaitNs), so that queueing and reordering count, and
	// asynchronous write-back only through the requests behind it (issue
	// 14 item 2). The node agent's measure.
	RankWait
)

// Measure is r's measure under rank k, ns.
func (k Rank) Measure(r sim.Result) int64 {
	if k == RankWait {
		return r.WaitNs
	}
	return r.TotalServiceNs
}

// Outcome is the simulation of one candidate.
type Outcome struct {
	Candidate Candidate
	Result    sim.Result
}

// ReadAheadAdvice is the competitive read-ahead depth for the window.
type ReadAheadAdvice struct {
	KiB    int
	Detail readahead.Detail
}

// Report is the evaluation of one window.
type Report struct {
	// Current is the name of the setting in effect.
	Current  string
	Requests int
	Loop     sim.Loop
	// Outcomes lists every simulated candidate in the order given, the
	// current setting first if it was not listed.
	Outcomes []Outcome
	// Decision is the scheduler choice among the candidates without the
	// cache (or, when every candidate has the cache, among those).
	Decision decide.Decision
	// Guard is the thrash-guard state to carry to the next window.
	Guard decide.State
	// ADA is REDCAP's on/off decision for the recommended scheduler, when
	// it was simulated both with and without the cache.
	ADA *sim.ADAResult
	// CacheGainPct is the predicted reduction of total I/O time with REDCAP
	// under the recommended scheduler (negative: slower), when simulated;
	// with Options.CacheFill, of the filled cache (its promotions made
	// at once, with no copy sent to the disk: sim.Config.FreeFill).
	CacheGainPct *float64
	// CacheReadHitPct is the share of the window's reads that the cache
	// candidate under the recommended scheduler served entirely from the
	// cache (redcap.Stats FullHits ÷ Reads), percent: the prediction that
	// dm-cache's own read-hit counters are compared with. Nil when the
	// cache was not simulated or the window has no reads.
	CacheReadHitPct *float64
	// CacheContents is what the current setting's cache candidate held at
	// the window's end (sim.Result.CacheContents; with Options.CacheFill,
	// simulated from empty), for the next window's Options.CacheWarm; nil
	// when it was not simulated.
	CacheContents *CacheWarm
	// ReadAhead is the recommended read_ahead_kb.
	ReadAhead ReadAheadAdvice
	// Concurrency is the mean number of requests in the block layer in the
	// current setting's simulation (Little's law: Σ response ÷ makespan).
	Concurrency float64
	// PendingAtSwitch is the number of queued requests used for the switch
	// cost (T_change = pending × mean service time, DADS §4.2).
	PendingAtSwitch int
	// BusyRate is the window's requests per second of busy time (time
	// with at least one request between arrival and completion), as
	// recorded: the rate DispatchFactors are taken at.
	BusyRate float64
	// DispatchFactors is, by scheduler, the factor its candidates'
	// measures were multiplied by for their dispatch cost
	// (Options.DispatchCostNs); nil when no cost was given.
	DispatchFactors map[string]float64
	// ResponseRatio is the current setting's simulated mean response time
	// ÷ the measured mean response time (arrival to completion) of the
	// window's requests that carry both; 0 when the window has none
	// (decide.Input.ResponseRatio).
	ResponseRatio float64
}

// DispatchFactor is the factor the decision multiplied scheduler's
// candidates' measures by for its dispatch cost (1: none charged).
func (r Report) DispatchFactor(scheduler string) float64 {
	if f, ok := r.DispatchFactors[scheduler]; ok {
		return f
	}
	return 1
}

// Predicted is o's predicted measure under rank k, ns: the simulated
// measure times its scheduler's dispatch factor in r, without learned
// corrections.
func (r Report) Predicted(k Rank, o Outcome) float64 {
	return float64(k.Measure(o.Result)) * r.DispatchFactor(o.Candidate.Scheduler)
}

// dispatchFactors is 1 + rate × cost ÷ CPUs for each scheduler of
// opt.DispatchCostNs: the extra CPU time a second of the window's work
// would take under that scheduler, as a share of the CPUs. A fast device
// whose requests keep the CPUs busy slows by that share; a disk at a few
// hundred requests a second not measurably (1 + 10⁻⁴). The share charges
// the whole cost to the application even when CPUs are idle, which
// over-states it on a moderately loaded device: a scheduler must then win
// by more to be chosen, never by less.
func dispatchFactors(opt Options, rate float64) map[string]float64 {
	if len(opt.DispatchCostNs) == 0 || rate <= 0 {
		return nil
	}
	cpus := opt.CPUs
	if cpus <= 0 {
		cpus = runtime.NumCPU()
	}
	f := make(map[string]float64, len(opt.DispatchCostNs))
	for s, ns := range opt.DispatchCostNs {
		f[s] = 1 + rate*max(ns, 0)*1e-9/float64(cpus)
	}
	return f
}

// busyRate is reqs' requests per second of busy time: the union of their
// [arrival, completion] intervals (arrival order; a request without a
// completion counts from its arrival to its arrival), or of the arrivals'
// span when that is empty. 0 for fewer than two requests.
func busyRate(reqs []trace.Request) float64 {
	if len(reqs) < 2 {
		return 0
	}
	var busy int64
	start, end := reqs[0].Arrival, reqs[0].Arrival
	for i := range reqs {
		q := &reqs[i]
		done := q.Arrival
		if q.Complete != trace.Unknown && q.Complete > q.Arrival {
			done = q.Complete
		}
		if q.Arrival > end {
			busy += end - start
			start = q.Arrival
		}
		end = max(end, done)
	}
	busy += end - start
	if busy <= 0 {
		busy = reqs[len(reqs)-1].Arrival - reqs[0].Arrival
	}
	if busy <= 0 {
		return 0
	}
	return float64(len(reqs)) / (float64(busy) / 1e9)
}

// ErrNoModel is returned when Options.Model is nil.
var ErrNoModel = errors.New("engine: no disk model")

// Evaluate simulates w under each candidate and decides.
func Evaluate(w *sim.Window, cands []Candidate, opt Options) (Report, error) {
	if opt.Model == nil {
		return Report{}, ErrNoModel
	}
	if opt.Current.Scheduler == "" {
		return Report{}, errors.New("engine: the current setting is not set")
	}
	cands = withCurrent(cands, opt.Current)
	if opt.Cache.CapacitySectors == 0 {
		opt.Cache.CapacitySectors = opt.Model.Config().CapacitySectors
	}
	outs, err := simulateAll(w, cands, opt, false)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Current: opt.Current.Name(), Requests: w.Len(), Outcomes: outs, Loop: outs[0].Result.Loop}
	for i := range outs { // only the current setting's cache candidate keeps them (simulateAll)
		if cc := outs[i].Result.CacheContents; cc != nil {
			rep.CacheContents, outs[i].Result.CacheContents = cc, nil
		}
	}

	if len(opt.DispatchCostNs) > 0 {
		rep.BusyRate = busyRate(w.Requests())
		rep.DispatchFactors = dispatchFactors(opt, rep.BusyRate)
	}
	cur := find(outs, opt.Current)
	rep.Concurrency = concurrency(cur.Result)
	if real := MeasuredResponseNs(w.Requests()); real > 0 && cur.Result.MeanResponseNs > 0 {
		rep.ResponseRatio = cur.Result.MeanResponseNs / real
	}
	rep.PendingAtSwitch = int(rep.Concurrency + 0.5)

	// The scheduler decision: among uncached candidates unless the current
	// setting is cached, in which case among cached ones.
	var dc []decide.Candidate
	for _, o := range outs {
		if o.Candidate.Cache == opt.Current.Cache {
			dc = append(dc, decide.Candidate{Name: o.Candidate.Name(), TotalNs: corrected(opt, rep, o)})
		}
	}
	cfg := opt.Decide
	if cfg.Default == "" {
		cfg.Default = opt.Current.Name()
	}
	meanSvc := int64(0)
	if cur.Result.DeviceRequests > 0 {
		meanSvc = cur.Result.TotalServiceNs / int64(cur.Result.DeviceRequests)
	}
	d, guard, err := decide.Decide(decide.Input{
		Current: opt.Current.Name(), Candidates: dc,
		Pending: rep.PendingAtSwitch, MeanServiceNs: meanSvc, ResponseRatio: rep.ResponseRatio,
		CounterfactualErrorPct: opt.CounterfactualErrorPct,
	}, cfg, opt.Guard)
	if err != nil {
		return Report{}, err
	}
	rep.Decision, rep.Guard = d, guard

	// REDCAP under the scheduler that will be in effect.
	target := d.Target
	if !d.Switch {
		target = opt.Current.Name()
	}
	var chosen Candidate
	for _, o := range outs {
		if o.Candidate.Name() == target {
			chosen = o.Candidate
		}
	}
	on, off := chosen, chosen
	on.Cache, off.Cache = true, false
	if o1, o2 := find(outs, on), find(outs, off); o1 != nil && o2 != nil {
		a, err := evalADA(w, o1, o2, opt)
		if err != nil {
			return Report{}, err
		}
		rep.ADA = &a
		if t := o2.Result.TotalServiceNs; t > 0 {
			g := 100 * float64(t-o1.Result.TotalServiceNs) / float64(t)
			rep.CacheGainPct = &g
		}
		if st := o1.Result.CacheStats; st != nil && st.Reads > 0 {
			h := 100 * float64(st.FullHits) / float64(st.Reads)
			rep.CacheReadHitPct = &h
		}
	}

	kib, det := readahead.Depth(opt.Model, span(w), rep.Concurrency, opt.ReadAhead)
	rep.ReadAhead = ReadAheadAdvice{KiB: kib, Detail: det}
	return rep, nil
}

// evalADA runs REDCAP's activation–deactivation algorithm over the
// per-request response times of on and off (one scheduler with and
// without the cache), then drops those arrays (n int64s each), so that a
// Report holds none. simulateAll keeps them only for the current
// setting's pair; for another pair, the two candidates are simulated
// again with them kept, which gives the same results (the same seed).
func evalADA(w *sim.Window, on, off *Outcome, opt Options) (sim.ADAResult, error) {
	if len(on.Result.ResponseNs) != w.Len() || len(off.Result.ResponseNs) != w.Len() {
		again, err := simulateAll(w, []Candidate{on.Candidate, off.Candidate}, opt, true)
		if err != nil {
			return sim.ADAResult{}, err
		}
		on.Result.ResponseNs, off.Result.ResponseNs = again[0].Result.ResponseNs, again[1].Result.ResponseNs
	}
	a, err := sim.EvalADA(w, on.Result, off.Result, opt.ADA)
	on.Result.ResponseNs, off.Result.ResponseNs = nil, nil
	return a, err
}

// corrected is o's predicted measure under opt.Rank with its learned
// correction (Report.Corrected), ns.
func corrected(opt Options, rep Report, o Outcome) int64 {
	return int64(rep.Corrected(opt.Rank, opt.Corrections, o))
}

// Corrected is o's predicted measure under rank k (Predicted: with its
// dispatch factor) times its learned correction in corrections (keyed by
// candidate name; a missing or non-positive factor is 1), ns: what the
// decision compares.
func (r Report) Corrected(k Rank, corrections map[string]float64, o Outcome) float64 {
	v := r.Predicted(k, o)
	if f, ok := corrections[o.Candidate.Name()]; ok && f > 0 {
		v *= f
	}
	return v
}

// ScreenTolerancePct is how far, in percentage points, a screening pass's
// predicted improvement may fall short of the whole slice's and still be
// trusted (ScreenAccepts). Measured on live traces of a loop device (random
// 4 KiB reads, four sequential 64 KiB streams, a 70/30 random read/write
// mix; 5 s windows of 72,000–345,000 requests): over the newest 16,384 of a
// window's newest 65,536 requests, the best candidate's improvement was
// within 0.7 points of the whole slice's, and the same candidate was best
// whenever the difference mattered.
const ScreenTolerancePct = 1.5

// ScreenAccepts reports whether r, an evaluation of only the newest
// requests of a window (a screening pass), may stand for the whole window:
// it keeps the current scheduler (no switch, no pin by the thrash guard),
// its best candidate stays ScreenTolerancePct points below the margin
// (Decision.BestImprovementPct < marginPct − ScreenTolerancePct, marginPct
// as in decide.Config), and REDCAP was not simulated (its
// activation–deactivation algorithm judges a cache warmed over the whole
// window, KDSim §4.1). Otherwise the whole window is to be evaluated.
//
// Screening is ours, not the papers' (DADS §4.1 simulates every window
// whole): the agent uses it so that a busy device whose setting is
// settled costs a fraction of a full evaluation per window, while every
// window near a switch is still decided on all its simulated requests.
func ScreenAccepts(r Report, marginPct float64) bool {
	d := r.Decision
	return !d.Switch && d.Target == r.Current && r.ADA == nil && r.CacheGainPct == nil &&
		d.BestImprovementPct < marginPct-ScreenTolerancePct
}

func withCurrent(cands []Candidate, cur Candidate) []Candidate {
	for _, c := range cands {
		if c.Name() == cur.Name() {
			return cands
		}
	}
	return append([]Candidate{cur}, cands...)
}

func find(outs []Outcome, c Candidate) *Outcome {
	for i := range outs {
		if outs[i].Candidate.Name() == c.Name() {
			return &outs[i]
		}
	}
	return nil
}

// simulateAll runs every candidate, in parallel, each from an empty state;
// results come back in candidate order. Per-request response times
// (sim.Result.ResponseNs, 8 bytes per request) are kept for every
// candidate when keepAll is set, else only for the current setting with
// and without the cache, the pair ADA most often compares: kept for all
// candidates, they grew the agent's heap by ~80 bytes per simulated
// request per candidate (2.9 GB for the 1,056 candidates of the heaviest
// policy the CRD accepts, hack/testdata/storagetuning-heaviest.yaml).
func simulateAll(w *sim.Window, cands []Candidate, opt Options, keepAll bool) ([]Outcome, error) {
	names := map[string]bool{}
	for _, c := range cands {
		if names[c.Name()] {
			return nil, fmt.Errorf("engine: candidate %s listed twice", c.Name())
		}
		names[c.Name()] = true
	}
	cur := opt.Current
	cur.Cache = false
	keep := func(c Candidate) bool {
		c.Cache = false
		return keepAll || c.Name() == cur.Name()
	}
	m := opt.Model
	k := m.Servers()
	tags := k
	if m.Class() != model.HDD && opt.Tags > k {
		tags = opt.Tags
	}
	dev := sched.Device{Rotational: m.Class() == model.HDD, MaxSectors: opt.MaxSectors, QueueDepth: tags}
	if opt.Rotational != nil {
		dev.Rotational = *opt.Rotational
	}
	if dev.MaxSectors == 0 {
		dev.MaxSectors = sched.DefaultDevice.MaxSectors
	}
	newDisk := func(seed int64) sim.DeviceModel {
		d := m.NewDisk(seed)
		d.SetPredictMode(opt.Predict)
		return d
	}
	var newGate func() sim.Gate
	if th := m.Throttle(); th.Enabled() {
		newGate = func() sim.Gate { return th.NewBucket() }
	}
	par := opt.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	outs := make([]Outcome, len(cands))
	errs := make([]error, len(cands))
	run := func(i int, c Candidate) {
		iosched, nr := c.split()
		cfg := sim.Config{
			Scheduler: c.Scheduler, Tunables: iosched, NrRequests: nr, Device: dev, Servers: k, Tags: tags,
			NewDisk: newDisk, NewGate: newGate, Seed: opt.Seed, KeepPerRequest: keep(c),
			ResponseQuantiles: opt.ResponseQuantiles,
		}
		fill := c.Cache && keep(c) && opt.CacheFill
		if c.Cache {
			cc := opt.Cache
			cfg.Cache, cfg.CacheWarm = &cc, opt.CacheWarm
			cfg.KeepCacheContents = keep(c) && !fill
			cfg.FreeFill = opt.CacheFill
		}
		res, err := sim.Run(w, cfg)
		if err == nil && fill {
			res.CacheContents, err = filledFromEmpty(w, cfg)
		}
		outs[i], errs[i] = Outcome{Candidate: c, Result: res}, err
	}
	if par == 1 {
		for i, c := range cands {
			run(i, c)
		}
	} else {
		sem := make(chan struct{}, par)
		var wg sync.WaitGroup
		for i, c := range cands {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				run(i, c)
			}()
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("candidate %s: %w", cands[i].Name(), err)
		}
	}
	return outs, nil
}

// filledFromEmpty simulates w under cfg with its cache starting empty and
// returns the cache's contents at the end (Options.CacheFill); sim.Run's
// error is returned as is.
func filledFromEmpty(w *sim.Window, cfg sim.Config) (*CacheWarm, error) {
	cfg.CacheWarm, cfg.KeepCacheContents, cfg.KeepPerRequest, cfg.ResponseQuantiles = CacheWarm{}, true, false, 0
	cfg.FreeFill = false // the copies' timing as the device gives it
	res, err := sim.Run(w, cfg)
	return res.CacheContents, err
}

// MeasuredResponseNs is the mean response time (completion − arrival), ns,
// of the requests of reqs that were measured to completion; 0 when none
// was.
func MeasuredResponseNs(reqs []trace.Request) float64 {
	var sum float64
	n := 0
	for i := range reqs {
		if rt := reqs[i].ResponseTime(); rt != trace.Unknown {
			sum += float64(rt)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// concurrency is the time-averaged number of requests in the block layer
// (Little's law), at least 1.
func concurrency(r sim.Result) float64 {
	if r.MakespanNs <= 0 {
		return 1
	}
	c := r.MeanResponseNs * float64(r.Simulated) / float64(r.MakespanNs)
	return max(c, 1)
}

// span is the extent of the device the window touched, in sectors: the
// region whose average seek the competitive read-ahead depth prices.
func span(w *sim.Window) uint64 {
	reqs := w.Requests()
	lo, hi := ^uint64(0), uint64(0)
	for i := range reqs {
		lo = min(lo, reqs[i].Sector)
		hi = max(hi, reqs[i].End())
	}
	if hi <= lo {
		return 1
	}
	return hi - lo
}
