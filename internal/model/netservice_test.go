package model

import (
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func timed(d, c int64) trace.Request {
	return trace.Request{Arrival: d, Dispatch: d, Complete: c, Op: trace.Read, Sectors: 8}
}

func TestNetServiceTimes(t *testing.T) {
	unmeasured := trace.Request{Arrival: 5, Dispatch: trace.Unknown, Complete: trace.Unknown, Op: trace.Read, Sectors: 8}
	cases := []struct {
		name string
		reqs []trace.Request
		k    int
		want []int64
	}{
		{"queue depth 1 keeps D2C", []trace.Request{timed(0, 10), timed(15, 40), timed(50, 51)}, 1, []int64{10, 25, 1}},
		// Four dispatched at once on one server: D2C 10, 20, 30, 40; each
		// was served in 10 after the one before.
		{"one server, a backlog", []trace.Request{timed(0, 10), timed(0, 20), timed(0, 30), timed(0, 40)}, 1, []int64{10, 10, 10, 10}},
		// Two servers: the third starts when the first completes.
		{"two servers", []trace.Request{timed(0, 10), timed(0, 12), timed(0, 20), timed(0, 22)}, 2, []int64{10, 12, 10, 10}},
		// Completion order, not dispatch order, frees the server; a gap
		// (idle device) keeps the later request's own time.
		{"out of order, then idle", []trace.Request{timed(0, 30), timed(1, 10), timed(100, 105)}, 1, []int64{20, 9, 5}},
		{"unmeasured", []trace.Request{timed(0, 10), unmeasured, timed(0, 20)}, 1, []int64{10, trace.Unknown, 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NetServiceTimes(c.reqs, c.k, nil); !slices.Equal(got, c.want) {
				t.Errorf("NetServiceTimes = %v, want %v", got, c.want)
			}
		})
	}
}

// TestNetServiceChunks checks that a stream learned in chunks gets the
// times of the whole, and that a completion carried over from a chunk
// that ends after a request of the next is not used.
func TestNetServiceChunks(t *testing.T) {
	var reqs []trace.Request
	for i := range int64(40) {
		reqs = append(reqs, timed(i*5, 100+i*10)) // a backlog on one server
	}
	whole := NetServiceTimes(reqs, 1, nil)
	var s NetService
	var got []int64
	for lo := 0; lo < len(reqs); lo += 7 {
		got = append(got, s.Times(reqs[lo:min(lo+7, len(reqs))], 1, nil)...)
	}
	if !slices.Equal(got, whole) {
		t.Errorf("in chunks %v, whole %v", got, whole)
	}
	var e NetService
	e.Times([]trace.Request{timed(0, 50)}, 1, nil)
	if got := e.Times([]trace.Request{timed(10, 40)}, 1, nil); got[0] != 30 {
		t.Errorf("after a later completion in the chunk before: %d, want the whole 30", got[0])
	}
}

func TestMaxInFlight(t *testing.T) {
	reqs := []trace.Request{timed(0, 10), timed(0, 20), timed(5, 12), timed(10, 30), timed(40, 50)}
	// At 5: three outstanding; at 10 one completes as one is dispatched.
	if got := MaxInFlight(reqs); got != 3 {
		t.Errorf("MaxInFlight = %d, want 3", got)
	}
	if got := MaxInFlight(nil); got != 0 {
		t.Errorf("MaxInFlight(nil) = %d, want 0", got)
	}
}
