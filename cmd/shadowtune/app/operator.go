package app

import (
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/shadowtune/shadowtune/api/scheme"
	"github.com/shadowtune/shadowtune/internal/metricsauth"
	"github.com/shadowtune/shadowtune/operator/controller"
	"github.com/shadowtune/shadowtune/operator/metrics"
)

// LeaderElectionID names the operator's leader-election Lease.
const LeaderElectionID = "shadowtune-operator.storage.shadowtune.io"

func newOperatorCommand() *cobra.Command {
	var (
		metricsAddr, probeAddr, leNamespace string
		leaderElect, metricsSecure          bool
		zapOpts                             = zap.Options{}
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: aggregate NodeStorageStates into StorageTuning status and gate roll-out",
		Long: `operator reconciles every StorageTuning from the NodeStorageStates of the
nodes it selects: it resolves overlapping policies (spec.priority, then
name), keeps the status current, grants changes to at most
spec.rollout.maxUnavailable nodes at a time after the dwell time, halts a
roll-out when a node measures a regression, and deletes the
NodeStorageStates of deleted nodes. It is meant to run in the cluster as a
leader-elected Deployment (the Helm chart's), using the in-cluster
configuration or --kubeconfig / $KUBECONFIG.`,
		Example: `  # as the chart's Deployment runs it
  shadowtune operator --leader-elect --metrics-bind-address :8080 --zap-log-level info

  # out of cluster, one replica, against a test cluster
  shadowtune operator --kubeconfig ~/.kube/config --leader-elect=false --zap-encoder console`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			if leaderElect && leNamespace == "" {
				leNamespace = os.Getenv("POD_NAMESPACE")
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return badInputf("kubeconfig: %w", err)
			}
			s, err := scheme.New()
			if err != nil {
				return err
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                        s,
				Metrics:                       metricsServerOptions(metricsAddr, metricsSecure, ctrl.Log),
				HealthProbeBindAddress:        probeAddr,
				LeaderElection:                leaderElect,
				LeaderElectionID:              LeaderElectionID,
				LeaderElectionNamespace:       leNamespace,
				LeaderElectionReleaseOnCancel: true,
			})
			if err != nil {
				return fmt.Errorf("create manager: %w", err)
			}
			if err := controller.Setup(mgr, controller.Options{Metrics: metrics.New(ctrlmetrics.Registry)}); err != nil {
				return err
			}
			if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ping", healthz.Ping)); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus /metrics endpoint ("0" disables it)`)
	f.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.BoolVar(&metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS (self-signed), authenticated and authorized by the API server (TokenReview, SubjectAccessReview)")
	f.BoolVar(&leaderElect, "leader-elect", true, "elect a leader among replicas (a Lease); only the leader reconciles")
	f.StringVar(&leNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default $POD_NAMESPACE)")
	addKubeconfigFlag(f)
	gf := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	zapOpts.BindFlags(gf)
	f.AddGoFlagSet(gf)
	completeZapFlags(cmd)
	return cmd
}

// metricsServerOptions serves /metrics on addr: plain HTTP, or with secure
// HTTPS behind internal/metricsauth's authentication and authorization
// filter (a bearer token, reviewed by the API server, allowed to get
// /metrics; a refused token is 401 and one line in log).
func metricsServerOptions(addr string, secure bool, log logr.Logger) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr, SecureServing: secure}
	if secure {
		o.FilterProvider = metricsauth.Provider(log)
	}
	return o
}
