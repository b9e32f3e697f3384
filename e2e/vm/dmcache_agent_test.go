//go:build vm

package vm

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/vmlab"
)

// agentPolicy governs /dev/vdb and /dev/vdc, the caches' origins: the scheduler stays
// none, read-ahead is not governed, the cache is; no dwell, so that the
// test's phases are short. The windows are 10 s: the agent judges the
// cache as one window of reads fills it (engine.Options.CacheFill), and
// behind 500 IOPS a 5 s window (2,500 reads) is less than smq's own fill
// takes (10-15 s there): it under-predicted smq's read hits by 3-4
// points (77 % against 81 %), 10 s windows by 0.2.
const agentPolicy = `apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: vm-cache
spec:
  mode: Apply
  devices:
    include: ["vdb", "vdc"]
  schedulers:
    candidates: [none]
    default: none
  readAhead:
    enabled: false
  cache:
    enabled: true
  evaluation:
    window: 10s
  rollout:
    minDwell: 0s
`

// agentCacheScript builds two smq caches on a brd RAM disk: "big"
// (64 MiB) in front of the throttled /dev/vdb and "small" (8 MiB) in front
// of the throttled /dev/vdc (512 MiB each), both in passthrough, and runs
// `shadowtune run` in Apply mode on vdb and vdc while fio reads through a
// cache in 5 s slices, in three phases: zipf(1.2) 4 KiB random reads on
// big until the agent has turned it on and @AFTER@ slices more (at most
// @ZIPF@); uniform 4 KiB random reads over the whole origin on small
// (@UNI@ slices: a working set 64 times the cache); uniform on big (@UNI@
// slices, the cache on at the start). Each slice prints "slice PHASE N
// MODE IOPS". Then the agent is stopped (SIGTERM: it restores the
// original modes), uniform slices measure passthrough on each cache for
// reference beside an agent in Observe mode, a second agent is SIGKILLed
// in the middle of a switch and run --revert puts the cache back, and the
// origins' md5 are taken after the caches are removed.
const agentCacheScript = `set -e
md5() { md5sum <"$1" | cut -d' ' -f1; }
echo "md5-before $(md5 /dev/vdb) $(md5 /dev/vdc)"
modprobe brd rd_nr=1 rd_size=90112
dmsetup create bmeta --table "0 8192 linear /dev/ram0 0"
dmsetup create bdata --table "0 131072 linear /dev/ram0 8192"
dmsetup create smeta --table "0 8192 linear /dev/ram0 139264"
dmsetup create sdata --table "0 16384 linear /dev/ram0 147456"
dmsetup create big --table "0 $(blockdev --getsz /dev/vdb) cache /dev/mapper/bmeta /dev/mapper/bdata /dev/vdb 128 1 passthrough smq 0"
dmsetup create small --table "0 $(blockdev --getsz /dev/vdc) cache /dev/mapper/smeta /dev/mapper/sdata /dev/vdc 128 1 passthrough smq 0"
cat >/tmp/policy.yaml <<'EOF'
@POLICY@EOF
shadowtune run --config /tmp/policy.yaml --state-dir /tmp/state --metrics-bind-address 0 -o json >/tmp/run.json 2>>/tmp/run.log &
pid=$!
mode() { dmsetup status $1 | cut -d' ' -f16; }
# A phase is one fio run whose status every 5 s ends a slice: a stationary
# stream of reads. A new fio per slice would read the same offsets again
# (fio's zipf, and its uniform generator here, do not follow --randseed),
# so a 5 s window, a slice and a cache filled by a faster slice would all
# hold the same few thousand reads.
phase() { # name dist cache want max: stops @AFTER@ slices after the mode is want ("-": never)
	echo "== phase $1" >>/tmp/run.log # O_APPEND, like the agent's log: in order
	out=/tmp/fio-$1.out
	: >$out # before fio starts: the loop below must not read another phase's lines
	fio --name=s --filename=/dev/mapper/$3 --direct=1 --ioengine=libaio --iodepth=16 --rw=randread --bs=4k \
		--random_distribution=$2 --time_based --runtime=$(($5*5+10)) --status-interval=5 \
		--output-format=terse --terse-version=3 >>$out &
	fpid=$!
	n=0; after=-1
	while [ $n -lt $5 ]; do
		until [ "$(grep -c '^3;' $out)" -gt $n ]; do sleep 0.1; done
		n=$((n+1))
		# the slice's IOPS: read KiB (field 6) and runtime in ms (field 9) since the status before
		iops=$(grep '^3;' $out | awk -F';' -v n=$n 'NR==n-1{k=$6;t=$9} NR==n{printf "%.0f", ($9>t ? ($6-k)/4/(($9-t)/1000) : 0)}')
		echo "slice $1 $n $(mode $3) $iops $(dmsetup status $3 | cut -d' ' -f8,9)"
		if [ $after -lt 0 ] && [ "$(mode $3)" = "$4" ]; then after=0; fi
		if [ $after -ge 0 ]; then after=$((after+1)); [ $after -le @AFTER@ ] || break; fi
	done
	kill -INT $fpid; wait $fpid || true
	echo "status-$1 $(dmsetup status $3)"
}
phase zipf zipf:1.2 big writethrough @ZIPF@
phase uniform random small - @UNI@
phase uniform2 random big - @UNI@
kill -TERM $pid
rc=0; wait $pid || rc=$?
echo "agent-exit $rc"
echo "mode-after-agent $(mode big) $(mode small)"
# The passthrough references run beside an agent in Observe mode: it
# traces and simulates as the Apply agent did but changes nothing, so the
# references pay the agent's own CPU too (in a TCG guest that is not
# small) and the comparison measures the cache decision alone.
sed 's/^  mode: Apply$/  mode: Observe/' /tmp/policy.yaml >/tmp/observe.yaml
shadowtune run --config /tmp/observe.yaml --state-dir /tmp/state-ref --metrics-bind-address 0 >/dev/null 2>/tmp/ref.log &
rpid=$!
sleep 2
phase ref-small random small - 4
phase ref-big random big - 4
kill -TERM $rpid; wait $rpid || true
# SIGKILL in the middle of a switch: a new agent on big under zipf reads
# is killed as soon as big is seen suspended after the cache's record
# appeared (SetMode suspends, reads the status, reloads and resumes: a few
# hundred ms here), or once the switch is done if that was missed; then
# run --revert must leave big resumed, in its original mode.
shadowtune run --config /tmp/policy.yaml --state-dir /tmp/state2 --metrics-bind-address 0 -o json >/dev/null 2>/tmp/run2.log &
apid=$!
fio --name=k --filename=/dev/mapper/big --direct=1 --ioengine=libaio --iodepth=16 --rw=randread --bs=4k \
	--random_distribution=zipf:1.2 --time_based --runtime=120 --output-format=terse --terse-version=3 >/tmp/fio.kill &
fpid=$!
i=0
while [ ! -e /tmp/state2/dm-cache/big.json ]; do
	i=$((i+1)); [ $i -lt 1200 ] || { echo "no switch within 60 s"; cat /tmp/run2.log; exit 4; }
	sleep 0.05
done
until [ "$(dmsetup info -c --noheadings -o suspended big)" = Suspended ] || [ "$(mode big)" = writethrough ]; do :; done
kill -9 $apid
echo "killed-state $(dmsetup info -c --noheadings -o suspended big) $(mode big)"
wait $apid || true
rc=0; shadowtune run --revert --state-dir /tmp/state2 >/tmp/revert.out 2>&1 || rc=$?
echo "revert-exit $rc"; cat /tmp/revert.out
# fio may have ended already (its 120 s outlast the switch on a loaded host).
kill $fpid 2>/dev/null || true; wait $fpid || true
echo "after-revert $(mode big) $(dmsetup info -c --noheadings -o suspended big)"
echo "== run.log"; cat /tmp/run.log; echo "== run.log end"
echo "== run.json"; cat /tmp/run.json; echo
echo "== end"
dmsetup remove big
dmsetup remove small
echo "md5-after $(md5 /dev/vdb) $(md5 /dev/vdc)"
`

var (
	sliceRE    = regexp.MustCompile(`(?m)^slice ([\w-]+) (\d+) (\w+) ([0-9.]+) (\d+) (\d+)$`)
	predHitRE  = regexp.MustCompile(`"predictedReadHitPercent"="([0-9.]+)"`)
	appliedRE  = regexp.MustCompile(`"change"="(\w+) -> (\w+): ([^"]*)"`)
	gainRE     = regexp.MustCompile(`(?:predicted|measured) (-?[0-9.]+) %`)
	decisionRE = regexp.MustCompile(`"msg"="cache decision".*"decision"="([^"]*)"`)
)

type slice struct {
	phase, mode  string
	n            int
	iops         float64
	hits, misses uint64 // the cache's read counters at the slice's end (since its table was loaded)
}

// cacheCase is one line of the summary's cases.
type cacheCase struct {
	Name             string  `json:"name"`
	Decision         string  `json:"decision"`
	MeasuredGainPct  float64 `json:"measuredGainPct"`
	PredictedGainPct float64 `json:"predictedGainPct"`
	// PredictedReadHitPct is the simulated cache's read hits the switch on
	// rested on (the agent's log); MeasuredReadHitPct the cache's own over
	// the slices FinalIOPS is taken from (its counters), percent.
	PredictedReadHitPct float64 `json:"predictedReadHitPct,omitempty"`
	MeasuredReadHitPct  float64 `json:"measuredReadHitPct,omitempty"`
	PassthroughIOPS     float64 `json:"passthroughIOPS"`
	FinalIOPS           float64 `json:"finalIOPS"`
	Note                string  `json:"note,omitempty"`
}

// agentCacheDisk is the throttle of TestAgentDMCache's two origins: a
// cloud volume of 500 IOPS and 125 MiB/s (the baseline of a small
// provisioned volume: gp3 starts at 3,000, a 167 GiB gp2 gets 500, Azure's
// P10 gives 500), below vmlab.CloudDisk's 3,000. The disk, not the TCG
// guest's CPU, must bound the rates for the rate checks to judge the
// cache and its prediction, with the cache on too: at 2,000 IOPS the zipf
// reads through the warm cache (81 % read hits) ran at 10,400-11,700 IOPS
// on a quiet host, the rate the misses allow, and at 4,800-5,900 on a
// loaded one, where fio's thread and the agent shared the guest's two
// CPUs; at 500 they run at about 2,600 on both (fio at a quarter of a
// CPU).
var agentCacheDisk = vmlab.Throttle{IOPS: 500, BytesPerSec: vmlab.CloudDisk.BytesPerSec}

// TestAgentDMCache: the agent, in Apply mode on the origin of a dm-cache
// over a throttled cloud-like disk, turns the cache on under zipf random
// reads, which then run at least twice as fast as in passthrough, and
// turns it off (or keeps it off, or on where the measured gain holds)
// under uniform random reads over a working set 16 times the cache, losing
// no more than 5 % against passthrough; the zipf rate is within 25 % of
// the rate the agent predicted; at
// exit it restores the cache's original mode (passthrough); the origin's
// data is unchanged. The cases go into the summary with the measured and
// predicted gains (percent less time per request). The zipf fill is
// judged as it lands, in either of smq's two modes (fillMode), never run
// again for a better one.
func TestAgentDMCache(t *testing.T) {
	imgB, imgC := t.TempDir()+"/big.img", t.TempDir()+"/small.img"
	wantB, wantC := randomImage(t, imgB, 512<<20), randomImage(t, imgC, 512<<20)
	script := strings.NewReplacer("@POLICY@", agentPolicy, "@AFTER@", "5", "@ZIPF@", "24", "@UNI@", "8").Replace(agentCacheScript)
	out, sl, logs, zipf := agentCacheRun(t, script, imgB, imgC)
	uni := cacheCaseOf("uniform 4 KiB random reads, 512 MiB origin, 8 MiB cache, off at the start", "uniform", "small", sl, logs["uniform"])
	uni2 := cacheCaseOf("uniform 4 KiB random reads, 512 MiB origin, 64 MiB cache, on at the start (after zipf)", "uniform2", "big", sl, logs["uniform2"])
	if zipf.Decision == "writethrough" && (zipf.PredictedReadHitPct <= 0 || zipf.MeasuredReadHitPct <= 0) {
		// Both shares are reported (issue 15 item 5): the switch's log line
		// carries the simulated one, the slices' counters the cache's.
		t.Errorf("zipf: read hits predicted %.1f %%, measured %.1f %%: want both", zipf.PredictedReadHitPct, zipf.MeasuredReadHitPct)
	}
	checkGuestKeepsUp(t, sl)
	if zipf.Decision != "writethrough" {
		t.Errorf("zipf: the agent left the cache %s, want writethrough", zipf.Decision)
	} else {
		checkZipfFill(t, zipf)
	}
	// The uniform cases against passthrough measured right after the
	// agent's exit (it restored passthrough), beside an agent in Observe
	// mode: the same reads, under the host's load of the moment and the
	// agent's own cost. On a slow TCG host the agent's CPU alone took
	// 15-20 % of the guest's passthrough rate (2,446 against 3,003 IOPS
	// with the references measured without it), which is not what the
	// cache decision is judged on (make bench-agent measures that cost).
	for _, c := range []struct {
		c   *cacheCase
		ref string
	}{{&uni, "ref-small"}, {&uni2, "ref-big"}} {
		refs := iopsOf(sl, c.ref, "passthrough")
		if len(refs) != 4 {
			t.Fatalf("%d passthrough slices in phase %s, want 4", len(refs), c.ref)
		}
		c.c.PassthroughIOPS = median(refs)
		c.c.MeasuredGainPct = math.Round(1000*(1-c.c.PassthroughIOPS/c.c.FinalIOPS)) / 10
		// A cache kept off is passthrough, the reference's own mode: its
		// difference from the reference is the slices' noise, not a loss
		// the decision caused (±10 % between slices on a slow host).
		if c.c.Decision != "passthrough" && c.c.FinalIOPS < 0.95*c.c.PassthroughIOPS {
			t.Errorf("%s: the cache %s at %.0f IOPS against %.0f in passthrough: more than 5 %% lost", c.c.Name, c.c.Decision, c.c.FinalIOPS, c.c.PassthroughIOPS)
		}
	}
	t.Logf("cases:\n%+v\n%+v\n%+v", zipf, uni, uni2)
	if m := fields(t, out, "mode-after-agent"); m[0] != "passthrough" || m[1] != "passthrough" {
		t.Errorf("after the agent's exit the caches are %v, want their original passthrough", m)
	}
	if rc := fields(t, out, "agent-exit"); rc[0] != "0" {
		t.Errorf("the agent exited %s", rc[0])
	}
	killed, after := fields(t, out, "killed-state"), fields(t, out, "after-revert")
	t.Logf("agent SIGKILLed after the cache's record appeared: big was %v; after run --revert: %v", killed, after)
	if rc := fields(t, out, "revert-exit"); rc[0] != "0" || after[0] != "passthrough" || after[1] != "Active" {
		t.Errorf("after a SIGKILL mid-switch and run --revert (exit %s): big is %v, want passthrough and Active", rc[0], after)
	}
	set("killMidSwitch", map[string]any{"stateWhenKilled": strings.Join(killed, " "), "afterRevert": strings.Join(after, " ")})
	before, after := fields(t, out, "md5-before"), fields(t, out, "md5-after")
	ok := slices.Equal(before, []string{wantB, wantC}) && slices.Equal(after, before) &&
		md5File(t, imgB) == wantB && md5File(t, imgC) == wantC
	if !ok {
		t.Errorf("origin md5 changed: want %s %s, guest before %v, after %v", wantB, wantC, before, after)
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
	set("cases", []cacheCase{zipf, uni, uni2})
	intact(ok)
}

// agentCacheRun boots the VM on script over the origin images imgB and
// imgC and returns its output, its slices, the agent's log by phase and
// the zipf case.
func agentCacheRun(t *testing.T, script, imgB, imgC string) (string, []slice, map[string][]string, cacheCase) {
	t.Helper()
	r := boot(t, script, vmlab.Options{Disks: []vmlab.Disk{{SizeMiB: 16},
		{Image: imgB, Throttle: &agentCacheDisk}, {Image: imgC, Throttle: &agentCacheDisk}},
		Files: map[string]string{"/usr/local/bin/shadowtune": binary}, Timeout: 15 * time.Minute}, 0)
	var sl []slice
	for _, m := range sliceRE.FindAllStringSubmatch(r.Output, -1) {
		n, _ := strconv.Atoi(m[2])
		v, _ := strconv.ParseFloat(m[4], 64)
		h, _ := strconv.ParseUint(m[5], 10, 64)
		mi, _ := strconv.ParseUint(m[6], 10, 64)
		sl = append(sl, slice{phase: m[1], n: n, mode: m[3], iops: v, hits: h, misses: mi})
	}
	logs := phaseLogs(r.Output)
	t.Logf("slices: %+v", sl)
	t.Logf("agent log by phase: %q", logs)
	zipf := cacheCaseOf("zipf(1.2) 4 KiB random reads, 512 MiB origin, 64 MiB cache, off at the start", "zipf", "big", sl, logs["zipf"])
	return r.Output, sl, logs, zipf
}

// fillMode names the mode smq's fill of the zipf case settled in: the
// one the simulation predicts ("predicted", read hits within 10 points
// of the prediction) or its poor one ("poor", 10 to 25 points below).
// smq fills a cache from empty in one of these two modes on these reads:
// of 13 fills switched by the agent, 11 settled at 80.2-81.3 % read hits
// (predicted 80.3-81.5 %) and 2 at 62.3-62.5 %, where the rate is half
// (1,340 IOPS against 2,600); 6 fills switched by dmsetup at times of the
// test's choosing all settled at 80.5-80.9 %; of 22 fills up to
// 2026-11-29, 6 were poor. What picks the mode is not known (a candidate,
// not tested: smq promotes every miss once it rates its hotspot queue
// well, only the hottest hotspots' before; update_promote_levels in
// dm-cache-policy-smq.c; docs/agent.md). Anything else is "other": a
// fill the test does not accept.
func fillMode(z cacheCase) string {
	switch short := z.PredictedReadHitPct - z.MeasuredReadHitPct; {
	case z.MeasuredReadHitPct <= 0:
		return "other"
	case short <= 10:
		return "predicted"
	case short <= 25:
		return "poor"
	}
	return "other"
}

// checkZipfFill judges the zipf case with the cache on, in whichever of
// smq's modes its fill settled (fillMode; a fill in neither fails): at
// least twice the passthrough rate, and the rate the agent's prediction
// gives for the read hits the cache measured, within 25 %. The predicted
// gain is in time per request and rests on the predicted read hits; a
// hit costs next to nothing beside a miss on the throttled origin, so the
// gain at the measured hits h is the predicted gain scaled by
// h / predicted h, and the rate passthrough ÷ (1 − that gain). In the
// predicted mode this is the prediction itself (issue 15); in the poor
// mode it checks that the prediction's cost of a miss holds when smq
// keeps fewer hits.
func checkZipfFill(t *testing.T, z cacheCase) {
	t.Helper()
	mode := fillMode(z)
	set("zipfFillMode", mode)
	if mode == "other" {
		t.Errorf("zipf: %.1f %% read hits measured against %.1f %% predicted: in neither of smq's two fill modes", z.MeasuredReadHitPct, z.PredictedReadHitPct)
		return
	}
	if z.FinalIOPS < 2*z.PassthroughIOPS {
		t.Errorf("zipf (%s fill): %.0f IOPS with the cache on, %.0f in passthrough: want at least 2x", mode, z.FinalIOPS, z.PassthroughIOPS)
	}
	gain := z.PredictedGainPct / 100 * z.MeasuredReadHitPct / z.PredictedReadHitPct
	if z.PredictedGainPct >= 100 || gain >= 1 || z.PredictedReadHitPct <= 0 {
		t.Errorf("zipf: predicted gain %.1f %% at %.1f %% read hits: not a rate", z.PredictedGainPct, z.PredictedReadHitPct)
		return
	}
	pred := z.PassthroughIOPS / (1 - gain)
	t.Logf("zipf (%s fill): %.0f IOPS with the cache on at %.1f %% read hits; the prediction (%.1f %% less time at %.1f %% hits) gives %.0f IOPS there",
		mode, z.FinalIOPS, z.MeasuredReadHitPct, z.PredictedGainPct, z.PredictedReadHitPct, pred)
	if math.Abs(z.FinalIOPS-pred) > 0.25*pred {
		t.Errorf("zipf (%s fill): %.0f IOPS with the cache on; the prediction gives %.0f IOPS at the measured %.1f %% read hits: want within 25 %%",
			mode, z.FinalIOPS, pred, z.MeasuredReadHitPct)
	}
}

// checkGuestKeepsUp fails the test, saying why, when the guest does not
// keep up with the disk, and records the outcome in the summary
// (rateChecks). The rates are the cache's only where the guest keeps up:
// beside the agent, the median of its zipf passthrough slices must reach
// the throttle's rate within 3 % (a guest that keeps up measures 2,030
// IOPS behind QEMU's 2,000 and 500-509 behind 500; the first slice can
// share the CPU with the agent's start). Under TCG every read costs guest
// CPU, and on a slow host the guest is the bottleneck: behind a 3,000
// IOPS throttle, machines of this project's kind reached 1,973-2,796 IOPS
// in passthrough beside the agent and 4,154-5,801 with the cache on
// (7,219-8,700 with no agent, TestDMCache), where another machine gave
// 3,050 and 9,000-10,000; hence agentCacheDisk's 500. Where even that is
// out of the guest's reach the rate checks would measure the host's CPU,
// not the cache or its prediction.
func checkGuestKeepsUp(t *testing.T, sl []slice) {
	t.Helper()
	ptSlices := iopsOf(sl, "zipf", "passthrough")
	med := 0.0
	if len(ptSlices) > 0 {
		med = median(ptSlices)
	}
	if med >= 0.97*float64(agentCacheDisk.IOPS) {
		set("rateChecks", "asserted")
		return
	}
	note := fmt.Sprintf("cannot be asserted: the median of the guest's passthrough slices beside the agent was %.0f IOPS (slices %v), "+
		"below 97 %% of the disk's %d: the guest's CPU, not the disk, bounds the rates on this host",
		med, ptSlices, agentCacheDisk.IOPS)
	t.Errorf("rate checks %s", note)
	set("rateChecks", note)
}

func iopsOf(sl []slice, phase, mode string) []float64 {
	var out []float64
	for _, s := range sl {
		if s.phase == phase && s.mode == mode {
			out = append(out, s.iops)
		}
	}
	return out
}

// phaseLogs splits the agent's log (between "== run.log" and "== run.log
// end") at the script's "== phase NAME" markers.
func phaseLogs(out string) map[string][]string {
	logs := map[string][]string{}
	_, rest, _ := strings.Cut(out, "== run.log\n")
	rest, _, _ = strings.Cut(rest, "== run.log end")
	phase := "start"
	for _, line := range strings.Split(rest, "\n") {
		if p, ok := strings.CutPrefix(line, "== phase "); ok {
			phase = strings.TrimSpace(p)
			continue
		}
		if strings.Contains(line, "cache") {
			logs[phase] = append(logs[phase], line)
		}
	}
	return logs
}

// cacheCaseOf sums up a phase: the mode the agent left the cache in, the
// median IOPS of its passthrough slices and of its last slices in that
// mode (up to three), the measured gain as percent less time per request,
// and the gain the agent's last switch (or else its last decision) in the
// phase rested on.
func cacheCaseOf(name, phase, cache string, sl []slice, log []string) cacheCase {
	c := cacheCase{Name: name, Decision: "passthrough"}
	var pt, last []float64
	for _, s := range sl {
		if s.phase != phase {
			continue
		}
		c.Decision = s.mode
		if s.mode == "passthrough" {
			pt = append(pt, s.iops)
		}
	}
	var hits, reads uint64
	for i := len(sl) - 1; i >= 0 && len(last) < 3; i-- {
		if sl[i].phase == phase && sl[i].mode == c.Decision {
			last = append(last, sl[i].iops)
			// The slice's own reads: the counters since the slice before
			// (a mode switch reloads the table, which resets them).
			if p := sl[max(i-1, 0)]; i > 0 && p.phase == phase && sl[i].hits >= p.hits && sl[i].misses >= p.misses {
				hits, reads = hits+sl[i].hits-p.hits, reads+sl[i].hits-p.hits+sl[i].misses-p.misses
			}
		}
	}
	if c.Decision == "writethrough" && reads > 0 {
		c.MeasuredReadHitPct = math.Round(1000*float64(hits)/float64(reads)) / 10
	}
	// The origin's rate in passthrough is the throttle's when the phase's
	// passthrough slices measured less (the first slice shares the guest's
	// CPU with the agent's start: 1,860 IOPS once, then 3,041), as in
	// TestDMCache: that must not make the cache look better than it is.
	// The final rate is the median of the last three slices, the cache
	// on or off: behind agentCacheDisk's 500 IOPS the guest keeps up
	// with the disk (checkGuestKeepsUp), so a slice is the cache's rate, not the
	// host's CPU share.
	c.PassthroughIOPS, c.FinalIOPS = max(median(pt), float64(agentCacheDisk.IOPS)), median(last)
	if c.FinalIOPS > 0 && c.PassthroughIOPS > 0 {
		c.MeasuredGainPct = math.Round(1000*(1-c.PassthroughIOPS/c.FinalIOPS)) / 10
	}
	switched := false
	for _, line := range log {
		if !strings.Contains(line, `"cache"="`+cache+`"`) {
			continue
		}
		if m := appliedRE.FindStringSubmatch(line); m != nil {
			c.Note, switched = fmt.Sprintf("%s -> %s: %s", m[1], m[2], m[3]), true
			c.PredictedGainPct = gainOf(m[3])
			c.PredictedReadHitPct = 0
			if h := predHitRE.FindStringSubmatch(line); h != nil {
				c.PredictedReadHitPct, _ = strconv.ParseFloat(h[1], 64)
			}
		} else if m := decisionRE.FindStringSubmatch(line); m != nil && !switched {
			c.Note, c.PredictedGainPct = m[1], gainOf(m[1])
		}
	}
	return c
}

func gainOf(reason string) float64 {
	m := gainRE.FindStringSubmatch(reason)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
