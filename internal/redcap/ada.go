package redcap

import "fmt"

// DefaultADAWindow is the number of most recent read requests ADA compares
// over (Computer Journal 2016 §4.1, eq. 1; the size was chosen in §6).
const DefaultADAWindow = 1000

// ADAConfig configures the activation–deactivation algorithm. The zero
// value is the paper's: a window of 1000 requests, starting active.
type ADAConfig struct {
	// Window is the number of most recent read requests compared (default
	// [DefaultADAWindow]).
	Window int
	// StartOff starts with the cache inactive. The papers start active
	// (REDCAP 2007 §4; Computer Journal 2016 §7), which is the default.
	StartOff bool
}

// maxT bounds a per-request time so that T<<fracBits cannot overflow
// (2^46 ns ≈ 19.5 hours).
const (
	fracBits = 16
	maxT     = int64(1) << 46
)

// ADA is REDCAP's activation–deactivation algorithm (Computer Journal 2016
// §4.1; REDCAP 2007 §3). It keeps the cache on while
//
//	Σ T_Redcap,i / B_Redcap,i  <  Σ T_Normal,i / B_Normal,i
//
// over the last Window read requests, where for request i:
//
//   - T_Redcap is the time from the request's arrival at REDCAP until it
//     completes with the cache on: a hit's copy time, or the time of the
//     fills it started or waited for plus the copy (ns);
//   - B_Redcap is the number of 4 KiB blocks REDCAP served for it: the
//     requested blocks for a hit, the requested and prefetched blocks for a
//     miss ([Plan.ServedSectors] through [Blocks]);
//   - T_Normal is the request's time without the cache, from its insertion
//     into the I/O scheduler until completion, so it includes queueing in
//     the scheduler as well as the device's I/O time (ns);
//   - B_Normal is the number of requested 4 KiB blocks.
//
// Both sides must come from the same source — in shadowtune, two runs of
// the simulator over the same window, one with and one without the cache.
// Feed only reads: REDCAP takes no part in writes.
//
// Start-up: until Window requests have been added there is no decision and
// the state stays at its initial value (on, as in the papers). Once the
// window is full the condition is evaluated after every Add (a sliding
// window). Ties: condition (1) is a strict inequality, so equal sums turn
// the cache off — "off" is the no-op state (no RAM, no extra reads). The
// 2007 paper states the same test with ≤; the 2016 formulation is used.
//
// The per-request ratios are kept in fixed point (ns/block × 2^16) so the
// sliding sums are exact and ties are decided exactly; a time above 2^46 ns
// is clamped. ADA is not safe for concurrent use.
type ADA struct {
	window   int
	startOn  bool
	red, nor []int64 // ring of per-request ratios, fixed point
	pos, n   int
	sumRed   int64
	sumNor   int64
	on       bool
	switches int
}

// NewADA returns an ADA with an empty window.
func NewADA(cfg ADAConfig) (*ADA, error) {
	if cfg.Window == 0 {
		cfg.Window = DefaultADAWindow
	}
	if cfg.Window < 1 {
		return nil, fmt.Errorf("redcap: ADA window must be ≥ 1 request, got %d", cfg.Window)
	}
	a := &ADA{
		window:  cfg.Window,
		startOn: !cfg.StartOff,
		red:     make([]int64, cfg.Window),
		nor:     make([]int64, cfg.Window),
	}
	a.Reset()
	return a, nil
}

// Reset empties the window and returns to the initial state.
func (a *ADA) Reset() {
	clear(a.red)
	clear(a.nor)
	a.pos, a.n = 0, 0
	a.sumRed, a.sumNor = 0, 0
	a.on = a.startOn
	a.switches = 0
}

// ratio returns t/b in ns per block, fixed point. b = 0 counts as 1 block.
func ratio(t int64, b uint32) int64 {
	t = min(max(t, 0), maxT)
	return (t << fracBits) / int64(max(b, 1))
}

// Add records one read request: tRedcapNs and bRedcap are its time (ns) and
// 4 KiB blocks served with the cache on, tNormalNs and bNormal without it
// (see [ADA] for their exact meaning). A block count of 0 counts as 1 and
// negative times as 0. It returns the state after the request.
func (a *ADA) Add(tRedcapNs int64, bRedcap uint32, tNormalNs int64, bNormal uint32) bool {
	r, q := ratio(tRedcapNs, bRedcap), ratio(tNormalNs, bNormal)
	if a.n == a.window {
		a.sumRed -= a.red[a.pos]
		a.sumNor -= a.nor[a.pos]
	} else {
		a.n++
	}
	a.red[a.pos], a.nor[a.pos] = r, q
	a.sumRed += r
	a.sumNor += q
	a.pos++
	if a.pos == a.window {
		a.pos = 0
	}
	if a.n == a.window {
		on := a.sumRed < a.sumNor
		if on != a.on {
			a.on = on
			a.switches++
		}
	}
	return a.on
}

// On reports whether the cache should be active.
func (a *ADA) On() bool { return a.on }

// Full reports whether the window holds Window requests, i.e. whether On is
// a decision rather than the initial state.
func (a *ADA) Full() bool { return a.n == a.window }

// Len returns the number of requests in the window (≤ Window).
func (a *ADA) Len() int { return a.n }

// Window returns the window size in requests.
func (a *ADA) Window() int { return a.window }

// Switches returns how many times the state changed since NewADA or Reset.
func (a *ADA) Switches() int { return a.switches }

// Sums returns the two sides of condition (1) over the current window,
// Σ T_Redcap/B_Redcap and Σ T_Normal/B_Normal, in ns per 4 KiB block.
func (a *ADA) Sums() (redcap, normal float64) {
	const one = float64(int64(1) << fracBits)
	return float64(a.sumRed) / one, float64(a.sumNor) / one
}

// Ratios returns the mean per-request time per 4 KiB block (ns/block) over
// the current window with and without the cache: Sums divided by Len. The
// comparison between them is the same as between the sums. Both are 0 for
// an empty window.
func (a *ADA) Ratios() (redcapNsPerBlock, normalNsPerBlock float64) {
	if a.n == 0 {
		return 0, 0
	}
	r, q := a.Sums()
	return r / float64(a.n), q / float64(a.n)
}
