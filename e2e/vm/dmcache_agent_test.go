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

// agentPolicy governs /dev/vdb, the cache's origin: the scheduler stays
// none, read-ahead is not governed, the cache is; 5 s windows and no
// dwell, so that the test's phases are short.
const agentPolicy = `apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: vm-cache
spec:
  mode: Apply
  devices:
    include: ["vdb"]
  schedulers:
    candidates: [none]
    default: none
  readAhead:
    enabled: false
  cache:
    enabled: true
  evaluation:
    window: 5s
  rollout:
    minDwell: 0s
`

// agentCacheScript builds a 64 MiB smq cache on a brd RAM disk in front
// of the throttled /dev/vdb (512 MiB), starts it in passthrough, and runs
// `shadowtune run` in Apply mode on vdb while fio reads through the cache
// in 5 s slices, in three phases: uniform 4 KiB random reads over the
// whole origin (@UNI@ slices: the agent should keep the cache off); zipf(1.2)
// 4 KiB random reads until the agent has turned the cache on and @AFTER@
// slices more (at most @ZIPF@); uniform again (@UNI@ slices, the cache on
// at the start). Each slice prints "slice PHASE N MODE IOPS". Then the
// agent is stopped (SIGTERM: it restores the original mode), 4 uniform
// slices measure passthrough for reference, and the origin's md5 is taken
// after the cache is removed.
const agentCacheScript = `set -e
O=/dev/vdb
SZ=$(blockdev --getsz $O)
md5() { md5sum <"$1" | cut -d' ' -f1; }
echo "md5-before $(md5 $O)"
modprobe brd rd_nr=1 rd_size=73728
dmsetup create cmeta --table "0 8192 linear /dev/ram0 0"
dmsetup create cdata --table "0 131072 linear /dev/ram0 8192"
T="0 $SZ cache /dev/mapper/cmeta /dev/mapper/cdata $O 128"
dmsetup create cached --table "$T 1 passthrough smq 0"
cat >/tmp/policy.yaml <<'EOF'
@POLICY@EOF
shadowtune run --config /tmp/policy.yaml --state-dir /tmp/state --metrics-bind-address 0 -o json >/tmp/run.json 2>>/tmp/run.log &
pid=$!
mode() { dmsetup status cached | cut -d' ' -f16; }
slice() { # phase n dist
	fio --name=s --filename=/dev/mapper/cached --direct=1 --ioengine=libaio --iodepth=16 --rw=randread --bs=4k \
		--random_distribution=$3 --randseed=$2 --time_based --runtime=5 --output-format=terse --terse-version=3 >/tmp/fio.out
	echo "slice $1 $2 $(mode) $(cut -d';' -f8 /tmp/fio.out)"
}
phase() { # name dist want max: stops @AFTER@ slices after the mode is want ("-": never)
	echo "== phase $1" >>/tmp/run.log # O_APPEND, like the agent's log: in order
	n=0; after=-1
	while [ $n -lt $4 ]; do
		n=$((n+1)); slice $1 $n $2
		if [ $after -lt 0 ] && [ "$(mode)" = "$3" ]; then after=0; fi
		if [ $after -ge 0 ]; then after=$((after+1)); [ $after -le @AFTER@ ] || break; fi
	done
	echo "status-$1 $(dmsetup status cached)"
}
phase uniform random - @UNI@
phase zipf zipf:1.2 writethrough @ZIPF@
phase uniform2 random - @UNI@
kill -TERM $pid
rc=0; wait $pid || rc=$?
echo "agent-exit $rc"
echo "mode-after-agent $(mode)"
phase ref random - 4
echo "== run.log"; cat /tmp/run.log; echo "== run.log end"
echo "== run.json"; cat /tmp/run.json; echo
echo "== end"
dmsetup remove cached
echo "md5-after $(md5 $O)"
`

var (
	sliceRE    = regexp.MustCompile(`(?m)^slice (\w+) (\d+) (\w+) ([0-9.]+)$`)
	appliedRE  = regexp.MustCompile(`"change"="(\w+) -> (\w+): ([^"]*)"`)
	gainRE     = regexp.MustCompile(`(?:predicted|measured) (-?[0-9.]+) %`)
	decisionRE = regexp.MustCompile(`"msg"="cache decision".*"decision"="([^"]*)"`)
)

type slice struct {
	phase, mode string
	n           int
	iops        float64
}

// cacheCase is one line of the summary's cases.
type cacheCase struct {
	Name             string  `json:"name"`
	Decision         string  `json:"decision"`
	MeasuredGainPct  float64 `json:"measuredGainPct"`
	PredictedGainPct float64 `json:"predictedGainPct"`
	PassthroughIOPS  float64 `json:"passthroughIOPS"`
	FinalIOPS        float64 `json:"finalIOPS"`
	Note             string  `json:"note,omitempty"`
}

// TestAgentDMCache: the agent, in Apply mode on the origin of a dm-cache
// over a throttled cloud-like disk, turns the cache on under zipf random
// reads, which then run at least twice as fast as in passthrough, and
// turns it off (or keeps it off) under uniform random reads over a working
// set 16 times the cache, losing no more than 5 % against passthrough; at
// exit it restores the cache's original mode (passthrough); the origin's
// data is unchanged. The cases go into the summary with the measured and
// predicted gains (percent less time per request).
func TestAgentDMCache(t *testing.T) {
	img := t.TempDir() + "/origin.img"
	want := randomImage(t, img, 512<<20)
	script := strings.NewReplacer("@POLICY@", agentPolicy, "@AFTER@", "3", "@ZIPF@", "24", "@UNI@", "8").Replace(agentCacheScript)
	r := boot(t, script, vmlab.Options{Disks: []vmlab.Disk{{SizeMiB: 16}, {Image: img, Throttle: &vmlab.CloudDisk}},
		Files: map[string]string{"/usr/local/bin/shadowtune": binary}, Timeout: 15 * time.Minute}, 0)
	out := r.Output
	var slices_ []slice
	for _, m := range sliceRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		v, _ := strconv.ParseFloat(m[4], 64)
		slices_ = append(slices_, slice{phase: m[1], n: n, mode: m[3], iops: v})
	}
	logs := phaseLogs(out)
	t.Logf("slices: %+v", slices_)
	t.Logf("agent log by phase: %q", logs)
	uni := cacheCaseOf("uniform 4 KiB random reads over the 512 MiB origin, 64 MiB cache, off at the start", "uniform", slices_, logs["uniform"])
	zipf := cacheCaseOf("zipf(1.2) 4 KiB random reads, 512 MiB origin, 64 MiB cache", "zipf", slices_, logs["zipf"])
	uni2 := cacheCaseOf("uniform again, the cache on at the start", "uniform2", slices_, logs["uniform2"])
	t.Logf("cases:\n%+v\n%+v\n%+v", uni, zipf, uni2)
	if uni.Decision != "passthrough" {
		t.Errorf("uniform: the agent turned the cache on (%s)", uni.Note)
	}
	if zipf.Decision != "writethrough" {
		t.Errorf("zipf: the agent left the cache %s, want writethrough", zipf.Decision)
	} else if zipf.FinalIOPS < 2*zipf.PassthroughIOPS {
		t.Errorf("zipf: %.0f IOPS with the cache on, %.0f in passthrough: want at least 2x", zipf.FinalIOPS, zipf.PassthroughIOPS)
	}
	// Against passthrough measured right after (the agent restored it at
	// exit): the same reads under the host's load of the moment.
	var refs []float64
	for _, s := range slices_ {
		if s.phase == "ref" && s.mode == "passthrough" {
			refs = append(refs, s.iops)
		}
	}
	ref := median(refs)
	if uni2.FinalIOPS < 0.95*ref {
		t.Errorf("uniform after zipf: the cache %s at %.0f IOPS against %.0f in passthrough: more than 5 %% lost", uni2.Decision, uni2.FinalIOPS, ref)
	}
	uni2.PassthroughIOPS = ref
	uni2.MeasuredGainPct = math.Round(1000*(1-ref/uni2.FinalIOPS)) / 10
	if m := fields(t, out, "mode-after-agent"); m[0] != "passthrough" {
		t.Errorf("after the agent's exit the cache is %s, want its original passthrough", m[0])
	}
	if rc := fields(t, out, "agent-exit"); rc[0] != "0" {
		t.Errorf("the agent exited %s", rc[0])
	}
	intact := fields(t, out, "md5-before")[0] == want && fields(t, out, "md5-after")[0] == want && md5File(t, img) == want
	if !intact {
		t.Errorf("origin md5 changed: want %s, guest before %s, after %s", want, fields(t, out, "md5-before")[0], fields(t, out, "md5-after")[0])
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
	set("cases", []cacheCase{uni, zipf, uni2})
	set("agentCacheIntact", intact)
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
func cacheCaseOf(name, phase string, sl []slice, log []string) cacheCase {
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
	for i := len(sl) - 1; i >= 0 && len(last) < 3; i-- {
		if sl[i].phase == phase && sl[i].mode == c.Decision {
			last = append(last, sl[i].iops)
		}
	}
	// Without a passthrough slice in the phase, the origin's rate is the
	// throttle's (what passthrough measured in TestDMCache).
	c.PassthroughIOPS, c.FinalIOPS = median(pt), median(last)
	if len(pt) == 0 {
		c.PassthroughIOPS = float64(vmlab.CloudDisk.IOPS)
	}
	if c.FinalIOPS > 0 && c.PassthroughIOPS > 0 {
		c.MeasuredGainPct = math.Round(1000*(1-c.PassthroughIOPS/c.FinalIOPS)) / 10
	}
	switched := false
	for _, line := range log {
		if m := appliedRE.FindStringSubmatch(line); m != nil {
			c.Note, switched = fmt.Sprintf("%s -> %s: %s", m[1], m[2], m[3]), true
			c.PredictedGainPct = gainOf(m[3])
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
