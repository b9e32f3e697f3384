package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Throttle is a token-bucket limit in front of a device: the IOPS and
// bandwidth caps of a cloud volume, or QEMU's throttling.iops-total and
// throttling.bps-total on a virtio disk. A request may start service only
// while each bucket's level is at most its burst; starting adds one
// request to the IOPS bucket and its bytes to the bandwidth bucket, and
// each bucket drains at its rate. This is the leaky bucket of QEMU's
// util/throttle.c (throttle_compute_wait, throttle_account) with QEMU's
// default bucket size, a tenth of a second at the rate, when Burst* is 0.
// Flushes pass without counting.
//
// A zero rate is no cap on that quantity; a Throttle with both rates 0 is
// no throttle.
type Throttle struct {
	// IOPS is the request cap, requests per second (0: none).
	IOPS float64 `json:"iops,omitempty"`
	// BytesPerSec is the bandwidth cap, bytes per second (0: none).
	BytesPerSec float64 `json:"bytesPerSec,omitempty"`
	// BurstIOs and BurstBytes are the bucket sizes, requests and bytes a
	// full bucket lets through above the rate (0: rate/10).
	BurstIOs   float64 `json:"burstIOs,omitempty"`
	BurstBytes float64 `json:"burstBytes,omitempty"`
}

// Enabled reports whether t caps anything.
func (t Throttle) Enabled() bool { return t.IOPS > 0 || t.BytesPerSec > 0 }

// String formats the caps, e.g. "3000 IOPS, 125.0 MB/s".
func (t Throttle) String() string {
	switch {
	case t.IOPS > 0 && t.BytesPerSec > 0:
		return fmt.Sprintf("%.0f IOPS, %.1f MB/s", t.IOPS, t.BytesPerSec/1e6)
	case t.IOPS > 0:
		return fmt.Sprintf("%.0f IOPS", t.IOPS)
	case t.BytesPerSec > 0:
		return fmt.Sprintf("%.1f MB/s", t.BytesPerSec/1e6)
	}
	return "none"
}

func (t Throttle) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"iops", t.IOPS}, {"bytesPerSec", t.BytesPerSec}, {"burstIOs", t.BurstIOs}, {"burstBytes", t.BurstBytes}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("field \"throttle.%s\": must be a finite number ≥ 0, got %v", f.name, f.v)
		}
	}
	return nil
}

// Bucket replays a Throttle in time: the state of its two buckets. The
// zero Bucket admits everything at once; use [Throttle.NewBucket].
type Bucket struct {
	t                Throttle
	burstIOs, burstB float64
	levelIOs, levelB float64 // requests and bytes above the drained level
	at               int64   // ns, when the levels were last updated
	last             int64   // ns, the last admission (admissions are FIFO)
	started          bool
}

// NewBucket returns empty buckets (a full burst available) for t.
func (t Throttle) NewBucket() *Bucket {
	b := &Bucket{t: t, burstIOs: t.BurstIOs, burstB: t.BurstBytes}
	if b.burstIOs == 0 {
		b.burstIOs = t.IOPS / 10
	}
	if b.burstB == 0 {
		b.burstB = t.BytesPerSec / 10
	}
	return b
}

// Admit returns when a request of sectors 512-byte sectors that reaches the
// buckets at now (ns) starts service, and accounts it: not before now, not
// before the previous admission (first in, first out), and not before
// each bucket has drained to its burst. A request of 0 sectors (a flush)
// passes at once without counting.
func (b *Bucket) Admit(now int64, sectors uint32) int64 {
	if sectors == 0 {
		return now
	}
	t := now
	if b.started && t < b.last {
		t = b.last
	}
	if !b.started {
		b.at, b.started = t, true
	}
	b.drain(t)
	var wait float64 // seconds
	if b.t.IOPS > 0 && b.levelIOs > b.burstIOs {
		wait = (b.levelIOs - b.burstIOs) / b.t.IOPS
	}
	if b.t.BytesPerSec > 0 && b.levelB > b.burstB {
		wait = math.Max(wait, (b.levelB-b.burstB)/b.t.BytesPerSec)
	}
	if wait > 0 {
		t += int64(math.Ceil(wait * 1e9))
		b.drain(t)
	}
	if b.t.IOPS > 0 {
		b.levelIOs++
	}
	if b.t.BytesPerSec > 0 {
		b.levelB += float64(sectors) * 512
	}
	b.last = t
	return t
}

// drain lowers the levels to what they are at t (ns, ≥ b.at).
func (b *Bucket) drain(t int64) {
	if t <= b.at {
		return
	}
	s := float64(t-b.at) / 1e9
	b.levelIOs = math.Max(0, b.levelIOs-s*b.t.IOPS)
	b.levelB = math.Max(0, b.levelB-s*b.t.BytesPerSec)
	b.at = t
}

// EstimateServersBehind is [EstimateServers] for a device behind the
// token bucket t: measured on the requests as the bucket let them through
// (t.Admitted), or on reqs as they are when t caps nothing.
func EstimateServersBehind(reqs []trace.Request, t Throttle) int {
	if !t.Enabled() {
		return EstimateServers(reqs)
	}
	return EstimateServers(t.Admitted(reqs))
}

// Admitted returns a copy of reqs in which each measured request's
// dispatch is moved to when t's bucket, fed the measured requests in
// dispatch order from full, lets it start service: the requests as the
// device behind the bucket saw them. [EstimateServers] on them measures
// that device's parallelism, which the bucket hides (on the requests as
// dispatched, a device the bucket holds to its rate completes as fast at
// depth 1 as at depth 32, which reads as one server).
func (t Throttle) Admitted(reqs []trace.Request) []trace.Request {
	out := slices.Clone(reqs)
	order := make([]int, 0, len(out))
	for i := range out {
		if out[i].HasService() {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(out[a].Dispatch, out[b].Dispatch) })
	b := t.NewBucket()
	for _, i := range order {
		q := &out[i]
		q.Dispatch = min(b.Admit(q.Dispatch, q.Sectors), q.Complete)
	}
	return out
}
