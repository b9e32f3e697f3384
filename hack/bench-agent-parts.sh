#!/usr/bin/env bash
# Where the agent's IOPS cost comes from (as root): fio 4 KiB random reads
# on a new loop device, as in hack/bench-agent.sh, in rounds of four runs in
# rotated order:
#   off     nothing else runs;
#   reject  `shadowtune trace record` of another, idle loop device: the BPF
#           programs are attached and run for every request, and their
#           filter rejects them all;
#   trace   `shadowtune trace record` of the fio device: the BPF programs
#           and the reader (and the trace file writer), no simulation;
#   agent   `shadowtune run` in Observe mode on the fio device (5 s windows,
#           as hack/bench-agent.sh runs it).
# It prints each run's IOPS and, per mode, the median and mean of the
# per-round ratios to "off" and the ratio of the medians. It creates and
# removes its own files and loop devices and touches no other device.
#
# usage: hack/bench-agent-parts.sh BINARY [ROUNDS]   (BENCH_DIR=/var/tmp)
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY [ROUNDS]}")
rounds=${2:-10}
[[ $(id -u) -eq 0 ]] || { echo "bench-agent-parts: run as root" >&2; exit 1; }
command -v fio >/dev/null || { echo "bench-agent-parts: fio is required (make bench-agent installs it)" >&2; exit 1; }
tmp=$(mktemp -d "${BENCH_DIR:-/var/tmp}/shadowtune-bench-parts.XXXXXX")
loop="" idle="" bg="" sched0=""
cleanup() {
	set +e
	[[ -n $bg ]] && kill "$bg" && wait "$bg"
	[[ -n $sched0 ]] && echo "$sched0" >"/sys/block/$name/queue/scheduler"
	[[ -n $loop ]] && losetup -d "$loop"
	[[ -n $idle ]] && losetup -d "$idle"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fio --name=fill --filename="$tmp/disk.img" --size=2G --rw=write --bs=1M --direct=1 --ioengine=psync --output=/dev/null
loop=$(losetup --find --show --direct-io=on "$tmp/disk.img")
truncate -s 64M "$tmp/idle.img"
idle=$(losetup --find --show --direct-io=on "$tmp/idle.img")
name=$(basename "$loop")
[[ $(cat "/sys/block/$name/loop/backing_file") == "$tmp/disk.img" ]] || { echo "bench-agent-parts: $loop is not ours" >&2; exit 1; }
# A detached loop device keeps the settings its last user left: put back.
sched0=$(sed 's/.*\[\(.*\)\].*/\1/' "/sys/block/$name/queue/scheduler")
echo none >"/sys/block/$name/queue/scheduler"
cat >"$tmp/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: bench-agent-parts
spec:
  mode: Observe
  devices:
    include: ["$name"]
  evaluation:
    window: 5s
    cpuBudgetPercent: 10
YAML
modes=(off reject trace agent)
for ((r = 0; r < rounds; r++)); do
	for ((i = 0; i < ${#modes[@]}; i++)); do
		mode=${modes[$(((i + r) % ${#modes[@]}))]}
		case $mode in
		reject) "$bin" trace record --device "$idle" --duration 60s --out-file "$tmp/t.trace" >"$tmp/bg.log" 2>&1 & bg=$! ;;
		trace) "$bin" trace record --device "$loop" --duration 60s --out-file "$tmp/t.trace" >"$tmp/bg.log" 2>&1 & bg=$! ;;
		agent) "$bin" run --config "$tmp/policy.yaml" --state-dir "$tmp/state" --metrics-bind-address 127.0.0.1:0 >"$tmp/bg.log" 2>&1 & bg=$! ;;
		esac
		sleep 1.5
		fio --name=parts --filename="$loop" --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=16 --numjobs=2 \
			--group_reporting --time_based --ramp_time=4 --runtime=10 --randrepeat=0 --output-format=json --output="$tmp/fio.json"
		if [[ -n $bg ]]; then
			kill -INT "$bg"
			wait "$bg" || true
			bg=""
		fi
		rm -f "$tmp/t.trace"
		echo "$r $mode $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$tmp/fio.json")" | tee -a "$tmp/runs"
	done
done
python3 - "$tmp/runs" <<'PY'
import collections, statistics as st, sys
by = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, m, iops = line.split()
    by[r][m] = float(iops)
rounds = [r for r in by if len(by[r]) == 4]
off = [by[r]["off"] for r in rounds]
print(f"{len(rounds)} rounds; IOPS off: median {st.median(off):,.0f}")
for m in ("reject", "trace", "agent"):
    rat = [by[r][m] / by[r]["off"] - 1 for r in rounds]
    med = st.median([by[r][m] for r in rounds]) / st.median(off) - 1
    print(f"{m:7s} vs off: median of ratios {100 * st.median(rat):+.2f}%, mean {100 * st.mean(rat):+.2f}%, ratio of medians {100 * med:+.2f}%")
PY
