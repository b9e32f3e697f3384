// Package metrics defines the operator's Prometheus metrics,
// shadowtune_operator_*. Per-policy gauges carry the policy's name in the
// "policy" label and are deleted with the policy.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// With --metrics-secure the operator's /metrics endpoint reviews each
// scraper's token and access (controller-runtime's authn/authz filter):
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Metrics are the operator's metrics.
type Metrics struct {
	nodes     *prometheus.GaugeVec
	devices   *prometheus.GaugeVec
	pending   *prometheus.GaugeVec
	changed   *prometheus.GaugeVec
	reverted  *prometheus.GaugeVec
	gain      *prometheus.GaugeVec
	ready     *prometheus.GaugeVec
	grants    *prometheus.CounterVec
	revokes   *prometheus.CounterVec
	collected prometheus.Counter
}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	policy := []string{"policy"}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "shadowtune", Subsystem: "operator", Name: name, Help: help}, policy)
	}
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shadowtune", Subsystem: "operator", Name: name, Help: help}, policy)
	}
	m := &Metrics{
		nodes:    g("policy_nodes", "Nodes the policy selects (status.matchedNodes)."),
		devices:  g("policy_devices", "Devices the policy governs (status.matchedDevices)."),
		pending:  g("policy_pending_devices", "Governed devices whose recommendation differs from their setting."),
		changed:  g("policy_changed_devices", "Governed devices whose setting shadowtune changed and keeps."),
		reverted: g("policy_reverted_devices", "Governed devices with a change put back after a measured regression."),
		gain:     g("policy_predicted_gain_percent", "Predicted fleet improvement of the recommendations over the current settings, percent of service time."),
		ready:    g("policy_ready", "1 when the policy's Ready condition is True, else 0."),
		grants:   c("grants_total", "Roll-out grants written to NodeStorageStates."),
		revokes:  c("grant_revocations_total", "Roll-out grants removed before use or after expiry."),
		collected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shadowtune", Subsystem: "operator",
			Name: "nodestoragestates_collected_total", Help: "NodeStorageStates deleted because their node no longer exists."}),
	}
	reg.MustRegister(m.nodes, m.devices, m.pending, m.changed, m.reverted, m.gain, m.ready, m.grants, m.revokes, m.collected)
	return m
}

// SetStatus records a policy's status.
func (m *Metrics) SetStatus(policy string, s *v1alpha1.StorageTuningStatus, ready bool) {
	m.nodes.WithLabelValues(policy).Set(float64(s.MatchedNodes))
	m.devices.WithLabelValues(policy).Set(float64(s.MatchedDevices))
	m.pending.WithLabelValues(policy).Set(float64(s.RecommendedChanges))
	m.changed.WithLabelValues(policy).Set(float64(s.ChangedDevices))
	m.reverted.WithLabelValues(policy).Set(float64(s.RevertedDevices))
	gain, err := v1alpha1.ParsePercent(s.PredictedGainPercent)
	if err != nil {
		gain = 0
	}
	m.gain.WithLabelValues(policy).Set(gain)
	r := 0.0
	if ready {
		r = 1
	}
	m.ready.WithLabelValues(policy).Set(r)
}

// Forget deletes a deleted policy's series.
func (m *Metrics) Forget(policy string) {
	for _, v := range []*prometheus.GaugeVec{m.nodes, m.devices, m.pending, m.changed, m.reverted, m.gain, m.ready} {
		v.DeleteLabelValues(policy)
	}
	m.grants.DeleteLabelValues(policy)
	m.revokes.DeleteLabelValues(policy)
}

// Granted counts n grants of a policy.
func (m *Metrics) Granted(policy string, n int) { m.grants.WithLabelValues(policy).Add(float64(n)) }

// Revoked counts n revocations of a policy's grants.
func (m *Metrics) Revoked(policy string, n int) { m.revokes.WithLabelValues(policy).Add(float64(n)) }

// Collected counts a garbage-collected NodeStorageState.
func (m *Metrics) Collected() { m.collected.Inc() }
