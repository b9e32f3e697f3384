package readahead

import "github.com/shadowtune/shadowtune/internal/model"

// The road's thresholds, each with its mechanism. The policy's own
// settings (margin, tolerated regression, minDwell, verification windows,
// back-off) are the others (Settings). docs/agent.md tabulates them all.
const (
	// MinResolvedPages is the fewest pages (4 KiB) the evidence must have
	// resolved, used or wasted, to be judged: the waste of 256 pages is
	// measured within ±3.1 points (one binomial standard error at its
	// worst, 50 %), a fraction of the distance between the wastes that
	// call for a change (a random reader wastes nearly all of a deep
	// read-around, a sequential one nearly none).
	MinResolvedPages = 256
	// MinRequests is the fewest read-ahead requests of a size (a row of
	// the disk model) that the cost line is fitted to: the model's ring
	// (S = 64 service times, KDSim §3.1.1), the samples that make a cell
	// learned. Fewer are incidental (a file system's metadata read
	// ahead).
	MinRequests = model.RingSize
	// FitRows is the model's rows whose sizes the cost line is fitted
	// to: the papers' rows, up to 128 KiB (KDSim §3.1). A larger request
	// is split and its parts served beside each other, and its time
	// measures that sharing as much as its size: a scan's 64 KiB
	// requests beside a thrash's 1280 KiB parts fit 8 µs + 2.96 µs/KiB
	// on a loop device that served 64 KiB in 150 µs and 256 KiB in
	// 358 µs, a line that prices every depth of a scan alike.
	FitRows = model.LinearRows
	// CompetitiveRatio sets the competitive depth, which a cut does not
	// go below (Decide): the deepest depth whose random window a device
	// serves within CompetitiveRatio times a one-page read. A random
	// reader then pays at most twice its least per window, and a
	// sequential one at most twice its least per page (a request's fixed
	// time spread over the depth, then the transfer): the data a device
	// transfers within one request's fixed time, EuroSys 2007 §4.1. No
	// online policy that does not know the streams' lengths does better
	// than 2 (§4.2), and a file keeps the depth it was opened at, for
	// readers the evidence has not seen.
	//
	// The value is not free: behind a token bucket of I requests and B
	// bytes a second, the random window the ratio admits ends at 2B/I
	// (130 KiB at the decision benchmark's 3,000 IOPS and 200 MB/s), two
	// percent above the 128 KiB candidate. Halving the ratio moved that
	// benchmark's cut to 64 KiB and its total 7.4 % slower
	// (docs/runs/2026-12-06-sensitivity-2.md), and a fitted line a few
	// percent steeper moves it the same way (docs/agent.md, the
	// competitive depth). Measured there, a sequential reader behind the
	// bucket (backup-oltp's) read 128 MiB/s at 64 KiB (the agent with the
	// ratio halved) and 183 MiB/s at 128 KiB (none/128,
	// docs/runs/2026-12-06-full-5.md): 0.49 and 0.68 ms a window, a
	// per-window cost of about 0.3 ms that the device's service times
	// (60-100 µs fixed) do not show.
	CompetitiveRatio = 2
)

// th is the thresholds in force: the constants, unless a sensitivity
// build scales them (sensitivity.go, build tag sensitivity).
var th = struct {
	resolved, requests, ratio float64
	fitRows                   int
}{MinResolvedPages, MinRequests, CompetitiveRatio, FitRows}
