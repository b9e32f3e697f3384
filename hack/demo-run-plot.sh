#!/usr/bin/env bash
# Draws the timeline of a short real Apply run of the node agent (as root),
# as in docs/img/run-loop-device.svg: `shadowtune run --plot` on a new
# 256 MiB loop device of its own, with fio doing 4 KiB random reads for the
# first half and 64 KiB sequential reads from 4 processes for the second.
# It touches no other device; the agent restores the loop device's
# settings at exit, and the loop device is detached. It takes the lock of
# the heavy-I/O tests, so it does not run beside them.
#
# usage: hack/demo-run-plot.sh BINARY OUT.svg [SECONDS (default 120)]
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY OUT.svg [SECONDS]}")
out=${2:?usage: $0 BINARY OUT.svg [SECONDS]}
secs=${3:-120}
half=$((secs / 2))
[[ $(id -u) -eq 0 ]] || { echo "demo-run-plot: run as root (a loop device, eBPF)" >&2; exit 1; }
command -v fio >/dev/null || { echo "demo-run-plot: fio is required" >&2; exit 1; }
exec 9>"${TMPDIR:-/tmp}/shadowtune-heavy-io-tests.lock"
flock 9
d=$(mktemp -d)
loop=""
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[[ -n $loop ]] && losetup -d "$loop"
	rm -rf "$d"
}
trap cleanup EXIT
dd if=/dev/urandom of="$d/disk.img" bs=1M count=256 status=none
loop=$(losetup --find --show --direct-io=on "$d/disk.img")
name=$(basename "$loop")
cat >"$d/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: plot-demo
spec:
  mode: Apply
  devices:
    include: [$name]
  evaluation:
    window: 5s
    cpuBudgetPercent: 50
YAML
fio --name=rand --filename="$loop" --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=8 --numjobs=2 \
	--time_based --runtime="$half" --output=/dev/null &
pids+=($!)
(sleep "$half" && exec fio --name=seq --filename="$loop" --rw=read --bs=64k --direct=1 --ioengine=libaio --iodepth=4 \
	--numjobs=4 --offset_increment=64m --time_based --runtime="$half" --output=/dev/null) &
pids+=($!)
"$bin" run --config "$d/policy.yaml" --state-dir "$d/state" --metrics-bind-address 0 --duration "${secs}s" \
	--plot "$out" --quiet
wait
pids=()
echo "drew $out"
