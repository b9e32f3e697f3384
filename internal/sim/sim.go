// Package sim is shadowtune's discrete-event simulator: it replays a
// recorded window of block requests in virtual time through a request
// arrival simulator (RAS), an elevator model (internal/sched), an optional
// REDCAP segment cache (internal/redcap) and a learned disk model
// (internal/model) served by k parallel servers.
//
// It is the user-space, virtual-time counterpart of the in-kernel KDSim
// virtual disk (KDSim §3, DADS §3–4): every candidate is simulated from an
// empty state over the same window, and candidates are compared with one
// another, never with the real disk (DESIGN §4).
//
// Units: sectors are 512 bytes; times are int64 nanoseconds of virtual time
// measured from the start of the window.
//
// Determinism: a run depends only on the window, the configuration and the
// seed; the same inputs give bit-identical results.
package sim

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/shadowtune/shadowtune/internal/redcap"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// DeviceModel predicts the service time of the next request dispatched to
// a device. Service is called in dispatch order and may keep state (the
// head position, a disk-cache model). internal/model's *Disk implements it.
type DeviceModel interface {
	// Service returns the predicted service time in ns of a request of
	// sectors 512-byte sectors at sector, dispatched next.
	Service(op trace.Op, sector uint64, sectors uint32) int64
}

// Gate delays the start of service of requests the device has accepted:
// a token bucket in front of it (model.Bucket). Admit is called once per
// request, in dispatch order, and returns when the request may start
// service, ns, not before now; sectors is its length (0 for a flush).
type Gate interface {
	Admit(now int64, sectors uint32) int64
}

// Config describes one simulated setting of one device.
type Config struct {
	// Scheduler is the elevator name (see sched.Names) and Tunables its
	// sysfs tunables; unset tunables take the kernel defaults for Device.
	Scheduler string
	Tunables  sched.Tunables
	// Device describes the request queue (rotational, max request size,
	// queue depth seen by the elevator).
	Device sched.Device
	// Servers is the number of requests the device serves at once (k ≥ 1;
	// 1 for rotational disks, more for SSD/NVMe). 0 means 1.
	Servers int
	// Tags is the number of requests the device accepts at once
	// (dispatched and not completed: the blk-mq tag depth, the sum of
	// /sys/block/DEV/mq/*/nr_tags). Requests dispatched beyond Servers wait
	// in the device, first in first out, and the elevator dispatches
	// whenever a tag is free, as blk-mq does: on a device that accepts
	// more than the load keeps outstanding, the elevator holds nothing and
	// its order does not matter. 0 (or less than Servers) means Servers:
	// the device takes a request only when a server is free and the
	// elevator holds every other one, as the papers' one-at-a-time
	// disks did (KDSim §3, DADS §3).
	Tags int
	// Loop selects open or closed-loop replay.
	Loop Loop
	// NrRequests is the scheduler's request limit, queue/nr_requests: how
	// many requests may be allocated at once, in the elevator or
	// dispatched and not completed. A request that finds them all taken
	// waits, first in first out, until one completes, and only then
	// enters the elevator: blk_mq_get_tag (block/blk-mq-tag.c) sleeps on
	// the scheduler tags' wait queue, and a bio merged into a queued
	// request takes no tag. 0: no limit (the default depth, twice the
	// device's up to 256, is rarely reached by a replayed window). Not
	// applied under none, whose limit is the device's tags.
	NrRequests int
	// NewDisk returns a fresh device model for one run; seed is Config.Seed.
	NewDisk func(seed int64) DeviceModel
	// NewGate, when not nil, returns a fresh Gate for one run: a request
	// the device accepts (a tag) waits for it, first in first out, before
	// it waits for a server. Cache fills and write-through copies pass it
	// too; cache hits do not.
	NewGate func() Gate
	// Cache, when non-nil, puts a REDCAP segment cache in front of the
	// device (KDSim §4).
	Cache *CacheConfig
	// CacheWarm is the cache as an earlier window left it
	// (Result.CacheContents): the disk segments (numbers of
	// Cache.SegmentSectors-sized segments) it holds at the start, least
	// recently used first, and its hot hotspots (redcap.Warm). Empty: the
	// cache starts empty.
	CacheWarm redcap.Warm
	// KeepCacheContents returns the cache's contents at the end of the run
	// in Result.CacheContents.
	KeepCacheContents bool
	// FreeFill puts the blocks the cache promotes in the background
	// (redcap.Config.PromoteAfter: copies no read waits for) in the cache
	// at once, without a request to the device. It judges a cache that
	// fills once and then keeps its blocks (dm-cache's smq) by its filled
	// state: the copies' device time is a one-off cost, and left in the
	// run the copies also change the reads' times (the model's service
	// time depends on the request before), so their time cannot be
	// subtracted afterwards (engine.Options.CacheFill). Segment fetches
	// that reads wait for still go to the device. Result.FillServiceNs
	// then counts only those.
	FreeFill bool
	// Seed seeds every random choice of the run (model sampling).
	Seed int64
	// KeepPerRequest keeps each request's response and I/O time in the
	// result (for ADA and model checks); it costs 8 bytes per request.
	KeepPerRequest bool
	// ResponseQuantiles, when > 0, keeps a bounded picture of the response
	// times in Result.ResponseQuantilesNs: at most this many order
	// statistics, evenly spaced in rank (see Result). It costs 8 bytes
	// each, and a sort of the window's response times at the end of the
	// run.
	ResponseQuantiles int
}

// Result summarises one run.
type Result struct {
	Scheduler string
	Tunables  sched.Tunables
	Cache     bool
	Loop      Loop
	// Requests is the number of requests in the window; Simulated how many
	// completed in the simulation (all of them unless the run failed).
	Requests  int
	Simulated int
	// DeviceRequests counts requests issued to the device after merging and
	// cache splitting/prefetching; Merged counts requests merged into others.
	DeviceRequests int
	Merged         int
	// TotalServiceNs is the sum of the device service times of all issued
	// requests plus the RAM time of cache hits: the window's total I/O time.
	TotalServiceNs int64
	// FillServiceNs is the part of TotalServiceNs that the cache's fill
	// requests took, ns: REDCAP's segment fetches, or under
	// redcap.Config.PromoteAfter the background copies (dm-cache's
	// promotions). 0 without a cache.
	FillServiceNs int64
	// MeanResponseNs and P99ResponseNs summarise response times
	// (completion − release into the block layer), ns.
	MeanResponseNs float64
	P99ResponseNs  int64
	// MakespanNs is the last completion minus the first release, ns.
	MakespanNs int64
	// WaitNs is what the window's processes wait for, ns: the sum of the
	// response times of its reads and synchronous writes (WaitsFor), or
	// of all its requests when none qualifies. A read-ahead read counts:
	// its reader waits for its pages as soon as it reaches them, so a
	// scheduler that serves synchronous reads first by delaying
	// read-ahead gains nothing by it. Asynchronous write-back counts only
	// through the requests queued behind it.
	WaitNs int64
	// ResponseNs holds each request's response time in ns, in window
	// order, when Config.KeepPerRequest is set.
	ResponseNs []int64
	// ResponseQuantilesNs, when Config.ResponseQuantiles = m > 0, holds
	// min(m, Simulated) response times in ns, ascending: with n simulated
	// requests, the j-th (0-based) is the order statistic of rank
	// round(j·(n−1)/(m−1)), so the fastest and the slowest are included.
	// They are exact quantiles of the run's response times (no sampling,
	// no seed), drawn as its response-time CDF.
	ResponseQuantilesNs []int64
	// CacheStats is set when a cache was simulated.
	CacheStats *CacheStats
	// CacheContents, with Config.KeepCacheContents, is the cache at the
	// end (redcap.Cache.Warm): at most MaxWarmSegments segments, the most
	// recently used, and as many hotspots.
	CacheContents *redcap.Warm
}

// MaxWarmSegments bounds Result.CacheContents: the simulator's per-fill
// state grows with the slots in use, and a warm cache of the largest
// budget (524,288 segments) would cost 12 MB per candidate.
const MaxWarmSegments = 1 << 16

// WaitsFor reports whether an application waits for q's completion: a
// read (read-ahead included) or a synchronous write (trace.Sync: REQ_SYNC,
// as fsync and O_DIRECT issue them).
func WaitsFor(q *trace.Request) bool { return q.Op == trace.Read || q.IsSync() }

// Errors returned by Run.
var (
	ErrEmptyWindow = errors.New("sim: empty window")
	ErrNoModel     = errors.New("sim: no device model (Config.NewDisk is nil)")
)

// event kinds.
const (
	evRelease  uint8 = iota // request idx enters the block layer
	evComplete              // device slot finished request (slot idx)
	evWake                  // elevator timer
	evHit                   // cache hit part of request idx done
	evAdmit                 // the gate admits the head of r.gateq
)

type event struct {
	t    int64
	seq  uint64
	kind uint8
	idx  int32
}

// evHeap is a binary min-heap of events ordered by (t, seq). It is the
// simulator's hot path (several operations per simulated request), so it is
// written out rather than going through container/heap's interface calls.
type evHeap []event

func (h evHeap) less(a, b int) bool {
	return h[a].t < h[b].t || (h[a].t == h[b].t && h[a].seq < h[b].seq)
}

func (h *evHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for c := len(s) - 1; c > 0; {
		p := (c - 1) / 2
		if !s.less(c, p) {
			break
		}
		s[c], s[p] = s[p], s[c]
		c = p
	}
}

func (h *evHeap) pop() event {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for p := 0; ; {
		l, r, m := 2*p+1, 2*p+2, p
		if l < last && s.less(l, m) {
			m = l
		}
		if r < last && s.less(r, m) {
			m = r
		}
		if m == p {
			break
		}
		s[p], s[m] = s[m], s[p]
		p = m
	}
	*h = s
	return top
}

// Window is a recorded window prepared for simulation. Prepare it once and
// run it under every candidate; it is safe for concurrent runs.
type Window struct {
	reqs []trace.Request
	loop Loop
	plan *plan
}

// NewWindow prepares reqs (in non-decreasing arrival order) for replay.
// Arrival times are rebased so that the first request arrives at 0.
func NewWindow(reqs []trace.Request, loop Loop) (*Window, error) {
	if len(reqs) == 0 {
		return nil, ErrEmptyWindow
	}
	if len(reqs) > 1<<30 {
		return nil, fmt.Errorf("sim: window of %d requests is too large", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		if reqs[i].Arrival < reqs[i-1].Arrival {
			return nil, fmt.Errorf("sim: request %d arrives before request %d (%d ns < %d ns)", i, i-1, reqs[i].Arrival, reqs[i-1].Arrival)
		}
	}
	if loop == LoopClosed && !canClose(reqs) {
		return nil, errors.New("sim: closed-loop replay needs completion times and process ids, which this trace does not carry (use open loop)")
	}
	w := &Window{reqs: reqs, loop: loop}
	w.plan = buildPlan(reqs, loop)
	return w, nil
}

// Len returns the number of requests in the window.
func (w *Window) Len() int { return len(w.reqs) }

// Closed reports whether the window is replayed closed loop.
func (w *Window) Closed() bool { return w.plan.closed }

// Requests returns the window's requests (read-only).
func (w *Window) Requests() []trace.Request { return w.reqs }

// Run simulates the window under cfg.
func Run(w *Window, cfg Config) (Result, error) {
	if cfg.NewDisk == nil {
		return Result{}, ErrNoModel
	}
	dev := cfg.Device
	if dev.MaxSectors == 0 {
		dev.MaxSectors = sched.DefaultDevice.MaxSectors
	}
	if dev.QueueDepth <= 0 {
		dev.QueueDepth = 1
	}
	el, err := sched.New(cfg.Scheduler, cfg.Tunables, dev)
	if err != nil {
		return Result{}, err
	}
	tun, _ := sched.Defaults(cfg.Scheduler, dev)
	for k, v := range cfg.Tunables {
		tun[k] = v
	}
	r := newRunner(w, cfg, el)
	if cfg.Cache != nil {
		if err := r.enableCache(*cfg.Cache, cfg.CacheWarm, cfg.FreeFill); err != nil {
			return Result{}, err
		}
	}
	r.run()
	res := r.result()
	if r.cache != nil && cfg.KeepCacheContents {
		w := r.cache.c.Warm(MaxWarmSegments)
		res.CacheContents = &w
	}
	r.releaseBuffers()
	res.Scheduler, res.Tunables, res.Cache = cfg.Scheduler, tun, cfg.Cache != nil
	if w.plan.closed {
		res.Loop = LoopClosed
	} else {
		res.Loop = LoopOpen
	}
	if res.Simulated != res.Requests {
		return res, fmt.Errorf("sim: %s simulated %d of %d requests (a request never completed)", cfg.Scheduler, res.Simulated, res.Requests)
	}
	return res, nil
}

// runner is the state of one run.
type runner struct {
	w    *Window
	reqs []trace.Request
	p    *plan
	el   sched.Scheduler
	disk DeviceModel

	servers  int
	slots    []*sched.Request // device servers; nil = free
	freeSlot []int32
	tags     int         // Config.Tags, at least servers
	inflight int         // dispatched and not completed
	devq     requestFIFO // dispatched, waiting for a server
	gate     Gate
	gateq    requestFIFO // dispatched, waiting for the gate
	// nrRequests is Config.NrRequests (0: no limit); allocated counts the
	// requests holding one (in the elevator or in flight), tagq those
	// waiting for one.
	nrRequests int
	allocated  int
	tagq       requestFIFO

	sr  []sched.Request // one per window request
	rel []int64         // simulated release time, ns
	cmp []int64         // simulated completion time, ns (-1 until done)

	ev       evHeap
	seq      uint64
	nextOpen int   // next request (by index) that may be released open loop
	wakeAt   int64 // earliest pending elevator wake, or -1
	now      int64

	totalService int64
	fillService  int64 // the part of totalService the cache's fill requests took
	devReqs      int
	merged       int
	done         int

	cache     *cacheState
	keep      bool
	quantiles int // Config.ResponseQuantiles
	buf       *buffers
}

// buffers are a run's per-request arrays (about 130 B per request). A
// window is simulated under every candidate, each run needing the same
// sizes, so they are reused from run to run (bufPool) instead of being
// allocated for each: they were most of a run's garbage, and so of the
// agent's GC work and peak heap.
type buffers struct {
	sr            []sched.Request
	rel, cmp, rsp []int64
}

var bufPool sync.Pool // of *buffers

// getBuffers returns buffers for n requests; their contents are stale.
func getBuffers(n int) *buffers {
	b, _ := bufPool.Get().(*buffers)
	if b == nil || cap(b.sr) < n {
		return &buffers{sr: make([]sched.Request, n), rel: make([]int64, n), cmp: make([]int64, n), rsp: make([]int64, 0, n)}
	}
	clear(b.sr[n:cap(b.sr)]) // a longer window's merged lists
	b.sr, b.rel, b.cmp = b.sr[:n], b.rel[:n], b.cmp[:n]
	return b
}

// releaseBuffers returns r's buffers to the pool; r must not be used
// after.
func (r *runner) releaseBuffers() {
	b := r.buf
	r.buf, r.sr, r.rel, r.cmp = nil, nil, nil, nil
	bufPool.Put(b)
}

func newRunner(w *Window, cfg Config, el sched.Scheduler) *runner {
	n := len(w.reqs)
	k := cfg.Servers
	if k <= 0 {
		k = 1
	}
	r := &runner{
		w: w, reqs: w.reqs, p: w.plan, el: el,
		disk:    cfg.NewDisk(cfg.Seed),
		gate:    newGate(cfg),
		servers: k,
		tags:    max(cfg.Tags, k),
		nrRequests: func() int {
			if cfg.Scheduler == "none" {
				return 0
			}
			return max(cfg.NrRequests, 0)
		}(),
		slots:     make([]*sched.Request, k),
		wakeAt:    -1,
		ev:        make(evHeap, 0, 64),
		keep:      cfg.KeepPerRequest,
		quantiles: cfg.ResponseQuantiles,
		buf:       getBuffers(n),
	}
	r.sr, r.rel, r.cmp = r.buf.sr, r.buf.rel, r.buf.cmp
	for i := k - 1; i >= 0; i-- {
		r.freeSlot = append(r.freeSlot, int32(i))
	}
	for i := range w.reqs {
		q := &w.reqs[i]
		r.sr[i] = sched.Request{ID: int32(i), Sector: q.Sector, Sectors: q.Sectors, Op: q.Op, Flags: q.Flags, PID: q.PID}
		r.rel[i] = -1
		r.cmp[i] = -1
	}
	return r
}

func (r *runner) push(t int64, kind uint8, idx int32) {
	r.seq++
	r.ev.push(event{t: t, seq: r.seq, kind: kind, idx: idx})
}

// arrival returns request i's recorded arrival rebased to the window start.
func (r *runner) arrival(i int) int64 { return r.reqs[i].Arrival - r.reqs[0].Arrival }

// nextOpenRelease advances to the next request released at its recorded
// arrival (anchorNone) and returns its index, or -1.
func (r *runner) nextOpenRelease() int {
	for r.nextOpen < r.p.n && r.p.kind[r.nextOpen] != anchorNone {
		r.nextOpen++
	}
	if r.nextOpen >= r.p.n {
		return -1
	}
	return r.nextOpen
}

func (r *runner) run() {
	for {
		// Choose the earlier of the next open-loop release and the heap top;
		// open-loop releases win ties (they were recorded first).
		i := r.nextOpenRelease()
		if i >= 0 && (len(r.ev) == 0 || r.arrival(i) <= r.ev[0].t) {
			r.nextOpen++
			r.now = r.arrival(i)
			r.release(int32(i))
			r.dispatch()
			continue
		}
		if len(r.ev) == 0 {
			return
		}
		e := r.ev.pop()
		r.now = e.t
		switch e.kind {
		case evRelease:
			r.release(e.idx)
		case evComplete:
			r.complete(e.idx)
		case evWake:
			if r.wakeAt == e.t {
				r.wakeAt = -1
			}
		case evHit:
			r.partDone(e.idx)
		case evAdmit:
			r.admitted(r.gateq.pop())
		}
		r.dispatch()
	}
}

// release lets request i enter the block layer at r.now.
func (r *runner) release(i int32) {
	r.rel[i] = r.now
	for _, d := range r.p.deps[r.p.depStart[i]:r.p.depStart[i+1]] {
		if r.p.kind[d] == anchorRelease {
			r.push(r.now+r.p.offset[d], evRelease, d)
		}
	}
	q := &r.sr[i]
	if r.cache != nil && r.cache.intercept(r, q) {
		return
	}
	r.submit(q)
}

// submit hands a request to the elevator, or queues it for a request
// slot when nr_requests are allocated (Config.NrRequests).
func (r *runner) submit(q *sched.Request) {
	if r.nrRequests > 0 && r.allocated >= r.nrRequests {
		r.tagq.push(q)
		return
	}
	r.allocated++
	q.Insert = r.now
	if r.el.Insert(q, r.now) {
		r.merged++
		r.allocated--
	}
}

// freeRequest returns a completed request's slot and lets the oldest
// request waiting for one into the elevator.
func (r *runner) freeRequest() {
	r.allocated--
	for r.tagq.len() > 0 && r.allocated < r.nrRequests {
		r.submit(r.tagq.pop())
	}
}

// dispatch issues requests while the device has a free tag; a request
// waits in the device for a server when all are busy.
func (r *runner) dispatch() {
	for r.inflight < r.tags {
		q, wake := r.el.Dispatch(r.now)
		if q == nil {
			if wake >= 0 && (r.wakeAt < 0 || wake < r.wakeAt) {
				if wake <= r.now {
					wake = r.now + 1
				}
				r.wakeAt = wake
				r.push(wake, evWake, -1)
			}
			return
		}
		r.inflight++
		q.Dispatch = r.now
		if r.gate != nil {
			if t := r.gate.Admit(r.now, q.Sectors); t > r.now {
				r.gateq.push(q)
				r.push(t, evAdmit, -1)
				continue
			}
		}
		r.admitted(q)
	}
}

func newGate(cfg Config) Gate {
	if cfg.NewGate == nil {
		return nil
	}
	return cfg.NewGate()
}

// admitted starts q's service, or queues it for a server.
func (r *runner) admitted(q *sched.Request) {
	if len(r.freeSlot) > 0 {
		r.serve(q)
	} else {
		r.devq.push(q)
	}
}

// serve starts q's service on a free server.
func (r *runner) serve(q *sched.Request) {
	slot := r.freeSlot[len(r.freeSlot)-1]
	r.freeSlot = r.freeSlot[:len(r.freeSlot)-1]
	r.slots[slot] = q
	svc := r.disk.Service(q.Op, q.Sector, q.Sectors)
	if svc < 0 {
		svc = 0
	}
	r.totalService += svc
	if r.cache != nil && r.cache.owns(q) {
		r.fillService += svc
	}
	r.devReqs++
	r.push(r.now+svc, evComplete, slot)
}

// complete retires the request on a server and starts the next one
// waiting in the device.
func (r *runner) complete(slot int32) {
	q := r.slots[slot]
	r.slots[slot] = nil
	r.freeSlot = append(r.freeSlot, slot)
	r.inflight--
	if r.devq.len() > 0 {
		r.serve(r.devq.pop())
	}
	q.Complete = r.now
	r.el.Complete(q, r.now)
	r.freeRequest()
	r.finish(q)
}

// finish completes q and every request merged into it.
func (r *runner) finish(q *sched.Request) {
	for _, m := range q.Merged {
		m.Complete = r.now
		r.finish(m)
	}
	if r.cache != nil && r.cache.owns(q) {
		r.cache.fillDone(r, q)
		return
	}
	r.requestDone(q.ID)
}

// requestDone records the completion of window request i and releases the
// requests that waited for it.
func (r *runner) requestDone(i int32) {
	if r.cmp[i] >= 0 {
		return
	}
	r.cmp[i] = r.now
	r.done++
	for _, d := range r.p.deps[r.p.depStart[i]:r.p.depStart[i+1]] {
		if r.p.kind[d] == anchorComplete {
			r.push(r.now+r.p.offset[d], evRelease, d)
		}
	}
}

// partDone is called when a cache-hit part of request i is served.
func (r *runner) partDone(i int32) { r.cache.partDone(r, i) }

func (r *runner) result() Result {
	n := len(r.reqs)
	res := Result{
		Requests:       n,
		Simulated:      r.done,
		DeviceRequests: r.devReqs,
		Merged:         r.merged,
		TotalServiceNs: r.totalService,
		FillServiceNs:  r.fillService,
	}
	resp := r.buf.rsp[:0]
	var sum float64
	var syncSum, allSum int64
	anySync := false
	first, last := int64(-1), int64(0)
	for i := 0; i < n; i++ {
		if r.cmp[i] < 0 {
			continue
		}
		d := r.cmp[i] - r.rel[i]
		resp = append(resp, d)
		sum += float64(d)
		allSum += d
		if WaitsFor(&r.reqs[i]) {
			syncSum += d
			anySync = true
		}
		if first < 0 || r.rel[i] < first {
			first = r.rel[i]
		}
		if r.cmp[i] > last {
			last = r.cmp[i]
		}
	}
	if len(resp) > 0 {
		res.MeanResponseNs = sum / float64(len(resp))
		res.MakespanNs = last - first
	}
	res.WaitNs = allSum
	if anySync {
		res.WaitNs = syncSum
	}
	if r.keep && len(resp) == n {
		res.ResponseNs = slices.Clone(resp)
	}
	if len(resp) > 0 {
		res.P99ResponseNs = kth(resp, percentileIndex(len(resp), 0.99))
	}
	if r.quantiles > 0 && len(resp) > 0 {
		res.ResponseQuantilesNs = quantiles(resp, r.quantiles)
	}
	if r.cache != nil {
		st := r.cache.stats()
		res.CacheStats = &st
		res.TotalServiceNs += st.HitNs
	}
	return res
}

// quantiles sorts v and returns min(m, len(v)) of its order statistics,
// evenly spaced in rank from the smallest to the largest (rank
// round(j·(n−1)/(m−1)) for the j-th).
func quantiles(v []int64, m int) []int64 {
	slices.Sort(v)
	n := len(v)
	if n <= m {
		return slices.Clone(v)
	}
	out := make([]int64, m)
	if m == 1 {
		out[0] = v[n-1]
		return out
	}
	for j := range out {
		out[j] = v[(int64(j)*int64(n-1)+int64(m-1)/2)/int64(m-1)]
	}
	return out
}

// kth returns the k-th smallest of v (0-based: v[k] once v is sorted),
// reordering v. It keeps the len(v)−k largest values seen in a min-heap,
// whose root is the answer: for a high quantile that heap is small, and in
// a window's response times few values enter it, so this costs about one
// comparison per value where sorting cost O(n log n) (sorting a
// 64k-request window for its p99 was a fifth of a candidate's
// simulation).
func kth(v []int64, k int) int64 {
	m := len(v) - k // the heap: v[:m]
	h := v[:m]
	for i := m/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for _, x := range v[m:] {
		if x > h[0] {
			h[0] = x
			siftDown(h, 0)
		}
	}
	return h[0]
}

// siftDown restores the min-heap property of h below i.
func siftDown(h []int64, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			c = r
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// percentileIndex returns the nearest-rank index of quantile q in n sorted values.
func percentileIndex(n int, q float64) int {
	k := int(q*float64(n)+0.999999999) - 1
	if k < 0 {
		k = 0
	}
	if k >= n {
		k = n - 1
	}
	return k
}
