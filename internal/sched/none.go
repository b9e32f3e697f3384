package sched

// none.go models the "none" elevator: no I/O scheduler, blk-mq's software
// queue only (block/blk-mq.c blk_mq_submit_bio, block/blk-mq-sched.c
// __blk_mq_sched_bio_merge / blk_mq_flush_busy_ctxs, block/blk-merge.c
// blk_bio_list_merge).
//
// Policy: requests are dispatched in arrival order. While they wait, a new
// request is merged into one of the 8 newest queued requests when it is the
// same operation, contiguous (back merge: the queued request ends where the
// new one starts; front merge: it starts where the new one ends) and the
// result does not exceed Device.MaxSectors; a contiguous candidate that is
// too large stops the search, as in the kernel.
//
// Left out: plug merging before the software queue (the recorded requests
// already went through the submitter's plug), per-CPU software queues (one
// queue is modelled), and direct issue bypassing the software queue when the
// device is idle (equivalent here: Dispatch is called at once).

func init() {
	register(Spec{
		Name:     "none",
		Defaults: func(Device) Tunables { return Tunables{} },
		New: func(tun Tunables, dev Device) (Scheduler, error) {
			if err := checkTunables("none", tun, nil); err != nil {
				return nil, err
			}
			return &noneSched{max: maxSectors(dev)}, nil
		},
	})
}

// noneSched is the state of one "none" instance.
type noneSched struct {
	max    uint32
	q      fifo
	bypass fifo
}

func (s *noneSched) Name() string { return "none" }

func (s *noneSched) Queued() int { return s.q.len() + s.bypass.len() }

func (s *noneSched) Insert(r *Request, now int64) bool {
	if r.Op == flushOp {
		r.Class = ClassBypass
		s.bypass.push(r)
		return false
	}
	if listMerge(&s.q, r, s.max) != nil {
		return true
	}
	r.Class = 0
	s.q.push(r)
	return false
}

func (s *noneSched) Dispatch(now int64) (*Request, int64) {
	if r := s.bypass.pop(); r != nil {
		return r, -1
	}
	return s.q.pop(), -1
}

func (s *noneSched) Complete(r *Request, now int64) {}
