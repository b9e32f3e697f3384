package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// seekySSD is an SSD model learned at queue depth 1 from reads that take
// 20 µs plus 10 µs per doubling of the distance from the previous one: a
// device whose model rewards an elevator's sorting.
func seekySSD(t *testing.T) *model.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	var reqs []trace.Request
	now, pos := int64(0), gib/2
	for range 8000 {
		bits := 3 + rng.IntN(19)
		s := (pos + uint64(1)<<bits) % gib
		svc := int64(20_000 + 10_000*bits)
		reqs = append(reqs, trace.Request{Arrival: now, Dispatch: now, Complete: now + svc, Sector: s, Sectors: 8, Op: trace.Read, PID: 1, Think: trace.Unknown})
		now, pos = now+svc+1000, s+8
	}
	m, err := model.Fit(reqs, model.FitOptions{Class: model.SSD, CapacitySectors: gib, Servers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTagsKeepTheBacklogFromTheElevator: 64 random reads issued at once
// by 64 processes. On one tag per server the elevator holds 63 of them
// and mq-deadline's sorting is predicted to pay; with the device's 128
// tags (a loop device's) it holds none and cannot be predicted faster
// than none. An HDD model keeps the papers' device whatever the tags.
func TestTagsKeepTheBacklogFromTheElevator(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var reqs []trace.Request
	for p := range 64 {
		reqs = append(reqs, trace.Request{Arrival: 0, Dispatch: trace.Unknown, Complete: trace.Unknown,
			Sector: rng.Uint64N(gib) &^ 7, Sectors: 8, Op: trace.Read, Flags: trace.Sync, PID: uint32(p + 1), Think: trace.Unknown})
	}
	w, err := sim.NewWindow(reqs, sim.LoopOpen)
	if err != nil {
		t.Fatal(err)
	}
	gain := func(m *model.Model, tags int) float64 {
		rep, err := Evaluate(w, []Candidate{{Scheduler: "none"}, {Scheduler: "mq-deadline"}}, Options{
			Model: m, Current: Candidate{Scheduler: "none"}, Decide: decide.DefaultConfig("none"), Tags: tags, Rank: RankWait, Parallel: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		none, dl := find(rep.Outcomes, Candidate{Scheduler: "none"}), find(rep.Outcomes, Candidate{Scheduler: "mq-deadline"})
		return 100 * (1 - float64(RankWait.Measure(dl.Result))/float64(RankWait.Measure(none.Result)))
	}
	ssd := seekySSD(t)
	if g := gain(ssd, 0); g < 10 {
		t.Errorf("ssd, one tag per server: mq-deadline predicted %.1f %% faster; want > 10 %% (the elevator sorts the backlog)", g)
	}
	if g := gain(ssd, 128); g != 0 {
		t.Errorf("ssd, 128 tags: mq-deadline predicted %.1f %% faster; want 0 (the backlog waits in the device)", g)
	}
	hdd := model.Default(model.HDD, gib)
	if a, b := gain(hdd, 0), gain(hdd, 128); a != b || a < 10 {
		t.Errorf("hdd: mq-deadline predicted %.1f %% faster with one tag, %.1f %% with 128; want the same, over 10 %%", a, b)
	}
}
