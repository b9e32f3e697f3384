package app

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/internal/plot"
)

// maxPlotWindows is how many of the last windows `run --plot` keeps (per
// device): 10,000 windows of 30 s are more than three days.
const maxPlotWindows = 10_000

// runTimeline collects, from the agent's per-window status, what
// `run --plot` draws at exit: per device the setting, the predicted gain
// and the model error of each window, and the changes and reverts. It
// keeps the last max windows of each device (and the events since the
// first of them), so its memory is bounded however long the agent runs.
type runTimeline struct {
	mu      sync.Mutex
	start   time.Time
	max     int
	mode    string
	windows int // windows seen in all
	order   []string
	devs    map[string]*deviceTimeline
}

// deviceTimeline is one device's part of a runTimeline.
type deviceTimeline struct {
	plot.DeviceTimeline
	lastChange time.Time // LastChangeTime last seen
	reverts    int32     // Reverts last seen
}

func newRunTimeline(start time.Time, max int) *runTimeline {
	return &runTimeline{start: start, max: max, devs: map[string]*deviceTimeline{}}
}

// add records one window's status, seen at now.
func (r *runTimeline) add(s agent.Status, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = s.Mode
	r.windows++
	at := now.Sub(r.start).Seconds()
	for i := range s.Devices {
		d := &s.Devices[i]
		dt := r.devs[d.Name]
		if dt == nil {
			// Reverts counts from the agent's start; a LastChangeTime
			// before r.start was written by an earlier run: not drawn.
			dt = &deviceTimeline{DeviceTimeline: plot.DeviceTimeline{Device: d.Name}}
			r.devs[d.Name] = dt
			r.order = append(r.order, d.Name)
		}
		w := plot.TimelineWindow{
			Seconds:           at,
			Setting:           fmt.Sprintf("%s, %d KiB", orDash(d.Current.Scheduler), d.Current.ReadAheadKiB),
			GainPercent:       math.NaN(),
			ModelErrorPercent: math.NaN(),
		}
		// A failed window, or one without requests, evaluated nothing: no
		// point. A skipped one may have (the change was not applied, e.g.
		// in the back-off after a revert): its gain is drawn when it has
		// a best candidate.
		if win := d.Window; win != nil && win.Error == "" {
			if win.Best != "" {
				w.GainPercent = percent(win.BestGainPercent)
			}
			if win.Best != "" || win.Requests > 0 {
				w.ModelErrorPercent = percent(d.ModelErrorPercent)
			}
		}
		dt.Windows = append(dt.Windows, w)
		if t := d.LastChangeTime; t != nil && !t.Time.Equal(dt.lastChange) {
			dt.lastChange = t.Time
			if !t.Time.Before(r.start) {
				dt.Events = append(dt.Events, plot.TimelineEvent{
					Seconds: t.Time.Sub(r.start).Seconds(), Label: d.LastChange, Revert: d.Reverts > dt.reverts,
				})
			}
		}
		dt.reverts = d.Reverts
		r.trim(dt)
	}
}

// trim keeps dt's last r.max windows and the events since the first of
// them (at most r.max); it copies only when twice as many piled up.
func (r *runTimeline) trim(dt *deviceTimeline) {
	if len(dt.Windows) >= 2*r.max {
		dt.Windows = append(dt.Windows[:0:0], dt.Windows[len(dt.Windows)-r.max:]...)
		first := dt.Windows[0].Seconds
		i := 0
		for i < len(dt.Events) && dt.Events[i].Seconds < first {
			i++
		}
		dt.Events = append(dt.Events[:0:0], dt.Events[i:]...)
	}
	if len(dt.Events) >= 2*r.max {
		dt.Events = append(dt.Events[:0:0], dt.Events[len(dt.Events)-r.max:]...)
	}
}

// chart returns the title and the devices' timelines (their last r.max
// windows), or no devices when no window was seen.
func (r *runTimeline) chart() (string, []plot.DeviceTimeline) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var devs []plot.DeviceTimeline
	kept := 0
	for _, name := range r.order {
		dt := r.devs[name].DeviceTimeline
		if len(dt.Windows) > r.max {
			dt.Windows = dt.Windows[len(dt.Windows)-r.max:]
			first := dt.Windows[0].Seconds
			for len(dt.Events) > 0 && dt.Events[0].Seconds < first {
				dt.Events = dt.Events[1:]
			}
		}
		kept = max(kept, len(dt.Windows))
		devs = append(devs, dt)
	}
	title := fmt.Sprintf("shadowtune run: %s mode, %d windows from %s", r.mode, r.windows, r.start.UTC().Format(time.DateTime+" MST"))
	if kept < r.windows {
		title = fmt.Sprintf("shadowtune run: %s mode, last %d of %d windows", r.mode, kept, r.windows)
	}
	return title, devs
}

// write draws the timeline to path; it returns nil without writing when
// no window was seen.
func (r *runTimeline) write(path string) error {
	title, devs := r.chart()
	if len(devs) == 0 {
		return nil
	}
	return writePlot(path, func(w io.Writer) error { return plot.Timeline(w, title, devs) })
}

// percent parses a status percentage ("12.5"); NaN when unset or not a
// number.
func percent(s string) float64 {
	if s == "" {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
