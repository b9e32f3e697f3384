// Package charts holds the Helm chart of shadowtune (charts/shadowtune) and,
// in its tests, the checks of what the chart renders: the objects and their
// security settings, RBAC, the agent's admission policy (evaluated in
// process with the API server's CEL admission code), the values schema, and
// that the chart's CRDs are the ones generated in crds/.
package charts
