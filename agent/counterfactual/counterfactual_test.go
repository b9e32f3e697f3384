package counterfactual

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestNewCheck(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		prev, pred, meas          float64
		ok                        bool
		predicted, measured, errP float64
	}{
		{"faster as predicted", 100, 80, 80, true, 0.8, 0.8, 0},
		{"predicted faster, measured slower", 100, 70, 130, true, 0.7, 1.3, 60},
		{"predicted slower, measured faster", 100, 110, 90, true, 1.1, 0.9, 20},
		{"zero baseline", 0, 80, 80, false, 0, 0, 0},
		{"negative prediction", 100, -1, 80, false, 0, 0, 0},
		{"NaN measure", 100, 80, math.NaN(), false, 0, 0, 0},
		{"infinite baseline", math.Inf(1), 80, 80, false, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := NewCheck(tc.prev, tc.pred, tc.meas)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if math.Abs(c.Predicted-tc.predicted) > 1e-12 || math.Abs(c.Measured-tc.measured) > 1e-12 || math.Abs(c.ErrorPoints()-tc.errP) > 1e-9 {
				t.Fatalf("check %+v, error %v; want %v, %v, %v", c, c.ErrorPoints(), tc.predicted, tc.measured, tc.errP)
			}
		})
	}
}

func TestSignRight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     Check
		right bool
	}{
		{"both faster", Check{0.7, 0.9}, true},
		{"both slower", Check{1.2, 1.1}, true},
		{"predicted faster, measured slower beyond the margin", Check{0.7, 1.06}, false},
		{"predicted faster, measured slower within the margin", Check{0.7, 1.04}, true},
		{"predicted slower, measured faster beyond the margin", Check{1.1, 0.9}, false},
		{"no measured effect", Check{0.5, 1}, true},
	} {
		if got := tc.c.SignRight(5); got != tc.right {
			t.Errorf("%s: SignRight %v, want %v", tc.name, got, tc.right)
		}
	}
}

// TestRecordHolding: the mean error holds switches back while it exceeds
// the margin, until the back-off after the last check; a later check
// within the margin can bring the mean under it.
func TestRecordHolding(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const backoff, margin = 30 * time.Minute, 5.0
	var r Record
	if r.ErrorPct() != 0 || r.Holding(t0, backoff, margin) != 0 {
		t.Fatal("a record without checks holds")
	}
	r.Add(Check{0.8, 0.9}, t0, margin) // 10 points
	for _, tc := range []struct {
		at   time.Time
		want float64
	}{
		{t0, 10}, {t0.Add(backoff - time.Nanosecond), 10}, {t0.Add(backoff), 0}, {t0.Add(time.Hour), 0},
	} {
		if got := r.Holding(tc.at, backoff, margin); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("holding at %v: %v, want %v", tc.at.Sub(t0), got, tc.want)
		}
	}
	t1 := t0.Add(time.Hour)
	r.Add(Check{0.9, 0.9}, t1, margin)
	if got := r.ErrorPct(); math.Abs(got-5) > 1e-9 || r.Holding(t1, backoff, margin) != 0 {
		t.Fatalf("after a check without error: mean %v (want 5), holding %v (want 0: at the margin)", got, r.Holding(t1, backoff, margin))
	}
	r.Add(Check{0.8, 1.2}, t1, margin)
	if r.WrongSigns != 1 || r.Checks != 3 || r.Holding(t1, backoff, margin) == 0 {
		t.Fatalf("record %+v: a wrong sign of 40 points holds", r)
	}
}

func TestRecordJSONAndValid(t *testing.T) {
	var r Record
	r.Add(Check{0.7, 1.3}, time.Unix(1000, 0).UTC(), 5)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil || back != r || back.Valid() != nil {
		t.Fatalf("round trip %s: %+v, %v, valid %v", b, back, err, back.Valid())
	}
	for _, bad := range []Record{
		{Checks: -1},
		{Checks: 1, WrongSigns: 2, Last: Check{1, 1}},
		{Checks: 1, SumErrorPoints: math.NaN(), Last: Check{1, 1}},
		{Checks: 1, SumErrorPoints: -3, Last: Check{1, 1}},
		{Checks: 1, SumErrorPoints: math.Inf(1), Last: Check{1, 1}},
		{Checks: 1, Last: Check{0, 1}},
	} {
		if bad.Valid() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if (Record{}).Valid() != nil {
		t.Error("the zero record refused")
	}
}
