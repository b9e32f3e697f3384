#!/usr/bin/env bash
# The main job on one host, in one command (as root), on a load where the
# agent as shipped helps: a memory-limited "pod" reading a RocksDB database
# through mmap, whose every miss faults in the device's default 2560 KiB
# read-around, almost all of it evicted unused.
#
#  1. a loop device over a file in /var/tmp (direct I/O), ext4 on it, and a
#     memory cgroup (v2 or v1, detected) standing for a memory-limited pod;
#  2. RocksDB's db_bench loads a database four times the pod's memory;
#  3. `shadowtune run` in Apply mode, its policy only mode and the device
#     (every other setting the CRD's default), traces the device;
#  4. db_bench readrandom through mmap runs in the pod, a new process at the
#     device's default read-ahead, while the agent measures its waste; the
#     agent cuts read_ahead_kb; the same reads run again as a new process,
#     which opens the tables at the agent's depth (the kernel copies
#     read_ahead_kb into a file when it is opened);
#  5. the change and both runs' ops/s are printed; the agent stops, which
#     restores the device, and every queue setting is checked against its
#     value before the run; everything created is removed, also on error.
#
# usage: sudo hack/quickstart.sh [DURATION]
#   DURATION  the longest the agent runs (default 3m); it is stopped as soon
#             as the second run ends (about half a minute after its start)
set -euo pipefail
duration=${1:-3m}
cd "$(dirname "$0")/.."

# Sizes, each from a mechanism:
# - the pod's memory: a few hundred MiB, like a small pod; at 2560 KiB a
#   read-around, about 100 of them fill it, after which each new one evicts
#   older ones, mostly unused.
pod_mib=256
# - the database: fillrandom draws its keys with replacement, so about
#   1 - 1/e = 63 % of them are distinct: 1.6 M keys of 16 + 1024 bytes make
#   ~1 GiB, four times the pod's memory, so that most reads miss the cache at
#   any read-ahead (a database that fits would waste nothing).
keys=1600000
# - the file under it: at the compaction's peak ext4 holds fillrandom's
#   ~1.6 GiB (duplicates included) and the ~1 GiB they are rewritten into,
#   until the inputs are deleted.
image_gib=3
# - the reads of each run: 50 times the ~100 read-arounds the pod holds, so
#   the first run measures the thrash, not the filling of an empty cache; at
#   ~2.5 ms a read (a 2560 KiB read-around per miss on this project's loop
#   device) it lasts longer than two of the agent's 5 s windows.
reads=5000

if [[ ! $duration =~ ^([0-9]+h)?([0-9]+m)?([0-9]+s)?$ || -z $duration ]]; then
	echo "quickstart: DURATION must be a duration such as 90s or 3m, not '$duration'" >&2
	exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "quickstart: run as root (it creates a loop device and traces it with eBPF)" >&2
	exit 1
fi
if ! command -v db_bench >/dev/null; then
	echo "quickstart: installing rocksdb-tools (db_bench)" >&2
	apt-get update -qq && apt-get install -y -qq --no-install-recommends rocksdb-tools >/dev/null
fi
echo "== building bin/shadowtune (a first build downloads the Go modules: a few minutes)"
make --no-print-directory build >/dev/null

# The pod's cgroup: v2 when /sys/fs/cgroup is the unified hierarchy (its root
# must delegate the memory controller), else v1's memory hierarchy, under the
# memory cgroup this script runs in.
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
	if ! grep -qw memory /sys/fs/cgroup/cgroup.subtree_control; then
		echo "quickstart: cgroup v2 without the memory controller in /sys/fs/cgroup/cgroup.subtree_control" >&2
		exit 1
	fi
	cg_version=2 cg_parent=/sys/fs/cgroup
elif [[ -d /sys/fs/cgroup/memory ]]; then
	cg_version=1 cg_parent=/sys/fs/cgroup/memory$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
	cg_parent=${cg_parent%/}
else
	echo "quickstart: no memory cgroup (neither cgroup v2 at /sys/fs/cgroup nor v1 at /sys/fs/cgroup/memory)" >&2
	exit 1
fi

work=$(mktemp -d /var/tmp/shadowtune-quickstart.XXXXXX)
loop="" mounted="" cg="" agent_pid=""
cleanup() {
	set +e
	if [[ -n $cg && -d $cg ]]; then
		# shellcheck disable=SC2046 # one PID a word
		kill -KILL $(cat "$cg/cgroup.procs") 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done
	fi
	[[ -n $agent_pid ]] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	[[ -n $mounted ]] && umount "$work/mnt"
	if [[ -n $loop ]]; then
		# Restores anything still recorded (e.g. after an interrupted run).
		bin/shadowtune run --revert --state-dir "$work/state" >/dev/null
		losetup -d "$loop"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

truncate -s "${image_gib}G" "$work/disk.img"
loop=$(losetup --find --show --direct-io=on "$work/disk.img")
name=$(basename "$loop")
if [[ $(cat "/sys/block/$name/loop/backing_file") != "$work/disk.img" ]]; then
	echo "quickstart: $loop is not backed by our file; refusing to touch it" >&2
	exit 1
fi
# Every readable file under queue/ (iosched/ exists only with an elevator).
snapshot() { (cd "/sys/block/$name/queue" && find . -type f -readable -exec grep -H . {} + 2>/dev/null | sort) || true; }
snapshot >"$work/before"
ra_before=$(cat "/sys/block/$name/queue/read_ahead_kb")

# The inode tables and journal are written now, not by ext4's lazy
# initialisation in the background of the measured reads.
mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
mkdir "$work/mnt"
mount -o noatime "$loop" "$work/mnt"
mounted=1
cg=$cg_parent/shadowtune-quickstart-$$
mkdir "$cg"
if [[ $cg_version == 2 ]]; then
	echo "${pod_mib}M" >"$cg/memory.max"
	echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
else
	echo "${pod_mib}M" >"$cg/memory.limit_in_bytes"
fi
echo "== $loop over $work/disk.img (${image_gib} GiB sparse, ext4), scheduler $(sed 's/.*\[\(.*\)\].*/\1/' "/sys/block/$name/queue/scheduler"), read_ahead_kb $ra_before; the pod: a memory cgroup v$cg_version of $pod_mib MiB"

db=(db_bench "--db=$work/mnt/rocks" "--num=$keys" --key_size=16 --value_size=1024 --compression_type=none)
# compact: one sorted run, so that no compaction runs during the measured
# reads and each read looks in one table.
start=$SECONDS
"${db[@]}" --benchmarks=fillrandom,compact --seed=42 >"$work/load.txt" 2>&1 ||
	{ echo "quickstart: db_bench fillrandom failed:" >&2; tail -n 5 "$work/load.txt" >&2; exit 1; }
sync
echo "== RocksDB loaded outside the pod: $(du -sm "$work/mnt/rocks" | cut -f1) MiB in $(find "$work/mnt/rocks" -name '*.sst' | wc -l) tables (db_bench fillrandom,compact, $((SECONDS - start)) s)"

# drop_tables drops the tables' pages from the page cache (the kernel's
# POSIX_FADV_DONTNEED, which the agent counts neither used nor wasted), so
# that each run starts cold. RocksDB's small files (CURRENT, MANIFEST,
# OPTIONS) stay cached from the load, as on a node where the pod restarts.
drop_tables() { for f in "$work"/mnt/rocks/*.sst; do dd if="$f" iflag=nocache count=0 status=none; done; }

# reader N: db_bench readrandom through mmap, a new process in the pod.
# advise_random_on_open=0: RocksDB would otherwise madvise(MADV_RANDOM) its
# mapped tables, which turns the kernel's read-around off. The block cache
# is db_bench's default 8 MiB, small beside the pod: the page cache serves
# the reads. The same seed in both runs: the same keys, in the same order.
# It prints the run's ops/s and seconds.
reader() {
	drop_tables
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "${db[@]}" --benchmarks=readrandom \
		--use_existing_db=1 --mmap_read=1 --advise_random_on_open=0 --cache_size=$((8 << 20)) \
		--reads=$reads --threads=1 --seed=7 >"$work/read$1.txt" 2>&1 ||
		{ echo "quickstart: db_bench readrandom failed:" >&2; tail -n 5 "$work/read$1.txt" >&2; exit 1; }
	awk '/^readrandom/ { for (i = 2; i < NF; i++) if ($(i + 1) == "ops/sec") print $i, $(i + 2) }' "$work/read$1.txt" | grep . ||
		{ echo "quickstart: no readrandom result in db_bench's output:" >&2; tail -n 5 "$work/read$1.txt" >&2; exit 1; }
}
# thousands: 12345 -> 12,345.
thousands() { sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta' <<<"$1"; }

cat >"$work/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: quickstart
spec:
  mode: Apply
  devices:
    include: ["$name"]
YAML
echo "== shadowtune run (Apply mode, only $name, every other setting the CRD's default), at most $duration"
bin/shadowtune run --config "$work/policy.yaml" --duration "$duration" --state-dir "$work/state" \
	--metrics-bind-address 127.0.0.1:0 -v 1 > >(tee "$work/agent.out") 2>"$work/agent.log" &
agent_pid=$!
agent_gone() {
	echo "quickstart: the agent exited early (interrupted, or its DURATION $duration ended); its log:" >&2
	tail -n 5 "$work/agent.log" >&2
	exit 1
}
for _ in $(seq 600); do
	grep -q '"msg"="tracing"' "$work/agent.log" && break
	kill -0 "$agent_pid" 2>/dev/null || agent_gone
	sleep 0.1
done
window=$(sed -n 's/.*"msg"="tracing".*"window"="\([0-9]*\)s".*/\1/p' "$work/agent.log")
[[ -n $window ]] || { echo "quickstart: the agent did not start tracing within 60 s" >&2; exit 1; }

out=$(reader 1)
read -r ops1 secs1 <<<"$out"
echo "== db_bench readrandom through mmap, $reads reads, a new process in the pod at read_ahead_kb $ra_before: $(thousands "${ops1%.*}") ops/s ($secs1 s)"
# The agent decides at the end of each window from what it measured: the
# cut is due within a window of the first run's end; two allow for a late
# window.
for _ in $(seq $((window * 2 * 10))); do
	[[ $(cat "/sys/block/$name/queue/read_ahead_kb") != "$ra_before" ]] && break
	kill -0 "$agent_pid" 2>/dev/null || agent_gone
	sleep 0.1
done
ra_after=$(cat "/sys/block/$name/queue/read_ahead_kb")
if [[ $ra_after == "$ra_before" ]]; then
	echo "== the agent made no read-ahead change within $((window * 2)) s of the first run ($(thousands "${ops1%.*}") ops/s); its last decisions:" >&2
	grep '"msg"="read-ahead"' "$work/agent.log" | tail -n 3 | cut -c1-300 >&2
	exit 1
fi
change="read_ahead_kb $ra_before -> $ra_after"
# The decision that set it (-v 1): its reason and the waste it measured.
why=$(grep '"msg"="read-ahead"' "$work/agent.log" | grep -v "\"current\"=$ra_after " | grep "\"decision\"=$ra_after " | head -n 1 |
	sed -n 's/.*"reason"="\([A-Za-z]*\)".*"mix"="random [^ ]* used \([0-9]*\) wasted \([0-9]*\); sequential [^ ]* used \([0-9]*\) wasted \([0-9]*\); short [^ ]* used \([0-9]*\) wasted \([0-9]*\)".*/\1 \2 \3 \4 \5 \6 \7/p')
read -r reason used wasted sused swasted hused hwasted <<<"${why:-? 0 0 0 0 0 0}"
waste=$(awk -v u=$((used + sused + hused)) -v w=$((wasted + swasted + hwasted)) 'BEGIN { if (u + w > 0) printf "%.1f", 100 * w / (u + w); else printf "?" }')
steps=$(sed -n 's/.*"msg"="applied".*"change"="read_ahead_kb [0-9]* -> \([0-9]*\)".*/\1/p' "$work/agent.log" | paste -sd ' ' | sed 's/ / -> /g')
echo "== the agent: read_ahead_kb $ra_before -> $steps ($reason: $waste % of the read-ahead pages it followed were evicted unused)"

out=$(reader 2)
read -r ops2 secs2 <<<"$out"
echo "== the same reads, a new process in the pod at read_ahead_kb $ra_after: $(thousands "${ops2%.*}") ops/s ($secs2 s)"
kill -TERM "$agent_pid"
wait "$agent_pid" || true
agent_pid=""
ratio=$(awk -v a="$ops1" -v b="$ops2" 'BEGIN { printf "%.1f", b / a }')
echo "== $change ($reason) after the first run; db_bench readrandom (mmap): $(thousands "${ops1%.*}") ops/s -> $(thousands "${ops2%.*}") ops/s (${ratio}×)"
snapshot >"$work/after"
if diff -u "$work/before" "$work/after"; then
	echo "== $name restored exactly: every queue setting equals its value before the run"
else
	echo "== $name NOT restored (see diff above)" >&2
	exit 1
fi
