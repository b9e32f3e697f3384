package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

const gib = uint64(1) << 21 // sectors

// closedReads builds a single-process, closed-loop read trace: each 4 KiB
// synchronous read is issued thinkNs after the previous one completed; the
// recorded service time is a nominal 5 ms (the simulation recomputes it).
func closedReads(sectors []uint64, thinkNs int64) []trace.Request {
	reqs := make([]trace.Request, len(sectors))
	now := int64(0)
	for i, s := range sectors {
		reqs[i] = trace.Request{
			Arrival: now, Dispatch: now, Complete: now + 5e6,
			Sector: s, Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: 42, Think: trace.Unknown,
		}
		now += 5e6 + thinkNs
	}
	return reqs
}

func evaluate(t *testing.T, reqs []trace.Request, cands []Candidate, current string) Report {
	t.Helper()
	return evaluateParallel(t, reqs, cands, current, 0)
}

func evaluateParallel(t *testing.T, reqs []trace.Request, cands []Candidate, current string, parallel int) Report {
	t.Helper()
	w, err := sim.NewWindow(reqs, sim.LoopAuto)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := ParseCandidate(current)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Evaluate(w, cands, Options{
		Model:    model.Default(model.HDD, 200*gib),
		Current:  cur,
		Decide:   decide.DefaultConfig(cur.Name()),
		Parallel: parallel,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func both(names ...string) []Candidate {
	var out []Candidate
	for _, n := range names {
		out = append(out, Candidate{Scheduler: n}, Candidate{Scheduler: n, Cache: true})
	}
	return out
}

// TestRedcapStridedRead mirrors KDSim (Computer Journal 2016) Figure 4,
// "8 kB Strided Read": read 4 KiB, skip 8 KiB. The Linux read-ahead does not
// detect the pattern; REDCAP's whole-segment prefetch turns ~10 of every 11
// reads into RAM hits, so the simulation predicts a large gain and ADA keeps
// the cache on.
func TestRedcapStridedRead(t *testing.T) {
	const n = 6000
	secs := make([]uint64, n)
	base := 37 * gib
	for i := range secs {
		secs[i] = base + uint64(i)*24 // 8 sectors read + 16 skipped
	}
	rep := evaluate(t, closedReads(secs, 200e3), both("mq-deadline"), "mq-deadline")
	if rep.ADA == nil || rep.CacheGainPct == nil {
		t.Fatal("REDCAP was not evaluated")
	}
	t.Logf("strided: REDCAP gain %.1f %%, ADA on=%v (%.0f vs %.0f ns/block)", *rep.CacheGainPct, rep.ADA.On, rep.ADA.RedcapNsPerBlock, rep.ADA.NormalNsPerBlock)
	if !rep.ADA.On {
		t.Errorf("ADA switched REDCAP off on a strided read")
	}
	if *rep.CacheGainPct < 30 {
		t.Errorf("predicted REDCAP gain on a strided read = %.1f %%, want ≥ 30 %% (the paper reports up to 36.8 %% application time)", *rep.CacheGainPct)
	}
	on := rep.Outcomes[1].Result
	if hits := on.CacheStats.HitParts; hits < n*8/10 {
		t.Errorf("cache hits = %d of %d reads, want ≥ 80 %%", hits, n)
	}
	// About 10 of the 11 reads of each 128 KiB segment hit: the first
	// one fetches the segment.
	if h := rep.CacheReadHitPct; h == nil || *h < 85 || *h > 95 {
		t.Errorf("predicted read hits %v %%, want 85–95 %%", ptrText(h))
	} else if want := 100 * float64(on.CacheStats.FullHits) / float64(on.CacheStats.Reads); *h != want {
		t.Errorf("predicted read hits %.2f %%, the cache candidate's stats give %.2f %%", *h, want)
	}
}

func ptrText(f *float64) string {
	if f == nil {
		return "nil"
	}
	return fmt.Sprintf("%.2f", *f)
}

// TestRedcapRandomRead mirrors KDSim Figure 4's random and large-stride
// cases (IOR random reads, 512 kB Strided Read), where the cache "provides
// no improvement" and ADA turns it off: every read misses and fetches a
// whole 128 KiB segment it never reuses.
func TestRedcapRandomRead(t *testing.T) {
	const n = 6000
	rng := rand.New(rand.NewPCG(1, 2))
	secs := make([]uint64, n)
	for i := range secs {
		secs[i] = rng.Uint64N(150*gib) &^ 7
	}
	rep := evaluate(t, closedReads(secs, 200e3), both("mq-deadline"), "mq-deadline")
	if rep.ADA == nil || rep.CacheGainPct == nil {
		t.Fatal("REDCAP was not evaluated")
	}
	t.Logf("random: REDCAP gain %.1f %%, ADA on=%v (%.0f vs %.0f ns/block)", *rep.CacheGainPct, rep.ADA.On, rep.ADA.RedcapNsPerBlock, rep.ADA.NormalNsPerBlock)
	if rep.ADA.On {
		t.Errorf("ADA kept REDCAP on for random reads")
	}
	if *rep.CacheGainPct > 0 {
		t.Errorf("predicted REDCAP gain on random reads = %.1f %%, want ≤ 0", *rep.CacheGainPct)
	}
	if h := rep.CacheReadHitPct; h == nil || *h > 1 {
		t.Errorf("predicted read hits %v %% on random reads over 150 GiB, want ≤ 1 %%", ptrText(h))
	}
}

func TestEvaluateDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	secs := make([]uint64, 3000)
	for i := range secs {
		secs[i] = rng.Uint64N(10*gib) &^ 7
	}
	reqs := closedReads(secs, 1e6)
	for i := range reqs {
		reqs[i].PID = uint32(1 + i%4)
	}
	a := evaluateParallel(t, reqs, both("none", "mq-deadline", "bfq", "kyber"), "mq-deadline", 4)
	// Parallel 1 simulates the candidates in this goroutine, one after
	// another: the same results.
	b := evaluateParallel(t, reqs, both("none", "mq-deadline", "bfq", "kyber"), "mq-deadline", 1)
	if len(a.Outcomes) != len(b.Outcomes) || len(a.Outcomes) != 8 {
		t.Fatalf("outcomes: %d and %d, want 8", len(a.Outcomes), len(b.Outcomes))
	}
	for i := range a.Outcomes {
		if a.Outcomes[i].Result.TotalServiceNs != b.Outcomes[i].Result.TotalServiceNs ||
			a.Outcomes[i].Result.P99ResponseNs != b.Outcomes[i].Result.P99ResponseNs {
			t.Fatalf("%s differs between runs", a.Outcomes[i].Candidate.Name())
		}
	}
	if a.Decision != b.Decision || a.ReadAhead != b.ReadAhead {
		t.Fatal("decisions differ between runs")
	}
}

func TestParseCandidate(t *testing.T) {
	cases := []struct {
		in, name string
		bad      bool
	}{
		{in: "none", name: "none"},
		{in: "bfq:slice_idle=0", name: "bfq(slice_idle=0)"},
		{in: "mq-deadline:read_expire=100,fifo_batch=8+redcap", name: "mq-deadline(fifo_batch=8,read_expire=100)+redcap"},
		{in: "cfq", bad: true},
		{in: "kyber:nosuch=1", bad: true},
		{in: "bfq:slice_idle", bad: true},
	}
	for _, c := range cases {
		got, err := ParseCandidate(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted", c.in)
			}
			continue
		}
		if err != nil || got.Name() != c.name {
			t.Errorf("%q: got %q, %v; want %q", c.in, got.Name(), err, c.name)
		}
	}
}

func TestCurrentIsAlwaysSimulated(t *testing.T) {
	reqs := closedReads([]uint64{0, 800, 1600, 2400}, 1e6)
	rep := evaluate(t, reqs, []Candidate{{Scheduler: "none"}}, "bfq")
	if len(rep.Outcomes) != 2 || rep.Outcomes[0].Candidate.Scheduler != "bfq" {
		t.Fatalf("outcomes %v: the current setting must be simulated first", rep.Outcomes)
	}
}

func TestScreenAccepts(t *testing.T) {
	gain := 3.0
	stay := func(best float64) Report {
		return Report{Current: "none", Decision: decide.Decision{Target: "none", Best: "bfq", BestImprovementPct: best}}
	}
	for _, tc := range []struct {
		name   string
		r      Report
		margin float64
		want   bool
	}{
		{"current is best", stay(0), 5, true},
		{"best slower than current", stay(-4), 5, true},
		{"best gains less than margin minus tolerance", stay(3.4), 5, true},
		{"best gains margin minus tolerance", stay(3.5), 5, false},
		{"best gains more, below the margin", stay(4.9), 5, false},
		{"margin as narrow as the tolerance", stay(0), ScreenTolerancePct, false},
		{"switch", Report{Current: "none", Decision: decide.Decision{Switch: true, Target: "bfq", BestImprovementPct: 9}}, 5, false},
		{"pinned to another setting", Report{Current: "none", Decision: decide.Decision{Target: "mq-deadline", Best: "none"}}, 5, false},
		{"REDCAP simulated", func() Report { r := stay(0); r.CacheGainPct = &gain; return r }(), 5, false},
		{"REDCAP decided", func() Report { r := stay(0); r.ADA = &sim.ADAResult{}; return r }(), 5, false},
		{"no margin", stay(0), 0, false},
	} {
		if got := ScreenAccepts(tc.r, tc.margin); got != tc.want {
			t.Errorf("%s: ScreenAccepts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDMCacheModel: the dm-cache stand-in (CacheForBlocks: no prefetch for
// the reader, a block copied in at its second miss) predicts a gain for
// reads that come back to a small hot set, and a loss for uniform random
// reads (every copy is a whole block read for nothing), where REDCAP's
// segment model predicts a gain for the strided read that dm-cache does
// not give (KDSim Fig. 4's 8k-SR; measured in the VM lab).
func TestDMCacheModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 6000
	hot, uni, strided := make([]uint64, n), make([]uint64, n), make([]uint64, n)
	for i := range hot {
		hot[i] = 40*gib + rng.Uint64N(8192)&^7 // 4 MiB
		uni[i] = rng.Uint64N(150*gib) &^ 7
		strided[i] = 37*gib + uint64(i)*24
	}
	gain := func(secs []uint64) float64 {
		w, err := sim.NewWindow(closedReads(secs, 200e3), sim.LoopAuto)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Evaluate(w, both("none"), Options{Model: model.Default(model.HDD, 200*gib), Current: Candidate{Scheduler: "none"},
			Decide: decide.DefaultConfig("none"), Cache: CacheForBlocks(512, 128, 200*gib)})
		if err != nil {
			t.Fatal(err)
		}
		return *rep.CacheGainPct
	}
	g1, g2, g3 := gain(hot), gain(uni), gain(strided)
	t.Logf("dm-cache model: hot set %.1f %%, uniform %.1f %%, strided %.1f %%", g1, g2, g3)
	if g1 < 50 {
		t.Errorf("hot set: predicted %.1f %%, want ≥ 50 %%", g1)
	}
	if g2 > 0 {
		t.Errorf("uniform: predicted %.1f %%, want ≤ 0", g2)
	}
	if g3 > 5 {
		t.Errorf("strided read once: predicted %.1f %%, want no gain (each block is read once: its copy comes too late)", g3)
	}
}

// TestPerRequestKeptOnlyForADA: per-request response times are kept only
// for the current setting's pair, a pair ADA needs is simulated again with
// them and judged exactly as if they had been kept throughout, and a
// Report holds none (they cost 8 bytes per request per candidate).
func TestPerRequestKeptOnlyForADA(t *testing.T) {
	secs := make([]uint64, 4000)
	for i := range secs {
		secs[i] = 37*gib + uint64(i)*24
	}
	w, err := sim.NewWindow(closedReads(secs, 200e3), sim.LoopAuto)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Model: model.Default(model.HDD, 200*gib), Current: Candidate{Scheduler: "none"}, Parallel: 1}
	opt.Cache.CapacitySectors = 200 * gib
	cands := both("none", "bfq")
	outs, err := simulateAll(w, cands, opt, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		kept := len(o.Result.ResponseNs) > 0
		if want := o.Candidate.Scheduler == "none"; kept != want {
			t.Errorf("%s: per-request results kept %v, want %v", o.Candidate.Name(), kept, want)
		}
	}
	all, err := simulateAll(w, cands, opt, true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.EvalADA(w, all[3].Result, all[2].Result, opt.ADA)
	if err != nil {
		t.Fatal(err)
	}
	got, err := evalADA(w, &outs[3], &outs[2], opt) // bfq+redcap, bfq
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ADA on a pair simulated again = %+v, want %+v (kept throughout)", got, want)
	}
	if outs[3].Result.ResponseNs != nil || outs[2].Result.ResponseNs != nil {
		t.Error("evalADA left per-request results in the outcomes")
	}

	rep := evaluate(t, closedReads(secs, 200e3), both("none", "mq-deadline", "bfq"), "none")
	if rep.ADA == nil {
		t.Fatal("REDCAP was not evaluated")
	}
	for _, o := range rep.Outcomes {
		if o.Result.ResponseNs != nil {
			t.Errorf("the report keeps %s's per-request results", o.Candidate.Name())
		}
	}
}

// HotspotSegments follows calc_hotspot_params (dm-cache-policy-smq.c).
func TestHotspotSegments(t *testing.T) {
	for _, tc := range []struct {
		blocks   uint64
		block    uint32
		capacity uint64
		want     int
	}{
		{1024, 128, 1 << 21, 16},  // 1 GiB origin: 1024 hotspots of 1 MiB fit
		{1024, 128, 1 << 20, 8},   // 512 MiB (the VM lab's): halved once
		{1024, 128, 1 << 16, 1},   // 32 MiB: down to one block
		{1 << 16, 64, 1 << 23, 8}, // 16384 hotspots of 16 × 32 KiB would cover 8 GiB of 4: halved once
	} {
		if got := HotspotSegments(tc.blocks, tc.block, tc.capacity); got != tc.want {
			t.Errorf("HotspotSegments(%d, %d, %d) = %d, want %d", tc.blocks, tc.block, tc.capacity, got, tc.want)
		}
	}
}
