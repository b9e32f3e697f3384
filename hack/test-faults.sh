#!/usr/bin/env bash
# Crash-and-fault test of the node agent's actuation (issue 16), as root:
# FAULTS_KILLS (default 100) SIGKILLs of `shadowtune run` at random moments
# on loop devices of its own, under fio load, with a policy that changes
# the device quickly (read-ahead pinned to 1024 KiB, minDwell 0s, 1 s
# windows, no regression revert). Each cycle is one scenario:
#
#   apply    an Apply run, killed 0.2-3 s in
#   revert   an Apply run killed as above, then `run --revert` killed 0-40 ms in
#   detach   an Apply run; the loop device is detached (losetup -d) before the kill
#   full     the state dir (a 1 MiB tmpfs) is filled up at a random moment
#   ro       the state dir is read-only: remounted ro before the run (half
#            the cycles) or right after the kill (a remount while the agent
#            runs is refused, EBUSY: it holds STATE/.lock open for writing)
#   corrupt  garbage in STATE/loopN.json before the run (the agent must not
#            touch a device whose record it cannot read)
#   writer   another writer: echo SCHED > queue/scheduler at a random moment,
#            SCHED the first of bfq, kyber, mq-deadline and none that the
#            kernel offers for the device, other than its current one (this
#            project's 6.18 test machines have no bfq)
#
# After each kill: `run --revert` (with the fault still in place), the fault
# removed, `run --revert` again and `state list`; then the device's queue
# (scheduler, read_ahead_kb, iosched/*) is compared with its snapshot taken
# when the script attached it, before the agent first touched it. Where
# another writer set the scheduler, its SCHED is expected instead (iosched/* then
# belongs to the writer's scheduler and is not compared). A device that is
# gone is not compared: it is counted apart (with how many of their queues,
# which the kernel keeps for the next loop device, were left changed). A
# mismatch while the device still has a record, or a revert that overwrote
# the other writer's value, is a failed revert (F); any other mismatch is
# an original lost (L). The last line is
#
#   kills N, originals lost L, failed reverts F
#
# and the exit status is non-zero when L or F > 0. FAULTS_SEED fixes the
# random choices; FAULTS_LOG=DIR keeps every run's output.
#
# usage: hack/test-faults.sh BINARY
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY}")
kills_wanted=${FAULTS_KILLS:-100}
RANDOM=${FAULTS_SEED:-$$}
[[ $(id -u) -eq 0 ]] || { echo "test-faults: run as root (loop devices, eBPF, mounts)" >&2; exit 1; }
command -v fio >/dev/null || { echo "test-faults: fio is required" >&2; exit 1; }

exec 9>"${TMPDIR:-/tmp}/shadowtune-heavy-io-tests.lock"
flock 9
work=$(mktemp -d /tmp/shadowtune-faults.XXXXXX)
state=$work/state
log=${FAULTS_LOG:-$work/log}
mkdir -p "$state" "$log"
mount -t tmpfs -o size=1m,mode=0700 shadowtune-faults "$state"
loop="" name="" file="" fio_pid="" agent_pid="" nfile=0
declare -a gone_loops=()

cleanup() {
	set +e
	[[ -n $agent_pid ]] && kill -9 "$agent_pid" 2>/dev/null
	[[ -n $fio_pid ]] && kill "$fio_pid" 2>/dev/null
	wait 2>/dev/null
	if mountpoint -q "$state"; then
		mount -o remount,rw "$state"
		rm -f "$state/filler"
		[[ -n $loop ]] && "$bin" run --revert --state-dir "$state" >/dev/null 2>&1
		umount "$state"
	fi
	[[ -n $loop ]] && losetup -d "$loop"
	[[ -z ${FAULTS_LOG:-} ]] && rm -rf "$work"
	[[ -n ${FAULTS_LOG:-} ]] && rm -f "$work"/disk*.img
}
trap cleanup EXIT

# snapshot prints every compared queue file of $name, one "file:value" a line.
snapshot() {
	(cd "/sys/block/$name/queue" && for f in scheduler read_ahead_kb iosched/*; do
		[[ -f $f && -r $f ]] && printf '%s:%s\n' "$f" "$(cat "$f" 2>/dev/null)"
	done) || true
}

attach() {
	nfile=$((nfile + 1))
	file=$work/disk$nfile.img
	truncate -s 256M "$file"
	loop=$(losetup --find --show --direct-io=on "$file")
	name=$(basename "$loop")
	if [[ $(cat "/sys/block/$name/loop/backing_file") != "$file" ]]; then
		echo "test-faults: $loop is not backed by our file; refusing to touch it" >&2
		loop=""
		exit 1
	fi
	# A detached loop device keeps its queue for the next attach: put back
	# what the queue had when the script first attached it.
	if [[ -f $work/orig-$name ]]; then
		restore_queue "$work/orig-$name"
	else
		snapshot >"$work/orig-$name"
	fi
	cp "$work/orig-$name" "$work/before"
	write_policy
}

# restore_queue puts a snapshot back on our device (the script's own device).
restore_queue() {
	local sch
	sch=$(sed -n 's/^scheduler:.*\[\(.*\)\].*/\1/p' "$1")
	echo "$sch" >"/sys/block/$name/queue/scheduler"
	grep -v '^scheduler:' "$1" | while IFS=: read -r f v; do
		echo "$v" >"/sys/block/$name/queue/$f" 2>/dev/null || true
	done
}

write_policy() {
	cat >"$work/policy.yaml" <<YAML
apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: faults
spec:
  mode: Apply
  devices:
    include: [$name]
  schedulers:
    candidates: [none, mq-deadline, kyber]
  readAhead:
    enabled: true
    minKiB: 1024
    maxKiB: 1024
  evaluation:
    window: 1s
    marginPercent: 0
    thrashGuard: {changes: 100, quietChecks: 1}
    cpuBudgetPercent: 100
  rollout:
    minDwell: 0s
    toleratedRegressionPercent: 100
YAML
}

start_fio() {
	fio --name=faults --filename="$loop" --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=8 \
		--time_based --runtime=60 --output=/dev/null &
	fio_pid=$!
}

stop_fio() {
	[[ -n $fio_pid ]] || return 0
	kill "$fio_pid" 2>/dev/null || true
	wait "$fio_pid" 2>/dev/null || true
	fio_pid=""
}

# msleep N sleeps N milliseconds.
msleep() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

kills=0 lost=0 failed=0 gone=0 gone_changed=0 changed_at_kill=0 cycle=0
declare -A by_scenario=()
scenarios=(apply apply revert detach full ro corrupt writer)

# kill_agent SIGKILLs the running agent; counts it when it was still running.
kill_agent() {
	if kill -0 "$agent_pid" 2>/dev/null && kill -9 "$agent_pid" 2>/dev/null; then
		kills=$((kills + 1))
		by_scenario[$sc]=$((${by_scenario[$sc]:-0} + 1))
		[[ -f $state/$name.json ]] && changed_at_kill=$((changed_at_kill + 1))
	fi
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=""
}

other_scheduler() { # other_scheduler NAME: an offered scheduler other than the current one
	local s list cur
	read -r list <"/sys/block/$1/queue/scheduler"
	cur=${list#*[}
	cur=${cur%%]*}
	for s in bfq kyber mq-deadline none; do
		[[ $s != "$cur" && " ${list//[\[\]]/} " == *" $s "* ]] && echo "$s" && return 0
	done
	echo "test-faults: $1 offers only $cur: no other scheduler to write" >&2
	return 1
}

revert() { # revert TAG: one `run --revert`, its output kept
	local rc=0
	"$bin" run --revert --state-dir "$state" >"$log/$cycle-revert-$1.out" 2>&1 || rc=$?
	echo "$rc"
}

attach
start=$(date +%s)
while ((kills < kills_wanted)); do
	cycle=$((cycle + 1))
	sc=${scenarios[RANDOM % ${#scenarios[@]}]}
	[[ -z $loop ]] && attach
	kill_ms=$((200 + RANDOM % 2801))
	fault_ms=$((100 + RANDOM % (kill_ms - 99)))
	[[ $sc == corrupt ]] && echo garbage >"$state/$name.json"
	ro_before=$((RANDOM % 2))
	[[ $sc == ro && $ro_before == 1 ]] && mount -o remount,ro "$state"
	start_fio
	"$bin" run --config "$work/policy.yaml" --state-dir "$state" --metrics-bind-address 0 \
		>"$log/$cycle-$sc-run.out" 2>&1 &
	agent_pid=$!
	wrote=""
	case $sc in
	detach | full | writer)
		msleep "$fault_ms"
		case $sc in
		detach)
			stop_fio
			losetup -d "$loop"
			;;
		full) dd if=/dev/zero of="$state/filler" bs=4k status=none 2>/dev/null || true ;;
		writer) other=$(other_scheduler "$name") && echo "$other" >"/sys/block/$name/queue/scheduler" && wrote=$other ;;
		esac
		msleep $((kill_ms - fault_ms))
		;;
	*) msleep "$kill_ms" ;;
	esac
	kill_agent
	if [[ $sc == revert ]]; then
		"$bin" run --revert --state-dir "$state" >"$log/$cycle-revert-killed.out" 2>&1 &
		agent_pid=$!
		msleep $((RANDOM % 41))
		kill_agent
	fi
	stop_fio
	[[ $sc == ro && $ro_before == 0 ]] && mount -o remount,ro "$state"
	r1=$(revert faulted)
	case $sc in
	full) rm -f "$state/filler" ;;
	ro) mount -o remount,rw "$state" ;;
	esac
	r2=$(revert final)
	"$bin" state list --state-dir "$state" >"$log/$cycle-state-list.out" 2>&1 || true
	if [[ $sc == detach ]]; then
		gone=$((gone + 1))
		# Reported apart: the record of a gone device is forgotten, and the
		# script's own loop queue is put back for the next device.
		"$bin" state forget "$name" --state-dir "$state" >>"$log/$cycle-state-list.out" 2>&1 || true
		snapshot >"$work/after"
		diff -q "$work/orig-$name" "$work/after" >/dev/null || gone_changed=$((gone_changed + 1))
		restore_queue "$work/orig-$name"
		loop=""
		continue
	fi
	if [[ $sc == corrupt && -f $state/$name.json ]] && ! grep -q '"version"' "$state/$name.json"; then
		"$bin" state forget "$name" --state-dir "$state" >>"$log/$cycle-state-list.out" 2>&1 || true
	fi
	snapshot >"$work/after"
	cp "$work/before" "$work/want"
	if [[ -n $wrote ]]; then # the other writer's scheduler stays; its iosched/* is the writer's
		sed -i -e '/^iosched\//d' -e 's/^scheduler:.*/scheduler:WRITER/' "$work/want"
		sed -i -e '/^iosched\//d' "$work/after"
		grep -q "^scheduler:.*\\[$wrote\\]" "$work/after" && sed -i 's/^scheduler:.*/scheduler:WRITER/' "$work/after"
	fi
	if ! diff -q "$work/want" "$work/after" >/dev/null; then
		if [[ -f $state/$name.json || -n $wrote ]]; then
			failed=$((failed + 1)) what=FAILED-REVERT
		else
			lost=$((lost + 1)) what=LOST
		fi
		echo "cycle $cycle $sc ($name, kill at ${kill_ms} ms, fault at ${fault_ms} ms, revert exit $r1/$r2): $what" >&2
		diff "$work/want" "$work/after" | sed 's/^/    /' >&2 || true
	elif [[ $r2 != 0 && $sc != corrupt ]]; then
		failed=$((failed + 1))
		echo "cycle $cycle $sc: run --revert exit $r2 with the fault removed: $(tail -1 "$log/$cycle-revert-final.out")" >&2
	fi
	if [[ -n $wrote ]]; then # the script undoes the other writer's change on its own device
		restore_queue "$work/orig-$name"
	fi
done
scs=""
for s in "${!by_scenario[@]}"; do scs+=" $s ${by_scenario[$s]}"; done
echo "cycles $cycle in $(($(date +%s) - start)) s; kills by scenario:$scs; kills with a record on disk $changed_at_kill; devices gone (detached, not compared) $gone, of which left with a changed queue $gone_changed"
echo "kills $kills, originals lost $lost, failed reverts $failed"
((lost == 0 && failed == 0))
