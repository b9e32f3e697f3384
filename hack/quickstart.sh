#!/usr/bin/env bash
# The main job on one host, in one command (as root): create a loop device
# over a file, run a real fio workload on it, run `shadowtune run` in Apply
# mode against only that loop device for DURATION (default 60s), print the
# result, then restore the device and remove everything this script created.
#
# usage: sudo hack/quickstart.sh [DURATION]
set -euo pipefail
duration=${1:-60s}
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
	echo "quickstart: run as root (it creates a loop device and traces it with eBPF)" >&2
	exit 1
fi
if ! command -v fio >/dev/null; then
	echo "quickstart: installing fio" >&2
	apt-get update -qq && apt-get install -y -qq fio >/dev/null
fi
echo "== building bin/shadowtune (a first build downloads the Go modules: a few minutes)"
make --no-print-directory build >/dev/null

work=$(mktemp -d /tmp/shadowtune-quickstart.XXXXXX)
loop=""
fio_pid=""
cleanup() {
	set +e
	[[ -n $fio_pid ]] && kill "$fio_pid" 2>/dev/null && wait "$fio_pid" 2>/dev/null
	[[ -n ${watch_pid:-} ]] && kill "$watch_pid" 2>/dev/null
	if [[ -n $loop ]]; then
		# Restores anything still recorded (e.g. after an interrupted run).
		bin/shadowtune run --revert --state-dir "$work/state" >/dev/null
		losetup -d "$loop"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

truncate -s 2G "$work/disk.img"
loop=$(losetup --find --show --direct-io=on "$work/disk.img")
name=$(basename "$loop")
if [[ $(cat "/sys/block/$name/loop/backing_file") != "$work/disk.img" ]]; then
	echo "quickstart: $loop is not backed by our file; refusing to touch it" >&2
	exit 1
fi
# Every readable file under queue/ (iosched/ exists only with an elevator).
snapshot() { (cd "/sys/block/$name/queue" && find . -type f -readable -exec grep -H . {} + 2>/dev/null | sort) || true; }
snapshot >"$work/before"

# net_effect prints one line: fio's read IOPS (the sum of its jobs' per-second
# logs) over the run's first 10 s, at the device's settings before the
# agent changed anything, against its last 10 s, at the setting the agent
# had left by then.
net_effect() {
	local first last
	first=$(head -n 1 "$work/settings" | cut -d' ' -f2)
	last=$(tail -n 3 "$work/settings" | head -n 1 | cut -d' ' -f2)
	cat "$work"/fio_iops.*.log 2>/dev/null | python3 -c '
import sys, collections
per = collections.Counter()
for line in sys.stdin:
    f = line.split(",")
    if len(f) > 2 and f[2].strip() == "0":
        per[int(f[0]) // 1000] += int(f[1])
secs = sorted(per)[1:-1]  # whole seconds only
if len(secs) < 25:
    print("== net effect: the run was too short to compare its first and last 10 s"); sys.exit()
a = sum(per[s] for s in secs[:10]) / 10
b = sum(per[s] for s in secs[-10:]) / 10
d = 100 * (b - a) / a
if sys.argv[1] == sys.argv[2]:
    print("== net effect: none, the device ended at its own setting (%s); fio %.0f read IOPS over the first 10 s, %.0f over the last (%+.1f %%: the machine, not a setting)" % (sys.argv[1], a, b, d))
else:
    print("== net effect: fio %.0f read IOPS over the first 10 s (%s) -> %.0f over the last 10 s (%s): %+.1f %%" % (a, sys.argv[1], b, sys.argv[2], d))
' "$first" "$last"
}

cat >"$work/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: quickstart
spec:
  mode: Apply
  devices:
    include: ["$name"]
  evaluation:
    window: 5s
    cpuBudgetPercent: 50
YAML

echo "== $loop over $work/disk.img (2 GiB); before: $(cat /sys/block/$name/queue/scheduler), read_ahead_kb $(cat /sys/block/$name/queue/read_ahead_kb)"
echo "== fio: random 4 KiB reads, 4 jobs × iodepth 8, for the whole run"
fio --name=quickstart --filename="$loop" --direct=1 --rw=randread --bs=4k --ioengine=libaio \
	--iodepth=8 --numjobs=4 --time_based --runtime=3600 --group_reporting --output="$work/fio.out" \
	--write_iops_log="$work/fio" --log_avg_msec=1000 &
fio_pid=$!
# The device's setting each second, to name the setting of the run's end.
(while sleep 1; do echo "$(date +%s) $(sed 's/.*\[\(.*\)\].*/\1/' "/sys/block/$name/queue/scheduler")/$(cat "/sys/block/$name/queue/read_ahead_kb")"; done >"$work/settings") &
watch_pid=$!
sleep 1

echo "== shadowtune run --duration $duration (Apply mode, only $name)"
bin/shadowtune run --config "$work/policy.yaml" --duration "$duration" --state-dir "$work/state" \
	--metrics-bind-address 127.0.0.1:0 --quiet

kill "$watch_pid" "$fio_pid" && wait "$fio_pid" 2>/dev/null || true
fio_pid=""
net_effect
snapshot >"$work/after"
if diff -u "$work/before" "$work/after"; then
	echo "== $name restored exactly: every queue setting equals its value before the run"
else
	echo "== $name NOT restored (see diff above)" >&2
	exit 1
fi
