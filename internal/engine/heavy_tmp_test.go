package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/decide"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sim"
)

func TestHeavyTmp(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	secs := make([]uint64, 65536)
	for i := range secs {
		secs[i] = rng.Uint64N(2*gib) &^ 7
	}
	reqs := closedReads(secs, 0)
	var cands []Candidate
	for _, a := range []int{50, 366, 683, 1000} {
		for _, b := range []int{1, 22, 43, 64} {
			for _, c := range []int{1, 3, 6, 8} {
				for _, d := range []int{1000, 4000, 7000, 10000} {
					tun := fmt.Sprintf("read_expire=%d,fifo_batch=%d,writes_starved=%d,write_expire=%d", a, b, c, d)
					cc, err := ParseCandidate("mq-deadline:" + tun)
					if err != nil {
						t.Fatal(err)
					}
					cands = append(cands, cc)
					cc.Cache = true
					cands = append(cands, cc)
				}
			}
		}
	}
	w, _ := sim.NewWindow(reqs, sim.LoopAuto)
	cur, _ := ParseCandidate("none")
	var peak atomic.Uint64
	done := make(chan bool)
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	start := time.Now()
	_, err := Evaluate(w, cands, Options{Model: model.Default(model.SSD, 2*gib), Current: cur, Decide: decide.DefaultConfig("none"), Parallel: 1, Cache: CacheForBudget(64 << 20)})
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d candidates, %v, peak heap alloc %d MiB", len(cands), time.Since(start), peak.Load()>>20)
	f, _ := os.Create("/tmp/heap.prof")
	pprof.WriteHeapProfile(f)
	f.Close()
}
