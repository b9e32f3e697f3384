package model

import (
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// bimodalReads builds a closed-loop HDD-like window: 30 % sequential reads
// that hit (0.3 ms + 60 µs/sector, a slow bus) and random reads that miss
// (4–20 ms + transfer). Sizes 1…64 sectors.
func bimodalReads(n int, seed uint64) ([]trace.Request, []bool) {
	rng := rand.New(rand.NewPCG(seed, 3))
	var reqs []trace.Request
	var hits []bool
	var now int64
	pos := uint64(0)
	for i := 0; i < n; i++ {
		sectors := uint32(1 + rng.IntN(64))
		var svc int64
		hit := rng.Float64() < 0.3
		sector := pos
		if hit {
			svc = 300_000 + int64(sectors)*60_000 + rng.Int64N(100_000)
		} else {
			sector = rng.Uint64N(1 << 24)
			svc = 4_000_000 + rng.Int64N(16_000_000) + int64(sectors)*60_000
		}
		reqs = append(reqs, trace.Request{Op: trace.Read, Sector: sector, Sectors: sectors,
			Arrival: now, Dispatch: now, Complete: now + svc})
		hits = append(hits, hit)
		now += svc + 1_000_000
		pos = sector + uint64(sectors)
	}
	return reqs, hits
}

func TestDeriveHitClassifierBimodal(t *testing.T) {
	reqs, truth := bimodalReads(5000, 1)
	h, ok := DeriveHitClassifier(reqs)
	if !ok {
		t.Fatal("clearly bimodal window not recognised")
	}
	// The fixed DADS threshold would call every 64-sector hit (4.2 ms) a miss.
	if h.NsPerSector < 40_000 || h.NsPerSector > 80_000 {
		t.Errorf("per-sector allowance %d ns, want ≈ 60 µs", h.NsPerSector)
	}
	wrong := 0
	for i, q := range reqs {
		if h.IsHit(q.Sectors, q.ServiceTime()) != truth[i] {
			wrong++
		}
	}
	if wrong > len(reqs)/200 {
		t.Errorf("classifier %+v misfiles %d of %d reads", h, wrong, len(reqs))
	}
	// DADS's fixed 1 ms threshold on the same data, for contrast.
	dads := HitClassifier{ThresholdNs: DefaultHitThresholdNs}
	wrongDADS := 0
	for i, q := range reqs {
		if dads.IsHit(q.Sectors, q.ServiceTime()) != truth[i] {
			wrongDADS++
		}
	}
	if wrongDADS <= wrong {
		t.Errorf("derived classifier (%d wrong) no better than 1 ms (%d wrong)", wrong, wrongDADS)
	}
}

func TestDeriveHitClassifierDiskSim(t *testing.T) {
	// hp_c2247a labels the drive's own cache outcome of reads: check the
	// derived classifier against it.
	reqs := loadDiskSim(t, "hp_c2247a")
	h, ok := DeriveHitClassifier(reqs[:5000])
	if !ok {
		t.Fatal("hp_c2247a not bimodal")
	}
	labels := hpLabels(t)
	agree, n := 0, 0
	for i, q := range reqs {
		if q.Op != trace.Read {
			continue
		}
		n++
		if h.IsHit(q.Sectors, q.ServiceTime()) == (labels[i] == "Hit") {
			agree++
		}
	}
	t.Logf("hp_c2247a: classifier %+v agrees with the drive's labels on %d of %d reads", h, agree, n)
	if float64(agree) < 0.98*float64(n) {
		t.Errorf("agreement %d/%d < 98 %%", agree, n)
	}
}

func TestDeriveHitClassifierUnimodal(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	var reqs []trace.Request
	for i := 0; i < 2000; i++ {
		svc := 5_000_000 + rng.Int64N(10_000_000) // misses only
		reqs = append(reqs, trace.Request{Op: trace.Read, Sector: rng.Uint64N(1 << 24), Sectors: 8, Dispatch: 0, Complete: svc})
	}
	h, ok := DeriveHitClassifier(reqs)
	if ok || h != DefaultHitClassifier() {
		t.Errorf("unimodal window: %+v, %v; want the default and false", h, ok)
	}
	if _, ok := DeriveHitClassifier(reqs[:50]); ok {
		t.Error("50 reads: derived a classifier")
	}
}
