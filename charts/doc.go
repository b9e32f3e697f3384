// Package charts holds the Helm chart of shadowtune (charts/shadowtune) and,
// in its tests, the checks of what the chart renders: the objects and their
// security settings, RBAC, the agent's admission policy (evaluated in
// process with the API server's CEL admission code), the values schema,
// that the chart's CRDs are the ones generated in crds/, the hardening
// values, and the monitoring (the PrometheusRule with promtool, the Grafana
// dashboard against the metrics the code exports).
package charts
