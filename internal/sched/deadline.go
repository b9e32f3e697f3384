package sched

// deadline.go models mq-deadline (block/mq-deadline.c, Linux 6.x), with the
// bio merge path of block/elevator.c (elv_merge) and block/blk-mq-sched.c
// (blk_mq_sched_try_merge) and the request merge of block/blk-merge.c
// (attempt_back_merge / attempt_front_merge).
//
// Policy (__dd_dispatch_request):
//   - Requests are kept per direction (reads; writes and discards) in a
//     sector-sorted tree and an arrival FIFO; each gets a deadline of
//     insertion time + read_expire / write_expire.
//   - A batch continues in the direction of the last dispatch with the first
//     request at or after latest_pos (the start sector of the last request
//     dispatched in that direction: deadline_next_request /
//     deadline_from_pos) while fewer than fifo_batch requests were
//     dispatched in the batch.
//   - Otherwise a new batch starts: reads are preferred, but when writes are
//     pending and reads have already been preferred writes_starved times in
//     a row, writes are chosen. In the chosen direction the oldest request is
//     taken when the oldest has expired or nothing lies at or after
//     latest_pos; else the next request in sector order.
//   - The model starts, like the kernel, with last_dir = write.
//
// Merging (bio path): first the one-hit cache q->last_merge (back or front,
// whatever front_merges says, as in elv_merge), then the hash of request end
// sectors (back merge), then, when front_merges=1, a request of the same
// direction starting where the new one ends (dd_request_merge). A merged
// request then tries to absorb its sector-order neighbour (attempt_back_merge
// / attempt_front_merge); the survivor keeps the earlier deadline and FIFO
// position (dd_merged_requests). Merges are limited to Device.MaxSectors.
//
// Left out: I/O priority classes (all requests are best-effort, so
// prio_aging_expire has no effect and is not offered), async_depth (a
// request-allocation limit upstream of the elevator), zoned-device write
// locking, and the hash's collision order (the newest request ending at a
// sector is the one found).

func init() {
	register(Spec{
		Name:     "mq-deadline",
		Defaults: deadlineDefaults,
		New:      newDeadline,
	})
}

var deadlineRanges = map[string]tunableRange{
	"read_expire":    {0, intMax}, // ms
	"write_expire":   {0, intMax}, // ms
	"writes_starved": {intMin, intMax},
	"front_merges":   {0, 1},
	"fifo_batch":     {0, intMax},
}

// deadlineDefaults returns mq-deadline's defaults (mq-deadline.c:
// read_expire = HZ/2, write_expire = 5*HZ, writes_starved = 2,
// fifo_batch = 16, front_merges = 1), in sysfs units (ms for the expiries).
func deadlineDefaults(Device) Tunables {
	return Tunables{
		"read_expire":    500,
		"write_expire":   5000,
		"writes_starved": 2,
		"front_merges":   1,
		"fifo_batch":     16,
	}
}

func newDeadline(tun Tunables, dev Device) (Scheduler, error) {
	if err := checkTunables("mq-deadline", tun, deadlineRanges); err != nil {
		return nil, err
	}
	return &deadlineSched{
		max:           maxSectors(dev),
		expire:        [2]int64{tun["read_expire"] * nsPerMs, tun["write_expire"] * nsPerMs},
		fifoBatch:     tun["fifo_batch"],
		writesStarved: tun["writes_starved"],
		frontMerges:   tun["front_merges"] != 0,
		pool:          newRQPool(),
		lastDir:       ddWrite,
		hash:          make(map[uint64]*Request),
	}, nil
}

const (
	ddRead  = 0
	ddWrite = 1
)

// deadlineSched is the state of one mq-deadline instance.
type deadlineSched struct {
	max           uint32
	expire        [2]int64 // ns, per direction
	fifoBatch     int64
	writesStarved int64
	frontMerges   bool

	pool      *rqPool
	sort      [2]rqTree
	fifo      [2]fifo
	bypass    fifo
	latestPos [2]uint64
	lastDir   int
	batching  int64
	starved   int64

	hash      map[uint64]*Request // end sector -> request (elv_rqhash)
	lastMerge *Request            // q->last_merge
	queued    int
}

func ddDir(r *Request) int32 {
	if r.IsRead() {
		return ddRead
	}
	return ddWrite
}

func (d *deadlineSched) Name() string { return "mq-deadline" }

func (d *deadlineSched) Queued() int { return d.queued + d.bypass.len() }

func (d *deadlineSched) Insert(r *Request, now int64) bool {
	if r.Op == flushOp {
		r.Class = ClassBypass
		d.bypass.push(r)
		return false
	}
	r.Class = ddDir(r)
	if d.bioMerge(r) {
		return true
	}
	dir := r.Class
	d.pool.insert(&d.sort[dir], r)
	if mergeable(r) {
		d.hash[r.End()] = r
		if d.lastMerge == nil {
			d.lastMerge = r
		}
	}
	r.Deadline = now + d.expire[dir]
	d.fifo[dir].push(r)
	d.queued++
	return false
}

func (d *deadlineSched) hashDel(r *Request) {
	if d.hash[r.End()] == r {
		delete(d.hash, r.End())
	}
}

// bioMerge tries to merge r into a queued request (elv_merge +
// blk_mq_sched_try_merge).
func (d *deadlineSched) bioMerge(r *Request) bool {
	if !mergeable(r) {
		return false
	}
	dir := r.Class
	var c *Request
	front := false
	if lm := d.lastMerge; lm != nil && sameOpMergeable(lm, r) {
		if lm.End() == r.Sector {
			c = lm
		} else if lm.Sector == r.End() {
			c, front = lm, true
		}
	}
	if c == nil {
		if h := d.hash[r.Sector]; h != nil && sameOpMergeable(h, r) {
			c = h
		} else if d.frontMerges {
			if f := d.pool.findStart(&d.sort[dir], r.End()); f != nil && sameOpMergeable(f, r) {
				c, front = f, true
			}
		}
	}
	if c == nil || !fits(c, r, d.max) {
		return false
	}
	t := &d.sort[dir]
	if front {
		d.pool.remove(t, c) // dd_request_merged: reposition
		absorb(c, r, true)
		d.pool.insert(t, c)
		if p := d.pool.before(t, c); p != nil && d.reqMergeable(p, c) {
			d.mergeRequests(p, c) // attempt_front_merge
			return true
		}
	} else {
		d.hashDel(c)
		absorb(c, r, false)
		d.hash[c.End()] = c
		if n := d.pool.after(t, c); n != nil && d.reqMergeable(c, n) {
			d.mergeRequests(c, n) // attempt_back_merge
			return true
		}
	}
	d.lastMerge = c
	return true
}

// reqMergeable is attempt_merge's test: same op, contiguous, fits.
func (d *deadlineSched) reqMergeable(a, b *Request) bool {
	return sameOpMergeable(a, b) && a.End() == b.Sector && fits(a, b, d.max)
}

// mergeRequests merges queued request gone (just after keep) into keep
// (elv_merge_requests + dd_merged_requests + deadline_remove_request).
func (d *deadlineSched) mergeRequests(keep, gone *Request) {
	dir := keep.Class
	if gone.Deadline < keep.Deadline {
		d.fifo[dir].takeSlot(keep, gone)
		keep.Deadline = gone.Deadline
	} else {
		d.fifo[dir].remove(gone)
	}
	d.pool.remove(&d.sort[dir], gone)
	d.hashDel(gone)
	d.hashDel(keep)
	absorb(keep, gone, false)
	d.hash[keep.End()] = keep
	d.lastMerge = keep
	d.queued--
}

// remove takes r off the sort tree, FIFO and hash (deadline_remove_request).
func (d *deadlineSched) remove(r *Request) {
	dir := r.Class
	d.fifo[dir].remove(r)
	d.pool.remove(&d.sort[dir], r)
	d.hashDel(r)
	if d.lastMerge == r {
		d.lastMerge = nil
	}
	d.queued--
}

// next is deadline_next_request: the first request of dir at or after
// latest_pos[dir].
func (d *deadlineSched) next(dir int) *Request {
	return d.pool.lowerBound(&d.sort[dir], d.latestPos[dir])
}

func (d *deadlineSched) Dispatch(now int64) (*Request, int64) {
	if r := d.bypass.pop(); r != nil {
		return r, -1
	}
	rq := d.next(d.lastDir)
	if rq == nil || d.batching >= d.fifoBatch {
		// Not batching: choose a direction.
		dir := -1
		if d.fifo[ddRead].len() > 0 {
			dir = ddRead
			if d.fifo[ddWrite].len() > 0 {
				s := d.starved
				d.starved++
				// starved is unsigned in the kernel: a negative
				// writes_starved never lets writes win.
				if d.writesStarved >= 0 && s >= d.writesStarved {
					dir = ddWrite
				}
			}
		} else if d.fifo[ddWrite].len() > 0 {
			dir = ddWrite
		}
		if dir < 0 {
			return nil, -1
		}
		if dir == ddWrite {
			d.starved = 0
		}
		next := d.next(dir)
		if head := d.fifo[dir].peek(); next == nil || head.Deadline <= now {
			rq = head // expired, or nothing ahead of latest_pos
		} else {
			rq = next
		}
		d.lastDir = dir
		d.batching = 0
	}
	d.batching++
	d.remove(rq)
	d.latestPos[rq.Class] = rq.Sector
	return rq, -1
}

func (d *deadlineSched) Complete(r *Request, now int64) {}
