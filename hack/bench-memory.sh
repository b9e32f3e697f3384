#!/usr/bin/env bash
# Peak RSS and wall time of the commands that read a whole trace, on
# generated DiskSim traces (hack/gen-disksim.sh, written to BENCH_DIR,
# default /tmp/shadowtune-bench, and reused): a trace of LINES requests
# (default 40,000,000, past every --max-requests default) and traces at the
# defaults (1,000,000 for simulate, 1,500,000 for model eval/learn), with
# each command's default flags. Needs GNU time (/usr/bin/time).
#
# usage: hack/bench-memory.sh BINARY [LINES]
set -euo pipefail
bin=${1:?usage: $0 BINARY [LINES]}
lines=${2:-40000000}
dir=${BENCH_DIR:-/tmp/shadowtune-bench}
here=$(dirname "$0")
[[ -x /usr/bin/time ]] || { echo "$0: needs GNU time: apt-get install time" >&2; exit 1; }
mkdir -p "$dir"

trace() { # LINES -> path, generated once
	local p="$dir/disksim-$1.gz"
	[[ -s $p ]] || "$here/gen-disksim.sh" "$1" "$p"
	echo "$p"
}

measure() { # LINES CMD...
	local n=$1 t out
	shift
	t=$(trace "$n")
	out=$(mktemp)
	set +e
	/usr/bin/time -f '%M %e' -o "$out.time" "$bin" "$@" --trace "$t" --format disksim >/dev/null 2>"$out"
	local rc=$?
	set -e
	read -r kib secs < <(tail -n 1 "$out.time") # GNU time first notes a non-zero exit
	printf '%-11s  %-12s  %4d  %8d MiB  %7.1f s  %s\n' "$n" "$*" "$rc" "$((kib / 1024))" "$secs" \
		"$(head -c 160 "$out" | head -n 1)"
	rm -f "$out" "$out.time"
}

printf '%-11s  %-12s  %4s  %12s  %9s  %s\n' REQUESTS COMMAND EXIT "PEAK RSS" WALL STDERR
measure "$lines" simulate
measure "$lines" model eval
measure "$lines" model learn
measure 1000000 simulate
measure 1500000 model eval
measure 1500000 model learn
