#!/usr/bin/env bash
# Peak memory of `shadowtune run` under a heavy policy (issue 16 item 7):
# the example policy's candidates (every scheduler, 9 tunable variants,
# each also with the REDCAP cache simulated) on a loop device of its own
# under a high-IOPS random-read load (fio, 4 KiB, direct), for each memory
# limit in LIMITS. The agent runs in a memory cgroup of its own (cgroup v2
# leaf, or a cgroup v1 child of this process's memory cgroup), so its peak
# is the cgroup's: resident memory plus the eBPF maps and page cache
# charged to it. It prints, per limit: the exit status (137: OOM-killed),
# the cgroup's peak, the Go heap's largest live size after a collection
# (from GODEBUG=gctrace=1, which the script sets), the requests of the
# last window, and the agent's note on how
# it sized its windows to the limit.
#
# usage: hack/bench-agent-memory.sh BINARY
# environment: LIMITS ("max 256M 160M"), SECONDS_PER_RUN (40), POLICY
# (example: examples/storagetuning-observe.yaml; heaviest: the most
# expensive policy the CRD accepts, hack/testdata/storagetuning-heaviest.yaml,
# whose window is 5 minutes: give it SECONDS_PER_RUN of 630 or more)
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY}")
limits=${LIMITS:-max 256M 160M}
secs=${SECONDS_PER_RUN:-40}
[[ $(id -u) -eq 0 ]] || { echo "$0: run as root (loop device, eBPF, cgroups)" >&2; exit 1; }
command -v fio >/dev/null || { echo "$0: fio is required" >&2; exit 1; }

work=$(mktemp -d /var/tmp/shadowtune-agent-memory.XXXXXX)
loop="" fio_pid="" cg=""
cleanup() {
	set +e
	[[ -n $fio_pid ]] && kill "$fio_pid" 2>/dev/null && wait "$fio_pid" 2>/dev/null
	[[ -n $cg && -d $cg ]] && rmdir "$cg"
	[[ -n $loop ]] && losetup -d "$loop"
	rm -rf "$work"
}
trap cleanup EXIT

truncate -s 1G "$work/disk.img"
loop=$(losetup --find --show --direct-io=on "$work/disk.img")
[[ $(losetup -nO BACK-FILE "$loop") == "$work/disk.img" ]] || { echo "$0: $loop is not ours" >&2; exit 1; }
name=${loop#/dev/}
case ${POLICY:-example} in
example)
	sed -e '/nodeSelector:/,/storage.shadowtune.io\/tune/d' \
		-e "s|include: \[\"sd\*\", \"nvme\*n1\"\].*|include: [\"$name\"]|" \
		-e '/exclude: \["loop/d' -e 's|minSizeBytes: 200Gi.*|minSizeBytes: 0|' \
		"$(dirname "$0")/../examples/storagetuning-observe.yaml" >"$work/policy.yaml" ;;
heaviest)
	sed -e "s|\"DEVICE\"|\"$name\"|" "$(dirname "$0")/testdata/storagetuning-heaviest.yaml" >"$work/policy.yaml" ;;
*) echo "$0: POLICY is example or heaviest, not $POLICY" >&2; exit 1 ;;
esac
grep -q "\"$name\"" "$work/policy.yaml" || { echo "$0: could not adapt the example policy" >&2; exit 1; }

# newcg LIMIT: a memory cgroup with that limit ("max": none); sets cg and
# the file its peak is read from (peak_file).
newcg() {
	if grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
		cg=/sys/fs/cgroup/shadowtune-agent-memory.$$
		mkdir "$cg"
		echo "$1" >"$cg/memory.max"
		peak_file=$cg/memory.peak
	else
		local own
		own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
		cg=/sys/fs/cgroup/memory$own/shadowtune-agent-memory.$$
		mkdir "$cg"
		[[ $1 == max ]] || echo "$1" >"$cg/memory.limit_in_bytes"
		peak_file=$cg/memory.max_usage_in_bytes
	fi
}

fio --name=agent-memory --filename="$loop" --direct=1 --rw=randread --bs=4k --ioengine=libaio \
	--iodepth=32 --numjobs=2 --time_based --runtime=100000 --group_reporting >/dev/null 2>&1 &
fio_pid=$!
sleep 2

printf '%-6s  %4s  %10s  %12s  %12s  %s\n' LIMIT EXIT PEAK "LIVE HEAP" "LAST WINDOW" NOTE
for lim in $limits; do
	newcg "$lim"
	set +e
	GODEBUG=gctrace=1 bash -c "echo \$\$ >'$cg/cgroup.procs' && exec '$bin' run --config '$work/policy.yaml' --state-dir '$work/state.$lim' \
		--duration ${secs}s --metrics-bind-address 0 -o json" >"$work/out.$lim" 2>"$work/err.$lim"
	rc=$?
	set -e
	peak=$(($(cat "$peak_file") >> 20))
	maxwin=$(python3 - "$work/out.$lim" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except ValueError:
    print(0, "-")
    sys.exit()
reqs = max([(d.get("window") or {}).get("requests", 0) for d in s.get("devices") or []] or [0])
note = "; ".join(n for n in s.get("notes") or [] if n.startswith("memory limit"))
print(reqs, note or "-")
PY
)
	live=$(grep -o '[0-9]*->[0-9]*->[0-9]* MB' "$work/err.$lim" | awk -F'->' '{sub(/ MB/,"",$3); if ($3+0 > m) m = $3+0} END {print m+0}')
	printf '%-6s  %4d  %6d MiB  %8s MiB  %12s  %s\n' "$lim" "$rc" "$peak" "$live" "${maxwin%% *}" "${maxwin#* }"
	rmdir "$cg" 2>/dev/null || sleep 1 && rmdir "$cg" 2>/dev/null || true
	cg=""
done
