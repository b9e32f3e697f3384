#!/usr/bin/env bash
# What the block tracer costs a buffered reader's device requests (as root):
# ext4 on a new loop device and a 128 MiB file, then BLOCKS blocks, each of
# four modes in rotated order with three runs of bench-decisions' 8k-SR
# (fio: 4 KiB read, 8 KiB skipped, buffered; the page cache dropped before
# each run):
#
#   none      nothing traced;
#   traced    `shadowtune trace record` of the device (the agent's block
#             tracer, writing to /dev/null);
#   rejected  the same tracer recording another, idle, loop device: its
#             programs run for every request and reject the benchmark's
#             (what a paused or ungoverned device pays);
#   stopped   the traced mode with the recording process stopped (SIGSTOP):
#             the programs run in full and the ring buffer fills, but no
#             reader runs, so what is left is the programs' own cost in the
#             I/O path.
#
# Per mode it prints the medians of fio's job runtime, its mean completion
# latency, and the device's read time per request (/sys/block/X/stat: ms
# reading ÷ reads), and each mode's runtime against none's. It creates and
# removes its own files and loop devices and touches no other device.
#
# usage: hack/bench-trace-cost.sh BINARY [BLOCKS]   (BENCH_DIR=/var/tmp)
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY [BLOCKS]}")
blocks=${2:-5}
die() { echo "bench-trace-cost: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run as root"
command -v fio >/dev/null || die "fio is required (make bench-agent installs it)"
tmp=$(mktemp -d "${BENCH_DIR:-/var/tmp}/shadowtune-bench-trace.XXXXXX")
loop="" idle="" mounted="" tpid=""
cleanup() {
	set +e
	[[ -n $tpid ]] && kill -CONT "$tpid" && kill -TERM "$tpid" && wait "$tpid"
	[[ -n $mounted ]] && umount "$tmp/mnt"
	[[ -n $loop ]] && losetup -d "$loop"
	[[ -n $idle ]] && losetup -d "$idle"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
truncate -s 4G "$tmp/disk.img"
truncate -s 64M "$tmp/idle.img"
loop=$(losetup --find --show --direct-io=on "$tmp/disk.img")
idle=$(losetup --find --show --direct-io=on "$tmp/idle.img")
name=$(basename "$loop")
[[ $(cat "/sys/block/$name/loop/backing_file") == "$tmp/disk.img" ]] || die "$loop is not ours"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
mkdir "$tmp/mnt"
mount -o noatime "$loop" "$tmp/mnt" && mounted=1
file=$tmp/mnt/big0
fio --name=fill --filename="$file" --size=128M --rw=write --bs=1M --direct=1 --ioengine=psync --output=/dev/null
sync

# start_tracer DEVICE: trace record DEVICE to /dev/null, until it traces.
start_tracer() {
	"$bin" trace record --device "$1" --duration 30m --out-file /dev/null 2>"$tmp/tracer.log" &
	tpid=$!
	sleep 3
	kill -0 "$tpid" 2>/dev/null || { cat "$tmp/tracer.log" >&2; die "trace record exited"; }
}
stop_tracer() { kill -CONT "$tpid"; kill -TERM "$tpid"; wait "$tpid" || true; tpid=""; }
# one MODE: one run; prints MODE, fio's runtime (ms) and mean completion
# latency (ns), the device's reads and ms reading.
one() {
	local s0 s1
	sync && echo 3 >/proc/sys/vm/drop_caches
	read -r -a s0 <"/sys/block/$name/stat"
	fio --name=sr8 --filename="$file" --rw=read:8k --bs=4k --ioengine=psync --direct=0 --fadvise_hint=0 \
		--invalidate=0 --output-format=json --output="$tmp/fio.json"
	read -r -a s1 <"/sys/block/$name/stat"
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(sys.argv[2], j["job_runtime"], j["read"]["clat_ns"]["mean"], *sys.argv[3:])' \
		"$tmp/fio.json" "$1" $((s1[0] - s0[0])) $((s1[3] - s0[3]))
}
modes=(none traced rejected stopped)
out=$tmp/runs.txt
for ((b = 0; b < blocks; b++)); do
	for ((i = 0; i < 4; i++)); do
		m=${modes[(i + b) % 4]}
		case $m in
		traced | stopped) start_tracer "$name" ;;
		rejected) start_tracer "$(basename "$idle")" ;;
		none) sleep 3 ;;
		esac
		[[ $m == stopped ]] && kill -STOP "$tpid" && sleep 1
		for k in 1 2 3; do one "$m" >>"$out"; done
		[[ -n $tpid ]] && stop_tracer
	done
done
python3 - "$out" <<'EOF'
import statistics as st, sys, random
runs = {}
for line in open(sys.argv[1]):
    m, rt, clat, reads, ms = line.split()
    runs.setdefault(m, []).append((float(rt), float(clat), int(reads), int(ms)))
def med(m, i): return st.median(r[i] for r in runs[m])
def interval(m, n=4000):
    rnd = random.Random(1); a = [r[0] for r in runs[m]]; b = [r[0] for r in runs["none"]]; q = []
    for _ in range(n):
        q.append(st.median(rnd.choices(a, k=len(a))) / st.median(rnd.choices(b, k=len(b))))
    q.sort(); return q[int(.025 * n)], q[int(.975 * n)]
print(f"{'mode':10s} {'runs':>4s} {'fio runtime ms':>14s} {'mean clat us':>12s} {'device reads':>12s} {'us per read':>11s}  runtime / none (95 % interval)")
for m in ("none", "traced", "rejected", "stopped"):
    per = st.median(r[3] * 1000 / r[2] for r in runs[m] if r[2])
    ratio = "" if m == "none" else "%.3f (%.3f-%.3f)" % ((med(m, 0) / med("none", 0),) + interval(m))
    print(f"{m:10s} {len(runs[m]):4d} {med(m, 0):14.0f} {med(m, 1) / 1000:12.1f} {med(m, 2):12.0f} {per:11.1f}  {ratio}")
EOF
