#!/usr/bin/env bash
# Decision-quality benchmark of the node agent (issue 14, part 1), as root:
# it judges `shadowtune run` by what the application sees. Every static
# setting of a loop device (each scheduler × read_ahead_kb in {the device's
# default, 128, 16}) and the agent in Apply mode run the same sequence of
# workloads in the style of KDSim §5 and DADS §5 (LKR, IOR-R, TAC, 8k-SR,
# 512k-SR, AIR, AIP), plus a memory-limited mmap/scan phase mix (and one that scans its mapping) and
# high-IOPS direct random reads; the application's wall time is recorded
# per workload, per setting, per repetition, and the agent's total is
# compared with the best static setting's and with the per-workload oracle
# (see docs/bench-decisions.md).
#
# It creates everything it uses and touches nothing else: a sparse file in
# BENCH_DIR, a loop device over it with direct I/O (checked to be backed by
# that file before anything is written to it), ext4 on it mounted in a
# temporary directory, and a memory cgroup (v1 or v2, detected) that bounds
# the workloads' page cache to BENCH_MEM. At exit (also on error or ^C) it
# stops what it started, puts the loop device's scheduler and read_ahead_kb
# back, unmounts, detaches the loop device, removes the cgroup and its files.
#
# Repetitions are interleaved: each runs every setting's whole sequence,
# the settings in the order of a row of a Williams design (williams_order,
# hack/lib/williams.sh), so that neither a drift of the host's speed nor the
# setting run before favours one setting. The page cache is dropped (sync;
# echo 3 > drop_caches) before every workload. The agent (default policy
# selecting only the loop device, minDwell 0s) is started before its
# sequence and runs through all of it, with one --state-dir kept across the
# repetitions as on a node.
#
# usage: hack/bench-decisions.sh BINARY [REPS]
# environment (defaults):
#   BENCH_QUICK=0     1: one repetition of a reduced sequence (1 process,
#                     smaller files, 2 memory phases), a few minutes
#   BENCH_DIR=/var/tmp  where the sparse image goes (must be a real disk)
#   BENCH_MEM=256M    memory.max / memory.limit_in_bytes of the workloads
#   BENCH_SETTINGS="" a subset to run, e.g. "none/2560 bfq/16 agent"; a
#                     setting agent.V runs the binary BINARY.V instead (a
#                     variant of the agent, compared in the same runs; its
#                     state directory is its own)
#   BENCH_WORKLOADS="" a subset of the sequence, e.g. "LKR-1 IOR-R-1"
#   BENCH_OUT=bin     where bench-decisions.json and the agent logs go
#   BENCH_KEEP=DIR    copy every fio output and agent log there, the
#                     windows where the agent decided a scheduler switch
#                     (run --explain-dir, DIR/windows.REP) and its state
#                     directory as the last repetition left it (DIR/state:
#                     the learned model, with its k)
#   BENCH_SCAN_KIB=8    the read() size of the memory mix's scans, KiB (8: a
#                     database page; runs before 2026-12-02 used 1024)
set -euo pipefail
bin=${1:?usage: $0 BINARY [REPS]}
reps=${2:-3}
quick=${BENCH_QUICK:-0}
mem=${BENCH_MEM:-256M}
out=${BENCH_OUT:-bin}
here=$(cd "$(dirname "$0")" && pwd)
py=$here/bench_decisions.py
bin=$(realpath "$bin")

# --- sizes (docs/bench-decisions.md explains them) -------------------------
if [[ $quick == 1 ]]; then
	reps=1
	procs_list=(1)       # processes per workload
	big=128              # MiB per large file (IOR-R, 8k-SR, 512k-SR, TAC)
	tac_mib=8            # MiB read backward by TAC, from the end of the file
	tree_files=1000      # files per LKR tree
	mm_mib=1024          # the mmap file of the memory phase mix
	mem_reads=1000       # random 4 KiB mmap reads per phase
	mem_phases=2         # rounds of (mmap reads, scan)
	rr_mib=64            # MiB of 4 KiB random direct reads (RR)
	per_seq_s=14         # estimated seconds per setting's sequence, this machine
else
	procs_list=(1 4)
	big=128
	tac_mib=8
	tree_files=2000
	mm_mib=2048
	mem_reads=2000
	mem_phases=3
	rr_mib=128
	per_seq_s=45
fi
# Smaller sizes for a smoke test of the script itself (not for results).
big=${BENCH_BIG_MIB:-$big} tac_mib=${BENCH_TAC_MIB:-$tac_mib} tree_files=${BENCH_TREE_FILES:-$tree_files}
mm_mib=${BENCH_MM_MIB:-$mm_mib} mem_reads=${BENCH_MEM_READS:-$mem_reads} rr_mib=${BENCH_RR_MIB:-$rr_mib}
nproc_max=${procs_list[-1]}
nbig=$((nproc_max > 2 ? nproc_max : 2)) # large files: one per process; the memory mix's scans read them all
scan_mib=$((nbig * big))
img_gib=$(((nbig * big + mm_mib + nproc_max * tree_files * 40 / 1024) / 1024 + 2))

# is_agent SETTING: the agent (agent) or a variant of it (agent.V).
is_agent() { [[ $1 == agent || $1 == agent.* ]]; }
die() {
	echo "bench-decisions: $*" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || die "run as root (loop device, mount, cgroup, drop_caches, eBPF)"
[[ -x $bin ]] || die "$bin: not an executable"
export BENCH_SCAN_KIB=${BENCH_SCAN_KIB:-8}
[[ $BENCH_SCAN_KIB =~ ^[1-9][0-9]{0,6}$ ]] || die "BENCH_SCAN_KIB: want a whole number of KiB from 1, got '$BENCH_SCAN_KIB'"
command -v python3 >/dev/null || die "python3 is required"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 is required (e2fsprogs)"
if ! command -v fio >/dev/null; then
	echo "bench-decisions: installing fio" >&2
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null; } ||
		die "could not install fio"
fi

tmp=$(mktemp -d "${BENCH_DIR:-/var/tmp}/shadowtune-bench-decisions.XXXXXX")
mnt=$tmp/mnt
loop="" name="" mounted="" cg="" agent_pid="" sched0="" ra0=""
bg_pids=()
# killtree PID...: SIGTERM to PID and all its descendants (collected first,
# by parent id), then wait for them to go; SIGKILL to any still there after 5 s.
descendants() {
	local p c
	for p in "$@"; do
		echo "$p"
		for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do descendants "$c"; done
	done
}
# running PID: PID exists and is not a zombie (an exited child not yet
# reaped still answers kill -0).
running() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $st && ${st%% *} != Z ]]
}
killtree() {
	local all p i
	all=$(descendants "$@")
	[[ -n $all ]] || return 0
	# shellcheck disable=SC2086
	kill -TERM $all 2>/dev/null || true
	for p in $all; do
		for ((i = 0; i < 100; i++)); do
			running "$p" || break
			sleep 0.05
		done
		# A fio stopped in its start-up can block SIGTERM and wait forever
		# (seen twice in 60 AIP runs: an orphan asleep on a futex, its file
		# system gone): after 5 s, SIGKILL.
		running "$p" && kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null || true # ours: reap
	done
	sweep_cg
	return 0
}
# sweep_cg: SIGKILL whatever is still in the workloads' cgroup and wait
# (up to 5 s) until it is empty. killtree finds descendants by parent id
# when it signals them, so a fio job process forked just after that, or
# reparented to init when its fio parent died first, escaped it: after a
# 30-repetition run a 512k-SR-4 fio was left asleep on a futex, its
# parent 1. Every workload process runs in the cgroup (incg) and nothing
# else does, so the cgroup finds them all.
sweep_cg() {
	[[ -n ${cg_procs:-} && -r $cg_procs ]] || return 0
	local p i procs
	for ((i = 0; i < 100; i++)); do
		procs=$(cat "$cg_procs" 2>/dev/null) # (a cgroup file's size is 0: test what it reads)
		[[ -n $procs ]] || return 0
		((i == 0)) && echo "bench-decisions: SIGKILL to what killtree left in the cgroup: ${procs//$'\n'/ }" >&2
		for p in $procs; do kill -KILL "$p" 2>/dev/null; done
		sleep 0.05
	done
	echo "bench-decisions: warning: processes still in $cg after SIGKILL: $(tr '\n' ' ' <"$cg_procs")" >&2
}
cleanup() {
	set +e
	((${#bg_pids[@]})) && killtree "${bg_pids[@]}"
	if [[ -n $agent_pid ]]; then
		kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	fi
	# Anything the agent recorded and did not restore (it was killed).
	local d
	for d in "$tmp"/state "$tmp"/state.*; do
		[[ -d $d ]] && "$bin" run --revert --state-dir "$d" >/dev/null 2>&1
	done
	if [[ -n $cg ]]; then
		sweep_cg
		# Every process of ours in it has exited; move stragglers out and remove it.
		for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do echo "$p" >"$cg_parent/cgroup.procs"; done
		rmdir "$cg" || echo "bench-decisions: could not remove the cgroup $cg" >&2
	fi
	[[ -n $mounted ]] && { umount "$mnt" || umount -l "$mnt"; }
	if [[ -n $loop ]]; then
		[[ -n $sched0 ]] && echo "$sched0" >"/sys/block/$name/queue/scheduler"
		[[ -n $ra0 ]] && echo "$ra0" >"/sys/block/$name/queue/read_ahead_kb"
		losetup -d "$loop"
	fi
	if [[ -n ${BENCH_KEEP:-} ]]; then
		mkdir -p "$BENCH_KEEP" && cp -r "$tmp"/fio "$tmp"/*.log "$tmp"/*.out "$tmp"/*.jsonl "$BENCH_KEEP"/ 2>/dev/null
		for d in "$tmp"/state "$tmp"/state.*; do
			[[ -d $d ]] && cp -r "$d" "$BENCH_KEEP"/
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the device: a sparse file, a loop device with direct I/O, ext4 ---------
truncate -s "${img_gib}G" "$tmp/disk.img"
loop=$(losetup --find --show --direct-io=on "$tmp/disk.img") || die "losetup failed"
name=$(basename "$loop")
[[ $(cat "/sys/block/$name/loop/backing_file") == "$tmp/disk.img" ]] ||
	die "$loop is not backed by $tmp/disk.img; refusing to touch it"
[[ $(cat "/sys/block/$name/loop/dio" 2>/dev/null) == 1 ]] ||
	echo "bench-decisions: warning: $loop has direct I/O off: the image's pages are cached twice" >&2
q=/sys/block/$name/queue
devstate() {
	local s r
	read -r s <"$q/scheduler"
	s=${s#*[} s=${s%%]*}
	read -r r <"$q/read_ahead_kb"
	echo "$s/$r"
}
sched0=$(devstate) ra0=${sched0#*/} sched0=${sched0%/*}
# The device's defaults: a new loop device has no scheduler (the loop driver
# asks for none by default) and the read_ahead_kb the kernel computes when
# the file is attached; a reused one keeps the scheduler its last user left,
# so the scheduler is not taken from what we find (that is put back at exit).
def_sched=${BENCH_DEFAULT_SCHEDULER:-none}
default_setting=$def_sched/$ra0
[[ $sched0 == "$def_sched" ]] ||
	echo "bench-decisions: note: $name came with scheduler $sched0 (left by its last user); defaults taken as $default_setting" >&2
set_dev() { # SCHED RA
	echo "$1" >"$q/scheduler" || die "cannot set $name's scheduler to $1"
	echo "$2" >"$q/read_ahead_kb" || die "cannot set $name's read_ahead_kb to $2"
	[[ $(devstate) == "$1/$2" ]] || die "$name: set $1/$2, reads back $(devstate)"
}
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop" # no ext4lazyinit writes later
mkdir -p "$mnt"
mount -o noatime "$loop" "$mnt" && mounted=1

# --- the memory cgroup: v2 (unified) or v1 (memory controller) -------------
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
	cgv=2
	cg_parent=/sys/fs/cgroup # v2: a leaf under the root (a cgroup with processes cannot have controlled children)
	grep -qw memory "$cg_parent/cgroup.subtree_control" ||
		die "the memory controller is not enabled in $cg_parent/cgroup.subtree_control (this script does not change it)"
	cg=$cg_parent/shadowtune-bench-decisions.$$
	mkdir "$cg"
	echo "$mem" >"$cg/memory.max"
	echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
elif [[ -d /sys/fs/cgroup/memory ]]; then
	cgv=1
	# v1: nested under our own memory cgroup, so whatever bounds us bounds it.
	own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
	cg_parent=/sys/fs/cgroup/memory${own%/}
	[[ -d $cg_parent ]] || cg_parent=/sys/fs/cgroup/memory
	cg=$cg_parent/shadowtune-bench-decisions.$$
	mkdir "$cg"
	echo "$mem" >"$cg/memory.limit_in_bytes"
else
	die "no memory cgroup (neither /sys/fs/cgroup/cgroup.controllers nor /sys/fs/cgroup/memory)"
fi
cg_procs=$cg/cgroup.procs
# incg CMD...: CMD in the memory cgroup.
incg() { bash -c 'echo $$ >"$0" && exec "$@"' "$cg_procs" "$@"; }

# --- the data (deterministic; written once, read by every setting) ---------
echo "== $loop over $tmp/disk.img (${img_gib} GiB sparse, dio on), ext4 on $mnt; defaults $default_setting; cgroup v$cgv $cg, memory $mem"
t_setup=$EPOCHREALTIME
for ((p = 0; p < nbig; p++)); do
	fio --name=fill --filename="$mnt/big$p" --size="${big}M" --rw=write --bs=1M --direct=1 \
		--ioengine=psync --randseed=$((7 + p)) --output=/dev/null || die "could not write $mnt/big$p"
done
fio --name=fill --filename="$mnt/mm.dat" --size="${mm_mib}M" --rw=write --bs=1M --direct=1 \
	--ioengine=psync --randseed=11 --output=/dev/null || die "could not write $mnt/mm.dat"
tree_bytes=0
for ((p = 0; p < nproc_max; p++)); do
	mkdir "$mnt/tree$p"
	tree_bytes=$(python3 "$py" gen-tree "$mnt/tree$p" "$tree_files" $((100 + p)))
done
sync
echo "== data: $nbig × $big MiB, mm.dat $mm_mib MiB, $nproc_max tree(s) × $tree_files files ($((tree_bytes >> 20)) MiB each); written in $(awk -v a="$t_setup" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}') s"

# --- the workloads (each: ARGS = processes, and a prefix for fio's output) --
mkdir -p "$tmp/fio"
fio_common=(--ioengine=psync --direct=0 --fadvise_hint=0 --invalidate=0 --output-format=json)
run_all() { # CMD-PER-PROCESS N ...: start N, wait for all, fail if one fails
	local fn=$1 n=$2 pre=$3 p pids=() rc=0
	for ((p = 0; p < n; p++)); do
		"$fn" "$p" "$pre" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}
fout() { [[ -n $2 ]] && echo "--output=$2.$1.json" || echo "--output=/dev/null"; }
one_tac() { incg python3 "$py" tac "$mnt/big$1" $((tac_mib << 20)) >/dev/null; }
one_sr512() { # 4 KiB read, 512 KiB skipped; four series at offsets 0, 4, 8, 12 KiB
	local s args=()
	for s in 0 1 2 3; do
		args+=(--name="s$s" --offset=$((s * 4))k --size=$((big * 1024 - 16))k --rw=read:512k --bs=4k)
		((s)) && args+=(--stonewall)
	done
	incg fio "$(fout "$1" "$2")" "${fio_common[@]}" --filename="$mnt/big$1" "${args[@]}"
}
one_sr8() { # 4 KiB read, 8 KiB skipped
	incg fio "$(fout "$1" "$2")" "${fio_common[@]}" --name=sr8 --filename="$mnt/big$1" --rw=read:8k --bs=4k
}
one_lkr() { incg find "$mnt/tree$1" -type f -exec cat {} + >/dev/null; }
one_ior() { # IOR POSIX, file per process: sequential 64 KiB transfers
	incg fio "$(fout "$1" "$2")" "${fio_common[@]}" --name=ior --filename="$mnt/big$1" --rw=read --bs=64k
}
w_tac() { run_all one_tac "$@"; }
w_sr512() { run_all one_sr512 "$@"; }
w_sr8() { run_all one_sr8 "$@"; }
w_lkr() { run_all one_lkr "$@"; }
w_ior() { run_all one_ior "$@"; }
w_rr() {
	incg fio "$(fout 0 "$2")" --output-format=json --name=rr --filename="$mnt/mm.dat" --rw=randread --bs=4k \
		--direct=1 --ioengine=libaio --iodepth=32 --io_size="${rr_mib}M" --randseed=42
}
w_mem() {
	local p scans=()
	for ((p = 0; p < nbig; p++)); do scans+=("$mnt/big$p"); done
	incg python3 "$py" memmix "$mnt/mm.dat" "$mem_reads" "$mem_phases" 5 "${scans[@]}" >"$2.mem.json"
}
# MEMMAP: the same mapping looked up at random, then scanned through the
# mapping itself (a database's or search index's lookups, then a scan or
# merge), scan_mib of it per round.
w_memmap() {
	incg python3 "$py" mapmix "$mnt/mm.dat" "$mem_reads" "$mem_phases" 5 "$scan_mib" >"$2.mem.json"
}
# AIP (KDSim §5): the five at once, each with N processes of its own; one
# that ends while another is still in its first run starts again; the time
# is until every one has ended its first run (the reruns are then stopped).
aip_members=(tac sr512 sr8 lkr ior)
aip_member() { # MEMBER N DIR
	local first=1 c
	while :; do
		"w_$1" "$2" "" || return 1
		if ((first)); then
			: >"$3/done.$1"
			first=0
		fi
		c=("$3"/done.*)
		((${#c[@]} >= ${#aip_members[@]})) && return 0
	done
}
w_aip() {
	local n=$1 d m c
	d=$(mktemp -d "$tmp/aip.XXXXXX")
	bg_pids=()
	for m in "${aip_members[@]}"; do
		aip_member "$m" "$n" "$d" &
		bg_pids+=($!)
	done
	while :; do
		wait -n "${bg_pids[@]}" || { killtree "${bg_pids[@]}"; bg_pids=(); die "AIP-$n: a member failed"; }
		c=("$d"/done.*)
		[[ -e ${c[0]} ]] && ((${#c[@]} >= ${#aip_members[@]})) && break
	done
	aip_end=$EPOCHREALTIME # before the reruns are stopped
	read -ra aip_d1 <"$q/../stat"
	killtree "${bg_pids[@]}"
	bg_pids=()
	rm -rf "$d"
}

# The sequence, in KDSim's AIR order (TAC; 512k-SR; 8k-SR; LKR; IOR-R), at
# 1 then 4 processes; then AIP at 1 and 4; the memory mix; RR.
seq_names=() seq_fns=() seq_n=()
declare -A derived=()
for n in "${procs_list[@]}"; do
	air=""
	for m in tac sr512 sr8 lkr ior; do
		case $m in tac) w=TAC ;; sr512) w=512k-SR ;; sr8) w=8k-SR ;; lkr) w=LKR ;; ior) w=IOR-R ;; esac
		seq_names+=("$w-$n") seq_fns+=("w_$m") seq_n+=("$n")
		air+="${air:+,}\"$w-$n\""
	done
	derived[AIR-$n]=$air
done
for n in "${procs_list[@]}"; do seq_names+=("AIP-$n") seq_fns+=(w_aip) seq_n+=("$n"); done
seq_names+=(MEM MEMMAP RR-4k-QD32) seq_fns+=(w_mem w_memmap w_rr) seq_n+=(1 1 1)
if [[ -n ${BENCH_WORKLOADS:-} ]]; then # a subset, in sequence order; AIR-n kept only whole
	keep_names=() keep_fns=() keep_n=()
	for ((i = 0; i < ${#seq_names[@]}; i++)); do
		[[ " $BENCH_WORKLOADS " == *" ${seq_names[i]} "* ]] || continue
		keep_names+=("${seq_names[i]}") keep_fns+=("${seq_fns[i]}") keep_n+=("${seq_n[i]}")
	done
	for w in $BENCH_WORKLOADS; do
		[[ " ${keep_names[*]} " == *" $w "* ]] || die "BENCH_WORKLOADS: no workload $w (have: ${seq_names[*]})"
	done
	seq_names=("${keep_names[@]}") seq_fns=("${keep_fns[@]}") seq_n=("${keep_n[@]}")
	for k in "${!derived[@]}"; do
		for w in ${derived[$k]//[\",]/ }; do
			[[ " ${seq_names[*]} " == *" $w "* ]] || { unset "derived[$k]"; break; }
		done
	done
fi

# --- the settings ------------------------------------------------------------
read -r avail <"$q/scheduler"
avail=${avail//[\[\]]/}
statics=()
for s in "$def_sched" $(printf '%s\n' none mq-deadline bfq kyber | grep -vx "$def_sched"); do
	[[ " $avail " == *" $s "* ]] || modprobe -q "${s/-/_}" 2>/dev/null || true
	read -r a <"$q/scheduler"
	[[ " ${a//[\[\]]/} " == *" $s "* ]] || { echo "bench-decisions: scheduler $s not available: skipped" >&2; continue; }
	declare -A seen=()
	for r in "$ra0" 128 16; do
		[[ -n ${seen[$r]:-} ]] && continue
		seen[$r]=1
		statics+=("$s/$r")
	done
	unset seen
done
settings=("${statics[@]}" agent)
if [[ -n ${BENCH_SETTINGS:-} ]]; then
	read -ra settings <<<"$BENCH_SETTINGS"
	for s in "${settings[@]}"; do
		if [[ $s == agent.* ]]; then
			[[ -x $bin${s#agent} ]] || die "BENCH_SETTINGS: $s runs $bin${s#agent}, which is not an executable"
		elif ! is_agent "$s" && [[ " ${statics[*]} " != *" $s "* ]]; then
			die "BENCH_SETTINGS: no setting $s (have: ${statics[*]} agent agent.VARIANT)"
		fi
	done
fi
nset=${#settings[@]}

cat >"$tmp/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: bench-decisions
spec:
  mode: Apply
  devices:
    include: ["$name"]
  rollout:
    minDwell: 0s
YAML

# start_agent REP SETTING: SETTING agent runs BINARY, agent.V runs BINARY.V,
# each with a state directory of its own kept across the repetitions.
start_agent() {
	local b=$bin sfx=${2#agent} log=$tmp/$2.$1.log
	b+=$sfx
	set_dev "$def_sched" "$ra0"
	"$b" run --config "$tmp/policy.yaml" --state-dir "$tmp/state$sfx" --metrics-bind-address 0 \
		${BENCH_KEEP:+--explain-dir "$BENCH_KEEP/windows$sfx.$1"} \
		>"$tmp/$2.$1.out" 2> >(while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done >"$log") &
	agent_pid=$!
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q '"tracing"' "$log" 2>/dev/null && return 0
		kill -0 "$agent_pid" 2>/dev/null || { cat "$log" >&2; agent_pid=""; die "the agent exited at start"; }
		sleep 0.1
	done
	die "the agent did not start tracing within 30 s"
}
stop_agent() { # REP SETTING
	kill -TERM "$agent_pid"
	wait "$agent_pid" || echo "bench-decisions: warning: the agent exited with status $? (see $tmp/$2.$1.log)" >&2
	agent_pid=""
	sleep 0.2 # the time-stamping reader drains
	[[ $(devstate) == "$default_setting" ]] ||
		echo "bench-decisions: warning: after the agent $name is $(devstate), not $default_setting" >&2
}

drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; }
# agent_cpu_ns: the CPU time of the agent's threads so far (the first
# field of each thread's schedstat), ns; 0 without an agent. A variant
# that wraps the binary in a shell counts the shell's threads.
agent_cpu_ns() {
	local f a s=0
	[[ -n $agent_pid ]] || { echo 0; return 0; }
	for f in /proc/"$agent_pid"/task/*/schedstat; do
		read -r a _ <"$f" 2>/dev/null && s=$((s + a))
	done
	echo "$s"
}
runs=$tmp/runs.jsonl
: >"$runs"
# run_sequence REP SETTING
run_sequence() {
	local rep=$1 set=$2 i w s0 s1 t0 t1 c0 c1 pre
	if is_agent "$set"; then
		start_agent "$rep" "$set"
		echo "{\"agent_start\": $EPOCHREALTIME, \"rep\": $rep, \"setting\": \"$set\", \"log\": \"$set.$rep.log\"}" >>"$runs"
	else
		set_dev "${set%/*}" "${set#*/}"
	fi
	for ((i = 0; i < ${#seq_names[@]}; i++)); do
		w=${seq_names[i]}
		pre=$tmp/fio/$rep.${set//\//_}.$w
		drop_caches
		s0=$(devstate)
		read -ra d0 <"$q/../stat" # reads completed, merged, sectors, ms (the device's counters)
		c0=$(agent_cpu_ns)
		t0=$EPOCHREALTIME
		aip_end=""
		"${seq_fns[i]}" "${seq_n[i]}" "$pre" || die "$w failed under $set (rep $rep)"
		t1=${aip_end:-$EPOCHREALTIME}
		c1=$(agent_cpu_ns)
		read -ra d1 <"$q/../stat"
		[[ -n $aip_end ]] && d1=("${aip_d1[@]}")
		s1=$(devstate)
		printf '{"rep": %d, "setting": "%s", "workload": "%s", "t0": %s, "t1": %s, "state0": "%s", "state1": "%s", "dev_reads": %d, "dev_read_mib": %.1f, "agent_cpu_ms": %.1f, "out": "%s"}\n' \
			"$rep" "$set" "$w" "$t0" "$t1" "$s0" "$s1" $((d1[0] - d0[0])) "$(((d1[2] - d0[2]) * 10 / 2048))e-1" \
			"$(((c1 - c0) / 100000))e-1" "${pre#"$tmp"/}" >>"$runs"
	done
	is_agent "$set" && stop_agent "$rep" "$set"
	return 0
}

est=$((nset * reps * per_seq_s))
echo "== ${#seq_names[@]} workloads per sequence: ${seq_names[*]}"
echo "== $nset settings: ${settings[*]}"
echo "== $reps repetition(s), interleaved, in Williams-design order; estimate $((est / 60)) min $((est % 60)) s (about $per_seq_s s per sequence on a 2-core VM)"
t_start=$EPOCHREALTIME
# shellcheck source=hack/lib/williams.sh
. "$here/lib/williams.sh" # williams_order: the settings' order per repetition
done_seqs=0
for ((rep = 1; rep <= reps; rep++)); do
	read -ra order <<<"$(williams_order "$nset" $((rep - 1)))"
	for ((k = 0; k < nset; k++)); do
		set=${settings[order[k]]}
		ts=$EPOCHREALTIME
		run_sequence "$rep" "$set"
		done_seqs=$((done_seqs + 1))
		el=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')
		left=$(((el * (nset * reps - done_seqs)) / done_seqs))
		printf '   rep %d %-16s %5.1f s   (%d/%d, about %d min left)\n' "$rep" "$set" \
			"$(awk -v a="$ts" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')" "$done_seqs" $((nset * reps)) $((left / 60))
	done
done

# --- the report ----------------------------------------------------------------
mkdir -p "$out"
derived_json=""
for k in "${!derived[@]}"; do derived_json+="${derived_json:+, }\"$k\": [${derived[$k]}]"; done
settings_json=$(printf '"%s",' "${settings[@]}")
workloads_json=$(printf '"%s",' "${seq_names[@]}")
python3 - "$tmp" "$out/bench-decisions.raw.json" <<PY
import json, os, re, sys
tmp, dst = sys.argv[1], sys.argv[2]
runs, starts = [], {}
for line in open(os.path.join(tmp, "runs.jsonl")):
    r = json.loads(line)
    if "agent_start" in r:
        if r.get("setting", "agent") == "agent":  # a variant's changes are in its log
            starts[r["rep"]] = r
        continue
    r["wall_s"] = r["t1"] - r["t0"]
    base = os.path.join(tmp, r.pop("out"))
    d = os.path.dirname(base)
    fios = [f for f in os.listdir(d) if f.startswith(os.path.basename(base) + ".") and f.endswith(".json")]
    nbytes, ios = 0, 0
    for f in fios:
        p = os.path.join(d, f)
        if f.endswith(".mem.json"):
            m = json.load(open(p))
            for k in ("mmap_s", "scan_s"):
                runs.append(dict(rep=r["rep"], setting=r["setting"], workload=r["workload"] + "-" + k[:-2], wall_s=sum(m[k]),
                                 t0=r["t0"], t1=r["t1"], state0=r["state0"], state1=r["state1"]))
            continue
        txt = open(p).read()
        j = json.loads(txt[txt.index("{"):])  # fio may print notes before the JSON
        for job in j["jobs"]:
            nbytes += job["read"]["io_bytes"]
            ios += job["read"]["total_ios"]
    if nbytes:
        r["mib_s"] = nbytes / r["wall_s"] / 2**20
        r["iops"] = ios / r["wall_s"]
    runs.append(r)
events = []
for rep, s in starts.items():
    seq = sorted((r for r in runs if r["setting"] == "agent" and r["rep"] == rep), key=lambda r: r["t0"])
    for line in open(os.path.join(tmp, s["log"])):
        ts, _, msg = line.partition(" ")
        m = re.search(r'"msg"="([^"]*)"', msg)
        if not m or m.group(1) in ("tracing",):
            continue
        ch = re.search(r'"change"="([^"]*)"', msg)
        t = float(ts)
        during = next((r["workload"] for r in seq if r["t0"] <= t <= r["t1"]), None)
        events.append(dict(rep=rep, t_s=t - s["agent_start"], workload=during,
                           change=ch.group(1) if ch else m.group(1)))
json.dump(dict(settings=[$settings_json], default_setting="$default_setting",
               workloads=[$workloads_json], derived={$derived_json}, extra=["MEM-mmap", "MEM-scan", "MEMMAP-mmap", "MEMMAP-scan"],
               agent_events=events, runs=runs,
               sizes=dict(quick=$quick, big_mib=$big, tac_mib=$tac_mib, tree_files=$tree_files, mm_mib=$mm_mib,
                          mem_reads=$mem_reads, mem_phases=$mem_phases, rr_mib=$rr_mib, scan_mib=$scan_mib,
                          memory="$mem", cgroup=$cgv, processes=[$(IFS=,; echo "${procs_list[*]}")], reps=$reps)),
          open(dst, "w"), indent=1)
PY
python3 "$py" report "$out/bench-decisions.raw.json" "$out/bench-decisions.json"
el=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')
echo
echo "sequences took $((el / 60)) min $((el % 60)) s; raw runs and summary in $out/bench-decisions.json"
