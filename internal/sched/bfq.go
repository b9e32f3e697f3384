package sched

import (
	"fmt"
	"math"
	"math/bits"
)

// bfq.go models BFQ (block/bfq-iosched.c with block/bfq-wf2q.c, Linux
// 6.x) for one cgroup and the best-effort I/O priority class.
//
// Queues: one sync queue per process (Request.PID) for sync requests (every
// read and REQ_SYNC writes, Request.IsSync), one async queue shared by all
// processes (the kernel's async queue of the default ioprio). Each queue has
// a sector-sorted tree and an arrival FIFO; its next request (next_rq) is
// the one closest after the disk head (bfqd->last_position, the end of the
// last dispatched request), with backward seeks up to back_seek_max KiB
// allowed at back_seek_penalty times their distance (bfq_choose_req,
// bfq_find_next_rq), unless the oldest request's FIFO deadline
// (fifo_expire_sync / fifo_expire_async) has passed, checked once per
// service slot (bfq_check_fifo).
//
// Scheduling: queues are scheduled by B-WF2Q+ (bfq_wf2q.go) on budgets in
// sectors; the in-service queue is served until it exhausts its budget
// (BFQQE_BUDGET_EXHAUSTED), its budget timeout of timeout_sync ms
// (multiplied by its weight-raising factor) expires, it has no more
// requests, or it is preempted. Async requests are charged 3 times their
// size (bfq_async_charge_factor). At expiration the queue's next budget is
// recomputed from the reason (__bfq_bfqq_recalc_budget): doubled after a
// timeout, quadrupled after exhaustion, cut after an idle timeout, set to
// the service received when the queue emptied; slow (seeky) queues are
// charged for the time they held the device (bfq_bfqq_is_slow,
// bfq_bfqq_charge_time). The maximum budget is max_budget, or, when it is 0,
// the sectors transferable in timeout_sync at the peak rate that BFQ
// estimates from dispatch and completion times (bfq_update_peak_rate;
// 16384 sectors until 194 budgets were assigned, as in the kernel).
//
// Idling: when the in-service sync queue empties and idling is worthwhile
// (bfq_better_to_idle), the queue keeps the device: Dispatch returns nil
// and wake = the end of the idle slice, slice_idle (min 20 ms for a
// weight-raised queue, at most 2 ms for a seeky one). Idling boosts
// throughput (idling_boosts_thr_without_issues) on a rotational device
// without command queueing, or for a sequential I/O-bound queue with a short
// think time on a rotational device or one without queueing, and only
// while no queue is weight-raised; it is needed for service guarantees
// (idling_needed_for_service_guarantees) when the queue is weight-raised and
// others are not, or when it is the only busy queue. Command queueing
// (hw_tag) is detected as the kernel does from the number of requests in
// the driver (bfq_update_hw_tag), so a non-rotational device with
// QueueDepth > 3 stops idling for throughput once detected, and is assumed
// to queue until then. slice_idle keeps its 8 ms default on non-rotational
// devices, as in Linux. A new request of the queue ends the idling; the
// idle timer expiring expires the queue (BFQQE_TOO_IDLE). With
// strict_guarantees=1 the model always idles and keeps at most one request
// in the driver.
//
// Low latency (low_latency=1): a sync queue that becomes busy after being
// idle for 2 s or more (a newly created queue counts as such) is deemed
// interactive and weight-raised 30-fold for a duration derived from the
// estimated peak rate (3-25 s: bfq_wr_duration) or until it received 120000
// sectors of service; its budget is kept small. An async queue that
// receives a request more than 500 ms after its previous one while busy is
// weight-raised too (bfq_add_request). A newly busy queue preempts the
// in-service one when it has a higher weight, when it recovers a service
// hole (bfq_bfqq_update_budg_for_activation), or when the in-service queue
// is not worth idling for (bfq_bfqq_handle_idle_busy_switch).
//
// Merging: as mq-deadline (deadline.go), restricted to requests of the same
// queue (bfq_allow_bio_merge), with front merges always enabled
// (bfq_request_merge).
//
// Left out, with their effect: cgroups and ioprio classes/weights (all
// queues have weight 40, so bfq_asymmetric_scenario is always false);
// soft real-time weight raising; large-burst detection (no queue is ever
// treated as part of a burst); queue merging of cooperating processes
// (bfq_setup_cooperator, stable merges); I/O injection while idling
// (bfq_choose_bfqq_for_injection and waker/woken queues), except that the
// in-service process's own async requests are injected as in
// bfq_select_queue; the depth limits of bfq_limit_depth (tag allocation);
// multi-actuator drives. The kernel sets a new queue's last completion time
// to "minus infinity" with a u64 wrap-around; the model treats it as "never
// completed" (maximal think time, no idle time accrued).

func init() {
	register(Spec{
		Name:     "bfq",
		Defaults: bfqDefaults,
		New:      newBFQ,
	})
}

var bfqRanges = map[string]tunableRange{
	"fifo_expire_sync":  {1, intMax}, // ms
	"fifo_expire_async": {1, intMax}, // ms
	"back_seek_max":     {0, intMax}, // KiB
	"back_seek_penalty": {1, intMax},
	"slice_idle":        {0, intMax},  // ms
	"slice_idle_us":     {0, uintMax}, // us
	"max_budget":        {0, intMax},  // sectors, 0 = auto
	"timeout_sync":      {1, intMax},  // ms
	"strict_guarantees": {0, 1},
	"low_latency":       {0, 1},
}

// bfqDefaults returns bfq's defaults (bfq-iosched.c: bfq_fifo_expire,
// bfq_back_max, bfq_back_penalty, bfq_slice_idle, bfq_timeout,
// bfq_init_queue), in sysfs units. They do not depend on the device:
// slice_idle is 8 ms on non-rotational devices too.
func bfqDefaults(Device) Tunables {
	return Tunables{
		"fifo_expire_sync":  125,
		"fifo_expire_async": 250,
		"back_seek_max":     16384,
		"back_seek_penalty": 2,
		"slice_idle":        8,
		"slice_idle_us":     8000,
		"max_budget":        0,
		"timeout_sync":      125,
		"strict_guarantees": 0,
		"low_latency":       1,
	}
}

// Constants of bfq-iosched.c.
const (
	bfqWeight             = 40 // bfq_ioprio_to_weight(IOPRIO_BE_NORM)
	bfqWrCoeff            = 30
	bfqWrMinIdleTime      = 2000 * nsPerMs
	bfqWrMinInterArrAsync = 500 * nsPerMs
	bfqMaxServiceFromWr   = 120000 // sectors
	bfqDefaultMaxBudget   = 16 * 1024
	bfqStatsMinBudgets    = 194
	bfqAsyncChargeFactor  = 3
	bfqMinTT              = 2 * nsPerMs
	bfqWrMinIdle          = 20 * nsPerMs // idle slice of a weight-raised queue
	bfqHwQueueThreshold   = 3
	bfqHwQueueSamples     = 32
	bfqqSeekThr           = 8 * 100 // sectors
	bfqqSectThrNonrot     = 2 * 32  // sectors
	bfqRateMinSamples     = 32
	bfqRateMinInterval    = 300 * nsPerMs
	bfqRateRefInterval    = 1000 * nsPerMs
	bfqRateShift          = 16
	bfqStaticSliceIdle    = 8 * nsPerMs   // the static bfq_slice_idle used by bfq_bfqq_is_slow
	bfqStaticTimeout      = 125 * nsPerMs // the static bfq_timeout used by bfq_bfqq_charge_time
	bfqSeekyHistory       = 19
	bfqLongAgo            = math.MinInt64 / 4 // bfq_smallest_from_now
)

// ref_rate (sectors/us << 16) and ref_wr_duration (ms), [rotational,
// non-rotational].
var (
	bfqRefRate       = [2]uint64{14000, 33000}
	bfqRefWrDuration = [2]uint64{7000, 2500}
)

// Expiration reasons (enum bfqq_expiration).
const (
	bfqqeTooIdle = iota
	bfqqeBudgetTimeout
	bfqqeBudgetExhausted
	bfqqeNoMoreRequests
	bfqqePreempted
)

func newBFQ(tun Tunables, dev Device) (Scheduler, error) {
	if err := checkTunables("bfq", tun, bfqRanges); err != nil {
		return nil, err
	}
	si, su := tun["slice_idle"], tun["slice_idle_us"]
	var sliceIdle int64
	switch {
	case si*1000 == su:
		sliceIdle = si * nsPerMs
	case si == 8: // only slice_idle_us differs from its default
		sliceIdle = su * 1000
	case su == 8000: // only slice_idle differs from its default
		sliceIdle = si * nsPerMs
	default:
		return nil, fmt.Errorf("scheduler bfq: slice_idle=%d (ms) and slice_idle_us=%d disagree", si, su)
	}
	strict := tun["strict_guarantees"] == 1
	if strict && sliceIdle < 8*nsPerMs { // bfq_strict_guarantees_store
		sliceIdle = 8 * nsPerMs
	}
	nonrot := 0
	if !dev.Rotational {
		nonrot = 1
	}
	b := &bfqSched{
		fifoExpire:    [2]int64{tun["fifo_expire_async"] * nsPerMs, tun["fifo_expire_sync"] * nsPerMs},
		backMax:       uint64(tun["back_seek_max"]) * 2,
		backPenalty:   uint64(tun["back_seek_penalty"]),
		sliceIdle:     sliceIdle,
		userMaxBudget: tun["max_budget"],
		timeout:       tun["timeout_sync"] * nsPerMs,
		strict:        strict,
		lowLatency:    tun["low_latency"] == 1,
		rot:           dev.Rotational,
		max:           maxSectors(dev),
		pool:          newRQPool(),
		syncQ:         make(map[uint32]*bfqQueue),
		hash:          make(map[uint64]*Request),
		hwTag:         -1,
		peakRate:      bfqRefRate[nonrot] * 2 / 3,
		rateDurProd:   bfqRefRate[nonrot] * bfqRefWrDuration[nonrot],
		bfqMaxBudget:  bfqDefaultMaxBudget,
		idleAt:        -1,
	}
	if b.userMaxBudget > 0 {
		b.bfqMaxBudget = b.userMaxBudget
	} else if tun["timeout_sync"] != 125 {
		// bfq_timeout_sync_store recomputes the automatic max budget.
		b.bfqMaxBudget = b.calcMaxBudget()
	}
	return b, nil
}

// bfqQueue is a bfq_queue with its scheduling entity.
type bfqQueue struct {
	id   int32
	pid  uint32
	sync bool

	sort       rqTree
	fifo       fifo
	nextRq     *Request
	queued     int // requests in sort
	dispatched int // requests in the driver

	// entity (struct bfq_entity)
	start, finish   uint64
	budget, service int64
	weight          int64
	prioChanged     bool
	onST            bool
	tree            uint8
	tl, tr          *bfqQueue
	tpri            uint32
	tseq            uint64
	minStart        uint64

	maxBudget     int64
	budgetTimeout int64

	busy, waitRequest, nonBlockingWaitRq, fifoExpire bool
	hasShortTtime, ioBound, justCreated              bool

	wrCoeff           int64
	wrCurMaxTime      int64
	lastWrStartFinish int64
	serviceFromWr     int64

	lastEndRequest int64
	ttimeSamples   uint64
	ttimeTotal     uint64
	ttimeMean      uint64
	seekHistory    uint32
	lastRequestPos uint64
	ioStartTime    int64
	totIdleTime    int64
}

// bfqSched is the state of one bfq instance (struct bfq_data).
type bfqSched struct {
	fifoExpire    [2]int64 // ns, [async, sync]
	backMax       uint64   // sectors
	backPenalty   uint64
	sliceIdle     int64 // ns
	userMaxBudget int64
	timeout       int64 // ns
	strict        bool
	lowLatency    bool
	rot           bool
	max           uint32

	pool   *rqPool
	queues []*bfqQueue
	syncQ  map[uint32]*bfqQueue
	asyncQ *bfqQueue
	bypass fifo

	// service tree
	active, idle  *bfqQueue
	vtime         uint64
	wsum          uint64
	nextInService *bfqQueue
	tseq          uint64

	inService     *bfqQueue
	busyQueues    int
	wrBusyQueues  int
	queued        int
	totRqInDriver int
	lastPosition  uint64
	inServLastPos uint64

	hwTag         int
	maxRqInDriver int
	hwTagSamples  int

	peakRate             uint64 // sectors/us << 16
	rateDurProd          uint64
	peakRateSamples      uint64
	sequentialSamples    uint64
	totSectorsDispatched uint64
	lastRqMaxSize        uint64
	firstDispatch        int64
	lastDispatch         int64
	lastCompletion       int64
	deltaFromFirst       int64
	bfqMaxBudget         int64
	budgetsAssigned      int64
	lastBudgetStart      int64
	lastIdlingStart      int64

	idleAt int64 // idle slice timer expiry, -1 = not armed

	hash      map[uint64]*Request
	lastMerge *Request
}

func (b *bfqSched) Name() string { return "bfq" }

func (b *bfqSched) Queued() int { return b.queued + b.bypass.len() }

// ---------------------------------------------------------------------------
// Small helpers.

func (b *bfqSched) maxBudgetNow() int64 { // bfq_max_budget
	if b.budgetsAssigned < bfqStatsMinBudgets {
		return bfqDefaultMaxBudget
	}
	return b.bfqMaxBudget
}

func (b *bfqSched) minBudget() int64 { // bfq_min_budget
	if b.budgetsAssigned < bfqStatsMinBudgets {
		return bfqDefaultMaxBudget / 32
	}
	return b.bfqMaxBudget / 32
}

func (b *bfqSched) calcMaxBudget() int64 { // bfq_calc_max_budget
	return int64((b.peakRate * 1000 * uint64(b.timeout/nsPerMs)) >> bfqRateShift)
}

func (b *bfqSched) wrDuration() int64 { // bfq_wr_duration
	d := b.rateDurProd / b.peakRate
	if d < 3000 {
		d = 3000
	}
	if d > 25000 {
		d = 25000
	}
	return int64(d) * nsPerMs
}

func budgetLeft(q *bfqQueue) int64 { return q.budget - q.service }

func seeky(q *bfqQueue) bool { return bits.OnesCount32(q.seekHistory) > bfqSeekyHistory }

// rqSeeky is BFQ_RQ_SEEKY.
func (b *bfqSched) rqSeeky(lastPos uint64, r *Request) bool {
	var d uint64
	if lastPos != 0 {
		if r.Sector > lastPos {
			d = r.Sector - lastPos
		} else {
			d = lastPos - r.Sector
		}
	}
	return d > bfqqSeekThr && (b.rot || r.Sectors < bfqqSectThrNonrot)
}

// servToCharge is bfq_serv_to_charge (the scenario is never asymmetric).
func (b *bfqSched) servToCharge(r *Request, q *bfqQueue) int64 {
	if q.sync || q.wrCoeff > 1 {
		return int64(r.Sectors)
	}
	return int64(r.Sectors) * bfqAsyncChargeFactor
}

// chooseReq is bfq_choose_req: which of r1 and r2 to serve next with the
// head at last.
func (b *bfqSched) chooseReq(r1, r2 *Request, last uint64) *Request {
	if r1 == nil || r1 == r2 {
		return r2
	}
	if r2 == nil {
		return r1
	}
	if s1, s2 := r1.IsSync(), r2.IsSync(); s1 != s2 {
		if s1 {
			return r1
		}
		return r2
	}
	if m1, m2 := r1.Flags&metaFlag != 0, r2.Flags&metaFlag != 0; m1 != m2 {
		if m1 {
			return r1
		}
		return r2
	}
	s1, s2 := r1.Sector, r2.Sector
	var d1, d2 uint64
	w1, w2 := false, false
	switch {
	case s1 >= last:
		d1 = s1 - last
	case s1+b.backMax >= last:
		d1 = (last - s1) * b.backPenalty
	default:
		w1 = true
	}
	switch {
	case s2 >= last:
		d2 = s2 - last
	case s2+b.backMax >= last:
		d2 = (last - s2) * b.backPenalty
	default:
		w2 = true
	}
	switch {
	case !w1 && !w2:
		if d1 < d2 {
			return r1
		}
		if d2 < d1 {
			return r2
		}
		if s1 >= s2 {
			return r1
		}
		return r2
	case w2 && !w1:
		return r1
	case w1 && !w2:
		return r2
	}
	// both behind the head beyond back_seek_max: the one further behind
	if s1 <= s2 {
		return r1
	}
	return r2
}

// ---------------------------------------------------------------------------
// Queues.

func (b *bfqSched) lookupQueue(r *Request) *bfqQueue {
	if r.IsSync() {
		return b.syncQ[r.PID]
	}
	return b.asyncQ
}

// newQueue is bfq_get_queue + bfq_init_bfqq + bfq_init_entity.
func (b *bfqSched) newQueue(r *Request, now int64) *bfqQueue {
	q := &bfqQueue{
		id:                int32(len(b.queues)),
		pid:               r.PID,
		sync:              r.IsSync(),
		weight:            bfqWeight,
		lastEndRequest:    now + 1,
		ioStartTime:       now,
		ioBound:           true,
		maxBudget:         2 * b.maxBudgetNow() / 3,
		budgetTimeout:     bfqLongAgo,
		wrCoeff:           1,
		lastWrStartFinish: now,
		seekHistory:       1,
	}
	if q.sync {
		q.hasShortTtime = true
		q.justCreated = true
		b.syncQ[r.PID] = q
	} else {
		q.pid = 0
		b.asyncQ = q
	}
	b.queues = append(b.queues, q)
	return q
}

func (b *bfqSched) updateIoThinktime(q *bfqQueue, now int64) {
	if q.dispatched > 0 || q.busy {
		return
	}
	limit := 2 * b.sliceIdle
	elapsed := now - q.lastEndRequest
	if elapsed < 0 || elapsed > limit {
		elapsed = limit
	}
	q.ttimeSamples = (7*q.ttimeSamples + 256) / 8
	q.ttimeTotal = (7*q.ttimeTotal + 256*uint64(elapsed)) / 8
	q.ttimeMean = (q.ttimeTotal + 128) / q.ttimeSamples
}

func (b *bfqSched) updateHasShortTtime(q *bfqQueue) {
	if !q.sync || b.sliceIdle == 0 {
		return
	}
	q.hasShortTtime = !(q.ttimeSamples > 80 && q.ttimeMean > uint64(b.sliceIdle>>1))
}

func (b *bfqSched) updateIoSeektime(q *bfqQueue, r *Request) {
	q.seekHistory <<= 1
	if b.rqSeeky(q.lastRequestPos, r) {
		q.seekHistory |= 1
	}
}

func (b *bfqSched) updateIoIntensity(q *bfqQueue, now int64) {
	totIo := now - q.ioStartTime
	if q.sort.empty() && q.dispatched == 0 {
		if idle := now - q.lastEndRequest; idle > 0 {
			q.totIdleTime += idle
		}
	}
	if q.justCreated {
		return
	}
	q.ioBound = !(q.totIdleTime*5 > totIo)
	if totIo > 200*nsPerMs {
		q.ioStartTime = now - totIo/2
		q.totIdleTime >>= 1
	}
}

// ---------------------------------------------------------------------------
// Insertion.

func (b *bfqSched) Insert(r *Request, now int64) bool {
	b.advance(now)
	if r.Op == flushOp {
		r.Class = ClassBypass
		b.bypass.push(r)
		return false
	}
	q := b.lookupQueue(r)
	if q != nil && b.bioMerge(r, q) {
		return true
	}
	if q == nil {
		q = b.newQueue(r, now)
	}
	r.Class = q.id
	b.updateIoThinktime(q, now)
	b.updateHasShortTtime(q)
	b.updateIoSeektime(q, r)
	b.addRequest(q, r, now)
	sync := 0
	if r.IsSync() {
		sync = 1
	}
	r.Deadline = now + b.fifoExpire[sync]
	q.fifo.push(r)
	if mergeable(r) {
		b.hash[r.End()] = r
		if b.lastMerge == nil {
			b.lastMerge = r
		}
	}
	b.rqEnqueued(q, r, now)
	return false
}

// addRequest is bfq_add_request.
func (b *bfqSched) addRequest(q *bfqQueue, r *Request, now int64) {
	oldWr := q.wrCoeff
	interactive := false
	q.queued++
	b.queued++
	if q.sync {
		b.updateIoIntensity(q, now)
	}
	b.pool.insert(&q.sort, r)
	prev := q.nextRq
	q.nextRq = b.chooseReq(q.nextRq, r, b.lastPosition)
	if !q.busy {
		interactive = b.handleIdleBusySwitch(q, oldWr, now)
	} else {
		if b.lowLatency && oldWr == 1 && !r.IsSync() && now > q.lastWrStartFinish+bfqWrMinInterArrAsync {
			q.wrCoeff = bfqWrCoeff
			q.wrCurMaxTime = b.wrDuration()
			b.wrBusyQueues++
			q.prioChanged = true
		}
		if prev != q.nextRq {
			b.updatedNextReq(q)
		}
	}
	if b.lowLatency && (oldWr == 1 || q.wrCoeff == 1 || interactive) {
		q.lastWrStartFinish = now
	}
}

// handleIdleBusySwitch is bfq_bfqq_handle_idle_busy_switch; it returns
// whether q was deemed interactive.
func (b *bfqSched) handleIdleBusySwitch(q *bfqQueue, oldWr int64, now int64) bool {
	idleForLong := q.dispatched == 0 && now > q.budgetTimeout+bfqWrMinIdleTime
	arrivedInTime := now <= q.lastEndRequest+3*b.sliceIdle
	interactive := idleForLong // not in a large burst, default weight
	wrOrDeserves := b.lowLatency && (q.wrCoeff > 1 || (q.sync && interactive))
	wantsPreempt := b.updateBudgForActivation(q, arrivedInTime)
	q.justCreated = false
	if b.lowLatency {
		if oldWr == 1 && wrOrDeserves {
			if interactive {
				q.serviceFromWr = 0
				q.wrCoeff = bfqWrCoeff
				q.wrCurMaxTime = b.wrDuration()
			}
			if mb := 2 * b.minBudget(); q.budget > mb {
				q.budget = mb
			}
		} else if oldWr > 1 && interactive {
			q.wrCoeff = bfqWrCoeff
			q.wrCurMaxTime = b.wrDuration()
		}
		if oldWr != q.wrCoeff {
			q.prioChanged = true
		}
	}
	b.addBusy(q)
	if in := b.inService; in != nil &&
		((wantsPreempt && q.wrCoeff >= in.wrCoeff) || q.weight > in.weight || !b.betterToIdle(in)) {
		b.expire(in, false, bfqqePreempted, now)
	}
	return interactive
}

// updateBudgForActivation is bfq_bfqq_update_budg_for_activation.
func (b *bfqSched) updateBudgForActivation(q *bfqQueue, arrivedInTime bool) bool {
	if q.nonBlockingWaitRq && arrivedInTime && budgetLeft(q) > 0 {
		q.budget = min(budgetLeft(q), q.maxBudget)
		q.service = 0
		return true
	}
	q.service = 0
	q.budget = max(q.maxBudget, b.servToCharge(q.nextRq, q))
	q.nonBlockingWaitRq = false
	return false
}

// addBusy is bfq_add_bfqq_busy (with bfq_activate_bfqq).
func (b *bfqSched) addBusy(q *bfqQueue) {
	b.activateRequeue(q, q.nonBlockingWaitRq)
	q.nonBlockingWaitRq = false
	q.busy = true
	b.busyQueues++
	if q.wrCoeff > 1 {
		b.wrBusyQueues++
	}
}

// delBusy is bfq_del_bfqq_busy.
func (b *bfqSched) delBusy(q *bfqQueue) {
	q.busy = false
	b.busyQueues--
	if q.wrCoeff > 1 {
		b.wrBusyQueues--
	}
	b.deactivate(q)
}

// updatedNextReq is bfq_updated_next_req.
func (b *bfqSched) updatedNextReq(q *bfqQueue) {
	next := q.nextRq
	if next == nil || q == b.inService {
		return
	}
	nb := max(q.maxBudget, b.servToCharge(next, q), q.service)
	if q.budget != nb {
		q.budget = nb
		b.activateRequeue(q, false)
	}
}

// rqEnqueued is bfq_rq_enqueued.
func (b *bfqSched) rqEnqueued(q *bfqQueue, r *Request, now int64) {
	q.lastRequestPos = r.End()
	if q != b.inService || !q.waitRequest {
		return
	}
	small := q.queued == 1 && r.Sectors < 32
	timedOut := q.budgetTimeout <= now
	if small && b.idlingBoostsThr(q) && !timedOut {
		return // keep the timer; the next dispatch ends the idling
	}
	q.waitRequest = false
	b.idleAt = -1
	if timedOut {
		b.expire(q, false, bfqqeBudgetTimeout, now)
	}
}

// ---------------------------------------------------------------------------
// Merging (bfq_bio_merge, bfq_request_merge, bfq_request_merged,
// bfq_requests_merged).

func (b *bfqSched) hashDel(r *Request) {
	if b.hash[r.End()] == r {
		delete(b.hash, r.End())
	}
}

func (b *bfqSched) bioMerge(r *Request, q *bfqQueue) bool {
	if !mergeable(r) {
		return false
	}
	var c *Request
	front := false
	if lm := b.lastMerge; lm != nil && lm.Class == q.id && sameOpMergeable(lm, r) {
		if lm.End() == r.Sector {
			c = lm
		} else if lm.Sector == r.End() {
			c, front = lm, true
		}
	}
	if c == nil {
		if h := b.hash[r.Sector]; h != nil && h.Class == q.id && sameOpMergeable(h, r) {
			c = h
		} else if f := b.pool.findStart(&q.sort, r.End()); f != nil && sameOpMergeable(f, r) {
			c, front = f, true
		}
	}
	if c == nil || !fits(c, r, b.max) {
		return false
	}
	if front {
		b.pool.remove(&q.sort, c)
		absorb(c, r, true)
		b.pool.insert(&q.sort, c)
		if p := b.pool.before(&q.sort, c); p != nil && b.reqMergeable(p, c) {
			b.mergeRequests(q, p, c)
			return true
		}
		prev := q.nextRq
		q.nextRq = b.chooseReq(q.nextRq, c, b.lastPosition)
		if prev != q.nextRq {
			b.updatedNextReq(q)
		}
	} else {
		b.hashDel(c)
		absorb(c, r, false)
		b.hash[c.End()] = c
		if n := b.pool.after(&q.sort, c); n != nil && b.reqMergeable(c, n) {
			b.mergeRequests(q, c, n)
			return true
		}
	}
	b.lastMerge = c
	return true
}

func (b *bfqSched) reqMergeable(a, c *Request) bool {
	return sameOpMergeable(a, c) && a.End() == c.Sector && fits(a, c, b.max)
}

// mergeRequests merges queued request gone (just after keep, same queue)
// into keep.
func (b *bfqSched) mergeRequests(q *bfqQueue, keep, gone *Request) {
	if gone.Deadline < keep.Deadline {
		q.fifo.takeSlot(keep, gone)
		keep.Deadline = gone.Deadline
	} else {
		q.fifo.remove(gone)
	}
	if q.nextRq == gone {
		q.nextRq = keep
	}
	q.queued--
	b.queued--
	b.pool.remove(&q.sort, gone)
	b.hashDel(gone)
	b.hashDel(keep)
	absorb(keep, gone, false)
	b.hash[keep.End()] = keep
	b.lastMerge = keep
}

// ---------------------------------------------------------------------------
// Dispatch.

// advance runs the idle slice timer if it expired at or before now.
func (b *bfqSched) advance(now int64) {
	if b.idleAt < 0 || now < b.idleAt {
		return
	}
	t := b.idleAt
	b.idleAt = -1
	q := b.inService
	if q == nil {
		return
	}
	q.waitRequest = false // bfq_idle_slice_timer_body
	var reason int
	switch {
	case q.budgetTimeout <= t:
		reason = bfqqeBudgetTimeout
	case q.queued == 0:
		reason = bfqqeTooIdle
	default:
		return
	}
	b.expire(q, true, reason, t)
}

func (b *bfqSched) Dispatch(now int64) (*Request, int64) {
	b.advance(now)
	if r := b.bypass.pop(); r != nil {
		return r, -1
	}
	if b.busyQueues == 0 || (b.strict && b.totRqInDriver > 0) {
		return nil, -1
	}
	q := b.selectQueue(now)
	if q == nil {
		if b.idleAt >= 0 && b.queued > 0 {
			return nil, b.idleAt
		}
		return nil, -1
	}
	r := b.dispatchFrom(q, now)
	b.totRqInDriver++
	return r, -1
}

// selectQueue is bfq_select_queue.
func (b *bfqSched) selectQueue(now int64) *bfqQueue {
	q := b.inService
	if q != nil && b.mayExpireForBudgTimeout(q, now) && !b.mustIdle(q) {
		b.expire(q, false, bfqqeBudgetTimeout, now)
		q = nil
	}
	for {
		if q == nil {
			if q = b.setInServiceQueue(now); q == nil {
				return nil
			}
		}
		if next := q.nextRq; next != nil {
			if b.servToCharge(next, q) > budgetLeft(q) {
				b.expire(q, false, bfqqeBudgetExhausted, now)
				q = nil
				continue
			}
			if q.waitRequest {
				q.waitRequest = false
				b.idleAt = -1
			}
			return q
		}
		if q.waitRequest || (q.dispatched != 0 && b.betterToIdle(q)) {
			// Inject the in-service process's own async I/O.
			if a := b.asyncQ; a != nil && a != q && a.busy && a.nextRq != nil &&
				a.nextRq.PID == q.pid && b.servToCharge(a.nextRq, a) <= budgetLeft(a) {
				return a
			}
			return nil
		}
		b.expire(q, false, bfqqeNoMoreRequests, now)
		q = nil
	}
}

// setInServiceQueue is bfq_set_in_service_queue.
func (b *bfqSched) setInServiceQueue(now int64) *bfqQueue {
	q := b.getNextQueue()
	b.inService = q
	b.inServLastPos = 0
	if q == nil {
		return nil
	}
	q.fifoExpire = false
	b.budgetsAssigned = (b.budgetsAssigned*7 + 256) / 8
	coeff := q.weight / bfqWeight // bfq_set_budget_timeout
	if coeff < 1 {
		coeff = 1
	}
	b.lastBudgetStart = now
	q.budgetTimeout = now + b.timeout*coeff
	return q
}

// dispatchFrom is bfq_dispatch_rq_from_bfqq.
func (b *bfqSched) dispatchFrom(q *bfqQueue, now int64) *Request {
	r := q.nextRq
	b.served(q, b.servToCharge(r, q))
	q.dispatched++
	b.updatePeakRate(r, q, now)
	b.removeRequest(q, r, now)
	if q == b.inService {
		b.updateWrData(q, now)
	}
	return r
}

// removeRequest is bfq_remove_request for a dispatched request.
func (b *bfqSched) removeRequest(q *bfqQueue, r *Request, now int64) {
	if q.nextRq == r {
		q.nextRq = b.findNextRq(q, r, now)
		b.updatedNextReq(q)
	}
	q.fifo.remove(r)
	q.queued--
	b.queued--
	b.pool.remove(&q.sort, r)
	b.hashDel(r)
	if b.lastMerge == r {
		b.lastMerge = nil
	}
	if q.sort.empty() {
		q.nextRq = nil
		if q.busy && q != b.inService {
			b.delBusy(q)
			q.budget, q.service = 0, 0
		}
	}
}

// findNextRq is bfq_find_next_rq: the request to serve after last.
func (b *bfqSched) findNextRq(q *bfqQueue, last *Request, now int64) *Request {
	if !q.fifoExpire { // bfq_check_fifo
		q.fifoExpire = true
		if h := q.fifo.peek(); h != nil && h != last && now >= h.Deadline {
			return h
		}
	}
	next := b.pool.after(&q.sort, last)
	prev := b.pool.before(&q.sort, last)
	if next == nil {
		if f := b.pool.first(&q.sort); f != last {
			next = f
		}
	}
	return b.chooseReq(next, prev, last.Sector)
}

// updateWrData is bfq_update_wr_data.
func (b *bfqSched) updateWrData(q *bfqQueue, now int64) {
	if q.wrCoeff > 1 {
		if now > q.lastWrStartFinish+q.wrCurMaxTime {
			b.endWr(q, now)
		}
		if q.wrCoeff > 1 && q.serviceFromWr > bfqMaxServiceFromWr {
			b.endWr(q, now)
		}
	}
	if (q.weight > bfqWeight) != (q.wrCoeff > 1) {
		b.updateWeightPrio(q)
	}
}

// endWr is bfq_bfqq_end_wr.
func (b *bfqSched) endWr(q *bfqQueue, now int64) {
	if q.busy {
		b.wrBusyQueues--
	}
	q.wrCoeff = 1
	q.wrCurMaxTime = 0
	q.lastWrStartFinish = now
	q.prioChanged = true
}

// ---------------------------------------------------------------------------
// Idling decisions.

// idlingBoostsThr is idling_boosts_thr_without_issues.
func (b *bfqSched) idlingBoostsThr(q *bfqQueue) bool {
	rotWithoutQueueing := b.rot && b.hwTag == 0
	seqIOBound := !seeky(q) && q.ioBound && q.hasShortTtime
	boosts := rotWithoutQueueing || ((b.rot || b.hwTag == 0) && seqIOBound)
	return boosts && b.wrBusyQueues == 0
}

// idlingNeeded is idling_needed_for_service_guarantees (never asymmetric).
func (b *bfqSched) idlingNeeded(q *bfqQueue) bool {
	return (q.wrCoeff > 1 && (b.wrBusyQueues < b.busyQueues || b.totRqInDriver >= q.dispatched+4)) ||
		b.busyQueues == 1
}

// betterToIdle is bfq_better_to_idle.
func (b *bfqSched) betterToIdle(q *bfqQueue) bool {
	if b.strict {
		return true
	}
	if b.sliceIdle == 0 || !q.sync {
		return false
	}
	return b.idlingBoostsThr(q) || b.idlingNeeded(q)
}

func (b *bfqSched) mustIdle(q *bfqQueue) bool { return q.sort.empty() && b.betterToIdle(q) }

func (b *bfqSched) mayExpireForBudgTimeout(q *bfqQueue, now int64) bool {
	return (!q.waitRequest || budgetLeft(q) >= q.budget/3) && q.budgetTimeout <= now
}

// armSliceTimer is bfq_arm_slice_timer.
func (b *bfqSched) armSliceTimer(now int64) {
	q := b.inService
	q.waitRequest = true
	sl := b.sliceIdle
	if seeky(q) && q.wrCoeff == 1 {
		sl = min(sl, bfqMinTT)
	} else if q.wrCoeff > 1 {
		sl = max(sl, bfqWrMinIdle)
	}
	b.lastIdlingStart = now
	b.idleAt = now + sl
}

// ---------------------------------------------------------------------------
// Expiration.

// expire is bfq_bfqq_expire.
func (b *bfqSched) expire(q *bfqQueue, compensate bool, reason int, now int64) {
	slow, delta := b.isSlow(q, compensate, now)
	if q.wrCoeff == 1 && (slow || (reason == bfqqeBudgetTimeout && budgetLeft(q) >= q.budget/3)) {
		b.chargeTime(q, delta)
	}
	if b.lowLatency && q.wrCoeff == 1 {
		q.lastWrStartFinish = now
	}
	b.recalcBudget(q, reason)
	// __bfq_bfqq_expire
	if q.sort.empty() && !(reason == bfqqePreempted && b.idlingNeeded(q)) {
		if q.dispatched == 0 {
			q.budgetTimeout = now
		}
		b.delBusy(q)
	} else {
		b.activateRequeue(q, false)
	}
	// __bfq_bfqd_reset_in_service
	q.waitRequest = false
	b.idleAt = -1
	b.inService = nil
	if !q.busy && reason != bfqqeBudgetTimeout && reason != bfqqeBudgetExhausted {
		q.nonBlockingWaitRq = true
	} else {
		q.service = 0
	}
}

// isSlow is bfq_bfqq_is_slow; it also returns the service time in ms.
func (b *bfqSched) isSlow(q *bfqQueue, compensate bool, now int64) (bool, int64) {
	slow := seeky(q)
	if !q.sync {
		return false, 0
	}
	end := now
	if compensate {
		end = b.lastIdlingStart
	}
	us := (end - b.lastBudgetStart) / 1000
	if us < 1000 {
		if !b.rot {
			return slow, bfqMinTT / nsPerMs
		}
		return slow, bfqStaticSliceIdle / nsPerMs
	}
	if us > 20000 {
		slow = q.service < b.bfqMaxBudget/2
	}
	return slow, us / 1000
}

// chargeTime is bfq_bfqq_charge_time.
func (b *bfqSched) chargeTime(q *bfqQueue, ms int64) {
	tot := q.service
	timeoutMs := bfqStaticTimeout / nsPerMs
	if ms > 0 && ms < timeoutMs {
		tot = b.bfqMaxBudget * ms / timeoutMs
	}
	if tot < q.service {
		tot = q.service
	}
	if tot > q.budget {
		q.budget = tot
	}
	b.served(q, max(0, tot-q.service))
}

// recalcBudget is __bfq_bfqq_recalc_budget.
func (b *bfqSched) recalcBudget(q *bfqQueue, reason int) {
	minB := b.minBudget()
	budget := q.maxBudget
	if q.wrCoeff > 1 {
		budget = 2 * minB
	}
	if q.sync && q.wrCoeff == 1 {
		switch reason {
		case bfqqeTooIdle:
			switch {
			case q.dispatched > 0:
				budget = min(budget*2, b.bfqMaxBudget)
			case budget > 5*minB:
				budget -= 4 * minB
			default:
				budget = minB
			}
		case bfqqeBudgetTimeout:
			budget = min(budget*2, b.bfqMaxBudget)
		case bfqqeBudgetExhausted:
			budget = min(budget*4, b.bfqMaxBudget)
		case bfqqeNoMoreRequests:
			budget = max(q.service, minB)
		default:
			return
		}
	} else if !q.sync {
		budget = b.bfqMaxBudget
	}
	q.maxBudget = budget
	if b.budgetsAssigned >= bfqStatsMinBudgets && b.userMaxBudget == 0 {
		q.maxBudget = min(q.maxBudget, b.bfqMaxBudget)
	}
	if q.nextRq != nil {
		q.budget = max(q.maxBudget, b.servToCharge(q.nextRq, q))
	}
}

// ---------------------------------------------------------------------------
// Completion.

func (b *bfqSched) Complete(r *Request, now int64) {
	b.advance(now)
	if r.Class < 0 || int(r.Class) >= len(b.queues) {
		return
	}
	q := b.queues[r.Class]
	b.updateHwTag()
	b.totRqInDriver--
	q.dispatched--
	if q.dispatched == 0 && !q.busy {
		q.budgetTimeout = now
	}
	q.lastEndRequest = now
	if dus := (now - b.lastCompletion) / 1000; dus > bfqMinTT/1000 &&
		(b.lastRqMaxSize<<bfqRateShift)/uint64(dus) < 1<<(bfqRateShift-10) {
		b.updateRateReset(nil, now)
	}
	b.lastCompletion = now
	if b.inService != q {
		return
	}
	switch {
	case b.mustIdle(q):
		if q.dispatched == 0 {
			b.armSliceTimer(now)
		}
	case b.mayExpireForBudgTimeout(q, now):
		b.expire(q, false, bfqqeBudgetTimeout, now)
	case q.sort.empty() && (q.dispatched == 0 || !b.betterToIdle(q)):
		b.expire(q, false, bfqqeNoMoreRequests, now)
	}
}

// updateHwTag is bfq_update_hw_tag.
func (b *bfqSched) updateHwTag() {
	if b.totRqInDriver > b.maxRqInDriver {
		b.maxRqInDriver = b.totRqInDriver
	}
	if b.hwTag == 1 || b.totRqInDriver+b.queued <= bfqHwQueueThreshold {
		return
	}
	if q := b.inService; q != nil && q.hasShortTtime &&
		q.dispatched+q.queued < bfqHwQueueThreshold && b.totRqInDriver < bfqHwQueueThreshold {
		return
	}
	s := b.hwTagSamples
	b.hwTagSamples++
	if s < bfqHwQueueSamples {
		return
	}
	b.hwTag = 0
	if b.maxRqInDriver > bfqHwQueueThreshold {
		b.hwTag = 1
	}
	b.maxRqInDriver = 0
	b.hwTagSamples = 0
}

// ---------------------------------------------------------------------------
// Peak rate estimation (bfq_update_peak_rate, bfq_update_rate_reset,
// bfq_reset_rate_computation).

func (b *bfqSched) resetRateComputation(r *Request, now int64) {
	if r != nil {
		b.lastDispatch, b.firstDispatch = now, now
		b.peakRateSamples = 1
		b.sequentialSamples = 0
		b.totSectorsDispatched = uint64(r.Sectors)
		b.lastRqMaxSize = uint64(r.Sectors)
	} else {
		b.peakRateSamples = 0
	}
}

func (b *bfqSched) updateRateReset(r *Request, now int64) {
	if b.peakRateSamples < bfqRateMinSamples || b.deltaFromFirst < bfqRateMinInterval {
		b.resetRateComputation(r, now)
		return
	}
	if d := b.lastCompletion - b.firstDispatch; d > b.deltaFromFirst {
		b.deltaFromFirst = d
	}
	us := uint64(b.deltaFromFirst / 1000)
	if us == 0 {
		us = 1
	}
	rate := (b.totSectorsDispatched << bfqRateShift) / us
	if (b.sequentialSamples < (3*b.peakRateSamples)>>2 && rate <= b.peakRate) || rate > 20<<bfqRateShift {
		b.resetRateComputation(r, now)
		return
	}
	weight := (9 * b.sequentialSamples) / b.peakRateSamples
	weight = min(8, weight*uint64(b.deltaFromFirst)/uint64(bfqRateRefInterval))
	div := 10 - weight
	b.peakRate = b.peakRate*(div-1)/div + rate/div
	if b.peakRate < 1 {
		b.peakRate = 1
	}
	if b.userMaxBudget == 0 { // update_thr_responsiveness_params
		b.bfqMaxBudget = b.calcMaxBudget()
	}
	b.resetRateComputation(r, now)
}

func (b *bfqSched) updatePeakRate(r *Request, q *bfqQueue, now int64) {
	switch {
	case b.peakRateSamples == 0:
		b.resetRateComputation(r, now)
	case now-b.lastDispatch > 100*nsPerMs && b.totRqInDriver == 0:
		b.updateRateReset(r, now)
	default:
		b.peakRateSamples++
		if (b.totRqInDriver > 0 || now-b.lastCompletion < bfqMinTT) && !b.rqSeeky(b.lastPosition, r) {
			b.sequentialSamples++
		}
		b.totSectorsDispatched += uint64(r.Sectors)
		if b.peakRateSamples%32 != 0 {
			b.lastRqMaxSize = max(uint64(r.Sectors), b.lastRqMaxSize)
		} else {
			b.lastRqMaxSize = uint64(r.Sectors)
		}
		b.deltaFromFirst = now - b.firstDispatch
		if b.deltaFromFirst >= bfqRateRefInterval {
			b.updateRateReset(r, now)
		}
	}
	b.lastPosition = r.End()
	if q == b.inService {
		b.inServLastPos = b.lastPosition
	}
	b.lastDispatch = now
}
