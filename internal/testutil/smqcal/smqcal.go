// Package smqcal compares the agent's simulated dm-cache with a real
// dm-cache's smq policy: it predicts, from a trace recorded on the
// cache's origin while the cache was off, the read-hit ratio and the gain
// of turning an empty cache on, with smq's own rules as the agent
// simulates them (engine.SMQ) and with the former LRU stand-in
// (engine.CacheForBlocks), for the VM lab's calibration (e2e/vm, TestSMQCalibration) and for sweeps over its saved
// traces (TestSavedRun).
package smqcal

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Setup is the real cache's geometry and what a hit costs.
type Setup struct {
	CacheBlocks  uint64 // the cache's size in blocks
	BlockSectors uint32 // the block size in 512-byte sectors
	// HitNs and HitServers are the cost of a read the cache serves, ns,
	// and how many it serves at once (redcap.Config.HitOverheadNs,
	// HitServers: the cache device's read time on each CPU, as the agent
	// sets them); zero: a RAM copy, unbounded.
	HitNs      int64
	HitServers int
	// SMQHitNs, when set, is what a hit costs engine.SMQ instead, ns
	// per server: the cache device's time per read at the workload's
	// depth times HitServers (fio's 1 s ÷ IOPS); in the VM lab a hit's
	// cost is guest CPU, which the depth-1 read time alone leaves out.
	SMQHitNs int64
	// OriginSectors is the cache's origin's size, which sets smq's
	// hotspot size (engine.HotspotSegments); 0: the trace's extent.
	OriginSectors uint64
}

// Prediction is one stand-in's prediction for a workload.
type Prediction struct {
	// HitPct is the share of the trace's reads served whole from the
	// cache, %; GainPct the cut of the window's I/O time with the cache
	// on (engine.Report.CacheGainPct), %.
	HitPct  float64 `json:"hitPct"`
	GainPct float64 `json:"gainPct"`
}

// Row is one workload: what the stand-ins predicted from the trace and
// what the real cache measured over the same reads.
type Row struct {
	Name  string     `json:"name"`
	Reads int        `json:"reads"` // reads in the trace
	SMQ   Prediction `json:"smq"`   // engine.SMQ's
	LRU   Prediction `json:"lru"`   // engine.CacheForBlocks's
	// MeasuredHitPct is smq's read hits ÷ (hits + misses) over the same
	// reads, each of Passes times from an empty cache, %; MeasuredGainPct
	// the cut of their wall time through the cache (CachedS, the passes'
	// mean) against the disk alone (1 − CachedS ÷ PassthroughS), %.
	Passes          int     `json:"passes"`
	MeasuredHitPct  float64 `json:"measuredHitPct"`
	MeasuredGainPct float64 `json:"measuredGainPct"`
	PassthroughS    float64 `json:"passthroughSeconds"`
	CachedS         float64 `json:"cachedSeconds"`
}

// Predict reads the native trace at path and simulates it as the agent
// judges a window with an empty cache of s's geometry, with each stand-in:
// an SSD model fitted on the trace (net service times, k servers
// estimated) and simulated as the agent simulates a window
// (model.WindowModel: the trace is one window), the device's tags at the
// most requests the trace had outstanding, none with and without the
// cache. The row's measured fields
// are left zero. It returns the trace's read error, model.Fit's, or the
// engine's.
func Predict(path string, s Setup) (Row, error) {
	reqs, err := trace.ReadFile("native", path)
	if err != nil {
		return Row{}, err
	}
	capacity := s.OriginSectors
	row := Row{}
	for i := range reqs {
		if s.OriginSectors == 0 {
			capacity = max(capacity, reqs[i].End())
		}
		if reqs[i].Op == trace.Read {
			row.Reads++
		}
	}
	fitted, err := model.Fit(reqs, model.FitOptions{Class: model.SSD})
	if err != nil {
		return Row{}, fmt.Errorf("%s: %w", path, err)
	}
	m := fitted.WindowModel() // as the agent simulates a window
	smqHitNs := s.HitNs
	if s.SMQHitNs > 0 {
		smqHitNs = s.SMQHitNs
	}
	for _, p := range []struct {
		cfg   redcap.Config
		hitNs int64
		out   *Prediction
	}{{engine.SMQ(s.CacheBlocks, s.BlockSectors, capacity), smqHitNs, &row.SMQ}, {engine.CacheForBlocks(s.CacheBlocks, s.BlockSectors, capacity), s.HitNs, &row.LRU}} {
		p.cfg.HitOverheadNs, p.cfg.HitServers = p.hitNs, s.HitServers
		if *p.out, err = predict(reqs, m, p.cfg); err != nil {
			return Row{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return row, nil
}

// predict simulates reqs with model m under none, with and without the
// cache cfg.
func predict(reqs []trace.Request, m *model.Model, cfg redcap.Config) (Prediction, error) {
	none := engine.Candidate{Scheduler: "none"}
	on := none
	on.Cache = true
	rep, err := engine.EvaluateRequests(reqs, engine.LoopAuto, []engine.Candidate{none, on}, engine.Options{
		Model: m, Seed: 1, Tags: model.MaxInFlight(reqs), Cache: cfg, Current: none,
		Rank: engine.RankWait, Parallel: 1, Decide: decide.DefaultConfig(none.Name())})
	if err != nil {
		return Prediction{}, err
	}
	var p Prediction
	for _, o := range rep.Outcomes {
		if st := o.Result.CacheStats; o.Candidate.Cache && st != nil && st.Reads > 0 {
			p.HitPct = 100 * float64(st.FullHits) / float64(st.Reads)
		}
	}
	if rep.CacheGainPct != nil {
		p.GainPct = *rep.CacheGainPct
	}
	return p, nil
}

// Table formats rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| workload | reads | smq's read hits | smq's rules | LRU stand-in | gain measured (passthrough → cache) | smq's rules | LRU stand-in |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %.1f %% | %.1f %% | %.1f %% | %.1f %% (%.2f → %.2f s) | %.1f %% | %.1f %% |\n", r.Name, r.Reads,
			r.MeasuredHitPct, r.SMQ.HitPct, r.LRU.HitPct, r.MeasuredGainPct, r.PassthroughS, r.CachedS,
			r.SMQ.GainPct, r.LRU.GainPct)
	}
	return b.String()
}

// runLineRE matches one workload's line of the VM lab's calibration run:
// "smq NAME T0 T1 T2 T3 | STATUS BEFORE | STATUS AFTER", the guest's
// uptimes around the run on the disk alone (T0, T1) and through the
// cache (T2, T3) and the cache's `dmsetup status` lines. passLineRE
// matches a further pass of the same reads through a new, empty cache:
// "smq-pass NAME T2 T3 | STATUS BEFORE | STATUS AFTER".
var (
	runLineRE  = regexp.MustCompile(`(?m)^smq (\w+) ([0-9.]+) ([0-9.]+) ([0-9.]+) ([0-9.]+) \| (.*) \| (.*)$`)
	passLineRE = regexp.MustCompile(`(?m)^smq-pass (\w+) ([0-9.]+) ([0-9.]+) \| (.*) \| (.*)$`)
)

// ParseRun reads the workloads of a calibration run's output, predicts
// each from its trace dir/NAME.st with s, and fills in what was measured,
// pooled over the workload's passes through the cache. It returns an
// error naming the workload for a trace or a status line that cannot be
// used.
func ParseRun(output, dir string, s Setup) ([]Row, error) {
	passes := map[string][][]string{}
	for _, m := range passLineRE.FindAllStringSubmatch(output, -1) {
		passes[m[1]] = append(passes[m[1]], m[2:])
	}
	var rows []Row
	for _, m := range runLineRE.FindAllStringSubmatch(output, -1) {
		row, err := Predict(filepath.Join(dir, m[1]+".st"), s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m[1], err)
		}
		row.Name = m[1]
		if err := measure(&row, m, passes[m[1]]); err != nil {
			return nil, fmt.Errorf("%s: %w", m[1], err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// measure fills row's measured fields from a runLineRE match and the
// workload's further passes (passLineRE's submatches from T2 on): the read
// hits and misses of all passes are pooled, and the time through the
// cache is their mean.
func measure(row *Row, m []string, more [][]string) error {
	var hits, misses, cachedS float64
	for _, p := range append([][]string{m[4:]}, more...) {
		h, ms, err := readCounts(p[2], p[3])
		if err != nil {
			return err
		}
		t2, _ := strconv.ParseFloat(p[0], 64) // the pattern's digits
		t3, _ := strconv.ParseFloat(p[1], 64)
		hits, misses, cachedS = hits+h, misses+ms, cachedS+t3-t2
	}
	if hits+misses <= 0 {
		return errors.New("no reads counted by the cache")
	}
	row.Passes = 1 + len(more)
	row.MeasuredHitPct = 100 * hits / (hits + misses)
	t0, _ := strconv.ParseFloat(m[2], 64)
	t1, _ := strconv.ParseFloat(m[3], 64)
	row.PassthroughS, row.CachedS = t1-t0, cachedS/float64(row.Passes)
	row.MeasuredGainPct = 100 * (1 - row.CachedS/row.PassthroughS)
	return nil
}

// readCounts returns the read hits and misses a cache counted between two
// of its status lines: fields 8 and 9 of a cache target's status
// (Documentation/admin-guide/device-mapper/cache.rst).
func readCounts(before, after string) (hits, misses float64, err error) {
	var c [2][2]float64 // before, after × hits, misses
	for i, st := range []string{before, after} {
		f := strings.Fields(st)
		if len(f) < 9 || f[2] != "cache" {
			return 0, 0, fmt.Errorf("not a cache status: %q", st)
		}
		for j := range 2 {
			v, err := strconv.ParseFloat(f[7+j], 64)
			if err != nil {
				return 0, 0, fmt.Errorf("cache status %q: %w", st, err)
			}
			c[i][j] = v
		}
	}
	return c[1][0] - c[0][0], c[1][1] - c[0][1], nil
}
