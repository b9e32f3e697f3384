#!/usr/bin/env bash
# Writes a gzip DiskSim validation trace of LINES requests to OUT: the
# shipped testdata/traces/disksim/atlas10k.trace (10,000 requests of a
# Quantum Atlas 10K, measured service and think times) repeated, cut to
# LINES lines. Deterministic: the same LINES give the same file.
#
# usage: hack/gen-disksim.sh LINES OUT.gz
set -euo pipefail
lines=${1:?usage: $0 LINES OUT.gz}
out=${2:?usage: $0 LINES OUT.gz}
src=$(dirname "$0")/../testdata/traces/disksim/atlas10k.trace
n=$(wc -l <"$src")
reps=$(((lines + n - 1) / n))
for ((i = 0; i < reps; i++)); do cat "$src"; done | head -n "$lines" | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
