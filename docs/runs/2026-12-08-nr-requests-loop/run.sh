#!/usr/bin/env bash
# nr_requests on a loop device: measured wall time of a fixed fio job
# under mq-deadline at nr_requests 4, 16 and the kernel's default, three
# rotated repetitions; then one traced run at the default and the
# simulator's prediction for each (shadowtune simulate, model learned on
# the trace itself). Plan declared in plan.txt before the first run.
set -euo pipefail
ST=/work/main/bin/shadowtune
OUT=/work/exp-nr/out; mkdir -p $OUT
IMG=/var/tmp/nrexp.img
JOB=(--name=rr --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=32 --number_ios=40000 --io_size=160m --randrepeat=0 --randseed=7 --norandommap --output-format=json)
truncate -s 1G $IMG
dd if=/dev/urandom of=$IMG bs=1M count=1024 conv=notrunc status=none
DEV=$(losetup --direct-io=on -f --show $IMG)
N=$(basename $DEV)
Q=/sys/block/$N/queue
old_sched=$(sed 's/.*\[\(.*\)\].*/\1/' $Q/scheduler); old_ra=$(cat $Q/read_ahead_kb)
cleanup() { echo none >$Q/scheduler || true; losetup -d $DEV || true; rm -f $IMG; }
trap cleanup EXIT
echo mq-deadline >$Q/scheduler
DEF=$(cat $Q/nr_requests)
echo "device $DEV (old scheduler $old_sched, read_ahead_kb $old_ra); mq-deadline default nr_requests $DEF" | tee $OUT/host.txt
settings=(4 16 $DEF)
run() { # nr rep
	echo mq-deadline >$Q/scheduler; echo $1 >$Q/nr_requests
	sync; echo 3 >/proc/sys/vm/drop_caches
	local t0=$(date +%s.%N)
	fio --filename=$DEV "${JOB[@]}" >$OUT/fio-$1-$2.json
	local t1=$(date +%s.%N)
	echo "run nr=$1 rep=$2 wall=$(echo "$t1 - $t0" | bc) nr_now=$(cat $Q/nr_requests)" | tee -a $OUT/runs.txt
}
: >$OUT/runs.txt
for rep in 1 2 3; do
	case $rep in 1) o=(0 1 2);; 2) o=(1 2 0);; 3) o=(2 0 1);; esac
	for i in "${o[@]}"; do run ${settings[$i]} $rep; done
done
# traced run at the default
echo mq-deadline >$Q/scheduler; echo $DEF >$Q/nr_requests
$ST trace record --device $DEV --duration 120s --out-file $OUT/default.st 2>$OUT/rec.log &
pid=$!
for i in $(seq 1 100); do grep -q -i "tracing\|recording" $OUT/rec.log 2>/dev/null && break; sleep 0.1; done
sleep 1
fio --filename=$DEV "${JOB[@]}" >$OUT/fio-traced.json
kill -INT $pid; wait $pid || true
$ST simulate --trace $OUT/default.st --format native --candidates mq-deadline --current mq-deadline \
	--candidate "mq-deadline:nr_requests=4" --candidate "mq-deadline:nr_requests=16" --device-class ssd -o json >$OUT/sim.json
$ST simulate --trace $OUT/default.st --format native --candidates mq-deadline --current mq-deadline \
	--candidate "mq-deadline:nr_requests=4" --candidate "mq-deadline:nr_requests=16" --device-class ssd >$OUT/sim.txt
cat $OUT/sim.txt
