package model

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// sortedEventWindows is backloggedWindows as it was first written: every
// dispatch and completion as one tagged event, all sorted together. It is
// the reference the merge of the two sorted lists must match.
func sortedEventWindows(reqs []trace.Request) []throttleWin {
	type ev struct {
		t     int64
		delta int8
		bytes int64
	}
	var evs []ev
	for _, q := range reqs {
		if q.HasService() && q.Complete > q.Dispatch {
			b := int64(q.Sectors) * 512
			evs = append(evs, ev{q.Dispatch, +1, b}, ev{q.Complete, -1, b})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(b.delta, a.delta)
	})
	var wins []throttleWin
	n, done, inFlight, start, bytes := 0, 0, 0, int64(-1), int64(0)
	for _, e := range evs {
		if e.delta > 0 {
			n++
			continue
		}
		n = max(n-1, 0)
		switch {
		case n == 0:
			start = -1
		case start < 0:
			start, done, bytes, inFlight = e.t, 0, 0, 0
		default:
			done, bytes, inFlight = done+1, bytes+e.bytes, inFlight+n+1
			if done < throttleWindow {
				continue
			}
			if e.t > start {
				s := float64(e.t-start) / 1e9
				wins = append(wins, throttleWin{iops: float64(done) / s, bps: float64(bytes) / s,
					size: float64(bytes) / float64(done), inFlight: float64(inFlight) / float64(done)})
			}
			start, done, bytes, inFlight = e.t, 0, 0, 0
		}
	}
	return wins
}

// TestBackloggedWindowsMatchesSortedEvents: the windows cut by merging
// the sorted dispatches and completions are those of one sort of all
// events, on recorded windows (a fast loop device, a throttled disk) and
// on random ones with idle gaps, out-of-order completions, requests
// without a service time, and dispatches at the nanosecond of a
// completion (a tie is no idle moment).
func TestBackloggedWindowsMatchesSortedEvents(t *testing.T) {
	cases := map[string][]trace.Request{}
	for _, f := range []string{"loop-ext4-window.st.gz", "virtio-throttled-phases.st.gz"} {
		reqs, err := trace.ReadFile("native", "../../agent/testdata/"+f)
		if err != nil {
			t.Fatal(err)
		}
		cases[f] = reqs
	}
	for seed := range uint64(20) {
		cases[fmt.Sprint("random, seed ", seed)] = randomServiceWindow(seed)
	}
	for name, reqs := range cases {
		want, got := sortedEventWindows(reqs), backloggedWindows(reqs)
		if len(want) == 0 {
			t.Errorf("%s: the reference found no backlogged window: the case tests nothing", name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d windows, want %d (first difference at %d)", name, len(got), len(want),
				slices.IndexFunc(got, func(w throttleWin) bool { return !slices.Contains(want, w) }))
		}
	}
}

// randomServiceWindow is 5,000 requests of a closed loop at a depth that
// wanders between 1 and 32, with idle gaps, completions out of dispatch
// order, a request in 50 without a service time and dispatches placed on
// the nanosecond of an earlier completion. Completion times are distinct,
// so that the order of the bytes in a window is defined.
func randomServiceWindow(seed uint64) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	var reqs []trace.Request
	used := map[int64]bool{}
	now := int64(0)
	for len(reqs) < 5000 {
		depth := 1 + rng.IntN(32)
		for range depth {
			q := trace.Request{Dispatch: now + rng.Int64N(2000), Sectors: uint32(8 << rng.IntN(5))}
			if len(reqs) > 0 && rng.IntN(4) == 0 { // at an earlier completion
				if c := reqs[rng.IntN(len(reqs))].Complete; c != trace.Unknown && c > now-50_000 {
					q.Dispatch = c
				}
			}
			q.Complete = q.Dispatch + 1 + rng.Int64N(200_000)
			for used[q.Complete] {
				q.Complete++
			}
			used[q.Complete] = true
			if rng.IntN(50) == 0 {
				q.Dispatch, q.Complete = trace.Unknown, trace.Unknown
			}
			q.Arrival = q.Dispatch
			reqs = append(reqs, q)
		}
		now += 100_000 + rng.Int64N(100_000)
		if rng.IntN(10) == 0 {
			now += 10_000_000 // the device idles
		}
	}
	return reqs
}
