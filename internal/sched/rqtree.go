package sched

// rqtree.go: an ordered set of requests keyed by start sector, the model of
// the kernel's per-queue rb-trees (elv_rb_add/elv_rb_del in
// block/elevator.c, used by block/mq-deadline.c sort_list and
// block/bfq-iosched.c bfqq->sort_list).
//
// It is a treap whose nodes live in one slice per scheduler (rqPool), so that
// inserting a request does not allocate once the pool has grown to the peak
// number of queued requests. Several trees (one per direction or per bfq
// queue) share a pool; a tree is just the index of its root. Node priorities
// come from a fixed-seed xorshift generator, so the shape, and therefore
// every query, is deterministic.
//
// Keys are (Sector, ID). Requests with equal keys (duplicate IDs) are
// tolerated: deletion then searches both subtrees of an equal key.

type rqNode struct {
	sector      uint64 // key, copied from r so searches stay in the pool
	id          int32
	left, right int32
	pri         uint32
	r           *Request
}

// nodeLess orders node a before key (sector, id).
func (n *rqNode) less(sector uint64, id int32) bool {
	return n.sector < sector || (n.sector == sector && n.id < id)
}

// greater reports whether node n orders after key (sector, id).
func (n *rqNode) greater(sector uint64, id int32) bool {
	return n.sector > sector || (n.sector == sector && n.id > id)
}

// rqPool owns the nodes of all trees of one scheduler instance.
type rqPool struct {
	nodes []rqNode // index 0 is the nil node
	free  []int32
	rng   uint32
}

func newRQPool() *rqPool {
	return &rqPool{nodes: make([]rqNode, 1, 64), rng: 0x9e3779b9}
}

func (p *rqPool) rand() uint32 {
	x := p.rng
	x ^= x << 13
	x ^= x >> 17
	x ^= x << 5
	p.rng = x
	return x
}

func (p *rqPool) alloc(r *Request) int32 {
	var n int32
	if k := len(p.free); k > 0 {
		n = p.free[k-1]
		p.free = p.free[:k-1]
	} else {
		p.nodes = append(p.nodes, rqNode{})
		n = int32(len(p.nodes) - 1)
	}
	p.nodes[n] = rqNode{sector: r.Sector, id: r.ID, r: r, pri: p.rand()}
	return n
}

// rqTree is one ordered set; the zero value is empty.
type rqTree struct {
	root int32
	n    int
}

func (t *rqTree) empty() bool { return t.n == 0 }

// insert adds r (keyed by its current Sector and ID).
func (p *rqPool) insert(t *rqTree, r *Request) {
	n := p.alloc(r)
	t.root = p.ins(t.root, n)
	t.n++
}

func (p *rqPool) ins(t, n int32) int32 {
	if t == 0 {
		return n
	}
	if p.nodes[n].pri > p.nodes[t].pri {
		l, r := p.split(t, p.nodes[n].sector, p.nodes[n].id)
		p.nodes[n].left, p.nodes[n].right = l, r
		return n
	}
	if p.nodes[t].greater(p.nodes[n].sector, p.nodes[n].id) {
		p.nodes[t].left = p.ins(p.nodes[t].left, n)
	} else {
		p.nodes[t].right = p.ins(p.nodes[t].right, n)
	}
	return t
}

// split divides t into keys < (sector, id) and keys >= (sector, id).
func (p *rqPool) split(t int32, sector uint64, id int32) (int32, int32) {
	if t == 0 {
		return 0, 0
	}
	if p.nodes[t].less(sector, id) {
		l, r := p.split(p.nodes[t].right, sector, id)
		p.nodes[t].right = l
		return t, r
	}
	l, r := p.split(p.nodes[t].left, sector, id)
	p.nodes[t].left = r
	return l, t
}

// join concatenates a and b, every key of a <= every key of b.
func (p *rqPool) join(a, b int32) int32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	if p.nodes[a].pri > p.nodes[b].pri {
		p.nodes[a].right = p.join(p.nodes[a].right, b)
		return a
	}
	p.nodes[b].left = p.join(a, p.nodes[b].left)
	return b
}

// remove deletes r, which must still have the Sector and ID it was inserted
// with. It reports whether r was found.
func (p *rqPool) remove(t *rqTree, r *Request) bool {
	root, gone := p.del(t.root, r)
	if gone == 0 {
		return false
	}
	t.root = root
	t.n--
	p.nodes[gone] = rqNode{}
	p.free = append(p.free, gone)
	return true
}

func (p *rqPool) del(t int32, r *Request) (int32, int32) {
	if t == 0 {
		return 0, 0
	}
	nd := &p.nodes[t]
	if nd.r == r {
		return p.join(nd.left, nd.right), t
	}
	if nd.sector == r.Sector && nd.id == r.ID { // duplicate key: look on both sides
		if l, g := p.del(nd.left, r); g != 0 {
			p.nodes[t].left = l
			return t, g
		}
		rr, g := p.del(p.nodes[t].right, r)
		p.nodes[t].right = rr
		return t, g
	}
	if nd.greater(r.Sector, r.ID) {
		l, g := p.del(nd.left, r)
		p.nodes[t].left = l
		return t, g
	}
	rr, g := p.del(nd.right, r)
	p.nodes[t].right = rr
	return t, g
}

// first returns the request with the smallest key, or nil.
func (p *rqPool) first(t *rqTree) *Request {
	n := t.root
	if n == 0 {
		return nil
	}
	for p.nodes[n].left != 0 {
		n = p.nodes[n].left
	}
	return p.nodes[n].r
}

// lowerBound returns the first request whose start sector is >= pos
// (mq-deadline's deadline_from_pos), or nil.
func (p *rqPool) lowerBound(t *rqTree, pos uint64) *Request {
	var res *Request
	n := t.root
	for n != 0 {
		nd := &p.nodes[n]
		if nd.sector >= pos {
			res = nd.r
			n = nd.left
		} else {
			n = nd.right
		}
	}
	return res
}

// findStart returns a request starting exactly at pos (elv_rb_find), or nil.
func (p *rqPool) findStart(t *rqTree, pos uint64) *Request {
	if r := p.lowerBound(t, pos); r != nil && r.Sector == pos {
		return r
	}
	return nil
}

// after returns the first request with key > r's key (rb_next), or nil.
func (p *rqPool) after(t *rqTree, r *Request) *Request {
	var res *Request
	n := t.root
	for n != 0 {
		nd := &p.nodes[n]
		if nd.greater(r.Sector, r.ID) {
			res = nd.r
			n = nd.left
		} else {
			n = nd.right
		}
	}
	return res
}

// before returns the last request with key < r's key (rb_prev), or nil.
func (p *rqPool) before(t *rqTree, r *Request) *Request {
	var res *Request
	n := t.root
	for n != 0 {
		nd := &p.nodes[n]
		if nd.less(r.Sector, r.ID) {
			res = nd.r
			n = nd.right
		} else {
			n = nd.left
		}
	}
	return res
}
