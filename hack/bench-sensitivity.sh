#!/usr/bin/env bash
# The sensitivity run of issue 43 item 4 (as root): the decision benchmark
# with the agent as shipped beside variants that halve and double each
# threshold the agent's read-ahead road has (agent/readahead/thresholds.go,
# scaled in a build with the tag sensitivity) and the policy's settings it
# uses (margin, tolerated regression, minDwell: the policy file each
# variant is given has the setting added). No variant is a headline; the
# report names each.
#
# usage: sudo hack/bench-sensitivity.sh [REPS]   (BENCH_PLAN etc. as for
#        hack/bench-decisions.sh; BENCH_VARIANTS to run a subset)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
[[ $(id -u) -eq 0 ]] || { echo "bench-sensitivity: run as root" >&2; exit 1; }
make --no-print-directory build >/dev/null
go build -tags sensitivity -trimpath -o bin/shadowtune-sensitivity ./cmd/shadowtune

# variant NAME ENV POLICY-LINE: bin/shadowtune.NAME runs the sensitivity
# build with $SHADOWTUNE_SENSITIVITY=ENV and the policy line added to spec.
variant() {
	cat >"bin/shadowtune.$1" <<WRAP
#!/usr/bin/env bash
# A sensitivity variant (hack/bench-sensitivity.sh): $2 $3
args=("\$@")
for i in "\${!args[@]}"; do
	if [[ \${args[i]} == --config && -n '$3' ]]; then
		cp "\${args[i+1]}" "\${args[i+1]}.$1" && printf '  %s\n' '$3' >>"\${args[i+1]}.$1"
		args[i+1]="\${args[i+1]}.$1"
	fi
done
SHADOWTUNE_SENSITIVITY='$2' exec "$(pwd)/bin/shadowtune-sensitivity" "\${args[@]}"
WRAP
	chmod +x "bin/shadowtune.$1"
}
variant s-resolved-half MinResolvedPages=0.5 ''
variant s-resolved-twice MinResolvedPages=2 ''
variant s-requests-half MinRequests=0.5 ''
variant s-requests-twice MinRequests=2 ''
variant s-fitrows-half FitRows=0.5 ''
variant s-fitrows-twice FitRows=2 ''
variant s-ratio-half CompetitiveRatio=0.5 ''
variant s-ratio-twice CompetitiveRatio=2 ''
variant s-margin-half '' 'evaluation: {"marginPercent": 2}'
variant s-margin-twice '' 'evaluation: {"marginPercent": 10}'
variant s-tolerance-half '' 'rollout: {"toleratedRegressionPercent": 2}'
variant s-tolerance-twice '' 'rollout: {"toleratedRegressionPercent": 10}'
variant s-dwell-half '' 'rollout: {"minDwell": "5m"}'
variant s-dwell-twice '' 'rollout: {"minDwell": "20m"}'
all="s-resolved-half s-resolved-twice s-requests-half s-requests-twice s-fitrows-half s-fitrows-twice s-ratio-half s-ratio-twice s-margin-half s-margin-twice s-tolerance-half s-tolerance-twice s-dwell-half s-dwell-twice"
settings="agent"
for v in ${BENCH_VARIANTS:-$all}; do settings+=" agent.$v"; done
BENCH_NAME=${BENCH_NAME:-sensitivity} BENCH_SETTINGS="$settings" BENCH_REPS="$reps" exec hack/bench-decisions.sh bin/shadowtune
