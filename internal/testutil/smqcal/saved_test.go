package smqcal

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/redcap"
)

var probeRE = regexp.MustCompile(`(?m)^hit-probe-us ([0-9.]+)$`)

// TestSavedRun re-predicts a saved TestSMQCalibration run (the VM lab's
// bin/vm-artifacts: its output and its smq/ traces) with the stand-ins,
// and with PromoteAfter and PromoteGapReads variants of the calibrated
// one, for calibrating without the VM:
//
//	SHADOWTUNE_SMQ_RUN=bin/vm-artifacts SHADOWTUNE_SMQ_PROMOTE="1 3" SHADOWTUNE_SMQ_GAP="512 2048" \
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
	variants := []struct {
		name string
		tune func(*redcap.Config)
	}{{"as calibrated", nil}}
	for _, v := range strings.Fields(os.Getenv("SHADOWTUNE_SMQ_PROMOTE")) {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SHADOWTUNE_SMQ_PROMOTE: %v", err)
		}
		variants = append(variants, struct {
			name string
			tune func(*redcap.Config)
		}{"PromoteAfter " + v, func(c *redcap.Config) { c.PromoteAfter = n }})
	}
	for _, v := range strings.Fields(os.Getenv("SHADOWTUNE_SMQ_GAP")) {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SHADOWTUNE_SMQ_GAP: %v", err)
		}
		variants = append(variants, struct {
			name string
			tune func(*redcap.Config)
		}{"PromoteGapReads " + v, func(c *redcap.Config) { c.PromoteGapReads = n }})
	}
	for _, v := range strings.Fields(os.Getenv("SHADOWTUNE_SMQ_GAP_MS")) {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SHADOWTUNE_SMQ_GAP_MS: %v", err)
		}
		variants = append(variants, struct {
			name string
			tune func(*redcap.Config)
		}{"PromoteGapNs " + v + " ms", func(c *redcap.Config) { c.PromoteGapNs = int64(n) * 1e6 }})
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
