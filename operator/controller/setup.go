package controller

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/shadowtune/shadowtune/operator/metrics"
)

// Options configure the operator's reconcilers.
type Options struct {
	// Metrics receives the operator's metrics (required).
	Metrics *metrics.Metrics
	// Now is the clock of roll-out decisions; nil means time.Now. Tests
	// move it forward to expire grants and dwell times.
	Now func() time.Time
}

// Setup registers the operator's reconcilers with mgr.
func Setup(mgr ctrl.Manager, opt Options) error {
	st := &StorageTuningReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name), Metrics: opt.Metrics, Now: opt.Now}
	if err := st.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the StorageTuning controller: %w", err)
	}
	gc := &NodeStorageStateReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Metrics: opt.Metrics}
	if err := gc.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the NodeStorageState garbage collector: %w", err)
	}
	return nil
}
