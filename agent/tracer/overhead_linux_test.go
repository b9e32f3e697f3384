//go:build linux

package tracer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// TestTracerOverhead measures O_DIRECT 4 KiB random-read IOPS (one thread,
// queue depth 1) on a loop device without a tracer and under each tracer,
// interleaved over several rounds. It runs only with
// SHADOWTUNE_TRACER_BENCH=1 (rounds: SHADOWTUNE_TRACER_BENCH_ROUNDS, default
// 5; seconds per run: SHADOWTUNE_TRACER_BENCH_SECS, default 3).
func TestTracerOverhead(t *testing.T) {
	if os.Getenv("SHADOWTUNE_TRACER_BENCH") != "1" {
		t.Skip("set SHADOWTUNE_TRACER_BENCH=1 to measure tracer overhead")
	}
	needRoot(t)
	rounds, secs := envInt("SHADOWTUNE_TRACER_BENCH_ROUNDS", 5), envInt("SHADOWTUNE_TRACER_BENCH_SECS", 3)
	l := newLoop(t, 1<<30)
	l.setScheduler(t, "none")
	modes := []string{"off", KindEBPF, KindTracefs}
	iops := map[string][]float64{}
	for round := range rounds {
		for i := range modes {
			mode := modes[(i+round)%len(modes)] // rotate the order
			n, traced := runOverhead(t, l, mode, time.Duration(secs)*time.Second, uint64(round))
			iops[mode] = append(iops[mode], n)
			t.Logf("round %d %-7s %8.0f IOPS (traced %d requests)", round, mode, n, traced)
		}
	}
	base := median(iops["off"])
	for _, m := range modes {
		med := median(iops[m])
		t.Logf("%-7s median %8.0f IOPS  %+6.1f%%  %5.2f µs/request  runs %v", m, med, 100*(med-base)/base,
			1e6/med-1e6/base, roundAll(iops[m]))
	}
	// The BPF programs' own run time, from the kernel's BPF statistics
	// (kernel.bpf_stats_enabled, on for this run only). Run counts include
	// the block events of every other disk, which the programs filter out.
	st, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Logf("no BPF run-time statistics: %v", err)
		return
	}
	defer st.Close()
	statsHook = func(tr *ebpfTracer, requests int) {
		var total time.Duration
		for name, p := range tr.coll.Programs {
			s, err := p.Stats()
			if err != nil || s.RunCount == 0 {
				continue
			}
			total += s.Runtime
			t.Logf("  %-18s %8d runs  %6.0f ns/run", name, s.RunCount, float64(s.Runtime.Nanoseconds())/float64(s.RunCount))
		}
		t.Logf("  BPF time per traced request: %.0f ns", float64(total.Nanoseconds())/float64(requests))
	}
	defer func() { statsHook = nil }()
	n, traced := runOverhead(t, l, KindEBPF, time.Duration(secs)*time.Second, 99)
	t.Logf("ebpf with BPF statistics: %.0f IOPS (traced %d)", n, traced)
}

// statsHook, when set, is called with the eBPF tracer after a run.
var statsHook func(tr *ebpfTracer, requests int)

func runOverhead(t *testing.T, l *loopDev, mode string, d time.Duration, seed uint64) (iops float64, traced int) {
	var (
		tr   Tracer
		done = make(chan error, 1)
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if mode != "off" {
		var err error
		tr, err = New(Options{Kind: mode, Devices: []uint32{l.dev}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		go func() { done <- tr.Run(ctx, func(b []trace.Request) { traced += len(b) }) }()
	}
	fd, err := unix.Open(l.path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(buf) }()
	rng := rand.New(rand.NewPCG(seed, 2))
	blocks := l.size / 4096
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		for range 64 {
			if _, err := unix.Pread(fd, buf, rng.Int64N(blocks)*4096); err != nil {
				t.Fatal(err)
			}
		}
		n += 64
	}
	iops = float64(n) / time.Since(start).Seconds()
	if tr != nil {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// A missed completion (see bpf/blocktrace.c) is counted lost.
		if st := tr.Stats(); uint64(traced)+st.Lost != uint64(n) || st.Lost > uint64(n/10000+1) {
			t.Errorf("%s traced %d of %d reads (%+v)", mode, traced, n, st)
		}
		if et, ok := tr.(*ebpfTracer); ok && statsHook != nil {
			statsHook(et, traced)
		}
	}
	return iops, traced
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func roundAll(v []float64) []string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return s
}
