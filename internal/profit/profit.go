// Package profit evaluates, in simulation, admission policies for a flash
// (SSD) cache in front of a hard disk: Profit Caching (Chen et al., SPE
// 2015 §3.3) against admitting every miss, admitting a block at its second
// miss (the agent's stand-in for dm-cache's smq), and admitting only small
// requests (Random Access First, the paper's RAF baseline, §6.2).
//
// The evaluation is trace-driven and open loop: requests are taken in
// arrival order; a read whose blocks are all cached is served by the
// flash; a read that spans cached and uncached blocks takes the cached
// ones from the flash and each run of uncached ones from the disk; writes
// go to the disk model unchanged (writethrough: a write also updates the
// flash copy of the blocks it touches).
// The I/O time of a policy is the disk model's service time of what goes
// to the disk, plus the flash's time for the reads it serves and the
// blocks it writes (admissions and write updates), the measure KDSim §4.1
// compares caches by. Blocks are CacheConfig.BlockSectors sectors of 512 B
// (trace.SectorSize); times are ns.
//
// What a dm-cache on Linux can realise of a policy is narrow: smq takes no
// admission tunables (mq, whose sequential_threshold and
// promote_adjustment tunables came closest, is an alias of smq and
// ignores them; Documentation/admin-guide/device-mapper/cache-policies.rst),
// so the knobs are the cache mode (writethrough, or passthrough to take the
// cache out), the core's migration_threshold (the promotion bandwidth), and
// whether the cache is there at all: which the agent decides by
// simulation. docs/agent.md gives the results and the mapping.
package profit

import (
	"container/heap"
	"container/list"
	"errors"
	"fmt"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// Policy is an admission policy.
type Policy int

// The policies compared.
const (
	// AdmitAll caches every read miss, least recently used out
	// (FlashCache-like, the paper's second baseline).
	AdmitAll Policy = iota
	// SecondMiss caches a block at its second read miss, least recently
	// used out: engine.CacheForBlocks, the agent's first stand-in for smq.
	SecondMiss
	// RAF caches the misses of reads of at most Config.RAFMaxSectors,
	// least recently used out: larger requests count as sequential and
	// stay on the disk (Random Access First, SPE 2015 §6.2).
	RAF
	// Profit caches a missed block when its profit exceeds the least
	// profit in the cache (or there is room), and evicts the block of
	// least profit (SPE 2015 §3.3, Equation (1)).
	Profit
)

func (p Policy) String() string {
	switch p {
	case AdmitAll:
		return "admit-all"
	case SecondMiss:
		return "second-miss"
	case RAF:
		return "raf"
	case Profit:
		return "profit"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// Config sizes the cache and prices the flash.
type Config struct {
	// Blocks is the cache's capacity in blocks (≥ 1); BlockSectors the
	// block size in sectors (≥ 1).
	Blocks       int
	BlockSectors uint32
	// FlashReadNs and FlashWriteNs are the flash's time per block read and
	// written, ns.
	FlashReadNs, FlashWriteNs int64
	// Alpha weighs a block's access profile against recency in its profit
	// (0 to 1; SPE 2015 §6.2.1 chose 0.7). RAFMaxSectors is RAF's largest
	// cached request, sectors.
	Alpha         float64
	RAFMaxSectors uint32
}

// Result is what one policy did over a trace.
type Result struct {
	Policy string
	// Reads and ReadHits count read requests, and those the flash served
	// whole; ReadBlocks and FlashBlocksRead the blocks they read, and
	// those the flash served (a read that spans cached and uncached blocks
	// takes the cached ones from the flash).
	Reads, ReadHits, ReadBlocks, FlashBlocksRead int
	// FlashBlocksWritten counts blocks written to the flash (admissions
	// and writethrough updates); DiskRequests the requests the disk served.
	FlashBlocksWritten, DiskRequests int
	// IOTimeNs is the disk model's service time of its requests plus the
	// flash's time, ns.
	IOTimeNs int64
}

// HitPct is the share of reads served by the flash whole, percent.
func (r Result) HitPct() float64 {
	if r.Reads == 0 {
		return 0
	}
	return 100 * float64(r.ReadHits) / float64(r.Reads)
}

// BlockHitPct is the share of the blocks read that the flash served,
// percent.
func (r Result) BlockHitPct() float64 {
	if r.ReadBlocks == 0 {
		return 0
	}
	return 100 * float64(r.FlashBlocksRead) / float64(r.ReadBlocks)
}

// ErrConfig is returned (wrapped) for an unusable Config.
var ErrConfig = errors.New("profit: invalid configuration")

// Evaluate replays reqs (in arrival order) through a cache of cfg under
// policy p, in front of a disk of model m, and returns what it did. The
// same inputs give the same result. It returns an error wrapping
// ErrConfig for an unusable cfg and trace.ErrEmpty for no requests.
func Evaluate(reqs []trace.Request, m *model.Model, p Policy, cfg Config) (Result, error) {
	switch {
	case len(reqs) == 0:
		return Result{}, fmt.Errorf("profit: %w", trace.ErrEmpty)
	case cfg.Blocks < 1 || cfg.BlockSectors < 1 || cfg.FlashReadNs < 0 || cfg.FlashWriteNs < 0 || !(cfg.Alpha >= 0 && cfg.Alpha <= 1):
		return Result{}, fmt.Errorf("%w: %+v", ErrConfig, cfg)
	case p < AdmitAll || p > Profit:
		return Result{}, fmt.Errorf("%w: unknown policy %d", ErrConfig, int(p))
	}
	res, _ := replay(reqs, m, p, cfg)
	return res, nil
}

// replay is Evaluate on a valid configuration; it also returns the cache
// as the trace left it.
func replay(reqs []trace.Request, m *model.Model, p Policy, cfg Config) (Result, *cache) {
	c := newCache(p, cfg)
	disk := m.NewDisk(0)
	res := Result{Policy: p.String()}
	for i := range reqs {
		q := &reqs[i]
		if q.Sectors == 0 || (q.Op != trace.Read && q.Op != trace.Write) {
			continue
		}
		first, last := q.Sector/uint64(cfg.BlockSectors), (q.End()-1)/uint64(cfg.BlockSectors)
		if q.Op == trace.Write {
			updated := c.write(first, last)
			res.FlashBlocksWritten += updated
			res.IOTimeNs += int64(updated)*cfg.FlashWriteNs + disk.Service(q.Op, q.Sector, q.Sectors)
			res.DiskRequests++
			continue
		}
		res.read(c, disk, q, first, last)
	}
	return res, c
}

// read serves a read: its cached blocks from the flash, each run of
// uncached blocks by one disk request (what dm-cache does with a bio that
// spans both), and admits the uncached blocks the policy takes.
func (r *Result) read(c *cache, disk *model.Disk, q *trace.Request, first, last uint64) {
	bs := uint64(c.cfg.BlockSectors)
	n := int(last - first + 1)
	r.Reads++
	r.ReadBlocks += n
	cached := c.cached(first, n)
	whole := true
	for i := 0; i < n; {
		if cached[i] {
			r.FlashBlocksRead++
			r.IOTimeNs += c.cfg.FlashReadNs
			i++
			continue
		}
		j := i
		for j < n && !cached[j] {
			j++
		}
		lo, hi := max(q.Sector, (first+uint64(i))*bs), min(q.End(), (first+uint64(j))*bs)
		r.IOTimeNs += disk.Service(trace.Read, lo, uint32(hi-lo))
		r.DiskRequests++
		whole = false
		i = j
	}
	if whole {
		r.ReadHits++
	}
	admitted := c.read(first, last, q.Sectors)
	r.FlashBlocksWritten += admitted
	r.IOTimeNs += int64(admitted) * c.cfg.FlashWriteNs
}

// block is one cached block, or a candidate's access counts.
type block struct {
	num           uint64
	reads, writes int
	seqLen        int     // blocks of the request that last touched it
	profit        float64 // Profit: its profit at its last access
	heapAt        int     // Profit: its index in the heap
	lru           *list.Element
}

// cache is the simulated flash cache of one policy.
type cache struct {
	p      Policy
	cfg    Config
	in     map[uint64]*block // cached blocks
	lru    *list.List        // cached blocks, most recently used first
	byProf profitHeap        // Profit: cached blocks, least profit first
	seen   map[uint64]*block // not cached: access counts (bounded)
	seenQ  *list.List        // seen, most recent first
	base   float64           // Profit: BaseProfit, the last evicted block's
	flags  []bool            // scratch of cached
}

func newCache(p Policy, cfg Config) *cache {
	return &cache{p: p, cfg: cfg, in: map[uint64]*block{}, lru: list.New(), seen: map[uint64]*block{}, seenQ: list.New()}
}

// profitOf is Equation (1) of SPE 2015 §3.3 for b, now.
func (c *cache) profitOf(b *block) float64 {
	a := c.cfg.Alpha
	return a*float64(b.reads+1)/float64(b.writes*b.seqLen+1) + (1-a)*c.base
}

// cached reports, for the n blocks from first, whether each is cached.
// The slice is valid until the next call.
func (c *cache) cached(first uint64, n int) []bool {
	c.flags = c.flags[:0]
	for k := first; k < first+uint64(n); k++ {
		c.flags = append(c.flags, c.in[k] != nil)
	}
	return c.flags
}

// write counts a write on blocks first..last and returns how many of them
// are cached (their flash copies are rewritten: writethrough).
func (c *cache) write(first, last uint64) int {
	updated := 0
	for k := first; k <= last; k++ {
		b, in := c.touched(k, first, last)
		b.writes++
		if in {
			updated++
			c.touch(b)
		}
	}
	return updated
}

// read counts a read of sectors on blocks first..last and admits the
// uncached ones the policy takes; it returns how many it admitted.
func (c *cache) read(first, last uint64, sectors uint32) int {
	admitted := 0
	for k := first; k <= last; k++ {
		b, in := c.touched(k, first, last)
		b.reads++
		switch {
		case in:
			c.touch(b)
		case c.admits(b, sectors):
			c.admit(b)
			admitted++
		}
	}
	return admitted
}

// touched returns block k, cached or a candidate, and whether it is
// cached, recording that a request on blocks first..last touched it.
func (c *cache) touched(k, first, last uint64) (*block, bool) {
	b, in := c.in[k], true
	if b == nil {
		b, in = c.candidate(k), false
	}
	b.seqLen = int(last - first + 1)
	return b, in
}

// candidate returns the access counts of uncached block k, keeping those
// of at most 8 × Blocks blocks (the least recently seen are forgotten).
func (c *cache) candidate(k uint64) *block {
	if b := c.seen[k]; b != nil {
		c.seenQ.MoveToFront(b.lru)
		return b
	}
	b := &block{num: k}
	b.lru = c.seenQ.PushFront(b)
	c.seen[k] = b
	if c.seenQ.Len() > 8*c.cfg.Blocks {
		old := c.seenQ.Remove(c.seenQ.Back()).(*block)
		delete(c.seen, old.num)
	}
	return b
}

// admits reports whether the policy caches b, missed by a read of
// sectors.
func (c *cache) admits(b *block, sectors uint32) bool {
	switch c.p {
	case SecondMiss:
		return b.reads >= 2
	case RAF:
		return sectors <= c.cfg.RAFMaxSectors
	case Profit:
		return len(c.in) < c.cfg.Blocks || c.profitOf(b) > c.byProf[0].profit
	}
	return true
}

// admit caches b, evicting a block when full: the least profitable under
// Profit (whose profit becomes BaseProfit), else the least recently used.
func (c *cache) admit(b *block) {
	if len(c.in) >= c.cfg.Blocks {
		var v *block
		if c.p == Profit {
			v = heap.Pop(&c.byProf).(*block)
			c.base = v.profit
		} else {
			v = c.lru.Back().Value.(*block)
		}
		c.lru.Remove(v.lru)
		delete(c.in, v.num)
	}
	c.seenQ.Remove(b.lru)
	delete(c.seen, b.num)
	b.lru = c.lru.PushFront(b)
	c.in[b.num] = b
	if c.p == Profit {
		b.profit = c.profitOf(b)
		heap.Push(&c.byProf, b)
	}
}

// touch makes cached b the most recently used and, under Profit,
// recomputes its profit.
func (c *cache) touch(b *block) {
	c.lru.MoveToFront(b.lru)
	if c.p == Profit {
		b.profit = c.profitOf(b)
		heap.Fix(&c.byProf, b.heapAt)
	}
}

// profitHeap orders cached blocks by profit, least first (then by block
// number, so that the result does not depend on map order).
type profitHeap []*block

func (h profitHeap) Len() int { return len(h) }
func (h profitHeap) Less(i, j int) bool {
	if h[i].profit != h[j].profit {
		return h[i].profit < h[j].profit
	}
	return h[i].num < h[j].num
}
func (h profitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = i, j
}
func (h *profitHeap) Push(x any) {
	b := x.(*block)
	b.heapAt = len(*h)
	*h = append(*h, b)
}
func (h *profitHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	*h = old[:len(old)-1]
	return b
}
