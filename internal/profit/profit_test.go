package profit

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

const gib = uint64(1) << 21 // sectors

var ssd = Config{Blocks: 1536, BlockSectors: 8, FlashReadNs: 100_000, FlashWriteNs: 300_000, Alpha: 0.7, RAFMaxSectors: 64}

func read(at int64, sector uint64, sectors uint32) trace.Request {
	return trace.Request{Arrival: at, Dispatch: trace.Unknown, Complete: trace.Unknown, Sector: sector, Sectors: sectors, Op: trace.Read, Think: trace.Unknown}
}

// mixed is a hot set of 1,024 random 4 KiB blocks read again and again,
// interleaved with a sequential scan in 512 KiB reads over 2 GiB that is
// never read again, and large sequential writes.
func mixed() []trace.Request {
	rng := rand.New(rand.NewPCG(1, 2))
	var reqs []trace.Request
	scan, wr := 10*gib, 20*gib
	for i := range 40000 {
		at := int64(i) * 1000
		switch {
		case i%10 == 9:
			reqs = append(reqs, read(at, scan, 1024))
			scan += 1024
		case i%20 == 4:
			w := read(at, wr, 512)
			w.Op = trace.Write
			reqs = append(reqs, w)
			wr += 512
		default:
			reqs = append(reqs, read(at, 40*gib+rng.Uint64N(1024)*8, 8))
		}
	}
	return reqs
}

func eval(t *testing.T, reqs []trace.Request, p Policy, cfg Config) Result {
	t.Helper()
	r, err := Evaluate(reqs, model.Default(model.HDD, 100*gib), p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProfitKeepsTheHotSet: a scan of blocks read once evicts the hot set
// from a cache that admits every miss; Profit, like the second-miss and
// small-request rules, keeps it, and so spends less I/O time.
func TestProfitKeepsTheHotSet(t *testing.T) {
	reqs := mixed()
	all, prof := eval(t, reqs, AdmitAll, ssd), eval(t, reqs, Profit, ssd)
	second, raf := eval(t, reqs, SecondMiss, ssd), eval(t, reqs, RAF, ssd)
	for _, r := range []Result{all, second, raf, prof} {
		t.Logf("%-12s hits %5.1f %%  flash blocks written %7d  disk requests %6d  I/O time %.2f s", r.Policy, r.HitPct(), r.FlashBlocksWritten, r.DiskRequests, float64(r.IOTimeNs)/1e9)
	}
	if prof.HitPct() < all.HitPct()+10 || prof.IOTimeNs >= all.IOTimeNs {
		t.Errorf("profit: %.1f %% hits, %d ns; admit-all %.1f %%, %d ns: want 10 points more hits and less time", prof.HitPct(), prof.IOTimeNs, all.HitPct(), all.IOTimeNs)
	}
	if prof.FlashBlocksWritten >= all.FlashBlocksWritten/2 {
		t.Errorf("profit wrote %d blocks to the flash, admit-all %d: want under half (the scan stays on the disk)", prof.FlashBlocksWritten, all.FlashBlocksWritten)
	}
	if again := eval(t, reqs, Profit, ssd); again != prof {
		t.Errorf("not deterministic: %+v then %+v", prof, again)
	}
}

// TestProfitPrefersReadBlocksOverWritten: two hot sets read equally
// often, one of them also rewritten in large writes; a cache that holds
// only one of them keeps the one not written (Equation (1): writes times
// sequence length divide the profit).
func TestProfitPrefersReadBlocksOverWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var reqs []trace.Request
	for i := range 30000 {
		at := int64(i) * 1000
		if i%3 == 2 {
			w := read(at, 60*gib+rng.Uint64N(64)*64, 64) // 32 KiB writes over set B
			w.Op = trace.Write
			reqs = append(reqs, w)
			continue
		}
		base := 40 * gib // set A, never written
		if i%2 == 1 {
			base = 60 * gib // set B
		}
		reqs = append(reqs, read(at, base+rng.Uint64N(512)*8, 8))
	}
	cfg := ssd
	cfg.Blocks = 600
	var onA, total int
	r, c := replay(reqs, model.Default(model.HDD, 100*gib), Profit, cfg)
	for k := range c.in {
		total++
		if k < 60*gib/8 {
			onA++
		}
	}
	t.Logf("profit: %.1f %% hits; %d of %d cached blocks from the set never written", r.HitPct(), onA, total)
	if onA*10 < total*8 {
		t.Errorf("%d of %d cached blocks are from the set never written; want at least 80 %%", onA, total)
	}
}

func TestEvaluateErrors(t *testing.T) {
	m := model.Default(model.HDD, gib)
	if _, err := Evaluate(nil, m, Profit, ssd); !errors.Is(err, trace.ErrEmpty) {
		t.Errorf("no requests: %v", err)
	}
	bad := ssd
	bad.Blocks = 0
	if _, err := Evaluate(mixed()[:10], m, Profit, bad); !errors.Is(err, ErrConfig) {
		t.Errorf("no blocks: %v", err)
	}
	if _, err := Evaluate(mixed()[:10], m, Policy(9), ssd); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown policy: %v", err)
	}
}
