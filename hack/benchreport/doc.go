// Package benchreport tests the figures of the decision benchmark
// (make bench-decisions, docs/bench-decisions.md): README.md's generated
// results block, docs/runs/README.md and every run's report in docs/runs
// must be exactly what hack/bench_decisions.py generates from the runs'
// records (docs/runs/*.json), and the generator's own unit tests
// (hack/benchdec/test_*.py) must pass. It has no code of its own.
package benchreport
