// Package cluster runs the node agent in a Kubernetes cluster (`shadowtune
// agent`, the DaemonSet): the policies come from the StorageTuning objects
// that select the node, the results go to the node's own NodeStorageState
// (its status only), and a change is made only under the operator's grant
// (NodeStorageState spec.grant) (DESIGN §7).
//
// It is a controller-runtime manager without leader election (one agent
// per node) whose cache holds every StorageTuning and only the node's own
// Node and NodeStorageState (a metadata.name field selector). Its Runnable
// runs one long-lived agent loop (agent.Agent) and hands it the policies
// selecting the node whenever they change (created, updated, deleted, or
// node labels changed): the loop keeps each device's learned state,
// restores, exactly as recorded, the devices no policy governs in Apply
// mode any more, and keeps the others. The loop is started again only
// after it failed (say, the tracer stopped), with a back-off.
//
// Status is written at most once per window and only when something other
// than a timestamp changed, plus a heartbeat at least every
// v1alpha1.HeartbeatInterval. On shutdown the agent restores every device
// it changed, writes a final status, and deletes its NodeStorageState when
// no active policy selects the node any more.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/api/scheme"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
	"github.com/shadowtune/shadowtune/internal/metricsauth"
)

// RBAC the agent needs, generated into the Helm chart's ClusterRole
// (charts/shadowtune/files/rbac/agent-role.yaml, make manifests): the policies
// (cache and direct list); its own Node and NodeStorageState (cache with a
// name field selector, direct get; create at start, delete when no policy
// selects the node); the status update; with --metrics-secure, token and
// access reviews for /metrics' scrapers; Events (events.k8s.io/v1) about
// its NodeStorageState, which, the object being cluster-scoped, go to the
// "default" namespace (the chart's admission policy lets the agent write
// only Events about its own NodeStorageState, or in the release namespace).
// +kubebuilder:rbac:groups=storage.shadowtune.io,resources=storagetunings,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.shadowtune.io,resources=nodestoragestates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=storage.shadowtune.io,resources=nodestoragestates/status,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// The agent also reads its own pod (a get on pods in the release
// namespace: the chart's namespaced Role, agent-rbac.yaml) for the reason
// its previous container ended (oomkill.go).

// FieldOwner is the agent's field manager name.
const FieldOwner = "shadowtune-agent"

// DefaultGracefulShutdown is the manager's graceful shutdown timeout: the
// time to restore the devices, write the final status and delete the
// NodeStorageState (the pod's terminationGracePeriodSeconds must be
// longer).
const DefaultGracefulShutdown = 60 * time.Second

// ManagerOptions configure NewManager.
type ManagerOptions struct {
	// NodeName is the node the agent runs on (required).
	NodeName string
	// MetricsBindAddress serves /metrics ("0" disables it);
	// HealthProbeBindAddress serves /healthz and /readyz ("0" or ""
	// disables them).
	MetricsBindAddress, HealthProbeBindAddress string
	// MetricsSecure serves /metrics over HTTPS behind the authentication
	// and authorization filter of internal/metricsauth (controller-
	// runtime's, but 401 and one log line for a token the API server
	// refuses).
	MetricsSecure bool
	// GracefulShutdownTimeout, 0 for DefaultGracefulShutdown.
	GracefulShutdownTimeout time.Duration
	// Logger is the manager's logger (default controller-runtime's
	// global one, ctrl.SetLogger).
	Logger logr.Logger
}

// NewManager returns the agent's manager: no leader election; a cache of
// every StorageTuning and of the node's own Node and NodeStorageState only.
func NewManager(cfg *rest.Config, o ManagerOptions) (manager.Manager, error) {
	if o.NodeName == "" {
		return nil, errors.New("cluster: no node name")
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	own := cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", o.NodeName)}
	grace := o.GracefulShutdownTimeout
	if grace <= 0 {
		grace = DefaultGracefulShutdown
	}
	probe := o.HealthProbeBindAddress
	if probe == "" {
		probe = "0"
	}
	metricsOpts := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if o.MetricsSecure {
		log := o.Logger
		if log.GetSink() == nil {
			log = logf.Log
		}
		metricsOpts.SecureServing, metricsOpts.FilterProvider = true, metricsauth.Provider(log)
	}
	return manager.New(cfg, manager.Options{
		Scheme:                  s,
		LeaderElection:          false,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probe,
		GracefulShutdownTimeout: &grace,
		Logger:                  o.Logger,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:               own,
			&v1alpha1.NodeStorageState{}: own,
		}},
	})
}

// Options configure the cluster agent.
type Options struct {
	// NodeName is the node the agent runs on (required).
	NodeName string
	// HostRoot, StateDir and Tracer are agent.Options'.
	HostRoot, StateDir, Tracer string
	// MemoryLimit is agent.Options.MemoryLimit (bytes; 0: none).
	MemoryLimit int64
	// TraceSample is agent.Options.TraceSample.
	TraceSample time.Duration
	// FollowOpenFiles is agent.Options.FollowOpenFiles.
	FollowOpenFiles bool
	// Caches is agent.Options.Caches (nil: no dm-cache is governed).
	Caches dmcache.Caches
	// Metrics, when non-nil, receives every window's figures (register it
	// in controller-runtime's metrics.Registry to serve it on the
	// manager's metrics endpoint).
	Metrics *metrics.Metrics
	// Log receives progress and problems (default: the manager's logger).
	Log logr.Logger
	// Debounce is how long policy events are gathered before the loop is
	// restarted (default 500 ms).
	Debounce time.Duration
	// OnStatus, when non-nil, is called with every status written (tests).
	OnStatus func(v1alpha1.NodeStorageStateStatus)
	// Recorder records the agent's Events on its NodeStorageState
	// (default: the manager's events.k8s.io/v1 recorder, reporting as
	// FieldOwner).
	Recorder events.EventRecorder
	// PodName and PodNamespace name the agent's own pod (the downward
	// API), ContainerName its container (default DefaultContainerName):
	// the agent reads the pod after it starts for an OOM kill of its
	// previous container (OOMKillOf). Empty PodName: not read.
	PodName, PodNamespace, ContainerName string
}

// Agent is the agent loop as a manager Runnable.
type Agent struct {
	opt    Options
	client client.Client
	reader client.Reader // the API server, bypassing the cache
	cache  cache.Cache
	log    logr.Logger

	wake chan struct{} // the writer: a new agent status or NodeStorageState

	mu       sync.Mutex
	ready    error
	st       agent.Status
	haveSt   bool
	runErr   string // why the agent loop does not run
	policies map[string]*v1alpha1.StorageTuning
	labels   map[string]string
	dropped  int64
	dropAt   time.Time
	events   []event // derived from consecutive statuses, not yet recorded

	started time.Time              // when Setup ran: this container's start
	podDone bool                   // the pod was read for this run (or given up); writer only
	oomKill *v1alpha1.AgentOOMKill // the pod's last OOM kill of the agent container
}

var errNotStarted = errors.New("the agent loop has not started tracing yet")

// Setup adds the agent to mgr, with its /healthz (ping) and /readyz (ready
// once the agent loop traces) checks.
func Setup(mgr manager.Manager, opt Options) (*Agent, error) {
	if opt.NodeName == "" {
		return nil, errors.New("cluster: no node name")
	}
	if opt.StateDir == "" {
		opt.StateDir = agent.DefaultStateDir
	}
	if opt.Debounce <= 0 {
		opt.Debounce = 500 * time.Millisecond
	}
	log := opt.Log
	if log.GetSink() == nil {
		log = mgr.GetLogger().WithName("agent")
	}
	if opt.Recorder == nil {
		opt.Recorder = mgr.GetEventRecorder(FieldOwner)
	}
	if opt.ContainerName == "" {
		opt.ContainerName = DefaultContainerName
	}
	a := &Agent{opt: opt, client: mgr.GetClient(), reader: mgr.GetAPIReader(), cache: mgr.GetCache(), log: log,
		wake: make(chan struct{}, 1), ready: errNotStarted, started: time.Now()}
	if err := mgr.Add(a); err != nil {
		return nil, err
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("tracing", a.Ready)); err != nil {
		return nil, err
	}
	return a, nil
}

// NeedLeaderElection is false: every node runs its agent.
func (a *Agent) NeedLeaderElection() bool { return false }

// Ready is the readiness check: nil while the agent loop traces.
func (a *Agent) Ready(*http.Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Start runs the agent loop until ctx is done, then (the loop having
// restored the devices) writes the final status and, when no active
// policy selects the node, deletes the NodeStorageState.
func (a *Agent) Start(ctx context.Context) error {
	changed, err := a.watch(ctx)
	if err != nil {
		return err
	}
	writerCtx, stopWriter := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		a.writeLoop(writerCtx)
	}()
	final := a.run(ctx, changed)
	stopWriter()
	<-writerDone
	a.finish(final)
	return nil
}

// watch watches the policies and the Node (a change is signalled on the
// channel it returns) and the NodeStorageState (a.wake, the writer).
func (a *Agent) watch(ctx context.Context) (<-chan struct{}, error) {
	changed := make(chan struct{}, 1)
	for _, w := range []struct {
		obj client.Object
		ch  chan struct{}
	}{{&v1alpha1.StorageTuning{}, changed}, {&corev1.Node{}, changed}, {&v1alpha1.NodeStorageState{}, a.wake}} {
		inf, err := a.cache.GetInformer(ctx, w.obj)
		if err != nil {
			return nil, fmt.Errorf("watch %T: %w", w.obj, err)
		}
		ch := w.ch
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke(ch) },
			UpdateFunc: func(any, any) { poke(ch) },
			DeleteFunc: func(any) { poke(ch) },
		}); err != nil {
			return nil, fmt.Errorf("watch %T: %w", w.obj, err)
		}
	}
	return changed, nil
}

// run runs the agent loop until ctx is done, starting it again with a
// back-off (1 s doubling to a minute) when it fails, and returns its last
// status.
func (a *Agent) run(ctx context.Context, changed <-chan struct{}) agent.Status {
	retry := time.Second
	var final agent.Status
	for ctx.Err() == nil {
		pols, labels, key, err := a.desired(ctx)
		if err == nil {
			a.setPolicies(pols, labels)
			loop := agent.New(a.loopOptions(pols, labels))
			done := make(chan error, 1)
			started := time.Now()
			go func() { done <- loop.Start(ctx) }()
			a.log.Info("agent loop started", "policies", key)
			err = a.follow(ctx, loop, changed, key, done)
			final = loop.Status()
			if err == nil {
				continue // ctx done: the loop restored the devices
			}
			err = fmt.Errorf("agent loop: %w", err)
			if time.Since(started) > time.Minute {
				retry = time.Second
			}
		}
		a.log.Error(err, "the agent loop does not run")
		a.setRunError(err)
		if !sleep(ctx, retry) {
			break
		}
		retry = min(2*retry, time.Minute)
	}
	return final
}

// follow hands the running loop every new set of policies (gathered over
// a.opt.Debounce) until it returns, and returns its error.
func (a *Agent) follow(ctx context.Context, loop *agent.Agent, changed <-chan struct{}, key string, done <-chan error) error {
	for {
		select {
		case err := <-done:
			return err
		case <-changed:
			if !sleep(ctx, a.opt.Debounce) {
				continue // ctx done: the loop returns
			}
			select { // events during the debounce
			case <-changed:
			default:
			}
			pols, labels, k, err := a.desired(ctx)
			if err != nil || k == key {
				continue
			}
			key = k
			a.log.Info("the policies selecting the node changed", "policies", k)
			a.setPolicies(pols, labels)
			loop.SetPolicies(pols, labels)
		}
	}
}

// finish writes the final status, or deletes the NodeStorageState when no
// active policy selects the node any more.
func (a *Agent) finish(final agent.Status) {
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a.mu.Lock()
	if final.Windows > 0 || len(final.Devices) > 0 {
		a.addEvents(eventsBetween(a.st, final, a.opt.Tracer))
		a.st, a.haveSt = final, true
	}
	a.runErr = "the agent is stopping"
	a.ready = errors.New("stopping")
	a.mu.Unlock()
	if a.selected(sctx) {
		if err := a.sync(sctx, true); err != nil {
			a.log.Error(err, "write the final status")
		}
		return
	}
	nss := &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{Name: a.opt.NodeName}}
	if err := a.client.Delete(sctx, nss); err != nil && !apierrors.IsNotFound(err) {
		a.log.Error(err, "delete the NodeStorageState")
		return
	}
	a.log.Info("no policy selects the node: deleted its NodeStorageState")
}

func (a *Agent) setPolicies(pols []*v1alpha1.StorageTuning, labels map[string]string) {
	a.mu.Lock()
	a.policies, a.labels = byName(pols), labels
	a.mu.Unlock()
}

// loopOptions are the agent loop's options.
func (a *Agent) loopOptions(pols []*v1alpha1.StorageTuning, labels map[string]string) agent.Options {
	return agent.Options{
		HostRoot: a.opt.HostRoot, StateDir: a.opt.StateDir, Tracer: a.opt.Tracer, MemoryLimit: a.opt.MemoryLimit,
		Caches: a.opt.Caches, Policies: pols, NodeLabels: labels, Metrics: a.opt.Metrics, Log: a.log,
		Grant: a.mayChange, TraceSample: a.opt.TraceSample, FollowOpenFiles: a.opt.FollowOpenFiles,
		Ready: func(err error) {
			a.mu.Lock()
			a.ready = err
			if err == nil {
				a.runErr = ""
			}
			a.mu.Unlock()
		},
		OnWindow: func(st agent.Status) {
			a.mu.Lock()
			a.addEvents(eventsBetween(a.st, st, a.opt.Tracer))
			a.st, a.haveSt = st, true
			var dropped int64
			for _, d := range st.Devices {
				dropped = max(dropped, d.EventsDropped)
			}
			if dropped > a.dropped {
				a.dropAt = time.Now()
			}
			a.dropped = dropped
			a.mu.Unlock()
			poke(a.wake)
		},
	}
}

// addEvents queues events for the writer, keeping the newest
// maxPendingEvents; a.mu must be held.
func (a *Agent) addEvents(evs []event) {
	a.events = append(a.events, evs...)
	if n := len(a.events) - maxPendingEvents; n > 0 {
		a.events = slices.Delete(a.events, 0, n)
	}
}

// recordEvents records the queued events on nss (the recorder sends them
// asynchronously, merging repeats into series).
func (a *Agent) recordEvents(nss *v1alpha1.NodeStorageState) {
	a.mu.Lock()
	evs := a.events
	a.events = nil
	a.mu.Unlock()
	for _, e := range evs {
		a.opt.Recorder.Eventf(nss, nil, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
}

func (a *Agent) setRunError(err error) {
	a.mu.Lock()
	a.runErr = err.Error()
	a.ready = err
	a.mu.Unlock()
	poke(a.wake)
}

// desired returns the active policies that select the node (deep copies,
// defaulted), its labels, and a key that changes when either changes in a
// way that matters to the agent loop (a policy's name, UID or generation,
// or the set of policies).
func (a *Agent) desired(ctx context.Context) ([]*v1alpha1.StorageTuning, map[string]string, string, error) {
	node := &corev1.Node{}
	if err := a.client.Get(ctx, client.ObjectKey{Name: a.opt.NodeName}, node); err != nil {
		return nil, nil, "", fmt.Errorf("get node %s: %w", a.opt.NodeName, err)
	}
	var list v1alpha1.StorageTuningList
	if err := a.client.List(ctx, &list); err != nil {
		return nil, nil, "", fmt.Errorf("list StorageTunings: %w", err)
	}
	pols := []*v1alpha1.StorageTuning{}
	var keys []string
	for i := range list.Items {
		p := list.Items[i].DeepCopy()
		if !p.Active() {
			continue
		}
		if ok, err := p.Spec.MatchesNode(node.Labels); err != nil || !ok {
			continue
		}
		p.Default()
		pols = append(pols, p)
		keys = append(keys, fmt.Sprintf("%s/%s/%d", p.Name, p.UID, p.Generation))
	}
	slices.Sort(keys)
	return pols, node.Labels, strings.Join(keys, ","), nil
}

// selected reports whether an active policy selects the node, asking the
// API server (the cache may be stopped), else the last policies known.
func (a *Agent) selected(ctx context.Context) bool {
	a.mu.Lock()
	labels, known := a.labels, len(a.policies) > 0
	a.mu.Unlock()
	node := &corev1.Node{}
	if err := a.reader.Get(ctx, client.ObjectKey{Name: a.opt.NodeName}, node); err == nil {
		labels = node.Labels
	}
	var list v1alpha1.StorageTuningList
	if err := a.reader.List(ctx, &list); err != nil {
		a.log.Error(err, "list StorageTunings at shutdown; using the last ones known")
		return known
	}
	for i := range list.Items {
		p := &list.Items[i]
		if ok, err := p.Spec.MatchesNode(labels); p.Active() && err == nil && ok {
			return true
		}
	}
	return false
}

// mayChange is agent.Options.Grant: the node's grant (from the cache)
// allows changing dev under policy p now.
func (a *Agent) mayChange(dev string, p *v1alpha1.StorageTuning) bool {
	nss := &v1alpha1.NodeStorageState{}
	if err := a.client.Get(context.Background(), client.ObjectKey{Name: a.opt.NodeName}, nss); err != nil {
		return false
	}
	return v1alpha1.ValidGrant(nss.Spec.Grant, p, dev, time.Now())
}

// writeLoop writes the status when the agent loop reports a window or the
// NodeStorageState changes, and checks the heartbeat every few seconds.
func (a *Agent) writeLoop(ctx context.Context) {
	tick := time.NewTicker(v1alpha1.HeartbeatInterval / 6)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		case <-tick.C:
		}
		if err := a.sync(ctx, false); err != nil && ctx.Err() == nil {
			a.log.Error(err, "write the NodeStorageState status")
		}
	}
}

// heartbeatDue is how old the last heartbeat may grow before an unchanged
// status is written again: half the interval, so that a heartbeat is
// never later than HeartbeatInterval.
const heartbeatDue = v1alpha1.HeartbeatInterval / 2

// sync writes the status if it changed (ignoring timestamps) or the
// heartbeat is due, or always when force; it creates the NodeStorageState
// first when there is none.
func (a *Agent) sync(ctx context.Context, force bool) error {
	a.readPod(ctx)
	a.mu.Lock()
	in := StatusInput{Agent: a.st, TracerError: a.runErr, EventsDroppedAt: a.dropAt, Policies: a.policies,
		Node: a.opt.NodeName, OOMKill: a.oomKill}
	// An OOM kill is reported at once: an agent killed in every first
	// window would otherwise never write.
	have := a.haveSt || a.runErr != "" || a.oomKill != nil
	a.mu.Unlock()
	if !have {
		return nil // nothing to report before the first window
	}
	nss, err := a.ensure(ctx)
	if err != nil {
		return err
	}
	a.recordEvents(nss)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		in.Now = time.Now()
		in.Generation, in.Grant, in.Conditions = nss.Generation, nss.Spec.Grant, nss.Status.Conditions
		in.LastOOMKill = nss.Status.AgentOOMKill
		want := BuildStatus(in)
		if !force && SameStatus(nss.Status, want) && nss.Status.LastHeartbeatTime != nil &&
			in.Now.Sub(nss.Status.LastHeartbeatTime.Time) < heartbeatDue {
			return nil
		}
		nss.Status = want
		err := a.client.Status().Update(ctx, nss, client.FieldOwner(FieldOwner))
		if apierrors.IsConflict(err) {
			fresh := &v1alpha1.NodeStorageState{}
			if gerr := a.reader.Get(ctx, client.ObjectKey{Name: a.opt.NodeName}, fresh); gerr != nil {
				return gerr
			}
			nss = fresh
			return err
		}
		if err == nil && a.opt.OnStatus != nil {
			a.opt.OnStatus(*want.DeepCopy())
		}
		return err
	})
}

// readPod reads the agent's own pod (from the writer, before a status
// write) until its status shows the current container running, for at
// most PodCheckFor: what it says of the previous container (an OOM kill)
// is final for this run. A pod that cannot be read (no RBAC, gone) is
// logged once and not read again.
func (a *Agent) readPod(ctx context.Context) {
	if a.podDone || a.opt.PodName == "" {
		return
	}
	pod := &corev1.Pod{}
	err := a.reader.Get(ctx, client.ObjectKey{Namespace: a.opt.PodNamespace, Name: a.opt.PodName}, pod)
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		a.podDone = true
		a.log.Error(err, "cannot read the agent's own pod: out-of-memory kills of the agent are not reported", "pod", a.opt.PodName)
		return
	case err != nil:
		if time.Since(a.started) > PodCheckFor {
			a.podDone = true
			a.log.Error(err, "cannot read the agent's own pod: out-of-memory kills of the agent are not reported", "pod", a.opt.PodName)
		}
		return
	}
	kill, current := OOMKillOf(pod, a.opt.ContainerName, a.started)
	a.mu.Lock()
	a.oomKill = kill
	a.mu.Unlock()
	if current || time.Since(a.started) > PodCheckFor {
		a.podDone = true
		if kill != nil {
			a.log.Info("the agent's previous container was killed for lack of memory", "pod", kill.Pod,
				"restartCount", kill.RestartCount, "at", kill.Time.UTC().Format(time.RFC3339))
		}
	}
}

// ensure returns the node's NodeStorageState, creating it (owned by the
// Node, labelled with the node name, empty spec) when it does not exist.
func (a *Agent) ensure(ctx context.Context) (*v1alpha1.NodeStorageState, error) {
	key := client.ObjectKey{Name: a.opt.NodeName}
	nss := &v1alpha1.NodeStorageState{}
	err := a.client.Get(ctx, key, nss)
	if err == nil {
		return nss, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	node := &corev1.Node{}
	if err := a.reader.Get(ctx, key, node); err != nil {
		return nil, fmt.Errorf("get node %s to own its NodeStorageState: %w", a.opt.NodeName, err)
	}
	nss = &v1alpha1.NodeStorageState{ObjectMeta: metav1.ObjectMeta{
		Name:   a.opt.NodeName,
		Labels: map[string]string{v1alpha1.NodeLabel: a.opt.NodeName},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		}},
	}}
	err = a.client.Create(ctx, nss, client.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		err = a.reader.Get(ctx, key, nss)
	}
	if err != nil {
		return nil, fmt.Errorf("create NodeStorageState %s: %w", a.opt.NodeName, err)
	}
	a.log.Info("created the NodeStorageState", "name", nss.Name)
	return nss, nil
}

func byName(pols []*v1alpha1.StorageTuning) map[string]*v1alpha1.StorageTuning {
	out := make(map[string]*v1alpha1.StorageTuning, len(pols))
	for _, p := range pols {
		out[p.Name] = p
	}
	return out
}

// sleep waits d or until ctx is done; it reports whether ctx is still
// live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
