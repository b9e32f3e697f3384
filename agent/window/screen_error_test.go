package window

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/engine"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestScreeningError measures what engine.ScreenTolerancePct must cover:
// for each 5 s window of each native trace in SHADOWTUNE_SCREEN_TRACES
// (comma separated; recorded with `shadowtune trace record` on a busy
// device), the best candidate's predicted improvement over the newest
// Policy.ScreenRequests requests versus over the window's newest
// MaxSimulated, with the agent's defaults, the current setting none and
// the model learned online from the trace. It fails if a screening pass
// that would have stood hides a switch the whole slice decides.
func TestScreeningError(t *testing.T) {
	paths := os.Getenv("SHADOWTUNE_SCREEN_TRACES")
	if paths == "" {
		t.Skip("set SHADOWTUNE_SCREEN_TRACES to native traces of busy devices to measure the screening error")
	}
	var worst float64
	for _, p := range strings.Split(paths, ",") {
		reqs, err := trace.ReadFile("native", p)
		if err != nil {
			t.Fatal(err)
		}
		pol := testPolicy(false)
		pol.ScreenRequests = -1 // every window whole; the screen is computed beside it
		c, err := New("screen", model.Default(model.HDD, 1<<32), Setting{Candidate: engine.Candidate{Scheduler: "none"}}, pol)
		if err != nil {
			t.Fatal(err)
		}
		screen := (&Policy{}).withKnobDefaults().ScreenRequests
		for w, i := 0, 0; i < len(reqs); w++ {
			end := reqs[0].Arrival + int64(w+1)*5e9
			j := i
			for j < len(reqs) && reqs[j].Arrival < end {
				j++
			}
			win := reqs[i:j]
			i = j
			rep, err := step(c, win, time.Unix(int64(w)*5, 0))
			if err != nil {
				t.Fatal(err)
			}
			sl := win[max(len(win)-c.Policy.MaxSimulated, 0):]
			if rep.Report == nil || len(sl) <= screen {
				continue
			}
			sr, err := c.evaluateOver(sl[len(sl)-screen:], c.learn.model.Clone())
			if err != nil {
				t.Fatal(err)
			}
			full, part := rep.Report.Decision, sr.Decision
			diff := part.BestImprovementPct - full.BestImprovementPct
			worst = max(worst, math.Abs(diff))
			stands := engine.ScreenAccepts(sr, c.Policy.Decide.MarginPct)
			t.Logf("%s window %d (%d requests): whole slice %s %+.2f %%, screen %s %+.2f %% (%+.2f points), screen stands %v",
				p, w, len(win), full.Best, full.BestImprovementPct, part.Best, part.BestImprovementPct, diff, stands)
			if stands && full.Switch {
				t.Errorf("%s window %d: the screening pass stood, but the whole slice switches to %s", p, w, full.Target)
			}
		}
	}
	t.Logf("largest difference %.2f points (tolerance %.1f)", worst, engine.ScreenTolerancePct)
}
