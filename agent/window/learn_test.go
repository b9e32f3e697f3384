package window

import "testing"

// deviceVariation is the median distance of a group's measured total from
// the window's mean group total, percent: 0 for a steady device, 50 for
// one that alternates between half and one and a half times its mean, -1
// below two groups.
func TestDeviceVariation(t *testing.T) {
	for _, c := range []struct {
		totals []int64
		want   float64
	}{
		{nil, -1},
		{[]int64{100}, -1},
		{[]int64{100, 100, 100, 100}, 0},
		{[]int64{50, 150, 50, 150}, 50},
		{[]int64{90, 100, 110, 100, 100}, 0},
		{[]int64{80, 120, 100, 100, 60, 140}, 20},
	} {
		if got := deviceVariation(c.totals, make([]float64, 0, len(c.totals))); got != c.want {
			t.Errorf("deviceVariation(%v) = %v, want %v", c.totals, got, c.want)
		}
	}
}
