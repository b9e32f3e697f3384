#!/usr/bin/env bash
# Decision benchmark of the node agent (issue 43), as root: the agent as
# the chart ships it (`shadowtune run`, the CRD's defaults, only
# spec.mode: Apply and the device set) against every static setting of a
# throttled loop device, on real applications in memory-limited pods:
# RocksDB db_bench, PostgreSQL 15 (pgbench, a reporting scan, a backup
# beside OLTP) and ripgrep over a source tree. docs/bench-decisions.md
# says what it runs and how its figures are generated.
#
# The run is hack/bench_decisions.py run (Python 3, standard library): it
# declares the plan in docs/runs/DATE-NAME.json before the first workload,
# records every measurement there as it goes, and generates
# docs/runs/DATE-NAME.md and docs/runs/README.md at the end (also after an
# error or ^C, marked as cut short). Everything it creates (loop device,
# mount, cgroups, servers, temporary files) is put back at exit.
#
# usage: hack/bench-decisions.sh BINARY [REPS]
# environment (see docs/bench-decisions.md):
#   BENCH_PLAN=FILE      a plan (JSON; default hack/bench-plans/default.json)
#   BENCH_QUICK=1        the smoke plan hack/bench-plans/quick.json
#   BENCH_REPS, BENCH_WORKLOADS, BENCH_SETTINGS, BENCH_MEM, BENCH_THROTTLE,
#   BENCH_NAME, BENCH_AGENT_STATE   overrides of the plan, recorded in it
#   BENCH_AGENT_ARGS, BENCH_POLICY_EXTRA, BENCH_AGENT_HOSTPID=1
#                        non-default agent settings: named
#                        in the report; such a run is never a headline
#   BENCH_DIR=/var/tmp   where the sparse image goes (a real disk)
#   BENCH_RUNS_DIR=docs/runs   where the record and report go
#   BENCH_KEEP=DIR       keep every workload's output and the agent's logs
set -euo pipefail
bin=${1:?usage: $0 BINARY [REPS]}
here=$(cd "$(dirname "$0")" && pwd)
if [[ -n ${2:-} ]]; then
	export BENCH_REPS=$2
fi
command -v python3 >/dev/null || {
	echo "bench-decisions: python3 is required" >&2
	exit 2
}
exec python3 "$here/bench_decisions.py" run "$bin"
