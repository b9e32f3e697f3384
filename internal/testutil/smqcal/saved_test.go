package smqcal

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

var (
	probeRE   = regexp.MustCompile(`(?m)^hit-probe-us ([0-9.]+)$`)
	probe16RE = regexp.MustCompile(`(?m)^hit-probe-depth16-iops ([0-9.]+)$`)
)

// TestSavedRun re-predicts a saved TestSMQCalibration run (the VM lab's
// bin/vm-artifacts: its output and its smq/ traces, recorded on a 512
// MiB origin) with the stand-ins, for working on them without the VM:
//
//	SHADOWTUNE_SMQ_RUN=$PWD/bin/vm-artifacts go test -run TestSavedRun -v ./internal/testutil/smqcal
func TestSavedRun(t *testing.T) {
	dir := os.Getenv("SHADOWTUNE_SMQ_RUN")
	if dir == "" {
		t.Skip("SHADOWTUNE_SMQ_RUN is not set (a saved VM lab run)")
	}
	out, err := os.ReadFile(filepath.Join(dir, "TestSMQCalibration-output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	setup := Setup{CacheBlocks: 1024, BlockSectors: 128, OriginSectors: 512 << 11}
	if m := probeRE.FindSubmatch(out); m != nil {
		us, _ := strconv.ParseFloat(string(m[1]), 64)
		setup.HitNs, setup.HitServers = int64(us*1e3), 2
	}
	if m := probe16RE.FindSubmatch(out); m != nil {
		if iops, _ := strconv.ParseFloat(string(m[1]), 64); iops > 0 {
			setup.SMQHitNs = int64(2 * 1e9 / iops)
		}
	}
	rows, err := ParseRun(string(out), filepath.Join(dir, "smq"), setup)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Table(rows))
}
