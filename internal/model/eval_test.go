package model

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func TestEvaluateDeterministic(t *testing.T) {
	reqs := loadDiskSim(t, "cheetah9LP")
	for _, pm := range []PredictMode{PredictMean, PredictSample} {
		opt := EvalOptions{Predict: pm, Seed: 7}
		a, err := Evaluate(reqs, opt)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Evaluate(reqs, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%v: two runs differ:\n%+v\n%+v", pm, a, b)
		}
		opt.Seed = 8
		c, _ := Evaluate(reqs, opt)
		if pm == PredictSample && c.DemeritMs == a.DemeritMs {
			t.Errorf("sample mode ignores the seed")
		}
		if pm == PredictMean && !reflect.DeepEqual(a, c) {
			t.Errorf("mean mode depends on the seed")
		}
	}
}

func TestDiskSampleDeterministic(t *testing.T) {
	m, reqs := trainedModel(t, "st41601n")
	run := func(seed int64) []int64 {
		d := m.NewDisk(seed)
		d.SetPredictMode(PredictSample)
		var out []int64
		for _, q := range reqs[5000:6000] {
			out = append(out, d.Service(q.Op, q.Sector, q.Sectors))
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different samples")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same samples")
	}
	// Samples are stored values of the cell: never outside the cell's range.
	d := m.NewDisk(3)
	d.SetPredictMode(PredictSample)
	mean := m.NewDisk(3)
	for _, q := range reqs[5000:5100] {
		dist := d.distance(q.Sector)
		v := d.Service(q.Op, q.Sector, q.Sectors)
		mv := mean.Service(q.Op, q.Sector, q.Sectors)
		row, col := RowOf(q.Sectors), m.ColumnOf(dist)
		tb := m.tableFor(q.Op, d.LastHit())
		c := &m.tables[tb].cells[col*NumRows+row]
		if c.n == 0 {
			if v != mv {
				t.Fatalf("cold cell: sample %d != mean %d", v, mv)
			}
			continue
		}
		found := false
		for i := 0; i < int(c.n); i++ {
			found = found || c.logical(i) == v
		}
		if !found {
			t.Fatalf("sampled %d is not a stored value of its cell", v)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	reqs := loadDiskSim(t, "atlas10k")
	noSvc := make([]trace.Request, len(reqs))
	copy(noSvc, reqs)
	for i := range noSvc {
		noSvc[i].Dispatch, noSvc[i].Complete = trace.Unknown, trace.Unknown
	}
	if _, err := Evaluate(noSvc, EvalOptions{}); !errors.Is(err, ErrNoServiceTimes) || !strings.Contains(err.Error(), "service times") {
		t.Errorf("trace without service times: %v", err)
	}
	if _, err := Evaluate(nil, EvalOptions{}); !errors.Is(err, trace.ErrEmpty) {
		t.Errorf("empty trace: %v", err)
	}
	for _, f := range []float64{-0.1, 1, 1.5, math.NaN()} {
		if _, err := Evaluate(reqs, EvalOptions{TrainFraction: f}); err == nil || !strings.Contains(err.Error(), "train fraction") {
			t.Errorf("train fraction %v: %v", f, err)
		}
	}
	if _, err := Evaluate(reqs[:1], EvalOptions{}); err == nil {
		t.Error("one request: no error")
	}
	if _, err := Evaluate(reqs, EvalOptions{Window: -1}); err == nil {
		t.Error("negative window: no error")
	}
	if _, err := Evaluate(reqs, EvalOptions{Class: 9}); err == nil {
		t.Error("bad class: no error")
	}
}

func TestEvaluateOptions(t *testing.T) {
	reqs := loadDiskSim(t, "hp_c2247a")
	r, err := Evaluate(reqs, EvalOptions{TrainFraction: 0.8, Window: 500, Mode: EvalFrozen, HitThreshold: 4 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.TrainRequests != 7999 || r.TestRequests != 2000 || r.Windows != 4 {
		t.Errorf("split %d/%d, %d windows; want 7999/2000, 4", r.TrainRequests, r.TestRequests, r.Windows)
	}
	if r.HitThresholdUs != 4000 || r.HitUsPerSector != 0 || r.HitThresholdDerived {
		t.Errorf("fixed threshold not used: %+v", r)
	}
	if r.Mode != "frozen" || r.Predict != "mean" || r.Class != "hdd" {
		t.Errorf("echo: %s %s %s", r.Mode, r.Predict, r.Class)
	}
	// A partial trailing window counts only from half a window on.
	r, _ = Evaluate(reqs, EvalOptions{Window: 1800}) // 5000 test requests: 1800, 1800, 1400
	if r.Windows != 3 {
		t.Errorf("windows %d, want 3", r.Windows)
	}
	r, _ = Evaluate(reqs, EvalOptions{Window: 2200}) // 2200, 2200, 600 (dropped)
	if r.Windows != 2 {
		t.Errorf("windows %d, want 2", r.Windows)
	}
	// JSON names.
	b, _ := json.Marshal(r)
	for _, k := range []string{`"trainRequests"`, `"testRequests"`, `"windowErrorPct":{"mean"`, `"median"`, `"max"`,
		`"totalErrorPct"`, `"meanMeasuredMs"`, `"meanPredictedMs"`, `"demeritMs"`, `"mode":"online"`, `"predict":"mean"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
	// An SSD evaluation uses no cache and no classifier.
	s, err := Evaluate(reqs, EvalOptions{Class: SSD})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cache != nil || s.PredictedHitPct != 0 {
		t.Errorf("SSD evaluation with a cache: %+v", s)
	}
}

func TestDemerit(t *testing.T) {
	// Identical distributions in a different order: 0.
	if d := Demerit([]int64{1, 2, 3, 4}, []int64{4, 3, 2, 1}); d != 0 {
		t.Errorf("permutation: %v", d)
	}
	// A constant shift s: s.
	if d := Demerit([]int64{10, 20, 30}, []int64{15, 25, 35}); d != 5 {
		t.Errorf("shift: %v", d)
	}
	// Order statistics 1,2,3,4 vs 1,2,3,8: sqrt(16/4) = 2.
	if d := Demerit([]int64{4, 1, 3, 2}, []int64{8, 3, 2, 1}); d != 2 {
		t.Errorf("tail: %v", d)
	}
	if d := Demerit(nil, nil); d != 0 {
		t.Errorf("empty: %v", d)
	}
	// The inputs are not reordered.
	a := []int64{3, 1, 2}
	Demerit(a, []int64{1, 2, 3})
	if a[0] != 3 {
		t.Error("input sorted in place")
	}
}

func TestParseModes(t *testing.T) {
	for _, s := range []string{"online", "frozen"} {
		m, err := ParseEvalMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseEvalMode(%q) = %v, %v", s, m, err)
		}
	}
	for _, s := range []string{"mean", "sample"} {
		m, err := ParsePredictMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParsePredictMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseEvalMode("sometimes"); err == nil {
		t.Error("ParseEvalMode accepted junk")
	}
	if _, err := ParsePredictMode("median"); err == nil {
		t.Error("ParsePredictMode accepted junk")
	}
}

// KeepSorted hands out the sorted samples the demerit was computed from,
// and changes nothing else.
func TestEvaluateKeepSorted(t *testing.T) {
	reqs := loadDiskSim(t, "cheetah9LP")
	plain, err := Evaluate(reqs, EvalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Sorted != nil {
		t.Fatal("Sorted set without KeepSorted")
	}
	kept, err := Evaluate(reqs, EvalOptions{KeepSorted: true})
	if err != nil {
		t.Fatal(err)
	}
	st := kept.Sorted
	if st == nil || len(st.MeasuredNs) == 0 || len(st.MeasuredNs) != len(st.PredictedNs) || len(st.MeasuredNs) > kept.TestRequests {
		t.Fatalf("Sorted = %+v", st)
	}
	if !slices.IsSorted(st.MeasuredNs) || !slices.IsSorted(st.PredictedNs) {
		t.Error("Sorted samples are not sorted")
	}
	if got := Demerit(st.MeasuredNs, st.PredictedNs) / 1e6; got != kept.DemeritMs {
		t.Errorf("demerit of the kept samples %v ms, reported %v ms", got, kept.DemeritMs)
	}
	kept.Sorted = nil
	if !reflect.DeepEqual(plain, kept) {
		t.Errorf("KeepSorted changed the result:\n%+v\n%+v", plain, kept)
	}
}
