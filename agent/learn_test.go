package agent

import (
	"math"
	"testing"
)

// The speed level follows a device whose speed steps within tens of
// requests: the model predicts 75 µs for every request while the device
// serves 50 µs, then 100 µs (a shared host's disk or CPU slowing a loop
// device). After 4 × levelRequests requests at a speed, the scaled
// prediction is within 2 % of it; before anything is measured the
// prediction is the model's.
func TestSpeedLevelFollowsDrift(t *testing.T) {
	var v speedLevel
	if got := v.scale(75e3); got != 75e3 {
		t.Fatalf("no requests measured: %d ns, want the model's 75000", got)
	}
	for _, svc := range []int64{50e3, 100e3, 50e3} {
		for range 4 * levelRequests {
			v.add(svc, 75e3)
		}
		got := v.scale(75e3)
		t.Logf("device at %d µs: predicted %d µs", svc/1e3, got/1e3)
		if math.Abs(float64(got-svc)) > 0.02*float64(svc) {
			t.Errorf("device at %d ns: predicted %d ns, want within 2 %%", svc, got)
		}
	}
}
