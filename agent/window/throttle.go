package window

// A token bucket in front of a non-rotational device (blk-throttle, a
// cloud volume's cap): the window's requests are checked for one, and the
// device is re-modelled as throttled, or back as an SSD, on two windows
// in a row of the same evidence.

import (
	"fmt"
	"math"

	"github.com/go-logr/logr"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

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
