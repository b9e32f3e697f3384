package window

// Learning a window: every measured request predicted, then learned, in
// dispatch order (KDSim §4: the model learns online), the class check of
// the first loaded window (calibrate), the check for a token bucket in
// front of the device (checkThrottle) and the fit of its servers k
// (fitServers).
//
// Learning online is the learning a whole window got at its end: every
// request is predicted, then learned, and the model error is taken over
// the same groups. The order differs only at the edges of the chunks it
// is learned in (each one tracer batch, 250 ms, or more): a chunk is
// sorted by dispatch time, and a request dispatched before the last of
// the previous chunk (at most the requests in flight at that moment, out
// of tens of thousands) is learned after it, as one at a window's edge
// always was. Until the controller has calibrated the model (calibrate
// may replace it by another class's default, so nothing learned before
// counts), a window is calibrated and learned at its end, over the kept
// slice: that is the whole window up to MaxSimulated requests, and a
// busier first window teaches the model only its newest MaxSimulated
// requests.

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/go-logr/logr"
	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// learning is what a device's controller learns of the device: its model
// (replaced when calibration, a throttle or the servers' fit re-model the
// device) with the disk state it learns on, the window's learner, and the
// model's bias. It learns each window's requests (add, end), checks the
// device's class once (calibrate) and its token bucket every window
// (checkThrottle), and fits the model's servers when a
// window was not reproduced (fitServers).
type learning struct {
	model *model.Model
	disk  *model.Disk // online-learning state: position, disk cache
	// learner learns the window's requests as they arrive once online
	// (the model calibrated when the window began).
	learner windowLearner
	online  bool
	// calibrated is set once a window with enough measured requests has
	// checked the device class and learned k (see calibrate).
	calibrated bool
	// note records what calibration, or a later re-modelling, found, for
	// the status.
	note string

	// bias is the model's recent real ÷ simulated ratio for the current
	// setting (an exponential average); verification compares the real
	// time after a change with the previous setting's simulated time
	// scaled by this bias, so model error does not count as regression.
	bias float64
	// biasKnown: bias was measured at least once (until then it is 1).
	biasKnown bool

	// throttleCaps are the caps the previous window showed (checkThrottle;
	// zero: none), and throttleOver tells whether it ran well above the
	// model's caps: a class change needs two windows in a row.
	throttleCaps model.Throttle
	throttleOver bool
	// throttleSeen is what the last window's check found, for the log
	// (logThrottle): nil when the window was not checked.
	throttleSeen *throttleSeen

	// serversWait counts down the windows until fitServers may search
	// for k again; serversReach is the largest k the last search could
	// try (serversReach).
	serversWait, serversReach int
}

// newLearning is the learning state of model m, uncalibrated, with a
// bias of 1.
func newLearning(m *model.Model) learning {
	return learning{model: m, disk: m.NewDisk(0), bias: 1}
}

// add learns chunk at once when the window is learned online.
func (l *learning) add(chunk []trace.Request) {
	if l.online {
		l.learner.observe(l.disk, chunk)
	}
}

// skip ends a window that is not evaluated: reqs (its kept requests) are
// learned when the window was not learned online, without calibration.
func (l *learning) skip(reqs []trace.Request) {
	if !l.online {
		l.learner.observe(l.disk, reqs)
	}
	l.learner.result()
}

// end learns what the window (reqs, its kept requests) has not learned
// yet, calibrating the model first until that is done (calibrate, with
// minRequests), checks it for a token bucket (checkThrottle; not while a
// change is verifying) and returns what the window gave.
func (l *learning) end(reqs []trace.Request, minRequests int, verifying bool) learned {
	if !l.online {
		if !l.calibrated {
			l.calibrate(reqs, minRequests)
		}
		l.model.StartWindow()
		l.learner.observe(l.disk, reqs)
	}
	if l.calibrated && l.checkThrottle(reqs, verifying) {
		// A new throttled model: it learns the window afresh.
		l.learner.result()
		l.model.StartWindow()
		l.learner.observe(l.disk, reqs)
	}
	return l.learner.result()
}

// next starts the next window: it is learned online once the model is
// calibrated, and the model keeps what its cells learn in it
// (model.StartWindow) for the window's simulation.
func (l *learning) next() {
	l.online = l.calibrated
	if l.online {
		l.model.StartWindow()
	}
}

// loaded marks the model as learned before (loaded from the state
// directory): calibrated, and its window starts now.
func (l *learning) loaded() {
	l.calibrated, l.online = true, true
	l.model.StartWindow()
}

// carry takes o's model with its calibration and note.
func (l *learning) carry(o *learning) {
	l.model, l.disk = o.model, o.model.NewDisk(0)
	l.calibrated, l.online, l.note = o.calibrated, o.calibrated, o.note
}

// learnBias averages the window's real ÷ simulated ratio of the current
// setting into bias. The first measurement sets it: the simulated wait of
// a deep queue on a fast device can be many times the real one, and an
// average started at 1 would scale the first verifications and
// corrections by that error.
func (l *learning) learnBias(realNs, simNs int64) {
	if realNs <= 0 || simNs <= 0 {
		return
	}
	r := float64(realNs) / float64(simNs)
	if l.biasKnown {
		l.bias = 0.7*l.bias + 0.3*r
		return
	}
	l.bias, l.biasKnown = r, true
}

// learned is what learning a window's requests gave.
type learned struct {
	requests       int // the window's requests
	realNs, predNs int64
	errPct         float64
	// varPct is the device's own variation over the same groups: the
	// median of |Σmeasured − mean| ÷ mean, mean being the window's mean
	// group total, percent (-1 for fewer than two groups). It is the
	// error of the best prediction that is the same for every group of
	// the window, known only in hindsight: where the device's speed
	// changes from group to group by more than a model's error limit (a
	// loop device on a shared host under CPU contention: 27 to 118 ms a
	// group of 1,000 requests within one window on the 2-core test
	// machine), no model of a device of fixed speed meets that limit.
	varPct float64
}

// windowLearner predicts then learns each measured request (sorted by
// dispatch within each observed chunk) and accumulates the window's totals
// and its per-1000-request group errors until result.
type windowLearner struct {
	realNs, predNs int64
	gReal, gPred   int64 // the open group
	n              int   // requests in the open group
	groupErrs      []float64
	groupReal      []int64 // measured totals of the closed groups, ns
	order          []int32
	net            model.NetService // carried from chunk to chunk
	netThrottle    model.Throttle   // the bucket net holds
	netNs          []int64
}

// observe learns the measured requests of reqs on d, in dispatch order,
// with their service times net of the wait inside the device for one of
// the model's k servers (model.NetServiceTimes): the model learns, and is
// scored on, what a server takes per request.
func (l *windowLearner) observe(d *model.Disk, reqs []trace.Request) {
	if th := d.Model().Throttle(); th != l.netThrottle {
		// A throttled model learns times net of the bucket's wait too.
		l.net.SetThrottle(th)
		l.netThrottle = th
	}
	l.netNs = l.net.Times(reqs, d.Model().Servers(), l.netNs)
	l.order = l.order[:0]
	sorted := true
	var last int64
	for i := range reqs {
		if reqs[i].HasService() {
			if len(l.order) > 0 && reqs[i].Dispatch < last {
				sorted = false
			}
			last = reqs[i].Dispatch
			l.order = append(l.order, int32(i))
		}
	}
	if !sorted {
		// By dispatch, then record order (a stable sort); pdqsort is
		// near-linear on the nearly sorted input.
		slices.SortFunc(l.order, func(a, b int32) int {
			if c := cmp.Compare(reqs[a].Dispatch, reqs[b].Dispatch); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	for _, i := range l.order {
		q := &reqs[i]
		svc := l.netNs[i]
		p := d.PredictObserve(q.Op, q.Sector, q.Sectors, svc)
		l.realNs += svc
		l.predNs += p
		l.gReal += svc
		l.gPred += p
		l.n++
		if l.n == 1000 {
			l.groupErrs = append(l.groupErrs, pctErr(l.gPred, l.gReal))
			l.groupReal = append(l.groupReal, l.gReal)
			l.gReal, l.gPred, l.n = 0, 0, 0
		}
	}
}

// result returns the totals and the model error, the median group error
// (a last group of fewer than 500 requests counts only when it is the
// only one), and resets the learner.
func (l *windowLearner) result() learned {
	if l.n > 0 && (len(l.groupErrs) == 0 || l.n >= 500) {
		l.groupErrs = append(l.groupErrs, pctErr(l.gPred, l.gReal))
	}
	r := learned{realNs: l.realNs, predNs: l.predNs}
	if len(l.groupErrs) > 0 {
		slices.Sort(l.groupErrs)
		r.errPct = l.groupErrs[len(l.groupErrs)/2]
	}
	r.varPct = deviceVariation(l.groupReal, l.groupErrs) // the group errors are no longer needed
	*l = windowLearner{groupErrs: l.groupErrs[:0], groupReal: l.groupReal[:0], order: l.order[:0], net: l.net,
		netThrottle: l.netThrottle, netNs: l.netNs[:0]}
	return r
}

// deviceVariation is learned.varPct of the closed groups' measured totals
// (ns): the median over them of |total − mean| ÷ mean, percent; -1 for
// fewer than two. The deviations are written over scratch's storage.
func deviceVariation(totals []int64, scratch []float64) float64 {
	if len(totals) < 2 {
		return -1
	}
	var sum int64
	for _, v := range totals {
		sum += v
	}
	mean := float64(sum) / float64(len(totals))
	if mean <= 0 {
		return -1
	}
	dev := scratch[:0]
	for _, v := range totals {
		dev = append(dev, 100*math.Abs(float64(v)-mean)/mean)
	}
	slices.Sort(dev)
	return dev[len(dev)/2]
}

func pctErr(pred, real int64) float64 {
	if real <= 0 {
		return 0
	}
	return 100 * math.Abs(float64(pred-real)) / float64(real)
}

// calibrate checks the device class against the first window with enough
// measured reads, and learns k for non-rotational devices (DESIGN §3).
//
// queue/rotational is often wrong: virtio disks, many cloud volumes and
// loop devices over them report 1. A device classed HDD whose random reads
// (inter-request distance over 64 KiB) almost all (≥ 90 %) complete under
// the HDD hit threshold is not seek-bound: its read-miss table would never
// learn, and the HDD default would predict seeks it does not have. Such a
// device is re-modelled as an SSD. The elevator still sees the kernel's
// rotational flag (Policy.Engine.Rotational), since bfq and the kernel use
// it.
func (l *learning) calibrate(reqs []trace.Request, minRequests int) {
	var random, fast, measured int
	var last uint64
	thr := l.model.Config().Hit
	for i := range reqs {
		q := &reqs[i]
		if !q.HasService() {
			continue
		}
		measured++
		if q.Op != trace.Read {
			continue
		}
		d := q.Sector - last
		if q.Sector < last {
			d = last - q.Sector
		}
		last = q.End()
		if d <= 128 {
			continue
		}
		random++
		if thr.IsHit(q.Sectors, q.ServiceTime()) {
			fast++
		}
	}
	if measured < minRequests {
		return
	}
	l.calibrated = true
	what := "random reads"
	if l.model.Class() == model.HDD && random < minRequests {
		// Too few random reads to judge (a strided or sequential load):
		// the reads the HDD model itself predicts as misses testify
		// instead. They are the ones its read-miss table would price, and
		// if nearly all are as fast as hits, that table never learns and
		// the model keeps predicting seeks the device does not have.
		random, fast = l.predictedMisses(reqs)
		what = "reads the HDD model predicted as misses"
	}
	if l.model.Class() == model.HDD && random >= minRequests && fast*10 >= random*9 {
		m := model.Default(model.SSD, l.model.Config().CapacitySectors)
		l.model, l.disk = m, m.NewDisk(0)
		l.note = fmt.Sprintf("modelled as ssd: %d of %d %s were faster than the HDD hit threshold", fast, random, what)
	}
	if l.model.Class() == model.HDD {
		l.compareClasses(reqs)
	}
	if l.model.Class() != model.HDD {
		l.model.SetServers(model.EstimateServersBehind(reqs, l.model.Throttle()))
	}
}

// The class check by model error (compareClasses): an HDD model is
// replaced when its error on the first window is at least classErrMinPct
// and an SSD model's is at most classErrRatio of it.
const (
	classErrMinPct = 20
	classErrRatio  = 0.5
)

// compareClasses re-models an HDD-classed device as an SSD when the SSD
// model predicts its first window far better: each model, on a scratch
// copy, predicts then learns the window's measured requests in dispatch
// order, as the agent learns, and the median error over groups of 1000
// requests is compared (classErrMinPct, classErrRatio). This catches what
// the hit-threshold rule cannot: a disk throttled by a token bucket (a
// cloud volume, QEMU's throttling.iops-total) reports rotational=1, and
// its random reads queue behind the cap, slower than the HDD hit
// threshold, so they look like seeks; in the VM lab, on a virtio disk
// capped at 3,000 IOPS and 125 MB/s, `shadowtune model eval` gave a
// median error of 33.3 % as hdd and 4.4 % as ssd (issue 15 item 4). On the
// DiskSim traces of real HDDs the HDD model stays (docs/agent.md).
func (l *learning) compareClasses(reqs []trace.Request) {
	ssd := model.Default(model.SSD, l.model.Config().CapacitySectors)
	ssd.SetServers(model.EstimateServers(reqs))
	hddErr, ssdErr := replayError(l.model, reqs), replayError(ssd, reqs)
	if hddErr < classErrMinPct || ssdErr > classErrRatio*hddErr {
		return
	}
	l.model, l.disk = ssd, ssd.NewDisk(0)
	l.note = fmt.Sprintf("modelled as ssd: on its first window the model error was %.1f %% as ssd, %.1f %% as hdd", ssdErr, hddErr)
}

// replayError is m's model error on reqs (the median error over groups of
// 1000 measured requests, in %) when a scratch copy of m predicts, then
// learns, each one in dispatch order.
func replayError(m *model.Model, reqs []trace.Request) float64 {
	var l windowLearner
	l.observe(m.Clone().NewDisk(0), reqs)
	return l.result().errPct
}

// predictedMisses replays the measured requests, in dispatch order, on a
// scratch copy of the (HDD) model, as learn does, and counts the reads it
// predicts slower than the hit threshold (misses: a seek) and, of those,
// the ones measured faster than it.
func (l *learning) predictedMisses(reqs []trace.Request) (misses, fast int) {
	order := make([]int, 0, len(reqs))
	for i := range reqs {
		if reqs[i].HasService() {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(reqs[a].Dispatch, reqs[b].Dispatch)
	})
	thr := l.model.Config().Hit
	d := l.model.Clone().NewDisk(0)
	for _, i := range order {
		q := &reqs[i]
		p := d.PredictObserve(q.Op, q.Sector, q.Sectors, q.ServiceTime())
		if q.Op == trace.Read && !thr.IsHit(q.Sectors, p) {
			misses++
			if thr.IsHit(q.Sectors, q.ServiceTime()) {
				fast++
			}
		}
	}
	return misses, fast
}

// replaceModel puts m in place of the device's model after the first
// window and records why in the note. The bias between real and simulated
// times was the old model's, so it is learned anew from the next window.
func (l *learning) replaceModel(m *model.Model, note string) {
	l.model, l.disk, l.note = m, m.NewDisk(0), note
	l.bias, l.biasKnown = 1, false
}

// A token bucket in front of a non-rotational device (blk-throttle, a
// cloud volume's cap): the window's requests are checked for one, and the
// device is re-modelled as throttled, or back as an SSD, on two windows
// in a row of the same evidence.

// throttleChange is how far (relative) a newly measured cap must differ
// from the model's before checkThrottle replaces it.
const throttleChange = 0.1

// checkThrottle looks for a token bucket in front of a non-rotational
// device in the window's requests (model.EstimateThrottle) and reports
// whether it replaced the model. A device modelled as an SSD or NVMe is
// re-modelled as throttled, with the window's k, when this window and the
// one before both showed caps within throttleChange of each other; a
// throttled one takes caps that moved by more than throttleChange and
// keeps its tables. Two windows in a row that ran well above the caps
// make it an SSD again (model.ExceedsThrottle). Any other window changes
// nothing: a cap that did not bind is not shown to be gone. Two windows,
// so that a burst of CPU contention, which holds a fast device to a
// steady rate as a bucket would, does not flip the model. Nothing
// changes while a change is being verified: the verification's baseline
// is the current model's simulation scaled by its bias, and another model
// would break that comparison.
func (l *learning) checkThrottle(reqs []trace.Request, verifying bool) bool {
	if l.model.Class() == model.HDD || verifying {
		return false
	}
	prevCaps, prevOver := l.throttleCaps, l.throttleOver
	l.throttleCaps, l.throttleOver = model.Throttle{}, false
	wins := model.NewThrottleWindows(reqs)
	t, ev, ok := wins.Estimate()
	l.throttleSeen = &throttleSeen{caps: t, ev: ev, found: ok}
	if !ok {
		if l.model.Class() != model.Throttled || !wins.Exceeds(l.model.Throttle()) {
			return false
		}
		l.throttleOver = true
		if !prevOver {
			return false
		}
		old := l.model.Throttle()
		m := model.Default(model.SSD, l.model.Config().CapacitySectors)
		m.SetServers(model.EstimateServers(reqs))
		l.replaceModel(m, fmt.Sprintf("modelled as ssd: two windows ran above the caps of %s", old))
		l.throttleOver = false
		return true
	}
	l.throttleCaps = t
	if capsMoved(prevCaps, t) { // no caps, or others, in the window before
		return false
	}
	if l.model.Class() == model.Throttled {
		if !capsMoved(l.model.Throttle(), t) {
			return false
		}
		if err := l.model.SetThrottle(t); err != nil {
			return false // EstimateThrottle returns valid caps; keep the old ones
		}
		l.note = fmt.Sprintf("modelled as throttled: caps now %s (%s)", t, ev)
		return false
	}
	m, err := model.NewThrottled(l.model.Config().CapacitySectors, t)
	if err != nil {
		return false
	}
	m.SetServers(model.EstimateServersBehind(reqs, t))
	l.replaceModel(m, fmt.Sprintf("modelled as throttled: %s in two windows in a row (%s)", t, ev))
	return true
}

// logThrottle logs to log, at verbosity 1, what the last window showed
// of a token bucket in front of disk (checkThrottle), and the device's
// class; nothing when the window was not checked.
func (l *learning) logThrottle(log logr.Logger, disk string) {
	seen := l.throttleSeen
	l.throttleSeen = nil
	if seen == nil || !log.V(1).Enabled() {
		return
	}
	text := fmt.Sprintf("no caps (%s)", seen.ev)
	if seen.found {
		text = fmt.Sprintf("caps %s (%s)", seen.caps, seen.ev)
	}
	log.V(1).Info("throttle", "disk", disk, "class", l.model.Class().String(), "window", text)
}

// throttleSeen is one window's estimate (model.ThrottleWindows.Estimate),
// kept for logThrottle and formatted only when logged.
type throttleSeen struct {
	caps  model.Throttle
	ev    model.ThrottleEvidence
	found bool
}

// capsPending reports whether the last window showed what checkThrottle
// needs the next window to confirm: caps the model does not have, or a
// throttled device running well above its caps. The next window is then
// traced whole (sampleNext). Caps that move from window to window keep
// the windows whole, at the tracing's cost only: nothing is decided on
// them.
func (l *learning) capsPending() bool {
	if l.throttleOver {
		return true
	}
	if !l.throttleCaps.Enabled() {
		return false
	}
	return l.model.Class() != model.Throttled || capsMoved(l.model.Throttle(), l.throttleCaps)
}

// capsMoved reports whether a cap of now appeared, went, or moved by more
// than throttleChange from old (a zero old: every cap of now appeared).
func capsMoved(old, now model.Throttle) bool {
	moved := func(o, n float64) bool {
		if o == 0 || n == 0 {
			return o != n
		}
		return math.Abs(n-o) > throttleChange*o
	}
	return moved(old.IOPS, now.IOPS) || moved(old.BytesPerSec, now.BytesPerSec)
}

// serverSteps are the k fitServers tries, up to the most requests the
// window had in flight.
var serverSteps = []int{1, 2, 4, 8, 16, 32, 64, 128}

// serversTolerance is how close (a ratio, either way) a k's simulated
// mean response time must come to the measured one for fitServers to
// stop at it. More servers than that explains always reproduce a window
// too (with as many servers as requests in flight, none ever waits), but
// they hide the queue the elevators work on.
const serversTolerance = 1.25

// serversSearchEvery is how many windows a k search waits for after the
// last one, so that its simulations (one candidate per k) stay a small
// share of the agent's work.
const serversSearchEvery = 4

// serverFit is one k tried: the simulated mean response time of the
// setting in effect ÷ the measured one, and the model learned with it.
type serverFit struct {
	k     int
	ratio float64
	model *model.Model
}

// fitServers learns k, the requests a non-rotational device serves at
// once, by what it must reproduce: when a predicted gain was not acted on
// because the simulation of the setting in effect missed the window's
// measured mean response time by more than MaxResponseRatio either way
// (decide.ReasonNotReproduced; er.ResponseRatio), it
// learns the window again on a copy of the model for every k of
// serverSteps up to the window's most requests in flight (the service
// times net of the wait for k servers, model.NetServiceTimes), simulates
// the setting in effect with each copy (model.WindowModel), from the
// fewest servers up. It stops at the first k within serversTolerance,
// else takes the k whose ratio came nearest 1, and puts that copy in
// place of the model when its ratio is within MaxResponseRatio. The next
// windows are simulated with it; the window's own decision stands.
//
// model.EstimateServers learns k once, from throughput against depth on
// the first window, and throughput says little when a window's sizes
// change with its depth or it never ran deep: on the decision benchmark's
// loop device it gave 1, the device had up to 128 requests in flight, and
// the simulated response times were 4 to 78 times the measured ones
// (docs/runs/2026-12-03-history.md). It does nothing for a rotational model (k =
// 1, DESIGN §3), while a change is being verified (the verification
// compares against the current model), or where no decision waits on it.
// Within serversSearchEvery windows of the last search it searches only a
// window that ran deeper than that search could try (serversReach): a
// first window of one second, at 4 requests in flight, can try no more
// than 4 servers, and on the decision benchmark the next window, at 9,
// needed 8 (it waited four windows for them before). Its simulations take
// CPU from the node's work (in the VM lab's TCG guest, seconds), and each
// early search raises the reach, so at most len(serverSteps) run in a
// row. It returns an error from the simulation.
func (l *learning) fitServers(reqs []trace.Request, er engine.Report, verifying bool, opt engine.Options, current engine.Candidate, name string) error {
	l.serversWait--
	ratio := er.ResponseRatio
	if er.Decision.Reason != decide.ReasonNotReproduced || l.model.Class() == model.HDD || verifying ||
		ratio <= 0 {
		return nil
	}
	reach := serversReach(model.MaxInFlight(reqs))
	if l.serversWait > 0 && reach <= l.serversReach {
		return nil
	}
	l.serversWait, l.serversReach = serversSearchEvery, reach
	best := serverFit{k: l.model.Servers(), ratio: ratio}
	for _, k := range serverSteps {
		if k > reach {
			break
		}
		if k == l.model.Servers() {
			continue
		}
		f, err := l.tryServers(reqs, k, opt, current, name)
		if err != nil {
			return err
		}
		if d, b := math.Abs(math.Log(f.ratio)), math.Abs(math.Log(best.ratio)); d < b {
			best = f
		}
		if math.Abs(math.Log(f.ratio)) <= math.Log(serversTolerance) {
			break // the fewest servers that reproduce the window
		}
	}
	if best.model == nil || math.Abs(math.Log(best.ratio)) > math.Log(MaxResponseRatio) {
		return nil
	}
	l.replaceModel(best.model, fmt.Sprintf("k = %d: the simulated mean response time of %q was %.2f× the measured one with k = %d, %.2f× with k = %d",
		best.k, current.Name(), ratio, l.model.Servers(), best.ratio, best.k))
	return nil
}

// serversReach is the largest k of serverSteps a window with at most
// most requests in flight can tell from fewer (at least 1): with as many
// servers as requests in flight, none waits, and more change nothing.
func serversReach(most int) int {
	reach := serverSteps[0]
	for _, k := range serverSteps {
		if k <= most {
			reach = k
		}
	}
	return reach
}

// tryServers learns reqs on a copy of the model with k servers, as the
// agent learns a window, and simulates the setting in effect with it.
func (l *learning) tryServers(reqs []trace.Request, k int, opt engine.Options, current engine.Candidate, name string) (serverFit, error) {
	m := l.model.Clone()
	m.SetServers(k)
	m.StartWindow()
	var wl windowLearner
	wl.observe(m.NewDisk(0), reqs)
	opt.Parallel, opt.Model, opt.Current = 1, m.WindowModel(), current
	// One candidate, the setting in effect, is simulated: only its
	// response ratio is wanted, and a decision over it alone needs it as
	// the default.
	opt.Decide = decide.DefaultConfig(current.Name())
	er, err := engine.EvaluateRequests(reqs, engine.LoopAuto, []engine.Candidate{current}, opt)
	if err != nil {
		return serverFit{}, fmt.Errorf("%s: servers: %w", name, err)
	}
	return serverFit{k: k, ratio: er.ResponseRatio, model: m}, nil
}
