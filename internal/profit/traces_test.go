package profit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestShippedTraces replays the shipped real traces through each policy
// and logs one Markdown row per trace and policy: the figures of
// docs/agent.md. It runs only with SHADOWTUNE_PROFIT_EVAL=1.
//
//	SHADOWTUNE_PROFIT_EVAL=1 go test -run TestShippedTraces -v ./internal/profit
func TestShippedTraces(t *testing.T) {
	if os.Getenv("SHADOWTUNE_PROFIT_EVAL") != "1" {
		t.Skip("set SHADOWTUNE_PROFIT_EVAL=1 to evaluate the policies on the shipped traces")
	}
	root := "../../testdata/traces"
	traces := []struct{ format, path string }{
		{"disksim", "disksim/hp_c2247a.trace"}, {"disksim", "disksim/atlas10k.trace"},
		{"disksim", "disksim/cheetah9LP.trace"}, {"disksim", "disksim/st41601n.trace"},
		{"blkreplay", "blkreplay/linux-mysql.load.gz"}, {"blkreplay", "blkreplay/linux-webserver-2.load.gz"},
		{"blkreplay", "blkreplay/windows-mssql.load.gz"}, {"blkreplay", "blkreplay/windows-shared-server.load.gz"},
	}
	t.Log("| trace | requests | cache | policy | reads whole from flash % | blocks from flash % | flash blocks written | I/O time s | vs no cache |")
	t.Log("|---|---:|---|---|---:|---:|---:|---:|---:|")
	for _, tr := range traces {
		reqs, err := trace.ReadFile(tr.format, filepath.Join(root, tr.path))
		if err != nil {
			t.Fatal(err)
		}
		var capacity uint64
		for i := range reqs {
			capacity = max(capacity, reqs[i].End())
		}
		m := model.Default(model.HDD, capacity)
		none, touched := noCache(reqs, m), distinctBlocks(reqs, 8)
		// Flash caches of 1 % and 10 % of the space the trace touches, in
		// 4 KiB blocks (at least 256).
		for _, pct := range []uint64{1, 10} {
			cfg := ssd
			cfg.Blocks = max(int(touched*pct/100), 256)
			evalPolicies(t, tr.path, reqs, m, cfg, none)
		}
	}
}

// evalPolicies logs a row for each policy on reqs with cfg.
func evalPolicies(t *testing.T, path string, reqs []trace.Request, m *model.Model, cfg Config, none int64) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(path), ".gz")
	for _, p := range []Policy{AdmitAll, SecondMiss, RAF, Profit} {
		r, err := Evaluate(reqs, m, p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("| %s | %d | %d MiB | %s | %.1f | %.1f | %d | %.1f | %+.1f %% |", name, len(reqs), cfg.Blocks*4/1024, r.Policy, r.HitPct(),
			r.BlockHitPct(), r.FlashBlocksWritten, float64(r.IOTimeNs)/1e9, 100*float64(r.IOTimeNs-none)/float64(none))
	}
}

// noCache is the disk model's service time of every read and write of
// reqs, in order, ns: the I/O time without a cache.
func noCache(reqs []trace.Request, m *model.Model) int64 {
	d := m.NewDisk(0)
	var ns int64
	for i := range reqs {
		if q := &reqs[i]; q.Sectors > 0 && (q.Op == trace.Read || q.Op == trace.Write) {
			ns += d.Service(q.Op, q.Sector, q.Sectors)
		}
	}
	return ns
}

// distinctBlocks counts the distinct blocks of blockSectors the requests
// touch.
func distinctBlocks(reqs []trace.Request, blockSectors uint64) uint64 {
	seen := map[uint64]struct{}{}
	for i := range reqs {
		q := &reqs[i]
		if q.Sectors == 0 {
			continue
		}
		for k := q.Sector / blockSectors; k <= (q.End()-1)/blockSectors; k++ {
			seen[k] = struct{}{}
		}
	}
	return uint64(len(seen))
}
