package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/operator/controller"
	"github.com/shadowtune/shadowtune/operator/metrics"
	"github.com/shadowtune/shadowtune/operator/rollout"
)

// clock is the operator's roll-out clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// startOperator runs the operator's reconcilers in-process against the
// API server until the returned stop function is called (or the test ends).
func startOperator(t *testing.T, cfg *rest.Config, clk *clock) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(mgr, controller.Options{Metrics: metrics.New(prometheus.NewRegistry()), Now: clk.Now}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually retries f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fleet creates nodes and plays their agents.
type fleet struct {
	t   *testing.T
	c   client.Client
	clk *clock
}

func (f *fleet) node(name string, labels map[string]string) {
	f.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := f.c.Create(context.Background(), n); err != nil {
		f.t.Fatal(err)
	}
}

// report writes a node's NodeStorageState status as its agent would,
// creating the object first (owned by the node) if needed; the heartbeat is
// the operator clock's now.
func (f *fleet) report(name string, mut func(*v1alpha1.NodeStorageStateStatus)) {
	f.t.Helper()
	ctx := context.Background()
	err := retryConflict(func() error {
		nss := &v1alpha1.NodeStorageState{}
		err := f.c.Get(ctx, client.ObjectKey{Name: name}, nss)
		if apierrors.IsNotFound(err) {
			node := &corev1.Node{}
			if err := f.c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
				return err
			}
			nss = &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{v1alpha1.NodeLabel: name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}},
			}}
			if err := f.c.Create(ctx, nss); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		mut(&nss.Status)
		nss.Status.LastHeartbeatTime = ptr.To(metav1.NewTime(f.clk.Now()))
		return f.c.Status().Update(ctx, nss)
	})
	if err != nil {
		f.t.Fatalf("report %s: %v", name, err)
	}
}

func retryConflict(fn func() error) error {
	for i := 0; ; i++ {
		err := fn()
		if !apierrors.IsConflict(err) || i == 20 {
			return err
		}
	}
}

// devs sets the node's devices: each name pending a switch to bfq with a
// 20 % predicted gain.
func pendingDevs(names ...string) func(*v1alpha1.NodeStorageStateStatus) {
	return func(s *v1alpha1.NodeStorageStateStatus) {
		s.Devices = nil
		for _, n := range names {
			s.Devices = append(s.Devices, v1alpha1.DeviceState{
				Name: n, Class: v1alpha1.DeviceClassSSD, SizeBytes: 1 << 30,
				Current: v1alpha1.DeviceSettings{Scheduler: "mq-deadline", ReadAheadKiB: 128},
				Candidates: []v1alpha1.CandidateResult{
					{Name: "bfq", PredictedServiceTimeMicros: 800, PredictedGainPercent: "20.0"},
					{Name: "mq-deadline", PredictedServiceTimeMicros: 1000, PredictedGainPercent: "0.0"},
				},
				Recommendation: &v1alpha1.Recommendation{Scheduler: "bfq", GainPercent: "20.0", Reason: "Switch"},
			})
		}
		s.DeviceCount = int32(len(s.Devices))
	}
}

// applied plays the agent applying its grant: the device now runs bfq.
func applied(at time.Time, names ...string) func(*v1alpha1.NodeStorageStateStatus) {
	return func(s *v1alpha1.NodeStorageStateStatus) {
		for i := range s.Devices {
			d := &s.Devices[i]
			if !slices.Contains(names, d.Name) {
				continue
			}
			d.Original = &v1alpha1.DeviceSettings{Scheduler: "mq-deadline", ReadAheadKiB: 128}
			d.Current.Scheduler = "bfq"
			d.Applied = &v1alpha1.AppliedSetting{Scheduler: "bfq", At: metav1.NewTime(at)}
		}
	}
}

func (f *fleet) policy(name string, mut func(*v1alpha1.StorageTuning)) {
	f.t.Helper()
	p := &v1alpha1.StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: name}}
	mut(p)
	if err := f.c.Create(context.Background(), p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) updatePolicy(name string, mut func(*v1alpha1.StorageTuning)) {
	f.t.Helper()
	err := retryConflict(func() error {
		p := &v1alpha1.StorageTuning{}
		if err := f.c.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
			return err
		}
		mut(p)
		return f.c.Update(context.Background(), p)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) get(name string) *v1alpha1.StorageTuning {
	p := &v1alpha1.StorageTuning{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// grants returns node → granted devices of the named nodes.
func (f *fleet) grants(nodes ...string) map[string]*v1alpha1.RolloutGrant {
	out := map[string]*v1alpha1.RolloutGrant{}
	for _, n := range nodes {
		nss := &v1alpha1.NodeStorageState{}
		if err := f.c.Get(context.Background(), client.ObjectKey{Name: n}, nss); err != nil {
			f.t.Fatal(err)
		}
		if nss.Spec.Grant != nil {
			out[n] = nss.Spec.Grant
		}
	}
	return out
}

func grantedNodes(g map[string]*v1alpha1.RolloutGrant) []string {
	var out []string
	for n := range g {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// condition waits for a condition of the policy to have status and reason.
func (f *fleet) condition(name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	f.t.Helper()
	var got metav1.Condition
	eventually(f.t, 10*time.Second, name+" "+typ, func() error {
		c := meta.FindStatusCondition(f.get(name).Status.Conditions, typ)
		if c == nil {
			return errors.New("no condition")
		}
		got = *c
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	})
	return got
}

// events returns the reasons and notes of the events about the policy.
func (f *fleet) events(policy string) []string {
	var list eventsv1.EventList
	if err := f.c.List(context.Background(), &list); err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == v1alpha1.KindStorageTuning && e.Regarding.Name == policy {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

func (f *fleet) waitEvent(policy, prefix string) {
	f.t.Helper()
	eventually(f.t, 10*time.Second, "event "+prefix, func() error {
		for _, e := range f.events(policy) {
			if strings.HasPrefix(e, prefix) {
				return nil
			}
		}
		return fmt.Errorf("events %q", f.events(policy))
	})
}

func TestOperator(t *testing.T) {
	cfg, c := startAPIServer(t)
	clk := &clock{t: time.Now().Truncate(time.Second)}
	f := &fleet{t: t, c: c, clk: clk}
	top := t // the operator outlives the subtests
	stopOperator := startOperator(top, cfg, clk)

	t.Run("aggregation and overlap", func(t *testing.T) {
		f.t = t
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"suite": "agg"}}
		for _, n := range []string{"agg-1", "agg-2"} {
			f.node(n, map[string]string{"suite": "agg"})
			f.report(n, pendingDevs("sda", "sdb"))
		}
		f.report("agg-2", applied(clk.Now(), "sdb"))
		f.policy("agg-observe", func(p *v1alpha1.StorageTuning) { p.Spec.NodeSelector = sel })
		eventually(t, 10*time.Second, "status", func() error {
			s := f.get("agg-observe").Status
			if s.MatchedNodes != 2 || s.MatchedDevices != 4 || s.RecommendedChanges != 3 || s.ChangedDevices != 1 || s.PredictedGainPercent != "15.0" {
				return fmt.Errorf("status %+v", s)
			}
			return nil
		})
		f.condition("agg-observe", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
		f.condition("agg-observe", v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonObserving)
		f.condition("agg-observe", v1alpha1.ConditionConflict, metav1.ConditionFalse, v1alpha1.ReasonNoConflict)
		if g := f.grants("agg-1", "agg-2"); len(g) != 0 {
			t.Errorf("Observe mode granted %v", grantedNodes(g))
		}

		// A second policy of higher priority takes sda.
		f.policy("agg-sda", func(p *v1alpha1.StorageTuning) {
			p.Spec.NodeSelector = sel
			p.Spec.Priority = 10
			p.Spec.Devices.Include = []string{"sda"}
		})
		lose := f.condition("agg-observe", v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonOverridden)
		win := f.condition("agg-sda", v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonOverrides)
		if !strings.Contains(lose.Message, "agg-sda (2 devices)") || !strings.Contains(win.Message, "agg-observe (2 devices)") {
			t.Errorf("conflict messages:\n  loser:  %s\n  winner: %s", lose.Message, win.Message)
		}
		eventually(t, 10*time.Second, "governed devices after the overlap", func() error {
			if a, b := f.get("agg-observe").Status.MatchedDevices, f.get("agg-sda").Status.MatchedDevices; a != 2 || b != 2 {
				return fmt.Errorf("agg-observe governs %d, agg-sda %d; want 2 and 2", a, b)
			}
			return nil
		})
		f.waitEvent("agg-observe", rollout.EventConflict+": ")

		// Node labels matter: a relabelled node leaves both policies.
		err := retryConflict(func() error {
			n := &corev1.Node{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "agg-2"}, n); err != nil {
				return err
			}
			n.Labels["suite"] = "elsewhere"
			return c.Update(context.Background(), n)
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "relabelled node leaves", func() error {
			if n := f.get("agg-observe").Status.MatchedNodes; n != 1 {
				return fmt.Errorf("matchedNodes %d, want 1", n)
			}
			return nil
		})
	})

	t.Run("rollout", func(t *testing.T) {
		f.t = t
		nodes := []string{"ro-a", "ro-b", "ro-c"}
		for _, n := range nodes {
			f.node(n, map[string]string{"suite": "ro"})
			f.report(n, pendingDevs("sda", "sdb"))
		}
		f.policy("ro", func(p *v1alpha1.StorageTuning) {
			p.Spec.Mode = v1alpha1.ModeApply
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"suite": "ro"}}
			p.Spec.Evaluation.Window = &metav1.Duration{Duration: time.Second}
			p.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			p.Spec.Rollout.MinDwell = &metav1.Duration{Duration: 10 * time.Minute}
		})
		expectGrants := func(want ...string) map[string]*v1alpha1.RolloutGrant {
			t.Helper()
			var g map[string]*v1alpha1.RolloutGrant
			eventually(t, 10*time.Second, "grants", func() error {
				g = f.grants(nodes...)
				if got := grantedNodes(g); !slices.Equal(got, want) {
					return fmt.Errorf("granted %v, want %v", got, want)
				}
				return nil
			})
			// And it stays so: no second node is granted meanwhile.
			time.Sleep(500 * time.Millisecond)
			if got := grantedNodes(f.grants(nodes...)); !slices.Equal(got, want) {
				t.Fatalf("granted %v later, want %v", got, want)
			}
			return g
		}
		g := expectGrants("ro-a")
		if a := g["ro-a"]; !slices.Equal(a.Devices, []string{"sda", "sdb"}) || a.Policy != "ro" || a.Generation != f.get("ro").Generation {
			t.Errorf("grant %+v", a)
		}
		f.condition("ro", v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonRollingOut)
		f.waitEvent("ro", rollout.EventGranted+": ro-a: may change sda, sdb")

		// An operator restart keeps the grants as they are.
		stopOperator()
		stopOperator = startOperator(top, cfg, clk)
		if g2 := expectGrants("ro-a"); !g2["ro-a"].Until.Equal(&g["ro-a"].Until) {
			t.Errorf("grant changed over a restart: %v → %v", g["ro-a"].Until, g2["ro-a"].Until)
		}

		// ro-a applies; once its grant expires the next node gets one.
		f.report("ro-a", applied(clk.Now(), "sda", "sdb"))
		clk.Add(rollout.GrantDuration(time.Second) + time.Second)
		for _, n := range nodes {
			f.report(n, func(*v1alpha1.NodeStorageStateStatus) {}) // heartbeat at the new time
		}
		expectGrants("ro-b")
		f.waitEvent("ro", rollout.EventChanged+": ro-a/sda: applied scheduler bfq; ro-a/sdb: applied scheduler bfq")

		// ro-a has something new to change, but its dwell time is not over.
		f.report("ro-b", applied(clk.Now(), "sda", "sdb"))
		clk.Add(rollout.GrantDuration(time.Second) + time.Second)
		f.report("ro-a", func(s *v1alpha1.NodeStorageStateStatus) {
			s.Devices[0].Recommendation.Scheduler = "kyber"
		})
		f.report("ro-b", func(*v1alpha1.NodeStorageStateStatus) {})
		f.report("ro-c", func(*v1alpha1.NodeStorageStateStatus) {})
		expectGrants("ro-c")
		f.report("ro-c", applied(clk.Now(), "sda", "sdb"))
		clk.Add(rollout.GrantDuration(time.Second) + time.Second)
		for _, n := range nodes {
			f.report(n, func(*v1alpha1.NodeStorageStateStatus) {})
		}
		expectGrants()
		f.condition("ro", v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonWaitingForDwell)
		clk.Add(10 * time.Minute)
		for _, n := range nodes {
			f.report(n, func(*v1alpha1.NodeStorageStateStatus) {})
		}
		g = expectGrants("ro-a")
		if !slices.Equal(g["ro-a"].Devices, []string{"sda"}) {
			t.Errorf("granted %v, want only the pending sda", g["ro-a"].Devices)
		}

		// Pause revokes the grant and stops new ones.
		f.updatePolicy("ro", func(p *v1alpha1.StorageTuning) { p.Spec.Paused = true })
		expectGrants()
		f.condition("ro", v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonPaused)
		f.updatePolicy("ro", func(p *v1alpha1.StorageTuning) { p.Spec.Paused = false })
		expectGrants("ro-a")

		// A regression measured on ro-b halts the roll-out.
		f.report("ro-b", func(s *v1alpha1.NodeStorageStateStatus) {
			s.Devices[0].Reverts = 1
			s.Devices[0].LastRevertTime = ptr.To(metav1.NewTime(clk.Now()))
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.NodeConditionDegraded,
				Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReverted, Message: "sda: bfq measured 12 % slower"})
		})
		d := f.condition("ro", v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonRegressionReverted)
		if !strings.Contains(d.Message, "ro-b/sda") {
			t.Errorf("Degraded message %q does not name ro-b/sda", d.Message)
		}
		expectGrants()
		f.waitEvent("ro", rollout.EventRolloutHalted+": ")
		f.waitEvent("ro", rollout.EventReverted+": ro-b/sda")
		// Recovery resumes it.
		f.report("ro-b", func(s *v1alpha1.NodeStorageStateStatus) {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.NodeConditionDegraded,
				Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAgentReady, Message: "ok"})
		})
		f.condition("ro", v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected)
		expectGrants("ro-a")

		// Observe mode revokes.
		f.updatePolicy("ro", func(p *v1alpha1.StorageTuning) { p.Spec.Mode = v1alpha1.ModeObserve })
		expectGrants()
	})

	// An agent OOM-killed on a selected node: the policy is Degraded,
	// AgentOOMKilled, naming the node and pod, with a Warning event; the
	// roll-out goes on (Ready stays True); after the quiet period it clears.
	t.Run("agent OOM-killed", func(t *testing.T) {
		f.t = t
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"suite": "oom"}}
		f.node("oom-1", map[string]string{"suite": "oom"})
		f.report("oom-1", func(s *v1alpha1.NodeStorageStateStatus) {
			s.AgentOOMKill = &v1alpha1.AgentOOMKill{Pod: "shadowtune-agent-q8x2z", RestartCount: 2, Time: metav1.NewTime(clk.Now().Add(-time.Minute))}
		})
		f.policy("oom", func(p *v1alpha1.StorageTuning) { p.Spec.NodeSelector = sel })
		d := f.condition("oom", v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonAgentOOMKilled)
		if !strings.Contains(d.Message, "oom-1 (pod shadowtune-agent-q8x2z, restart count 2") {
			t.Errorf("Degraded message %q", d.Message)
		}
		f.condition("oom", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
		f.waitEvent("oom", v1alpha1.ReasonAgentOOMKilled+": agent killed for lack of memory")
		clk.Add(v1alpha1.OOMKillDegradedFor)
		f.report("oom-1", func(*v1alpha1.NodeStorageStateStatus) {}) // a fresh heartbeat
		f.condition("oom", v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected)
	})

	t.Run("garbage collection", func(t *testing.T) {
		f.t = t
		f.node("gc-1", nil)
		f.report("gc-1", pendingDevs("sda"))
		if err := c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gc-1"}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "NodeStorageState of a deleted node", func() error {
			err := c.Get(context.Background(), client.ObjectKey{Name: "gc-1"}, &v1alpha1.NodeStorageState{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (get: %w)", err)
		})
	})
}
