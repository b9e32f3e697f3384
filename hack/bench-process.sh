#!/usr/bin/env bash
# Whole-process benchmark of `shadowtune simulate` on the shipped
# linux-webserver-2 trace (269,007 requests, 3,601 s) under all four
# schedulers. Runs the two configurations in turn (interleaved) RUNS times
# each — all candidates in parallel (default) and one at a time
# (--parallel 1) — and reports medians of wall time, simulated requests per
# second, speed-up over real time (trace span ÷ simulation time) and peak
# RSS, plus the parallel/serial ratio.
#
# usage: hack/bench-process.sh BINARY [RUNS]
set -euo pipefail
bin=${1:?usage: $0 BINARY [RUNS]}
runs=${2:-5}
trace=testdata/traces/blkreplay/linux-webserver-2.load.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for ((i = 1; i <= runs; i++)); do
	for mode in parallel serial; do
		extra=()
		[[ $mode == serial ]] && extra=(--parallel 1)
		"$bin" simulate --trace "$trace" --format blkreplay -o json "${extra[@]}" >"$tmp/$mode.$i.json"
	done
done

python3 - "$tmp" "$runs" <<'PY'
import json, statistics, sys, os
tmp, runs = sys.argv[1], int(sys.argv[2])
res = {}
for mode in ("parallel", "serial"):
    rows = [json.load(open(os.path.join(tmp, f"{mode}.{i}.json")))["run"] for i in range(1, runs + 1)]
    med = lambda k: statistics.median(r[k] for r in rows)
    res[mode] = {k: med(k) for k in ("wallSeconds", "simulateSeconds", "simulatedRequestsPerSecond", "speedupVsRealTime", "peakRSSBytes")}
    res[mode]["simulatedRequests"] = rows[0]["simulatedRequests"]
    lo = min(r["simulatedRequestsPerSecond"] for r in rows); hi = max(r["simulatedRequestsPerSecond"] for r in rows)
    print(f"{mode:8s} runs={runs} simulated={res[mode]['simulatedRequests']} "
          f"wall={res[mode]['wallSeconds']:.2f}s simulate={res[mode]['simulateSeconds']:.2f}s "
          f"requests/s={res[mode]['simulatedRequestsPerSecond']:,.0f} (min {lo:,.0f}, max {hi:,.0f}) "
          f"realtime-x={res[mode]['speedupVsRealTime']:,.0f} peakRSS={res[mode]['peakRSSBytes']/2**20:.0f}MiB")
print(f"ratio parallel/serial requests/s: {res['parallel']['simulatedRequestsPerSecond']/res['serial']['simulatedRequestsPerSecond']:.2f}")
PY
