package controller_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	kubeenv "github.com/shadowtune/shadowtune/internal/testutil/envtest"
)

// Scale test knobs (environment): SHADOWTUNE_SCALE_NODES (default 1000),
// SHADOWTUNE_SCALE_PERIOD, each simulated agent's time between status
// writes (default 10s: a 5 s window with a change every other window,
// ten times the heartbeat rate), SHADOWTUNE_SCALE_DURATION (default 60s).
func scaleKnobs(t *testing.T) (nodes int, period, duration time.Duration) {
	nodes, period, duration = 1000, 10*time.Second, 60*time.Second
	if v := os.Getenv("SHADOWTUNE_SCALE_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("SHADOWTUNE_SCALE_NODES=%q: want a number ≥ 10", v)
		}
		nodes = n
	}
	for name, d := range map[string]*time.Duration{"SHADOWTUNE_SCALE_PERIOD": &period, "SHADOWTUNE_SCALE_DURATION": &duration} {
		if v := os.Getenv(name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil || p <= 0 {
				t.Fatalf("%s=%q: want a positive duration", name, v)
			}
			*d = p
		}
	}
	return nodes, period, duration
}

// TestScale runs the operator binary (a separate process, leader election
// on) against a real API server with 1,000 simulated agents writing their
// NodeStorageState status at their normal rate, and measures how long a
// change on one node takes to show in the StorageTuning statuses that
// govern it (target: every one within 5 s), the API write rate per node,
// the operator's reconcile latency (p50/p99, from its own histogram) and
// its memory (peak RSS).
func TestScale(t *testing.T) {
	nodes, period, duration := scaleKnobs(t)
	env := kubeenv.StartEnv(t)
	bin := buildBinary(t)

	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The fleet: nodes in zones a–d, each reporting sda (pending) and sdb.
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
	}
	zone := func(i int) string { return string(rune('a' + i%4)) }
	start := time.Now()
	parallel(t, 32, nodes, func(i int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{"zone": zone(i)}}}
		if err := c.Create(ctx, n); err != nil {
			return err
		}
		nss := &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: names[i],
			Labels:          map[string]string{v1alpha1.NodeLabel: names[i]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: names[i], UID: n.UID}}}}
		if err := c.Create(ctx, nss); err != nil {
			return err
		}
		pendingDevs("sda", "sdb")(&nss.Status)
		nss.Status.Devices[1].Recommendation.Scheduler = "mq-deadline" // sdb stays
		nss.Status.LastHeartbeatTime = ptr.To(metav1.Now())
		return c.Status().Update(ctx, nss)
	})
	t.Logf("created %d nodes and NodeStorageStates in %v", nodes, time.Since(start).Round(time.Millisecond))

	policies := []*v1alpha1.StorageTuning{
		{ObjectMeta: metav1.ObjectMeta{Name: "all"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "zone-a-sda"}, Spec: v1alpha1.StorageTuningSpec{
			Mode: v1alpha1.ModeApply, Priority: 10,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}},
			Devices:      v1alpha1.DeviceSelector{Include: []string{"sda"}},
			Rollout:      v1alpha1.RolloutPolicy{MaxUnavailable: ptr.To(intstr.FromString("10%"))},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "zone-b"}, Spec: v1alpha1.StorageTuningSpec{
			Priority:     5,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}},
		}},
	}
	for _, p := range policies {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	metricsAddr := freeAddr(t)
	op := startOperatorProcess(t, bin, env.Environment.KubeConfig, metricsAddr)

	// Expected pending counts: sda is pending everywhere; "zone-a-sda"
	// (priority 10) governs it in zone a, "zone-b" (priority 5) in zone b,
	// "all" in zones c and d.
	inZone := func(z int) int32 { return int32((nodes - z + 3) / 4) }
	want := map[string]int32{"zone-a-sda": inZone(0), "zone-b": inZone(1), "all": inZone(2) + inZone(3)}
	waitCounts := func(want map[string]int32, timeout time.Duration) (time.Duration, error) {
		t0 := time.Now()
		for {
			ok := true
			var got []string
			for name, w := range want {
				p := &v1alpha1.StorageTuning{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
					return 0, err
				}
				got = append(got, fmt.Sprintf("%s=%d", name, p.Status.RecommendedChanges))
				ok = ok && p.Status.RecommendedChanges == w
			}
			if ok {
				return time.Since(t0), nil
			}
			if time.Since(t0) > timeout {
				return 0, fmt.Errorf("pending counts %v, want %v", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if d, err := waitCounts(want, 2*time.Minute); err != nil {
		t.Fatalf("first status: %v", err)
	} else {
		t.Logf("first full status after %v", d.Round(time.Millisecond))
	}

	// Simulated agents: every node writes its status every period (first
	// write at a random phase), as a read-modify-write with the object's
	// resourceVersion, as the agent does; only the heartbeat and predicted
	// times change.
	var writes atomic.Int64
	var agents sync.WaitGroup
	agentCtx, stopAgents := context.WithCancel(ctx)
	for i := range names {
		agents.Add(1)
		go func() {
			defer agents.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			timer := time.NewTimer(time.Duration(rng.Int64N(int64(period))))
			defer timer.Stop()
			for {
				select {
				case <-agentCtx.Done():
					return
				case <-timer.C:
				}
				err := retryConflict(func() error {
					nss := &v1alpha1.NodeStorageState{}
					if err := c.Get(agentCtx, client.ObjectKey{Name: names[i]}, nss); err != nil {
						return err
					}
					for j := range nss.Status.Devices {
						for k := range nss.Status.Devices[j].Candidates {
							nss.Status.Devices[j].Candidates[k].PredictedServiceTimeMicros += int64(rng.IntN(5))
						}
					}
					nss.Status.LastHeartbeatTime = ptr.To(metav1.Now())
					return c.Status().Update(agentCtx, nss)
				})
				if err == nil {
					writes.Add(1)
				} else if agentCtx.Err() == nil {
					t.Errorf("agent %s: %v", names[i], err)
				}
				timer.Reset(period)
			}
		}()
	}

	// Probes: once a second, a node of zone a, b or c in turn changes its
	// recommendation for sda; measure until the policy governing it shows
	// the new pending count.
	var lags []time.Duration
	deadline := time.Now().Add(duration)
	flipped := map[int]bool{}
	governing := []string{"zone-a-sda", "zone-b", "all"}
	for k := 0; time.Now().Before(deadline); k++ {
		z := k % 3
		i := (k/3*4 + z) % nodes
		pending := flipped[i]
		err := retryConflict(func() error {
			nss := &v1alpha1.NodeStorageState{}
			if err := c.Get(ctx, client.ObjectKey{Name: names[i]}, nss); err != nil {
				return err
			}
			rec := "mq-deadline"
			if pending {
				rec = "bfq"
			}
			nss.Status.Devices[0].Recommendation.Scheduler = rec
			return c.Status().Update(ctx, nss)
		})
		if err != nil {
			t.Fatal(err)
		}
		flipped[i] = !pending
		delta := int32(-1)
		if pending {
			delta = 1
		}
		want[governing[z]] += delta
		expect := map[string]int32{governing[z]: want[governing[z]]}
		lag, err := waitCounts(expect, 30*time.Second)
		if err != nil {
			t.Fatalf("probe %d (%s): %v", k, names[i], err)
		}
		lags = append(lags, lag)
		time.Sleep(time.Until(start.Add(time.Duration(k+1) * time.Second)))
	}
	stopAgents()
	agents.Wait()
	elapsed := duration

	m := scrape(t, metricsAddr)
	peak := op.stop(t)

	slices.Sort(lags)
	p50, p99, worst := quantile(lags, 0.5), quantile(lags, 0.99), lags[len(lags)-1]
	rate := float64(writes.Load()) / elapsed.Seconds()
	t.Logf("nodes %d, agent status writes %.1f/s in all, %.3f/s per node (one every %v)", nodes, rate, rate/float64(nodes), period)
	t.Logf("status lag after a node's change (%d probes): p50 %v, p99 %v, max %v", len(lags),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond))
	t.Logf("operator reconcile time (storagetuning): p50 %.1f ms, p99 %.1f ms over %.0f reconciles",
		1000*m.reconcileQuantile(0.5), 1000*m.reconcileQuantile(0.99), m.reconciles)
	t.Logf("operator API writes %.1f/s; peak RSS %d MiB", m.writes/elapsed.Seconds(), peak>>20)
	if worst > 5*time.Second {
		t.Errorf("a StorageTuning status took %v to reflect a node's change, want ≤ 5s", worst)
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// parallel runs f(0..n-1) on workers goroutines and fails on the first
// error.
func parallel(t *testing.T, workers, n int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// buildBinary builds cmd/shadowtune into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "shadowtune")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/shadowtune")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// operatorProcess is a running `shadowtune operator`.
type operatorProcess struct {
	cmd  *exec.Cmd
	done chan error
}

func startOperatorProcess(t *testing.T, bin string, kubeconfig []byte, metricsAddr string) *operatorProcess {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "operator.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "operator", "--kubeconfig", kc, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", freeAddr(t), "--leader-elect", "--leader-election-namespace", "default")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &operatorProcess{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-p.done; err != nil {
			t.Logf("operator: %v", err)
		}
		log.Close()
		if t.Failed() {
			if b, err := os.ReadFile(log.Name()); err == nil {
				t.Logf("operator log (tail):\n%s", tailLines(string(b), 30))
			}
		}
	})
	return p
}

// stop sends SIGTERM, waits for a clean exit and returns the peak RSS.
func (p *operatorProcess) stop(t *testing.T) int64 {
	t.Helper()
	peak := vmHWM(p.cmd.Process.Pid)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("operator exited with %v after SIGTERM", err)
		}
		p.done <- nil
	case <-time.After(30 * time.Second):
		t.Error("operator did not stop within 30 s of SIGTERM")
	}
	return peak
}

func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// operatorMetrics is what the scale test reads from the operator's
// /metrics.
type operatorMetrics struct {
	buckets    []bucket // cumulative, reconcile time of the storagetuning controller
	reconciles float64
	writes     float64 // POST, PUT, PATCH, DELETE requests to the API server
}

type bucket struct{ le, count float64 }

func scrape(t *testing.T, addr string) operatorMetrics {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m operatorMetrics
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		name, value, ok := splitSample(line)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, `controller_runtime_reconcile_time_seconds_bucket{`) && strings.Contains(name, `controller="storagetuning"`):
			le := labelValue(name, "le")
			b := bucket{count: value, le: math.Inf(1)}
			if le != "+Inf" {
				b.le, _ = strconv.ParseFloat(le, 64)
			}
			m.buckets = append(m.buckets, b)
		case strings.HasPrefix(name, `controller_runtime_reconcile_time_seconds_count{`) && strings.Contains(name, `controller="storagetuning"`):
			m.reconciles = value
		case strings.HasPrefix(name, "rest_client_requests_total{"):
			switch labelValue(name, "method") {
			case "POST", "PUT", "PATCH", "DELETE":
				m.writes += value
			}
		}
	}
	if len(m.buckets) == 0 {
		t.Fatal("no controller_runtime_reconcile_time_seconds for the storagetuning controller in the operator's /metrics")
	}
	slices.SortFunc(m.buckets, func(a, b bucket) int { return int(math.Copysign(1, a.le-b.le)) })
	return m
}

func splitSample(line string) (string, float64, bool) {
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	return line[:i], v, err == nil
}

func labelValue(series, label string) string {
	_, rest, ok := strings.Cut(series, label+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// reconcileQuantile estimates a quantile of the reconcile time, seconds,
// by linear interpolation inside the histogram bucket that holds it.
func (m operatorMetrics) reconcileQuantile(q float64) float64 {
	total := m.buckets[len(m.buckets)-1].count
	rank := q * total
	lo, prev := 0.0, 0.0
	for _, b := range m.buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lo
			}
			if b.count == prev {
				return b.le
			}
			return lo + (b.le-lo)*(rank-prev)/(b.count-prev)
		}
		lo, prev = b.le, b.count
	}
	return lo
}
