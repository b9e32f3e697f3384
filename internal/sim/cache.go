package sim

import (
	"fmt"

	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// CacheConfig configures the simulated REDCAP cache (KDSim §4): the cache
// sits above the elevator, as a dm-cache device would, so whole-segment
// prefetches and bypassed reads are scheduled like any other request.
type CacheConfig = redcap.Config

// CacheStats counts what the simulated cache did.
type CacheStats struct {
	redcap.Stats
	// HitNs is the RAM time of requests served from the cache (copy cost),
	// ns; it is included in Result.TotalServiceNs.
	HitNs int64
}

// cacheState connects a redcap.Cache to one run.
type cacheState struct {
	c *redcap.Cache
	n int32 // window length: fetch requests have IDs ≥ n

	pending []int32 // per window request: fills it still waits for
	copyNs  []int64 // per window request: RAM copy time once its fills are done
	hitFree []int64 // per hit server (redcap.Config.HitServers): when it is free, ns

	waiters [][]int32 // per FillID: window requests waiting for it

	fetch     []*sched.Request // fetch request pool, indexed by ID − n
	fetchFill []redcap.FillID
	freeFetch []int32

	hitNs int64
	free  bool // Config.FreeFill
}

// enableCache puts a cache of cfg in front of the device, holding the
// segments warm (Config.CacheWarm); free is Config.FreeFill.
func (r *runner) enableCache(cfg CacheConfig, warm redcap.Warm, free bool) error {
	c, err := redcap.New(cfg)
	if err != nil {
		return fmt.Errorf("sim: redcap: %w", err)
	}
	c.Load(warm)
	n := len(r.reqs)
	r.cache = &cacheState{
		c:       c,
		n:       int32(n),
		pending: make([]int32, n),
		copyNs:  make([]int64, n),
		hitFree: make([]int64, min(cfg.HitServers, 1024)),
		free:    free,
	}
	return nil
}

// wait adds window request i to the waiters of fill id. The waiters grow
// with the fill IDs in use, not with the cache's size: a cache of the
// largest budget (64 GiB, 524,288 segments) would otherwise cost 12 MB per
// simulated candidate however few segments a window touches.
func (cs *cacheState) wait(id redcap.FillID, i int32) {
	if int(id) >= len(cs.waiters) {
		cs.waiters = append(cs.waiters, make([][]int32, int(id)+1-len(cs.waiters))...)
	}
	cs.waiters[id] = append(cs.waiters[id], i)
}

// intercept routes a released request through the cache. It returns true
// when the cache took the request (a read it serves, wholly or after
// fills); false when the request must go to the elevator unchanged (writes
// after invalidation, discards, flushes, bypassed reads).
func (cs *cacheState) intercept(r *runner, q *sched.Request) bool {
	// The cache's clock (redcap.Config.PromoteGapNs, SMQ) is the
	// workload's own: the request's recorded arrival and completion, not
	// the simulated times, which move with the model's error and the
	// candidate.
	rq := &r.reqs[q.ID]
	cs.c.SetTimes(rq.Arrival, rq.Complete)
	switch q.Op {
	case trace.Write, trace.Discard:
		cs.c.Write(q.Sector, q.Sectors)
		return false
	case trace.Read:
	default:
		return false
	}
	if q.Sectors == 0 {
		return false
	}
	p := cs.c.Read(q.Sector, q.Sectors)
	i := q.ID
	if p.Bypass {
		// Promotions (redcap.Config.PromoteAfter): background copies
		// that no read waits for.
		for _, f := range p.Fetches {
			if cs.free {
				cs.c.FillDone(f.ID)
				continue
			}
			r.submit(cs.newFetch(f, q))
		}
		return false
	}
	cs.copyNs[i] = p.CopyNs
	cs.pending[i] = int32(len(p.Waits) + len(p.Fetches))
	for _, id := range p.Waits {
		cs.wait(id, i)
	}
	for _, f := range p.Fetches {
		cs.wait(f.ID, i)
		r.submit(cs.newFetch(f, q))
	}
	if cs.pending[i] == 0 {
		r.push(cs.served(r.now, p.CopyNs), evHit, i)
	}
	return true
}

// served returns when a read that the cache can serve at now, taking
// copyNs, completes: at once plus copyNs, or, with
// redcap.Config.HitServers k > 0, when the first of k servers is free
// (FIFO), which it then holds for copyNs.
func (cs *cacheState) served(now, copyNs int64) int64 {
	if len(cs.hitFree) == 0 {
		return now + copyNs
	}
	j := 0
	for k, t := range cs.hitFree {
		if t < cs.hitFree[j] {
			j = k
		}
	}
	done := max(now, cs.hitFree[j]) + copyNs
	cs.hitFree[j] = done
	return done
}

// newFetch returns a pooled elevator request for a whole-segment fill,
// issued on behalf of q's process as a synchronous read.
func (cs *cacheState) newFetch(f redcap.Fetch, q *sched.Request) *sched.Request {
	var k int32
	if len(cs.freeFetch) > 0 {
		k = cs.freeFetch[len(cs.freeFetch)-1]
		cs.freeFetch = cs.freeFetch[:len(cs.freeFetch)-1]
	} else {
		k = int32(len(cs.fetch))
		cs.fetch = append(cs.fetch, new(sched.Request))
		cs.fetchFill = append(cs.fetchFill, 0)
	}
	fr := cs.fetch[k]
	*fr = sched.Request{ID: cs.n + k, Sector: f.Sector, Sectors: f.Sectors, Op: trace.Read, Flags: trace.Sync, PID: q.PID, Merged: fr.Merged[:0]}
	cs.fetchFill[k] = f.ID
	return fr
}

// owns reports whether q is a fill issued by the cache.
func (cs *cacheState) owns(q *sched.Request) bool { return q.ID >= cs.n }

// fillDone marks a fill complete and finishes the reads it completes.
func (cs *cacheState) fillDone(r *runner, q *sched.Request) {
	k := q.ID - cs.n
	id := cs.fetchFill[k]
	cs.freeFetch = append(cs.freeFetch, k)
	cs.c.FillDone(id)
	if int(id) >= len(cs.waiters) {
		return // a promotion no read waited for
	}
	w := cs.waiters[id]
	cs.waiters[id] = w[:0]
	for _, i := range w {
		cs.pending[i]--
		if cs.pending[i] == 0 {
			r.push(cs.served(r.now, cs.copyNs[i]), evHit, i)
		}
	}
}

// partDone completes a read served from RAM after its copy time.
func (cs *cacheState) partDone(r *runner, i int32) {
	cs.hitNs += cs.copyNs[i]
	r.requestDone(i)
}

func (cs *cacheState) stats() CacheStats {
	return CacheStats{Stats: cs.c.Stats(), HitNs: cs.hitNs}
}
