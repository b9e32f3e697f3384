package sched

import "github.com/shadowtune/shadowtune/internal/trace"

// kyber.go models kyber (block/kyber-iosched.c, Linux 6.x).
//
// Policy:
//   - Requests are split into scheduling domains by operation: read, write,
//     discard, other (kyber_sched_domain). Each domain is an arrival FIFO
//     (the per-CPU kcq lists flushed in order; one CPU is modelled) in which
//     a new request may merge into one of the 8 newest requests
//     (kyber_bio_merge -> blk_bio_list_merge).
//   - Each domain holds a number of device-wide tokens ("depth"), initially
//     read 256, write 128, discard 64, other 16 (kyber_depth). A request is
//     dispatched only if a token of its domain is free; the token returns at
//     completion.
//   - Dispatch continues the current domain while fewer than its batch size
//     (read 16, write 8, discard 1, other 1: kyber_batch_size) requests were
//     taken in a row and it has requests and tokens; otherwise it moves
//     round-robin to the next domain that can dispatch
//     (kyber_dispatch_request).
//   - Every completion of a read, write or discard records two latencies in
//     8-bucket histograms whose bucket width is target/4: the total latency
//     (completion - Request.Insert, the kernel's start_time_ns) and the I/O
//     latency (completion - Request.Dispatch, io_start_time_ns). The first
//     completion after the timer last ran arms it for 100 ms later
//     (timer_reduce(HZ/10)).
//   - When the timer runs (kyber_timer_fn), a domain's histogram is
//     evaluated once it has 500 samples or 1 s has passed since it was
//     first examined (calculate_percentile). If any domain's p90 I/O latency
//     exceeds its target, the device is congested: every domain with a p99
//     total latency is resized to depth*(p99 bucket+1)/4, which shrinks the
//     domains meeting their target and grows those missing it. Without
//     congestion only domains whose p99 total latency misses the target
//     grow. Depths are clamped to [1, initial depth] (kyber_resize_domain).
//     Note the direction: a domain whose own latency is bad is given MORE
//     tokens; the domains that are fine are throttled to make room for it.
//
// Targets: read_lat_nsec (2 ms) and write_lat_nsec (10 ms) are tunables;
// discard's is fixed at 5 s. Time is virtual: the timer runs at its
// scheduled time, before any later event, and when Dispatch cannot issue a
// queued request it returns the timer time as wake.
//
// Left out: async_depth (75 % of nr_requests for async requests; a tag
// allocation limit upstream of the elevator), per-CPU software queues and
// per-hardware-queue state (one hardware queue is modelled).

func init() {
	register(Spec{
		Name: "kyber",
		Defaults: func(Device) Tunables {
			return Tunables{
				"read_lat_nsec":  2000000,  // kyber_latency_targets[KYBER_READ]
				"write_lat_nsec": 10000000, // kyber_latency_targets[KYBER_WRITE]
			}
		},
		New: newKyber,
	})
}

var kyberRanges = map[string]tunableRange{
	"read_lat_nsec":  {0, 1<<63 - 1},
	"write_lat_nsec": {0, 1<<63 - 1},
}

// Kyber scheduling domains.
const (
	kyRead = iota
	kyWrite
	kyDiscard
	kyOther
	kyDomains
)

var (
	kyberDepth     = [kyDomains]int{256, 128, 64, 16}
	kyberBatchSize = [kyDomains]int{16, 8, 1, 1}
)

const (
	kyLatencyShift   = 2
	kyGoodBuckets    = 1 << kyLatencyShift
	kyLatencyBuckets = 2 << kyLatencyShift
	kyTotal          = 0
	kyIO             = 1
	kyTimerPeriod    = 100 * nsPerMs // HZ / 10
	kyPercentileWait = 1000 * nsPerMs
	kyMinSamples     = 500
	kyDiscardTarget  = 5000 * nsPerMs
)

func newKyber(tun Tunables, dev Device) (Scheduler, error) {
	if err := checkTunables("kyber", tun, kyberRanges); err != nil {
		return nil, err
	}
	k := &kyberSched{
		max:     maxSectors(dev),
		target:  [kyOther]int64{tun["read_lat_nsec"], tun["write_lat_nsec"], kyDiscardTarget},
		depth:   kyberDepth,
		timerAt: -1,
	}
	for i := range k.domainP99 {
		k.domainP99[i] = -1
	}
	return k, nil
}

// kyberSched is the state of one kyber instance.
type kyberSched struct {
	max    uint32
	target [kyOther]int64 // ns

	rqs      [kyDomains]fifo
	bypass   fifo
	depth    [kyDomains]int // current token depth per domain
	inflight [kyDomains]int // tokens in use
	cur      int
	batching int

	buckets   [kyOther][2][kyLatencyBuckets]uint32
	latTimout [kyOther]int64 // 0 = not started (latency_timeout)
	domainP99 [kyOther]int
	timerAt   int64 // -1 = timer not pending
	queued    int
}

func kyDomain(op trace.Op) int32 {
	switch op {
	case trace.Read:
		return kyRead
	case trace.Write:
		return kyWrite
	case trace.Discard:
		return kyDiscard
	}
	return kyOther
}

func (k *kyberSched) Name() string { return "kyber" }

func (k *kyberSched) Queued() int { return k.queued + k.bypass.len() }

// runTimer runs kyber_timer_fn if it was due at or before now.
func (k *kyberSched) runTimer(now int64) {
	if k.timerAt < 0 || now < k.timerAt {
		return
	}
	t := k.timerAt
	k.timerAt = -1
	bad := false
	for d := 0; d < kyOther; d++ {
		if p90 := k.percentile(d, kyIO, 90, t); p90 >= kyGoodBuckets {
			bad = true
		}
	}
	for d := 0; d < kyOther; d++ {
		p99 := k.percentile(d, kyTotal, 99, t)
		if bad {
			if p99 < 0 {
				p99 = k.domainP99[d]
			}
			k.domainP99[d] = -1
		} else if p99 >= 0 {
			k.domainP99[d] = p99
		}
		if p99 < 0 {
			continue
		}
		if bad || p99 >= kyGoodBuckets {
			k.resize(d, (k.depth[d]*(p99+1))>>kyLatencyShift)
		}
	}
}

func (k *kyberSched) resize(d, depth int) {
	if depth < 1 {
		depth = 1
	}
	if depth > kyberDepth[d] {
		depth = kyberDepth[d]
	}
	k.depth[d] = depth
}

// percentile is calculate_percentile: the bucket holding the given
// percentile, or -1 when there are not enough samples yet.
func (k *kyberSched) percentile(d, typ, pct int, now int64) int {
	b := &k.buckets[d][typ]
	samples := uint32(0)
	for _, c := range b {
		samples += c
	}
	if samples == 0 {
		return -1
	}
	if k.latTimout[d] == 0 {
		k.latTimout[d] = now + kyPercentileWait
	}
	if samples < kyMinSamples && k.latTimout[d] > now {
		return -1
	}
	k.latTimout[d] = 0
	ps := (samples*uint32(pct) + 99) / 100
	bucket := 0
	for ; bucket < kyLatencyBuckets-1; bucket++ {
		if b[bucket] >= ps {
			break
		}
		ps -= b[bucket]
	}
	*b = [kyLatencyBuckets]uint32{}
	return bucket
}

func (k *kyberSched) Insert(r *Request, now int64) bool {
	k.runTimer(now)
	if r.Op == flushOp {
		r.Class = ClassBypass
		k.bypass.push(r)
		return false
	}
	d := kyDomain(r.Op)
	if listMerge(&k.rqs[d], r, k.max) != nil {
		return true
	}
	r.Class = d
	k.rqs[d].push(r)
	k.queued++
	return false
}

// dispatchCur is kyber_dispatch_cur_domain.
func (k *kyberSched) dispatchCur() *Request {
	d := k.cur
	if k.rqs[d].len() == 0 || k.inflight[d] >= k.depth[d] {
		return nil
	}
	k.inflight[d]++
	k.batching++
	k.queued--
	return k.rqs[d].pop()
}

func (k *kyberSched) Dispatch(now int64) (*Request, int64) {
	k.runTimer(now)
	if r := k.bypass.pop(); r != nil {
		return r, -1
	}
	if k.batching < kyberBatchSize[k.cur] {
		if r := k.dispatchCur(); r != nil {
			return r, -1
		}
	}
	k.batching = 0
	for i := 0; i < kyDomains; i++ {
		k.cur = (k.cur + 1) % kyDomains
		if r := k.dispatchCur(); r != nil {
			return r, -1
		}
	}
	if k.queued > 0 && k.timerAt >= 0 {
		return nil, k.timerAt // throttled: depths may change when the timer runs
	}
	return nil, -1
}

func (k *kyberSched) Complete(r *Request, now int64) {
	k.runTimer(now)
	d := int(r.Class)
	if d < 0 || d >= kyDomains {
		return
	}
	k.inflight[d]--
	if d == kyOther {
		return
	}
	k.sample(d, kyTotal, now-r.Insert)
	k.sample(d, kyIO, now-r.Dispatch)
	if k.timerAt < 0 {
		k.timerAt = now + kyTimerPeriod
	}
}

// sample is add_latency_sample.
func (k *kyberSched) sample(d, typ int, lat int64) {
	bucket := 0
	if lat > 0 {
		div := k.target[d] >> kyLatencyShift
		if div < 1 {
			div = 1
		}
		q := (lat - 1) / div
		if q > kyLatencyBuckets-1 {
			q = kyLatencyBuckets - 1
		}
		bucket = int(q)
	}
	k.buckets[d][typ][bucket]++
}
