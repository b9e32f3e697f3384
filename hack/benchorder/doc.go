// Package benchorder tests the order in which hack/bench-decisions.sh runs
// its settings: williams_order in hack/lib/williams.sh, a Williams design.
// It has no code of its own.
package benchorder
