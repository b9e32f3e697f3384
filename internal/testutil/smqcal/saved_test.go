package smqcal

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/redcap"
)

var (
	probeRE   = regexp.MustCompile(`(?m)^hit-probe-us ([0-9.]+)$`)
	probe16RE = regexp.MustCompile(`(?m)^hit-probe-depth16-iops ([0-9.]+)$`)
)

// TestSavedRun re-predicts a saved TestSMQCalibration run (the VM lab's
// bin/vm-artifacts: its output and its smq/ traces) with the stand-ins,
// and with PromoteAfter, PromoteGapReads and PromoteGapNs variants of the
// calibrated one, for calibrating without the VM:
//
//	SHADOWTUNE_SMQ_RUN=bin/vm-artifacts SHADOWTUNE_SMQ_PROMOTE="1 3" SHADOWTUNE_SMQ_GAP="1024" SHADOWTUNE_SMQ_GAP_MS="400 1000" \
//		go test -run TestSavedRun -v ./internal/testutil/smqcal
func TestSavedRun(t *testing.T) {
	dir := os.Getenv("SHADOWTUNE_SMQ_RUN")
	if dir == "" {
		t.Skip("SHADOWTUNE_SMQ_RUN is not set (a saved VM lab run)")
	}
	out, err := os.ReadFile(filepath.Join(dir, "TestSMQCalibration-output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	setup := Setup{CacheBlocks: 1024, BlockSectors: 128}
	if m := probeRE.FindSubmatch(out); m != nil {
		us, _ := strconv.ParseFloat(string(m[1]), 64)
		setup.HitNs, setup.HitServers = int64(us*1e3), 2
	}
	if m := probe16RE.FindSubmatch(out); m != nil {
		if iops, _ := strconv.ParseFloat(string(m[1]), 64); iops > 0 {
			setup.CalibratedHitNs = int64(2 * 1e9 / iops)
		}
	}
	type variant struct {
		name string
		tune func(*redcap.Config)
	}
	variants := []variant{{"as calibrated", nil}}
	for _, k := range []struct {
		env, name string
		set       func(c *redcap.Config, n int)
	}{
		{"SHADOWTUNE_SMQ_PROMOTE", "PromoteAfter %d", func(c *redcap.Config, n int) { c.PromoteAfter = n }},
		// A gap in reads replaces the calibrated gap in time.
		{"SHADOWTUNE_SMQ_GAP", "PromoteGapReads %d", func(c *redcap.Config, n int) { c.PromoteGapReads, c.PromoteGapNs = n, 0 }},
		{"SHADOWTUNE_SMQ_GAP_MS", "PromoteGapNs %d ms", func(c *redcap.Config, n int) { c.PromoteGapNs = int64(n) * 1e6 }},
	} {
		for _, v := range strings.Fields(os.Getenv(k.env)) {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", k.env, err)
			}
			set := k.set
			variants = append(variants, variant{fmt.Sprintf(k.name, n), func(c *redcap.Config) { set(c, n) }})
		}
	}
	for _, v := range variants {
		s := setup
		s.Tune = v.tune
		rows, err := ParseRun(string(out), filepath.Join(dir, "smq"), s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", v.name, Table(rows))
	}
}
