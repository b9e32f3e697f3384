//go:build vm

package vm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/vmlab"
)

// agentProvisionSetup is the start of both boots: the LVM configuration
// the agent's lvm commands read (/etc/lvm/lvm.conf: no udev, no devices
// file, zram a known type), and the state directory on the ext2 file
// system of /dev/vdb (made in boot 1), so that it outlives an unclean
// reset.
const agentProvisionSetup = `set -e
mkdir -p /run/lvm /run/lock/lvm /etc/lvm /state
cat >/etc/lvm/lvm.conf <<'EOF'
devices { use_devicesfile=0 obtain_device_list_from_udev=0 types=["zram",16] }
global { cache_check_executable="" }
activation { udev_sync=0 udev_rules=0 monitoring=0 }
EOF
modprobe ext4
md5() { md5sum <"$1" | cut -d' ' -f1; }
lvsa() { lvm lvs -a -o lv_name,segtype,lv_tags,devices,lv_attr vg0 2>&1; }
`

// agentProvisionPolicy governs /dev/vda (the LV's PV) in Apply mode and
// asks for a 32 MiB RAM cache in front of vg0/data: the LV has 512-byte
// logical blocks, so the agent loads brd and uses /dev/ram0.
const agentProvisionPolicy = `apiVersion: storage.shadowtune.io/v1alpha1
kind: StorageTuning
metadata:
  name: vm-provision
spec:
  mode: Apply
  devices:
    include: ["vda"]
  schedulers:
    candidates: [none]
    default: none
  readAhead:
    enabled: false
  cache:
    enabled: true
    memoryBudget: 32Mi
    provision:
      logicalVolumes: ["vg0/data"]
      fastDevice: ram
  evaluation:
    window: 5s
`

// agentProvisionBoot1: vg0/data (96 MiB of random data) on the throttled
// /dev/vda; `shadowtune run` attaches the cache (checked with lvs and
// dmsetup table while it runs); SIGTERM detaches it (nothing left in
// vg0 but data and /dev/vda); a second run attaches it again and the VM
// is reset with sysrq-b while it is attached.
const agentProvisionBoot1 = agentProvisionSetup + `mke2fs -F /dev/vdb >/dev/null
mount -t ext4 /dev/vdb /state
lvm pvcreate -q /dev/vda
lvm vgcreate -q vg0 /dev/vda
lvm lvcreate -q -y -n data -L 96M vg0
dd if=/dev/urandom of=/dev/mapper/vg0-data bs=1M count=96 oflag=direct 2>/dev/null
echo "md5-before $(md5 /dev/mapper/vg0-data)"
cat >/tmp/policy.yaml <<'EOF'
@POLICY@EOF
run() { shadowtune run --config /tmp/policy.yaml --state-dir /state/st --metrics-bind-address 0 -o json >/tmp/run$1.json 2>/tmp/run$1.log & pid=$!; }
waitcached() {
	i=0
	until [ "$(lvm lvs --noheadings -o segtype vg0/data 2>/dev/null | tr -d ' ')" = cache ]; do
		i=$((i+1)); if [ $i -gt 240 ] || ! kill -0 $pid 2>/dev/null; then echo "not cached (run $1)"; cat /tmp/run$1.log; exit 3; fi
		sleep 0.5
	done
}
run 1
waitcached 1
echo "segtype-running $(lvm lvs --noheadings -o segtype vg0/data | tr -d ' ')"
echo "table-running $(dmsetup table vg0-data)"
lvsa
dd if=/dev/mapper/vg0-data of=/dev/null bs=64k count=800 iflag=direct 2>/dev/null
echo "md5-cached $(md5 /dev/mapper/vg0-data)"
kill -TERM $pid
rc=0; wait $pid || rc=$?
echo "agent-exit $rc"
grep -i "cache of" /tmp/run1.log || true
echo "== after SIGTERM"
lvsa
lvm pvs -o pv_name,vg_name,pv_tags 2>&1
echo "left-lvs $(lvm lvs -a --noheadings -o lv_name vg0 | tr -d ' ' | tr '\n' ' ')"
echo "left-pvs $(lvm pvs --noheadings -o pv_name | tr -d ' ' | tr '\n' ' ')"
echo "left-records $(ls /state/st/dm-cache-attached 2>/dev/null | wc -l)"
echo "md5-detached $(md5 /dev/mapper/vg0-data)"
run 2
waitcached 2
cat /state/st/dm-cache-attached/*.json
lvsa
echo "resetting-uncleanly"
sleep 1
echo b >/proc/sysrq-trigger
sleep 60
`

// agentProvisionBoot2: the same disks, brd not loaded (the RAM disk is
// gone): `shadowtune run --revert` finds the record of boot 1, recovers
// vg0/data at its start (uncache, the missing PV removed, the LV
// activated); then vgck and the md5.
const agentProvisionBoot2 = agentProvisionSetup + `mount -t ext4 /dev/vdb /state
echo "== before recovery"
lvsa
lvm pvs -o pv_name,vg_name,pv_tags,pv_missing 2>&1
ls /state/st/dm-cache-attached
rc=0; shadowtune run --revert --state-dir /state/st >/tmp/revert.out 2>&1 || rc=$?
echo "revert-exit $rc"
cat /tmp/revert.out
echo "== after recovery"
lvsa
lvm pvs -o pv_name,vg_name,pv_tags,pv_missing 2>&1
echo "records-after $(ls /state/st/dm-cache-attached | wc -l)"
if lvm vgck vg0; then echo "vgck ok"; fi
echo "active-after $(lvm lvs --noheadings -o lv_active vg0/data | tr -d ' ')"
echo "md5-after $(md5 /dev/mapper/vg0-data)"
`

// TestAgentProvision: `shadowtune run` in Apply mode with
// spec.cache.provision attaches a brd RAM cache to an LV on a throttled
// disk (lvs reports segment type cache, dmsetup a cache target), detaches
// it at SIGTERM leaving no LV or PV behind; attached again and the VM
// reset uncleanly, the next boot's `run --revert` recovers the LV with the
// RAM disk gone: vgck passes and the LV's md5 is the one before the
// cache.
func TestAgentProvision(t *testing.T) {
	dir := t.TempDir()
	lvmImg, stateImg := filepath.Join(dir, "lvm.img"), filepath.Join(dir, "state.img")
	for img, size := range map[string]int64{lvmImg: 160 << 20, stateImg: 32 << 20} {
		if err := os.WriteFile(img, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, size); err != nil {
			t.Fatal(err)
		}
	}
	o := vmlab.Options{Disks: []vmlab.Disk{{Image: lvmImg, Throttle: &vmlab.CloudDisk}, {Image: stateImg}},
		Files: map[string]string{"/usr/local/bin/shadowtune": binary}, Timeout: 10 * time.Minute}
	out1 := bootUnclean(t, strings.ReplaceAll(agentProvisionBoot1, "@POLICY@", agentProvisionPolicy), o)
	t.Logf("boot 1 output:\n%s", out1)
	before := fields(t, out1, "md5-before")[0]
	if seg := fields(t, out1, "segtype-running"); seg[0] != "cache" {
		t.Errorf("while the agent ran, vg0/data's segment type is %v, want cache", seg)
	}
	if tbl := fields(t, out1, "table-running"); len(tbl) < 3 || tbl[2] != "cache" {
		t.Errorf("while the agent ran, vg0-data's table is %v, want a cache target", tbl)
	}
	if rc := fields(t, out1, "agent-exit"); rc[0] != "0" {
		t.Errorf("the agent exited %s at SIGTERM", rc[0])
	}
	leftLVs, leftPVs := fields(t, out1, "left-lvs"), fields(t, out1, "left-pvs")
	if strings.Join(leftLVs, " ") != "data" || strings.Join(leftPVs, " ") != "/dev/vda" {
		t.Errorf("after SIGTERM: LVs %v, PVs %v; want only data on /dev/vda", leftLVs, leftPVs)
	}
	if n := fields(t, out1, "left-records"); n[0] != "0" {
		t.Errorf("after SIGTERM: %s attach records left", n[0])
	}
	cached, detached := fields(t, out1, "md5-cached")[0], fields(t, out1, "md5-detached")[0]

	r := boot(t, agentProvisionBoot2, o, 0)
	out2 := r.Output
	t.Logf("boot 2 output:\n%s", out2)
	after := fields(t, out2, "md5-after")[0]
	vgck := strings.Contains(out2, "\nvgck ok")
	revertOK := fields(t, out2, "revert-exit")[0] == "0" && strings.Contains(out2, "recovered 1 volume(s)")
	records := fields(t, out2, "records-after")[0]
	active := fields(t, out2, "active-after")[0]
	recovered := revertOK && vgck && after == before && records == "0" && active == "active"
	if !recovered {
		t.Errorf("after the unclean reset: run --revert recovered it %v, vgck %v, records left %s, LV %s, md5 before the cache %s, after recovery %s",
			revertOK, vgck, records, active, before, after)
	}
	ok := cached == before && detached == before && after == before
	if !ok {
		t.Errorf("vg0/data md5: before %s, cached %s, detached %s, after the unclean reset and recovery %s", before, cached, detached, after)
	}
	set("agentUncleanRebootRecovered", recovered)
	intact(ok)
}
