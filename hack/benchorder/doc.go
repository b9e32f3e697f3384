// Package benchorder tests the order in which the decision benchmark runs
// its settings: williams_order in hack/lib/williams.sh, a Williams design
// (hack/benchdec/runner.py runs its Python port, which
// hack/benchdec/test_report.py checks against it). It has no code of its
// own.
package benchorder
