package redcap

import (
	"strings"
	"testing"
)

func newADA(t *testing.T, cfg ADAConfig) *ADA {
	t.Helper()
	a, err := NewADA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestADADefaultsAndValidation(t *testing.T) {
	a := newADA(t, ADAConfig{})
	if a.Window() != 1000 || !a.On() || a.Full() || a.Len() != 0 {
		t.Fatalf("defaults: window %d on %v full %v", a.Window(), a.On(), a.Full())
	}
	if r, n := a.Ratios(); r != 0 || n != 0 {
		t.Fatalf("empty ratios %v %v", r, n)
	}
	if _, err := NewADA(ADAConfig{Window: -3}); err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("negative window: %v", err)
	}
	if newADA(t, ADAConfig{StartOff: true}).On() {
		t.Fatal("StartOff ignored")
	}
}

func TestADAStartUpKeepsInitialState(t *testing.T) {
	a := newADA(t, ADAConfig{Window: 4})
	// REDCAP clearly worse, but no decision before the window is full.
	for i := range 3 {
		if !a.Add(1000, 1, 10, 1) {
			t.Fatalf("request %d: turned off before the window was full", i)
		}
	}
	if a.Full() {
		t.Fatal("full after 3 of 4")
	}
	if a.Add(1000, 1, 10, 1) {
		t.Fatal("should turn off once the window is full")
	}
	if a.Switches() != 1 {
		t.Fatalf("switches %d", a.Switches())
	}
	// Starting off, a good window turns it on.
	b := newADA(t, ADAConfig{Window: 2, StartOff: true})
	b.Add(10, 1, 1000, 1)
	if b.On() {
		t.Fatal("on before the window was full")
	}
	if !b.Add(10, 1, 1000, 1) {
		t.Fatal("should turn on")
	}
}

func TestADAPerBlockComparison(t *testing.T) {
	a := newADA(t, ADAConfig{Window: 2})
	// Miss: REDCAP reads a whole 128 KiB segment (32 blocks) in 8 ms for a
	// 4 KiB request that takes 5 ms without the cache: 250 µs/block versus
	// 5 ms/block. Per block, REDCAP wins although the request is slower.
	a.Add(8e6, 32, 5e6, 1)
	a.Add(8e6, 32, 5e6, 1)
	if !a.On() {
		t.Fatal("REDCAP should stay on")
	}
	r, n := a.Sums()
	if r != 2*250e3 || n != 2*5e6 {
		t.Fatalf("sums %v %v, want 500000 10000000", r, n)
	}
	rr, nn := a.Ratios()
	if rr != 250e3 || nn != 5e6 {
		t.Fatalf("ratios %v %v", rr, nn)
	}
	// Zero blocks count as one; negative times as zero.
	a.Add(100, 0, -5, 0)
	r, n = a.Sums()
	if r != 250e3+100 || n != 5e6 {
		t.Fatalf("sums %v %v", r, n)
	}
}

func TestADATiesTurnOff(t *testing.T) {
	a := newADA(t, ADAConfig{Window: 3})
	for range 3 {
		a.Add(4000, 2, 2000, 1) // 2000 ns/block on both sides
	}
	if a.On() {
		t.Fatal("equal sums must turn the cache off (strict inequality)")
	}
	r, n := a.Sums()
	if r != n {
		t.Fatalf("sums should tie exactly: %v %v", r, n)
	}
	// Non-integer ratios that tie exactly: 1000/3 on both sides.
	b := newADA(t, ADAConfig{Window: 1})
	if b.Add(1000, 3, 1000, 3) {
		t.Fatal("tie should be off")
	}
	if !b.Add(999, 3, 1000, 3) {
		t.Fatal("smaller REDCAP time should be on")
	}
}

func TestADAWindowSlides(t *testing.T) {
	a := newADA(t, ADAConfig{Window: 3})
	// Three requests where REDCAP is much better.
	for range 3 {
		a.Add(100, 1, 1000, 1)
	}
	if !a.On() {
		t.Fatal("should be on")
	}
	// One moderately bad request: 100+100+1500 = 1700 < 1000+1000+100 = 2100.
	if !a.Add(1500, 1, 100, 1) {
		t.Fatal("one bad request should not outweigh two good ones")
	}
	// A second: 100+1500+1500 = 3100 ≥ 1000+100+100 = 1200 → off.
	if a.Add(1500, 1, 100, 1) {
		t.Fatal("should be off after two bad requests")
	}
	// A good one: 1500+1500+100 = 3100 vs 100+100+1000 = 1200 → still off.
	if a.Add(100, 1, 1000, 1) {
		t.Fatal("still off")
	}
	// Another: 1500+100+100 = 1700 < 100+1000+1000 = 2100 → on.
	if !a.Add(100, 1, 1000, 1) {
		t.Fatal("should be on again")
	}
	a.Add(100, 1, 1000, 1) // the bad requests have slid out entirely
	if a.Len() != 3 || a.Switches() != 2 {
		t.Fatalf("len %d switches %d", a.Len(), a.Switches())
	}
	r, n := a.Sums()
	if r != 300 || n != 3000 {
		t.Fatalf("sums after sliding %v %v, want 300 3000", r, n)
	}
	a.Reset()
	if !a.On() || a.Len() != 0 || a.Switches() != 0 {
		t.Fatal("Reset")
	}
}

func TestADALongRunExactSums(t *testing.T) {
	a := newADA(t, ADAConfig{Window: 7})
	for i := range 10000 {
		a.Add(int64(i%13)*1237, uint32(1+i%5), int64(i%11)*977, uint32(1+i%3))
	}
	// Recompute the last 7 directly.
	var r, n int64
	for i := 10000 - 7; i < 10000; i++ {
		r += ratio(int64(i%13)*1237, uint32(1+i%5))
		n += ratio(int64(i%11)*977, uint32(1+i%3))
	}
	if r != a.sumRed || n != a.sumNor {
		t.Fatalf("sliding sums drifted: %d/%d vs %d/%d", a.sumRed, a.sumNor, r, n)
	}
	if a.On() != (r < n) {
		t.Fatal("state does not match condition (1)")
	}
}
