package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadowtune/shadowtune/api/scheme"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// newCleanupCommand is the chart's pre-delete hook: it stops the agents
// while their RBAC still exists, so each restores its node's devices and
// removes its NodeStorageState, then deletes the NodeStorageStates left
// (nodes whose agent could not).
func newCleanupCommand() *cobra.Command {
	var namespace, daemonSet string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    "cleanup --agent-daemonset NAME",
		Hidden: true, // run by the chart's pre-delete hook, not by hand
		Example: `  # as the chart's pre-delete hook runs it
  shadowtune cleanup --agent-daemonset shadowtune-agent --namespace shadowtune-system`,
		Short: "Uninstall step (the Helm chart's pre-delete hook): stop the agents, then delete every NodeStorageState",
		Long: `cleanup runs before helm uninstall removes anything. It deletes the agent
DaemonSet and waits until its pods are gone: each agent, stopping, puts its
node's devices back as they were and deletes its NodeStorageState when no
policy selects the node. Then it deletes the NodeStorageStates still there.
StorageTuning objects are the user's and are left alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if daemonSet == "" {
				return badInputf("--agent-daemonset: required")
			}
			if namespace == "" {
				namespace = os.Getenv("POD_NAMESPACE")
			}
			if namespace == "" {
				return badInputf("--namespace: required (or $POD_NAMESPACE)")
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return badInputf("kubeconfig: %w", err)
			}
			s, err := scheme.New()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: s})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return cleanup(ctx, c, namespace, daemonSet, func(format string, args ...any) {
				fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", "", "namespace of the agent DaemonSet (default $POD_NAMESPACE)")
	f.StringVar(&daemonSet, "agent-daemonset", "", "name of the agent DaemonSet")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	addKubeconfigFlag(f)
	return cmd
}

func cleanup(ctx context.Context, c client.Client, namespace, name string, say func(string, ...any)) error {
	ds := &appsv1.DaemonSet{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ds)
	switch {
	case apierrors.IsNotFound(err):
		say("agent DaemonSet %s/%s: not found", namespace, name)
	case err != nil:
		return fmt.Errorf("get the agent DaemonSet: %w", err)
	default:
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil {
			return fmt.Errorf("agent DaemonSet %s/%s: selector: %w", namespace, name, err)
		}
		if err := c.Delete(ctx, ds); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the agent DaemonSet: %w", err)
		}
		say("deleted DaemonSet %s/%s; waiting for its pods to stop (each restores its node's devices)", namespace, name)
		if err := waitNoPods(ctx, c, namespace, sel); err != nil {
			return err
		}
	}
	var list v1alpha1.NodeStorageStateList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("list NodeStorageStates: %w", err)
	}
	for i := range list.Items {
		if err := c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NodeStorageState %s: %w", list.Items[i].Name, err)
		}
		say("deleted NodeStorageState %s", list.Items[i].Name)
	}
	return nil
}

func waitNoPods(ctx context.Context, c client.Client, namespace string, sel labels.Selector) error {
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return fmt.Errorf("list agent pods: %w", err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d agent pods still there: %w", len(pods.Items), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
