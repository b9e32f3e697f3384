package sim_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/sim"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// webserverTrace is the 1&1 linux-webserver-2 production load shipped in
// testdata (269,007 requests over 3,601 s).
const webserverTrace = "../../testdata/traces/blkreplay/linux-webserver-2.load.gz"

var (
	benchOnce sync.Once
	benchWin  *sim.Window
	benchMod  *model.Model
	benchSpan float64
	benchErr  error
)

func loadBench(b *testing.B) (*sim.Window, *model.Model) {
	b.Helper()
	benchOnce.Do(func() {
		reqs, err := trace.ReadFile("blkreplay", webserverTrace)
		if err != nil {
			benchErr = err
			return
		}
		var capacity uint64
		for i := range reqs {
			capacity = max(capacity, reqs[i].End())
		}
		benchSpan = float64(reqs[len(reqs)-1].Arrival-reqs[0].Arrival) / 1e9
		benchMod = model.Default(model.HDD, capacity)
		benchWin, benchErr = sim.NewWindow(reqs, sim.LoopAuto)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchWin, benchMod
}

func benchConfig(m *model.Model, name string) sim.Config {
	return sim.Config{
		Scheduler: name,
		Device:    sched.Device{Rotational: true, MaxSectors: 2560, QueueDepth: 1},
		Servers:   1,
		NewDisk:   func(seed int64) sim.DeviceModel { return m.NewDisk(seed) },
	}
}

// BenchmarkSimulate replays linux-webserver-2 under each scheduler alone.
func BenchmarkSimulate(b *testing.B) {
	w, m := loadBench(b)
	for _, name := range sched.Names() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sim.Run(w, benchConfig(m, name)); err != nil {
					b.Fatal(err)
				}
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(w.Len())/perOp, "requests/s")
		})
	}
}

// BenchmarkSimulateAllFour replays linux-webserver-2 under all four
// schedulers, one goroutine each on GOMAXPROCS cores, as the engine does;
// requests/s counts simulated requests in total (4 × 269,007 per op), and
// realtime-x is the trace span divided by the time to simulate all four.
func BenchmarkSimulateAllFour(b *testing.B) {
	w, m := loadBench(b)
	names := sched.Names()
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, runtime.GOMAXPROCS(0))
		errs := make([]error, len(names))
		for i, name := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				_, errs[i] = sim.Run(w, benchConfig(m, name))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(len(names)*w.Len())/perOp, "requests/s")
	b.ReportMetric(benchSpan/perOp, "realtime-x")
}
