package app

import (
	"time"

	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/agent/cluster"
	"github.com/shadowtune/shadowtune/agent/metrics"
	"github.com/shadowtune/shadowtune/agent/tracer"
)

type agentFlags struct {
	nodeName, hostRoot, stateDir, metricsAddr, probeAddr, tracerKind string
	hostToolsRoot, podName, podNamespace                             string
	metricsSecure, followOpenFiles                                   bool
	traceSample                                                      time.Duration
	zapOpts                                                          zap.Options
}

func newAgentCommand() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent --node-name NODE",
		Short: "Run the node agent in a cluster: policies from StorageTunings, results in the node's NodeStorageState",
		Long: `agent runs the shadowtune loop on this node as part of a cluster (the Helm
chart's DaemonSet). The policies are the StorageTuning objects that select the
node; each device is governed by the first of them by priority, then name.
The results go to the node's NodeStorageState (its status; the agent creates
the object, owned by the Node, when it is missing). In Apply mode a device is
changed only while the operator's grant in the NodeStorageState's spec allows
it; a regression is reverted at once. A device whose policy turns to Observe
or goes away is restored exactly as recorded.

On SIGTERM the agent restores every device it changed, writes a final status
and, when no policy selects the node any more, deletes its NodeStorageState.
It uses the in-cluster configuration, or --kubeconfig / $KUBECONFIG.`,
		Example: `  # as the chart's DaemonSet runs it (NODE_NAME from the downward API)
  shadowtune agent --node-name "$NODE_NAME" --host-root /host --state-dir /var/lib/shadowtune

  # with agent.hostTools.enabled: dm-caches switched by the node's own dmsetup and lvm
  shadowtune agent --node-name "$NODE_NAME" --host-root /host --host-tools-root /host --state-dir /var/lib/shadowtune

  # out of cluster, against a test cluster, as root
  sudo shadowtune agent --node-name "$(hostname)" --kubeconfig ~/.kube/config --metrics-bind-address 127.0.0.1:9464`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node this agent runs on (default $NODE_NAME)")
	fl.StringVar(&f.podName, "pod-name", os.Getenv("POD_NAME"), "the agent's own pod, read for out-of-memory kills of its previous container (default $POD_NAME; empty: not read)")
	fl.StringVar(&f.podNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "the namespace of --pod-name (default $POD_NAMESPACE)")
	fl.StringVar(&f.hostRoot, "host-root", "", "prefix of the host's /sys (e.g. /host in a container)")
	fl.StringVar(&f.hostToolsRoot, "host-tools-root", "", hostToolsRootUsage)
	fl.StringVar(&f.stateDir, "state-dir", agent.DefaultStateDir, "where original settings and learned models are kept (a hostPath)")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":9464", `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":9465", `address of the /healthz and /readyz endpoints ("0" disables them)`)
	fl.StringVar(&f.tracerKind, "tracer", tracer.KindAuto, "auto, ebpf or tracefs")
	fl.DurationVar(&f.traceSample, "trace-sample", agent.DefaultTraceSample, traceSampleUsage)
	fl.BoolVar(&f.followOpenFiles, "follow-open-files", false, followOpenFilesUsage)
	fl.BoolVar(&f.metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS (self-signed), authenticated and authorized by the API server (TokenReview, SubjectAccessReview)")
	addKubeconfigFlag(fl)
	gf := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	f.zapOpts.BindFlags(gf)
	fl.AddGoFlagSet(gf)
	completeEnum(cmd, "tracer", tracerKinds...)
	completeZapFlags(cmd)
	return cmd
}

func runAgent(cmd *cobra.Command, f *agentFlags) error {
	if f.nodeName == "" {
		return badInputf("--node-name (or $NODE_NAME) is required")
	}
	switch f.tracerKind {
	case tracer.KindAuto, tracer.KindEBPF, tracer.KindTracefs:
	default:
		return badInputf("--tracer: want auto, ebpf or tracefs, got %q", f.tracerKind)
	}
	if os.Geteuid() != 0 && f.hostRoot == "" {
		return errors.New("shadowtune agent traces block devices and changes their settings: it must run as root")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zapOpts)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return badInputf("kubeconfig: %w", err)
	}
	mgr, err := cluster.NewManager(cfg, cluster.ManagerOptions{
		NodeName: f.nodeName, MetricsBindAddress: f.metricsAddr, HealthProbeBindAddress: f.probeAddr,
		MetricsSecure: f.metricsSecure,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	m, err := metrics.New(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	if _, err := cluster.Setup(mgr, cluster.Options{
		NodeName: f.nodeName, HostRoot: f.hostRoot, StateDir: f.stateDir, Tracer: f.tracerKind, Metrics: m,
		MemoryLimit: memoryLimit(), PodName: f.podName, PodNamespace: f.podNamespace, TraceSample: traceSample(f.traceSample), FollowOpenFiles: f.followOpenFiles,
		Caches: cacheTool(ctrl.Log.WithName("dm-cache"), f.hostToolsRoot),
	}); err != nil {
		return err
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	// SIGTERM (the pod's deletion) stops the manager: the agent restores
	// the devices, writes its final status and, with no policy left,
	// deletes its NodeStorageState.
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}
