package throttlecal

import (
	"os"
	"testing"
)

// TestSavedRun re-evaluates the traces of a TestThrottleClass run without
// the VM: SHADOWTUNE_THROTTLE_RUN=bin/vm-artifacts/throttle.
func TestSavedRun(t *testing.T) {
	dir := os.Getenv("SHADOWTUNE_THROTTLE_RUN")
	if dir == "" {
		t.Skip("SHADOWTUNE_THROTTLE_RUN is not set")
	}
	res, err := Run(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("caps found: %s (%s)\n%s", res.Found, res.Evidence, Table(res.Rows))
}
