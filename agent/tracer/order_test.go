package tracer

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// completions returns n requests as a device with qd requests in flight
// completes them: arrivals increase by 1–10 µs (some equal), completions
// come in an order shuffled within qd of arrival order. sector numbers the
// requests in arrival order.
func completions(n, qd int, seed uint64) []raw {
	rng := rand.New(rand.NewPCG(seed, 1))
	in := make([]raw, n)
	a := int64(1e9)
	for i := range in {
		if rng.IntN(8) != 0 {
			a += 1000 + rng.Int64N(9000)
		}
		in[i] = raw{arrival: a, dispatch: a + 10, complete: a + 100, sector: uint64(i), sectors: 8, op: trace.Read}
	}
	for i := 0; i+qd <= n; i += qd / 2 {
		w := in[i : i+qd]
		rng.Shuffle(len(w), func(x, y int) { w[x], w[y] = w[y], w[x] })
	}
	return in
}

// TestCollectorReleaseOrder feeds shuffled completions in batches and
// releases at frontiers in between: the releases together must hold every
// request once, in (Arrival, input order).
func TestCollectorReleaseOrder(t *testing.T) {
	in := completions(20000, 32, 7)
	c := collector{base: 0}
	var got []trace.Request
	for i := 0; i < len(in); i += 1500 {
		for _, r := range in[i:min(i+1500, len(in))] {
			c.add(r)
		}
		// Everything arrived before the oldest request still to come is
		// final.
		frontier := int64(math.MaxInt64)
		for _, r := range in[min(i+1500, len(in)):] {
			frontier = min(frontier, r.arrival)
		}
		if frontier != math.MaxInt64 {
			frontier--
		}
		got = append(got, c.release(frontier)...)
	}
	got = append(got, c.release(math.MaxInt64)...)
	if c.lost.Load() != 0 || len(got) != len(in) {
		t.Fatalf("released %d of %d, lost %d", len(got), len(in), c.lost.Load())
	}
	want := slices.Clone(in)
	pos := map[uint64]int{} // input position of each request
	for i, r := range in {
		pos[r.sector] = i
	}
	slices.SortStableFunc(want, func(a, b raw) int { return cmp.Compare(a.arrival, b.arrival) })
	for i := range got {
		if got[i].Sector != want[i].sector {
			t.Fatalf("release %d: request %d (input %d), want %d (input %d)", i,
				got[i].Sector, pos[got[i].Sector], want[i].sector, pos[want[i].sector])
		}
	}
}

// BenchmarkCollectorRelease is the tracer's ordering at 75,000 IOPS with
// 32 requests in flight: a 250 ms batch (18,750 completions) added and
// released per op.
func BenchmarkCollectorRelease(b *testing.B) {
	const batch = 18750
	in := completions(batch*8, 32, 9)
	c := collector{base: 0}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i+batch > len(in) {
			i = 0
			c = collector{base: 0}
		}
		for _, r := range in[i : i+batch] {
			c.add(r)
		}
		i += batch
		c.release(in[i-1].arrival - 200_000)
	}
	b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// After one huge batch (the agent's loop was busy), the collector lets its
// buffers go once batches are small again, and keeps releasing in order.
func TestCollectorShrinksAfterBurst(t *testing.T) {
	in := completions(300000, 32, 11)
	c := collector{base: 0}
	for _, r := range in[:299000] {
		c.add(r)
	}
	// frontier: everything arrived before the oldest request still to come.
	frontier := func(from int) int64 {
		f := int64(math.MaxInt64)
		for _, r := range in[from:] {
			f = min(f, r.arrival-1)
		}
		return f
	}
	burst := c.release(frontier(299000)) // most of the burst
	if len(burst) < 250000 {
		t.Fatalf("the burst released %d requests", len(burst))
	}
	var got []trace.Request
	got = append(got, burst...)
	for i := 299000; i < len(in); i += 250 {
		for _, r := range in[i:min(i+250, len(in))] {
			c.add(r)
		}
		got = append(got, c.release(frontier(min(i+250, len(in))))...)
	}
	got = append(got, c.release(math.MaxInt64)...)
	if len(got) != len(in) || c.lost.Load() != 0 {
		t.Fatalf("released %d of %d, lost %d", len(got), len(in), c.lost.Load())
	}
	if !slices.IsSortedFunc(got, func(a, b trace.Request) int { return cmp.Compare(a.Arrival, b.Arrival) }) {
		t.Fatal("releases out of Arrival order after the shrink")
	}
	for name, capacity := range map[string]int{"held": cap(c.held), "spare": cap(c.spare), "keys": cap(c.keys), "out": cap(c.out)} {
		if capacity > keepCap {
			t.Errorf("%s keeps a capacity of %d requests after small batches (≤ %d)", name, capacity, keepCap)
		}
	}
}
