//go:build vm

package vm

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/vmlab"
)

// hostToolsPolicy is agentPolicy for /dev/vdb alone, the cache's origin.
var hostToolsPolicy = strings.NewReplacer("name: vm-cache", "name: vm-host-tools",
	`include: ["vdb", "vdc"]`, `include: ["vdb"]`).Replace(agentPolicy)

// hostToolsScript lays the guest out as the chart's agent pod with
// agent.hostTools.enabled sees its node: a container root /ctr holding
// only the shadowtune binary (no dmsetup, no lvm; its own /proc, /sys,
// a /dev with null, zero and urandom only, /tmp), and the node's / at
// /ctr/host (a recursive bind, as the hostPath / with its submounts).
// The node's dmsetup is wrapped to log each call with $ST_CALLER, which
// only the agent's environment sets. A 64 MiB smq cache "big" on a brd
// RAM disk in front of the throttled /dev/vdb starts in passthrough; the
// agent, chrooted into /ctr with --host-root /host --host-tools-root
// /host, runs in Apply mode while fio reads zipf(1.2) through the cache
// in 5 s slices until the cache is writethrough (at most @ZIPF@ slices),
// then gets SIGTERM and restores passthrough.
const hostToolsScript = `set -e
modprobe brd rd_nr=1 rd_size=73728
dmsetup create bmeta --table "0 8192 linear /dev/ram0 0"
dmsetup create bdata --table "0 131072 linear /dev/ram0 8192"
dmsetup create big --table "0 $(blockdev --getsz /dev/vdb) cache /dev/mapper/bmeta /dev/mapper/bdata /dev/vdb 128 1 passthrough smq 0"
D=$(command -v dmsetup)
mv "$D" "$D.real"
printf '#!/bin/sh\n[ -z "$ST_CALLER" ] || echo "$ST_CALLER: $*" >>/run/dmsetup-calls\nexec %s.real "$@"\n' "$D" >"$D"
chmod 755 "$D"
mkdir -p /ctr/host /ctr/usr/local/bin /ctr/proc /ctr/sys /ctr/dev /ctr/tmp /ctr/state
mount --rbind / /ctr/host
cp /usr/local/bin/shadowtune /ctr/usr/local/bin/
mount -t proc proc /ctr/proc
mount --rbind /sys /ctr/sys
mount -t tmpfs tmpfs /ctr/dev
mknod -m 666 /ctr/dev/null c 1 3; mknod -m 666 /ctr/dev/zero c 1 5; mknod -m 666 /ctr/dev/urandom c 1 9
mount -t tmpfs tmpfs /ctr/tmp
echo "ctr-files $(cd /ctr && find . \( -path ./host -o -path ./proc -o -path ./sys \) -prune -o -type f -print | sort | tr '\n' ' ')"
echo "host-dmsetup $([ -x /ctr/host$D ] && echo yes) $D"
cat >/ctr/tmp/policy.yaml <<'EOF'
@POLICY@EOF
ST_CALLER=agent chroot /ctr /usr/local/bin/shadowtune run --config /tmp/policy.yaml --host-root /host --host-tools-root /host \
	--state-dir /state --metrics-bind-address 0 -o json >/tmp/run.json 2>/tmp/run.log &
pid=$!
mode() { dmsetup status $1 | cut -d' ' -f16; }
n=0
while [ $n -lt @ZIPF@ ]; do
	n=$((n+1))
	fio --name=s --filename=/dev/mapper/big --direct=1 --ioengine=libaio --iodepth=16 --rw=randread --bs=4k \
		--random_distribution=zipf:1.2 --randseed=$n --time_based --runtime=5 --output-format=terse --terse-version=3 >/tmp/fio.out
	echo "slice zipf $n $(mode big) $(cut -d';' -f8 /tmp/fio.out) $(dmsetup status big | cut -d' ' -f8,9)"
	[ "$(mode big)" != writethrough ] || break
done
kill -TERM $pid
rc=0; wait $pid || rc=$?
echo "agent-exit $rc"
echo "mode-after-agent $(mode big) $(dmsetup info -c --noheadings -o suspended big)"
echo "records-left $(ls /ctr/state/dm-cache 2>/dev/null | wc -l)"
echo "== calls"; cat /run/dmsetup-calls; echo "== calls end"
echo "== run.log"; grep -i cache /tmp/run.log || true; echo "== run.log end"
dmsetup remove big
`

// reloadRE matches a logged reload of big by the agent and its mode.
var reloadRE = regexp.MustCompile(`(?m)^agent: reload big --table .* (writethrough|passthrough) smq 0$`)

// TestAgentHostTools: the agent in a container root without dmsetup or
// lvm governs a dm-cache of its node through the node's own dmsetup,
// run chrooted into the node's root at /host (--host-tools-root), as
// the chart runs it with agent.hostTools.enabled: it discovers the
// cache, switches it passthrough → writethrough under zipf reads, and
// back to passthrough when it exits (it restores the original mode; or
// before, when its verification measures a regression: under TCG on a
// busy host the cache's hits can cost more guest CPU than they save),
// every call made by the node's dmsetup.
func TestAgentHostTools(t *testing.T) {
	script := strings.NewReplacer("@POLICY@", hostToolsPolicy, "@ZIPF@", "24").Replace(hostToolsScript)
	r := boot(t, script, vmlab.Options{
		Disks: []vmlab.Disk{{SizeMiB: 16}, {SizeMiB: 512, Throttle: &vmlab.CloudDisk}},
		Files: map[string]string{"/usr/local/bin/shadowtune": binary}, Timeout: 10 * time.Minute}, 0)
	out := r.Output
	if f := fields(t, out, "ctr-files"); !slices.Equal(f, []string{"./usr/local/bin/shadowtune"}) {
		t.Errorf("the container root holds %v, want only ./usr/local/bin/shadowtune", f)
	}
	if f := fields(t, out, "host-dmsetup"); f[0] != "yes" {
		t.Errorf("the node's dmsetup is not at /host%s in the container root", f[len(f)-1])
	}
	var modes []string
	for _, m := range sliceRE.FindAllStringSubmatch(out, -1) {
		modes = append(modes, m[3])
	}
	t.Logf("cache mode after each zipf slice: %v", modes)
	var reloads []string
	for _, m := range reloadRE.FindAllStringSubmatch(out, -1) {
		reloads = append(reloads, m[1])
	}
	t.Logf("the agent's reloads of big, by the node's dmsetup: %v", reloads)
	if !slices.Contains(modes, "writethrough") || len(reloads) < 2 || reloads[0] != "writethrough" || reloads[len(reloads)-1] != "passthrough" {
		t.Errorf("the agent did not switch big passthrough → writethrough → passthrough through the node's dmsetup: modes %v, reloads %v", modes, reloads)
	}
	if rc := fields(t, out, "agent-exit"); rc[0] != "0" {
		t.Errorf("the agent exited %s", rc[0])
	}
	if m := fields(t, out, "mode-after-agent"); !slices.Equal(m, []string{"passthrough", "Active"}) {
		t.Errorf("after the agent's exit big is %v, want its original passthrough, resumed", m)
	}
	restored := strings.Contains(out, `"msg"="restored original settings" "devices"=["dm-cache/big"]`)
	reverted := strings.Contains(out, `"change"="writethrough -> passthrough: regression`)
	t.Logf("passthrough again by: the restore at exit %v, a measured regression %v", restored && !reverted, reverted)
	if n := fields(t, out, "records-left"); n[0] != "0" || !restored {
		t.Errorf("%s dm-cache records left in the state directory; the agent logged the restore of big: %v", n[0], restored)
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
	set("agentHostTools", map[string]any{"modesBySlice": modes, "reloadsByNodeDmsetup": reloads, "regressionReverted": reverted})
}
