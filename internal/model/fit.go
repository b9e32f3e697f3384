package model

import (
	"fmt"
	"sort"
	"time"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// FitOptions parameterise Fit. The zero value fits an HDD model whose
// capacity is the largest end sector in the trace.
type FitOptions struct {
	// Class is the device class (0 means HDD).
	Class Class
	// CapacitySectors is the device size in sectors (0: the largest end
	// sector in the trace).
	CapacitySectors uint64
	// HitThreshold, when > 0, fixes the HDD hit/miss threshold; otherwise
	// it is derived from the trace ([DeriveHitClassifier]) or defaulted.
	HitThreshold time.Duration
	// Cache fixes the HDD disk-cache parameters; nil calibrates them on the
	// trace ([CalibrateCache]).
	Cache *CacheConfig
	// Servers fixes k; 0 learns it for SSD/NVMe ([EstimateServers]) and
	// uses 1 for HDD (DESIGN §3).
	Servers int
	// Throttle fixes the caps of a Throttled device; when not enabled
	// they are estimated ([EstimateThrottle]). Ignored for other classes.
	Throttle Throttle
}

// fitSetup is what configuring a model from a training trace decided.
type fitSetup struct {
	cfg            Config
	hitDerived     bool
	cacheCalibrate bool
}

// dispatchOrder returns the indices of reqs in dispatch order (the order
// of reqs when any dispatch time is unknown), the largest end sector and
// the number of requests with a measured service time.
func dispatchOrder(reqs []trace.Request) (order []int, capacity uint64, measured int) {
	order = make([]int, len(reqs))
	byDispatch := true
	for i := range reqs {
		order[i] = i
		if reqs[i].Dispatch == trace.Unknown {
			byDispatch = false
		}
		if reqs[i].HasService() {
			measured++
		}
		capacity = max(capacity, reqs[i].End())
	}
	if byDispatch {
		sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].Dispatch < reqs[order[b]].Dispatch })
	}
	return order, max(capacity, 1), measured
}

// configure derives a model configuration from training requests (in
// dispatch order): for HDDs the hit classifier (DADS §3.1) and the
// disk-cache parameters (DADS §3.2, the "probing run" done on the
// recording).
func configure(train []trace.Request, class Class, capacity uint64, hit time.Duration, cache *CacheConfig) fitSetup {
	s := fitSetup{cfg: DefaultConfig(class, capacity)}
	if class != HDD {
		return s
	}
	if hit > 0 {
		s.cfg.Hit = HitClassifier{ThresholdNs: int64(hit)}
	} else {
		s.cfg.Hit, s.hitDerived = DeriveHitClassifier(train)
	}
	if cache != nil {
		s.cfg.Cache = *cache
	} else {
		cal := CalibrateCache(train, s.cfg.Hit, capacity, s.cfg.Cache)
		s.cfg.Cache, s.cacheCalibrate = cal.Cache, cal.Calibrated
	}
	return s
}

// observeAll teaches d every request of reqs in the given order: measured
// ones through Observe, with their net service times (net, by index of
// reqs; NetServiceTimes), the others only move the position and cache.
func observeAll(d *Disk, reqs []trace.Request, order []int, net []int64) {
	for _, i := range order {
		q := &reqs[i]
		if q.HasService() {
			d.Observe(q.Op, q.Sector, q.Sectors, net[i])
		} else {
			d.Service(q.Op, q.Sector, q.Sectors)
		}
	}
}

// Fit learns a model from every request of a trace with measured service
// times: it configures the device (hit classifier and disk-cache
// calibration for HDDs, k for SSD/NVMe), then learns each request in
// dispatch order through a Disk (KDSim §3.1: the table is filled by the
// observed service times). It returns ErrNoServiceTimes (wrapped) if the
// trace has no measured time and trace.ErrEmpty for an empty trace. A
// Throttled model learns the service times net of the bucket's wait; it
// returns an error when the caps are not given and the trace shows none.
// The whole trace is learned as one window (Model.StartWindow), so that
// WindowModel gives a model whose busy cells hold their mean over it.
func Fit(reqs []trace.Request, opt FitOptions) (*Model, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("model fit: %w", trace.ErrEmpty)
	}
	class := opt.Class
	if class == 0 {
		class = HDD
	}
	if !class.Valid() {
		return nil, fmt.Errorf("model fit: invalid device class %d", uint8(opt.Class))
	}
	order, capacity, measured := dispatchOrder(reqs)
	if measured == 0 {
		return nil, fmt.Errorf("model fit: %w", ErrNoServiceTimes)
	}
	if opt.CapacitySectors > 0 {
		capacity = opt.CapacitySectors
	}
	ordered := make([]trace.Request, len(order))
	for k, i := range order {
		ordered[k] = reqs[i]
	}
	s := configure(ordered, class, capacity, opt.HitThreshold, opt.Cache)
	if class == Throttled {
		s.cfg.Throttle = opt.Throttle
		if !s.cfg.Throttle.Enabled() {
			t, ev, ok := EstimateThrottle(reqs)
			if !ok {
				return nil, fmt.Errorf("model fit: class throttled, but the trace shows no cap (%s)", ev)
			}
			s.cfg.Throttle = t
		}
	}
	switch {
	case opt.Servers > 0:
		s.cfg.Servers = opt.Servers
	case class != HDD:
		s.cfg.Servers = EstimateServersBehind(reqs, s.cfg.Throttle)
	}
	m, err := New(s.cfg)
	if err != nil {
		return nil, fmt.Errorf("model fit: %w", err)
	}
	var net NetService
	net.SetThrottle(s.cfg.Throttle)
	m.StartWindow() // the whole trace is one window: Model.WindowModel
	observeAll(m.NewDisk(0), reqs, order, net.Times(reqs, s.cfg.Servers, nil))
	return m, nil
}
