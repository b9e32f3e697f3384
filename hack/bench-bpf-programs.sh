#!/usr/bin/env bash
# What each of the agent's BPF programs costs a buffered reader (as root):
# ext4 on a new loop device, `shadowtune run` in Observe mode on it (the
# default policy, or with read-ahead not governed: BENCH_READAHEAD=false),
# and ROUNDS runs of a workload with the page cache dropped before each. It
# prints each run's wall time and the agent's CPU during it, and per BPF
# program (the kernel's own statistics, kernel.bpf_stats_enabled, switched
# on for the run and put back after) its runs and its time per workload
# run and per program run. The statistics add about 20-40 ns to every
# program run. It creates and removes its own files and loop device and
# touches no other device.
#
# The workload is bench-decisions' 8k-SR (fio: 4 KiB read, 8 KiB skipped,
# over a 128 MiB file, buffered), or BENCH_FIO="fio arguments" (the file is
# $FILE in them).
#
# usage: hack/bench-bpf-programs.sh BINARY [ROUNDS]   (BENCH_DIR=/var/tmp)
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY [ROUNDS]}")
rounds=${2:-8}
die() { echo "bench-bpf-programs: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run as root"
command -v fio >/dev/null || die "fio is required (make bench-agent installs it)"
command -v bpftool >/dev/null || die "bpftool is required (apt-get install bpftool)"
ra=${BENCH_READAHEAD:-true}
[[ $ra == true || $ra == false ]] || die "BENCH_READAHEAD: $ra, want true or false"
tmp=$(mktemp -d "${BENCH_DIR:-/var/tmp}/shadowtune-bench-bpf.XXXXXX")
loop="" mounted="" apid="" stats0=""
cleanup() {
	set +e
	[[ -n $apid ]] && kill -TERM "$apid" && wait "$apid"
	[[ -n $stats0 ]] && sysctl -q kernel.bpf_stats_enabled="$stats0"
	[[ -n $mounted ]] && umount "$tmp/mnt"
	[[ -n $loop ]] && losetup -d "$loop"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
truncate -s 4G "$tmp/disk.img"
loop=$(losetup --find --show --direct-io=on "$tmp/disk.img")
name=$(basename "$loop")
[[ $(cat "/sys/block/$name/loop/backing_file") == "$tmp/disk.img" ]] || die "$loop is not ours"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
mkdir "$tmp/mnt"
mount -o noatime "$loop" "$tmp/mnt" && mounted=1
FILE=$tmp/mnt/big0
fio --name=fill --filename="$FILE" --size=128M --rw=write --bs=1M --direct=1 --ioengine=psync --output=/dev/null
sync
read -r -a work <<<"${BENCH_FIO:---name=sr8 --filename=\$FILE --rw=read:8k --bs=4k --ioengine=psync --direct=0 --fadvise_hint=0 --invalidate=0}"
work=("${work[@]//\$FILE/$FILE}")
cat >"$tmp/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: bench-bpf-programs
spec:
  mode: Observe
  devices:
    include: ["$name"]
  readAhead:
    enabled: $ra
YAML
stats0=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q kernel.bpf_stats_enabled=1
"$bin" run --config "$tmp/policy.yaml" --state-dir "$tmp/state" --metrics-bind-address 0 -o json >/dev/null 2>"$tmp/agent.log" &
apid=$!
for ((i = 0; i < 300; i++)); do
	grep -q '"msg"="tracing"' "$tmp/agent.log" && break
	kill -0 "$apid" 2>/dev/null || { cat "$tmp/agent.log" >&2; apid=""; die "the agent exited at start"; }
	sleep 0.1
done
sleep 1
# snap: "name run_time_ns run_cnt" of every BPF program the agent holds.
snap() {
	local ids
	ids=$(for f in /proc/"$apid"/fdinfo/*; do awk '/^prog_id:/{print $2}' "$f"; done | sort -u | tr '\n' ' ')
	bpftool prog show -j | python3 -c '
import json, sys
ids = set(int(i) for i in sys.argv[1].split())
for p in json.load(sys.stdin):
    if p["id"] in ids:
        print(p.get("name", "?"), p.get("run_time_ns", 0), p.get("run_cnt", 0))' "$ids"
}
cpu() { awk '{print $14 + $15}' "/proc/$apid/stat"; }
tck=$(getconf CLK_TCK)
snap >"$tmp/s0"
for ((r = 1; r <= rounds; r++)); do
	sync
	echo 3 >/proc/sys/vm/drop_caches
	c0=$(cpu) t0=$EPOCHREALTIME
	fio "${work[@]}" --output=/dev/null
	t1=$EPOCHREALTIME c1=$(cpu)
	awk -v r="$r" -v a="$t0" -v b="$t1" -v c=$((c1 - c0)) -v k="$tck" \
		'BEGIN{printf "run %d: %.3f s, agent CPU %.0f ms\n", r, b-a, 1000*c/k}'
done
snap >"$tmp/s1"
python3 - "$tmp/s0" "$tmp/s1" "$rounds" <<'PY'
import sys
def read(path):
    out = {}
    for line in open(path):
        name, t, c = line.split()
        a, b = out.get(name, (0, 0))
        out[name] = (a + int(t), b + int(c))
    return out
s0, s1, n = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
total = 0
print(f"{'program':24s} {'runs/run':>10s} {'ms/run':>8s} {'ns/prog run':>12s}")
for name in sorted(s1):
    t = s1[name][0] - s0.get(name, (0, 0))[0]
    c = s1[name][1] - s0.get(name, (0, 0))[1]
    if c:
        print(f"{name:24s} {c / n:10.0f} {t / n / 1e6:8.2f} {t / c:12.0f}")
        total += t
print(f"{'all':24s} {'':10s} {total / n / 1e6:8.2f}")
PY
