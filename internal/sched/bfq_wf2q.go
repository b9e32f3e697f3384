package sched

// bfq_wf2q.go models B-WF2Q+, the fair-queueing engine of BFQ
// (block/bfq-wf2q.c), for one group (no cgroups) and one I/O priority class
// (best effort).
//
// Every busy queue ("entity") has a virtual start and finish time; the
// finish is start + budget·2^22/weight (bfq_delta, WFQ_SERVICE_SHIFT). The
// active tree orders busy entities by finish time and keeps the minimum
// start time of each subtree, so the entity with the smallest finish among
// those eligible (start <= system virtual time) is found in O(log n)
// (bfq_first_active_entity). The system virtual time advances by
// served·2^22/wsum on every dispatch (bfq_bfqq_served), wsum being the sum
// of the weights of the entities on the service tree. Entities that go idle
// with a finish time in the future are kept on an idle tree, still counted
// in wsum, so that they cannot gain by going idle; they are forgotten when
// the virtual time passes their finish (bfq_forget_idle). The entity chosen
// next is cached in nextInService and updated as the kernel does
// (bfq_update_next_in_service).
//
// The trees are treaps linked through fields of bfqQueue; priorities come
// from the scheduler's fixed-seed generator.

const wfqServiceShift = 22 // WFQ_SERVICE_SHIFT

// Which tree an entity is on.
const (
	entNone uint8 = iota
	entActive
	entIdle
)

// bfqDelta maps service (sectors) to virtual time (bfq_delta).
func bfqDelta(service, weight int64) uint64 {
	if weight <= 0 {
		weight = 1
	}
	if service < 0 {
		service = 0
	}
	return (uint64(service) << wfqServiceShift) / uint64(weight)
}

func entLess(a, b *bfqQueue) bool {
	if a.finish != b.finish {
		return a.finish < b.finish
	}
	return a.tseq < b.tseq
}

func entUpdate(n *bfqQueue) {
	m := n.start
	if n.tl != nil && n.tl.minStart < m {
		m = n.tl.minStart
	}
	if n.tr != nil && n.tr.minStart < m {
		m = n.tr.minStart
	}
	n.minStart = m
}

func entIns(t, n *bfqQueue) *bfqQueue {
	if t == nil {
		entUpdate(n)
		return n
	}
	if n.tpri > t.tpri {
		n.tl, n.tr = entSplit(t, n)
		entUpdate(n)
		return n
	}
	if entLess(n, t) {
		t.tl = entIns(t.tl, n)
	} else {
		t.tr = entIns(t.tr, n)
	}
	entUpdate(t)
	return t
}

// entSplit divides t into entities ordered before k and the rest.
func entSplit(t, k *bfqQueue) (*bfqQueue, *bfqQueue) {
	if t == nil {
		return nil, nil
	}
	if entLess(t, k) {
		l, r := entSplit(t.tr, k)
		t.tr = l
		entUpdate(t)
		return t, r
	}
	l, r := entSplit(t.tl, k)
	t.tl = r
	entUpdate(t)
	return l, t
}

func entJoin(a, b *bfqQueue) *bfqQueue {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.tpri > b.tpri {
		a.tr = entJoin(a.tr, b)
		entUpdate(a)
		return a
	}
	b.tl = entJoin(a, b.tl)
	entUpdate(b)
	return b
}

func entDel(t, n *bfqQueue) *bfqQueue {
	if t == nil {
		return nil
	}
	if t == n {
		r := entJoin(t.tl, t.tr)
		n.tl, n.tr = nil, nil
		return r
	}
	if entLess(n, t) {
		t.tl = entDel(t.tl, n)
	} else {
		t.tr = entDel(t.tr, n)
	}
	entUpdate(t)
	return t
}

func entMin(t *bfqQueue) *bfqQueue {
	if t == nil {
		return nil
	}
	for t.tl != nil {
		t = t.tl
	}
	return t
}

func entMax(t *bfqQueue) *bfqQueue {
	if t == nil {
		return nil
	}
	for t.tr != nil {
		t = t.tr
	}
	return t
}

func (b *bfqSched) entInsert(root **bfqQueue, q *bfqQueue, tree uint8) {
	b.tseq++
	q.tseq = b.tseq
	q.tpri = b.pool.rand()
	q.tl, q.tr = nil, nil
	*root = entIns(*root, q)
	q.tree = tree
}

func (b *bfqSched) activeInsert(q *bfqQueue)  { b.entInsert(&b.active, q, entActive) }
func (b *bfqSched) activeExtract(q *bfqQueue) { b.active = entDel(b.active, q); q.tree = entNone }
func (b *bfqSched) idleInsert(q *bfqQueue)    { b.entInsert(&b.idle, q, entIdle) }
func (b *bfqSched) idleExtract(q *bfqQueue)   { b.idle = entDel(b.idle, q); q.tree = entNone }

// firstEligible is bfq_first_active_entity: the entity with the smallest
// finish time among those with start <= vtime.
func (b *bfqSched) firstEligible(vtime uint64) *bfqQueue {
	var first *bfqQueue
	n := b.active
	for n != nil {
		if n.start <= vtime {
			first = n
		}
		if n.tl != nil && n.tl.minStart <= vtime {
			n = n.tl
			continue
		}
		if first != nil {
			break
		}
		n = n.tr
	}
	return first
}

// updateVtime is bfq_update_vtime.
func (b *bfqSched) updateVtime(v uint64) {
	if v > b.vtime {
		b.vtime = v
		b.forgetIdle()
	}
}

// lookupNext is bfq_lookup_next_entity / __bfq_lookup_next_entity: when no
// queue is in service the virtual time jumps to the smallest start time if
// no entity is eligible.
func (b *bfqSched) lookupNext() *bfqQueue {
	if b.active == nil {
		return nil
	}
	v := b.vtime
	if b.active.minStart > v {
		v = b.active.minStart
	}
	if b.inService == nil {
		b.updateVtime(v)
	}
	return b.firstEligible(v)
}

// updateNext is bfq_update_next_in_service.
func (b *bfqSched) updateNext(newEnt *bfqQueue) {
	next := b.nextInService
	if newEnt != nil && newEnt != next {
		if next == nil || (newEnt.start <= b.vtime && next.finish > newEnt.finish) {
			next = newEnt
		}
	} else {
		next = b.lookupNext()
	}
	b.nextInService = next
}

// forget removes q from the service tree's weight sum (bfq_forget_entity).
func (b *bfqSched) forget(q *bfqQueue) {
	q.onST = false
	b.wsum -= uint64(q.weight)
}

// forgetIdle is bfq_forget_idle: drop at most one idle entity whose finish
// time the virtual time has reached.
func (b *bfqSched) forgetIdle() {
	if b.idle == nil {
		return
	}
	if b.active == nil {
		if last := entMax(b.idle); last.finish <= b.vtime {
			b.vtime = last.finish
		}
	}
	if first := entMin(b.idle); first.finish <= b.vtime {
		b.idleExtract(first)
		b.forget(first)
	}
}

// served is bfq_bfqq_served: charge s sectors of service to q.
func (b *bfqSched) served(q *bfqQueue, s int64) {
	if q.wrCoeff > 1 {
		q.serviceFromWr += s
	}
	q.service += s
	if b.wsum > 0 {
		b.vtime += (uint64(s) << wfqServiceShift) / b.wsum
	}
	b.forgetIdle()
}

// updateWeightPrio applies a pending weight change
// (__bfq_entity_update_weight_prio): weight = orig_weight · wr_coeff.
func (b *bfqSched) updateWeightPrio(q *bfqQueue) {
	if !q.prioChanged {
		return
	}
	q.prioChanged = false
	nw := bfqWeight * q.wrCoeff
	if q.onST {
		b.wsum -= uint64(q.weight)
		b.wsum += uint64(nw)
	}
	q.weight = nw
}

// updateFinTimeEnqueue is bfq_update_fin_time_enqueue.
func (b *bfqSched) updateFinTimeEnqueue(q *bfqQueue, backshifted bool) {
	b.updateWeightPrio(q)
	q.finish = q.start + bfqDelta(q.budget, q.weight)
	if backshifted && b.vtime > q.finish {
		d := (b.vtime - q.finish) / uint64(q.wrCoeff)
		q.start += d
		q.finish += d
	}
	b.activeInsert(q)
}

// activateEntity is __bfq_activate_entity (a true activation).
func (b *bfqSched) activateEntity(q *bfqQueue, nonBlockingWaitRq bool) {
	backshifted := false
	minVstart := b.vtime
	if nonBlockingWaitRq && b.vtime > q.finish {
		backshifted = true
		minVstart = q.finish
	}
	if q.tree == entIdle {
		b.idleExtract(q)
		q.start = minVstart
		if q.finish > minVstart {
			q.start = q.finish
		}
	} else {
		q.start = minVstart
		b.wsum += uint64(q.weight)
		q.onST = true
	}
	b.updateFinTimeEnqueue(q, backshifted)
}

// requeueEntity is __bfq_requeue_entity.
func (b *bfqSched) requeueEntity(q *bfqQueue) {
	if q == b.inService {
		q.finish = q.start + bfqDelta(q.service, q.weight)
		q.start = q.finish
		if q.tree == entActive {
			b.activeExtract(q)
		}
	} else if q.tree == entActive {
		b.activeExtract(q)
	}
	b.updateFinTimeEnqueue(q, false)
}

// activateRequeue is bfq_activate_requeue_entity for a queue.
func (b *bfqSched) activateRequeue(q *bfqQueue, nonBlockingWaitRq bool) {
	if q == b.inService || q.tree == entActive {
		b.requeueEntity(q)
	} else {
		b.activateEntity(q, nonBlockingWaitRq)
	}
	b.updateNext(q)
}

// deactivate is bfq_deactivate_entity with ins_into_idle_tree = true.
func (b *bfqSched) deactivate(q *bfqQueue) {
	if !q.onST {
		return
	}
	inServ := q == b.inService
	if inServ {
		q.finish = q.start + bfqDelta(q.service, q.weight)
	}
	if q.tree == entActive {
		b.activeExtract(q)
	} else if !inServ && q.tree == entIdle {
		b.idleExtract(q)
	}
	if q.finish <= b.vtime {
		b.forget(q)
	} else {
		b.idleInsert(q)
	}
	if b.nextInService == q {
		b.updateNext(nil)
	}
}

// getNextQueue is bfq_get_next_queue: put the cached next entity in
// service and look up its successor.
func (b *bfqSched) getNextQueue() *bfqQueue {
	if b.busyQueues == 0 {
		return nil
	}
	q := b.nextInService
	if q == nil || q.tree != entActive {
		q = b.lookupNext()
		if q == nil {
			return nil
		}
	}
	b.inService = q
	q.service = 0
	if q.tree == entActive {
		b.activeExtract(q)
	}
	b.updateNext(nil)
	return q
}
