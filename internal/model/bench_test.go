package model

import (
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestServiceDoesNotAllocate: on a warm table, Service (mean and sample),
// Predict and Lookup allocate nothing, cold cells included.
func TestServiceDoesNotAllocate(t *testing.T) {
	m, reqs := trainedModel(t, "atlas10k")
	test := reqs[len(reqs)/2:]
	for _, pm := range []PredictMode{PredictMean, PredictSample} {
		d := m.NewDisk(1)
		d.SetPredictMode(pm)
		i := 0
		if a := testing.AllocsPerRun(10000, func() {
			q := &test[i%len(test)]
			d.Service(q.Op, q.Sector, q.Sectors)
			i++
		}); a != 0 {
			t.Errorf("Service (%v): %v allocs/op", pm, a)
		}
	}
	i := 0
	if a := testing.AllocsPerRun(10000, func() {
		q := &test[i%len(test)]
		m.Predict(q.Op, q.Sectors, uint64(i)*977, i%3 == 0)
		m.Lookup(Table(i%3), i%NumRows, i%m.Columns())
		i++
	}); a != 0 {
		t.Errorf("Predict/Lookup: %v allocs/op", a)
	}
}

func benchService(b *testing.B, m *Model, reqs []trace.Request, pm PredictMode) {
	d := m.NewDisk(1)
	d.SetPredictMode(pm)
	b.ReportAllocs()
	b.ResetTimer()
	var sink int64
	for i := 0; i < b.N; i++ {
		q := &reqs[i%len(reqs)]
		sink += d.Service(q.Op, q.Sector, q.Sectors)
	}
	_ = sink
}

// BenchmarkServiceHDD: a warm HDD model (atlas10k, trained on half the
// trace) serving the other half, default 32-segment cache.
func BenchmarkServiceHDD(b *testing.B) {
	m, reqs := trainedModel(b, "atlas10k")
	benchService(b, m, reqs[len(reqs)/2:], PredictMean)
}

func BenchmarkServiceHDDSample(b *testing.B) {
	m, reqs := trainedModel(b, "atlas10k")
	benchService(b, m, reqs[len(reqs)/2:], PredictSample)
}

// BenchmarkServiceHDD128Segments: the largest cache of the calibration
// grid, the worst case of the O(segments) scan.
func BenchmarkServiceHDD128Segments(b *testing.B) {
	m, reqs := trainedModel(b, "atlas10k")
	c := m.Config().Cache
	c.Segments = 128
	if err := m.SetCache(c); err != nil {
		b.Fatal(err)
	}
	benchService(b, m, reqs[len(reqs)/2:], PredictMean)
}

// BenchmarkServiceNVMe: no cache model; the table lookup alone.
func BenchmarkServiceNVMe(b *testing.B) {
	reqs := loadDiskSim(b, "atlas10k")
	m := Default(NVMe, 18e6)
	d := m.NewDisk(1)
	for _, q := range reqs[:5000] {
		d.Observe(q.Op, q.Sector, q.Sectors, q.ServiceTime()/50)
	}
	benchService(b, m, reqs[5000:], PredictMean)
}

func BenchmarkPredict(b *testing.B) {
	m, reqs := trainedModel(b, "atlas10k")
	reqs = reqs[len(reqs)/2:]
	b.ReportAllocs()
	b.ResetTimer()
	var sink int64
	for i := 0; i < b.N; i++ {
		q := &reqs[i%len(reqs)]
		sink += m.Predict(q.Op, q.Sectors, q.Sector, i&1 == 0)
	}
	_ = sink
}

// BenchmarkObserve: online learning of real completions (the agent's path).
func BenchmarkObserve(b *testing.B) {
	m, reqs := trainedModel(b, "atlas10k")
	d := m.NewDisk(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := &reqs[i%len(reqs)]
		d.Observe(q.Op, q.Sector, q.Sectors, q.ServiceTime())
	}
}

// BenchmarkEvaluate: a whole evaluation of a 10,000-request trace
// (threshold derivation, cache calibration over 96 candidates, training,
// prediction).
func BenchmarkEvaluate(b *testing.B) {
	reqs := loadDiskSim(b, "cheetah9LP")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(reqs, EvalOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrentDisks: several Disks share one Model from goroutines
// (lookups only write Disk state); run with -race to check.
func TestConcurrentDisks(t *testing.T) {
	m, reqs := trainedModel(t, "cheetah9LP")
	test := reqs[len(reqs)/2:]
	want := make([]int64, 4)
	for g := range want {
		d := m.NewDisk(int64(g))
		d.SetPredictMode(PredictSample)
		for _, q := range test {
			want[g] += d.Service(q.Op, q.Sector, q.Sectors)
		}
	}
	got := make([]int64, 4)
	done := make(chan struct{})
	for g := range got {
		go func() {
			defer func() { done <- struct{}{} }()
			d := m.NewDisk(int64(g))
			d.SetPredictMode(PredictSample)
			for _, q := range test {
				got[g] += d.Service(q.Op, q.Sector, q.Sectors)
			}
		}()
	}
	for range got {
		<-done
	}
	for g := range got {
		if got[g] != want[g] {
			t.Errorf("disk %d: concurrent total %d != serial %d", g, got[g], want[g])
		}
	}
}

// benchPerRequest runs run on the requests of the agent's recorded window
// file (agent/testdata) and reports its time per request.
func benchPerRequest(b *testing.B, file string, run func([]trace.Request)) {
	reqs, err := trace.ReadFile("native", "../../agent/testdata/"+file)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		run(reqs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(reqs)), "ns/request")
}

// BenchmarkEstimateThrottle: the agent's per-window throttle check on the
// VM lab's recording of five phases (11,512 requests), per request.
func BenchmarkEstimateThrottle(b *testing.B) {
	benchPerRequest(b, "virtio-throttled-phases.st.gz", func(reqs []trace.Request) {
		if _, _, ok := EstimateThrottle(reqs); !ok {
			b.Fatal("no caps found")
		}
	})
}

// BenchmarkThrottleWindowsLoop: cutting the backlogged windows of a
// recorded window of a fast device (a loop device under ext4, the agent's
// testdata), per request: the part of the per-window throttle check that
// every device pays.
func BenchmarkThrottleWindowsLoop(b *testing.B) {
	benchPerRequest(b, "loop-ext4-window.st.gz", func(reqs []trace.Request) { NewThrottleWindows(reqs) })
}
