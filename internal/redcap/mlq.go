package redcap

// mlq is smq's multi-level queue (struct queue in
// drivers/md/dm-cache-policy-smq.c): LRU lists stacked in levels, entries
// moved up a level or more when used and spread back over the levels by
// redistribute. Entries are the integers [0, n); an entry is in at most
// one list. The kernel's sentinel entries are left out: the only peek
// that stands for them here (queue_demotion's) crosses them.
type mlq struct {
	head, tail [smqLevels]int32
	count      [smqLevels]int // entries per level
	target     [smqLevels]int // redistribute's count per level (q_set_targets)
	prev, next []int32
	level      []uint8
	queued     []bool
	n          int // entries queued
	// topLevels and inTop: the top topLevels levels hold inTop entries
	// between them after a redistribute (nr_top_levels, nr_in_top_levels);
	// topLevels 0: all levels share the entries evenly.
	topLevels, inTop int
	lastTargetN      int
}

// smqLevels is NR_HOTSPOT_LEVELS and NR_CACHE_LEVELS.
const smqLevels = 64

func newMLQ(entries, topLevels, inTop int) *mlq {
	q := &mlq{prev: make([]int32, entries), next: make([]int32, entries), level: make([]uint8, entries),
		queued: make([]bool, entries), topLevels: topLevels, inTop: inTop}
	q.reset()
	return q
}

// reset empties the queue without allocating.
func (q *mlq) reset() {
	for l := range q.head {
		q.head[l], q.tail[l] = none, none
	}
	q.count, q.target = [smqLevels]int{}, [smqLevels]int{}
	clear(q.prev)
	clear(q.next)
	clear(q.level)
	clear(q.queued)
	q.n, q.lastTargetN = 0, -1
}

// push adds e at the tail of its level (q_push).
func (q *mlq) push(e int32) {
	l := q.level[e]
	q.prev[e], q.next[e] = q.tail[l], none
	if q.tail[l] != none {
		q.next[q.tail[l]] = e
	} else {
		q.head[l] = e
	}
	q.tail[l] = e
	q.count[l]++
	q.queued[e] = true
	q.n++
}

// del takes e out of its level (q_del).
func (q *mlq) del(e int32) {
	l := q.level[e]
	p, n := q.prev[e], q.next[e]
	if p != none {
		q.next[p] = n
	} else {
		q.head[l] = n
	}
	if n != none {
		q.prev[n] = p
	} else {
		q.tail[l] = p
	}
	q.prev[e], q.next[e] = none, none
	q.count[l]--
	q.queued[e] = false
	q.n--
}

// peek returns the oldest entry of the lowest populated level below
// maxLevel, or none (q_peek crossing sentinels).
func (q *mlq) peek(maxLevel int) int32 {
	for l := range min(maxLevel, smqLevels) {
		if q.head[l] != none {
			return q.head[l]
		}
	}
	return none
}

// setTargets spreads the queued entries over the levels (q_set_targets):
// inTop of them over the top topLevels levels, the rest evenly below,
// the lower levels taking the remainder.
func (q *mlq) setTargets() {
	if q.lastTargetN == q.n {
		return
	}
	q.lastTargetN = q.n
	spread := func(n, lo, hi int) {
		per, rem := 0, 0
		if hi > lo {
			per, rem = n/(hi-lo), n%(hi-lo)
		}
		for l := lo; l < hi; l++ {
			q.target[l] = per
			if l < lo+rem {
				q.target[l]++
			}
		}
	}
	if q.topLevels == 0 {
		spread(q.n, 0, smqLevels)
		return
	}
	spread(q.inTop, smqLevels-q.topLevels, smqLevels)
	spread(max(q.n-q.inTop, 0), 0, smqLevels-q.topLevels)
}

// redistribute moves entries between adjacent levels, from the bottom up,
// until each level holds its target (q_redistribute): a level short of
// entries takes the oldest from the levels above, one with too many
// passes its newest up.
func (q *mlq) redistribute() {
	q.setTargets()
	for l := range smqLevels - 1 {
		for q.count[l] < q.target[l] {
			e := none
			for a := l + 1; a < smqLevels && e == none; a++ {
				e = q.head[a]
			}
			if e == none {
				break
			}
			q.move(e, uint8(l))
		}
		for q.count[l] > q.target[l] {
			q.move(q.tail[l], uint8(l+1))
		}
	}
}

// move puts e at the tail of level l.
func (q *mlq) move(e int32, l uint8) {
	q.del(e)
	q.level[e] = l
	q.push(e)
}

// requeue moves e to the tail of extra levels above its own (q_requeue),
// the oldest entry of that level taking e's old level, so that the
// levels keep their counts.
func (q *mlq) requeue(e int32, extra uint8) {
	old := q.level[e]
	nl := min(int(old)+int(extra), smqLevels-1)
	if extra > 0 && int(old) < smqLevels-1 {
		if d := q.head[nl]; d != none {
			q.move(d, old)
		}
	}
	q.move(e, uint8(nl))
}
