//go:build vm

package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/vmlab"
)

// provisionPrelude is the LVM setup of the provisioning scripts: lvm2
// 2.03.16 needs zram listed as a device type (it does not know it), no
// udev, no devices file; L runs an lvm command with that configuration;
// md5 prints a device's md5.
const provisionPrelude = `set -e
mkdir -p /run/lvm /run/lock/lvm
C='devices { use_devicesfile=0 obtain_device_list_from_udev=0 types=["zram",16] } global { cache_check_executable="" } activation { udev_sync=0 udev_rules=0 monitoring=0 }'
export DMC_LVM_CONFIG="$C"
L() { s=$1; shift; lvm $s --config "$C" "$@"; }
md5() { md5sum <"$1" | cut -d' ' -f1; }
`

// dmProvisionScript: vg0/data (96 MiB of random data) on the throttled
// /dev/vda with 4096-byte blocks, where a zram cache fits; vg1 on
// /dev/vdb (512-byte blocks) with vg1/small, and vg1/other cached by hand
// on a brd RAM disk without shadowtune's tag. It runs the in-guest
// TestGuestProvisionZRAM and TestGuestProvisionRefuse and prints the md5
// of vg0/data before and after.
const dmProvisionScript = provisionPrelude + `modprobe zram
modprobe brd rd_nr=1 rd_size=32768
L pvcreate -q /dev/vda /dev/vdb /dev/ram0
L vgcreate -q vg0 /dev/vda
L vgcreate -q vg1 /dev/vdb /dev/ram0
L lvcreate -q -y -n data -L 96M vg0
dd if=/dev/urandom of=/dev/mapper/vg0-data bs=1M count=96 oflag=direct 2>/dev/null
echo "md5-before $(md5 /dev/mapper/vg0-data)"
L lvcreate -q -y -n small -L 16M vg1 /dev/vdb
L lvcreate -q -y -n other -L 16M vg1 /dev/vdb
L lvcreate -q -y -n fast -L 24M vg1 /dev/ram0
L lvconvert -q -y --type cache --cachevol fast --cachemode writethrough vg1/other
export DMP_VG=vg0 DMP_LV=data DMP_SMALL=vg1/small DMP_FOREIGN=vg1/other
rc=0
dmcache.test -test.v -test.run '^TestGuestProvision(ZRAM|Refuse)$' || rc=$?
echo "== after"
L lvs -a -o lv_name,segtype,lv_tags,devices vg0 vg1
L pvs -o pv_name,vg_name,pv_tags,pv_missing
ls /sys/block
echo "md5-after $(md5 /dev/mapper/vg0-data)"
exit $rc
`

// provisionHitsRE is the guest test's log line of the cache's read hits
// and misses after fio.
var provisionHitsRE = regexp.MustCompile(`provision-hits (\d+) (\d+)`)

// TestDMCacheProvisionZRAM: agent/dmcache attaches a 32 MiB zram cache to
// an LV online (pvcreate, vgextend, lvcreate, lvconvert --cachevol,
// writethrough), the cache serves zipf reads with read hits, SetMode
// switches it, DetachCache leaves no zram device, PV or LV behind; the
// LV's md5 is unchanged. A zram cache on a 512-byte-block LV and the
// detach of an untagged cache are refused.
func TestDMCacheProvisionZRAM(t *testing.T) {
	bin := buildDMCacheTest(t)
	r := boot(t, dmProvisionScript, vmlab.Options{
		Disks: []vmlab.Disk{{SizeMiB: 128, BlockSize: 4096, Throttle: &vmlab.CloudDisk}, {SizeMiB: 64}},
		Files: map[string]string{"/usr/local/bin/dmcache.test": bin}}, 0)
	results := guestResults(r.Output)
	for _, name := range []string{"TestGuestProvisionZRAM", "TestGuestProvisionRefuse"} {
		if results[name] != "PASS" {
			t.Errorf("in the guest, %s: %q, want PASS", name, results[name])
		}
	}
	before, after := fields(t, r.Output, "md5-before")[0], fields(t, r.Output, "md5-after")[0]
	if before != after {
		t.Errorf("vg0/data md5 before the cache %s, after it was detached %s", before, after)
	}
	intact(before == after)
	hits := provisionHitsRE.FindStringSubmatch(r.Output)
	if len(hits) != 3 || hits[1] == "0" {
		t.Errorf("no read hits reported by the guest (%q)", hits)
	} else {
		hits = hits[1:] // hits, misses
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", r.Output)
	}
	set("dmCacheProvision", map[string]any{"guestTests": results, "lvIntact": before == after, "readHitsMisses": hits})
}

// uncleanBoot1 puts vg0/data (96 MiB of random data) on /dev/vda, attaches
// a cache on the brd RAM disk with AttachCache, reads through it, and
// resets the VM with sysrq-b (emergency_restart: no sync, no device
// shutdown, nothing detached; QEMU exits with -no-reboot).
const uncleanBoot1 = provisionPrelude + `modprobe brd rd_nr=1 rd_size=65536
L pvcreate -q /dev/vda
L vgcreate -q vg0 /dev/vda
L lvcreate -q -y -n data -L 96M vg0
dd if=/dev/urandom of=/dev/mapper/vg0-data bs=1M count=96 oflag=direct 2>/dev/null
echo "md5-before $(md5 /dev/mapper/vg0-data)"
export DMP_VG=vg0 DMP_LV=data DMP_RAM=/dev/ram0
dmcache.test -test.v -test.run '^TestGuestProvisionAttachRAM$'
dd if=/dev/mapper/vg0-data of=/dev/null bs=64k count=800 iflag=direct 2>/dev/null
echo "md5-cached $(md5 /dev/mapper/vg0-data)"
echo "status-boot1 $(dmsetup status vg0-data)"
L lvs -a -o lv_name,segtype,lv_tags,devices vg0
echo "resetting-uncleanly"
sleep 1
echo b >/proc/sysrq-trigger
sleep 60
`

// uncleanBoot2 boots on the same disk with an empty RAM disk: the cache's
// PV is missing; TestGuestProvisionRecover runs RecoverMissing; then
// vgck, activation and the md5.
const uncleanBoot2 = provisionPrelude + `modprobe brd rd_nr=1 rd_size=65536
echo "== before recovery"
L lvs -a -o lv_name,segtype,lv_tags,devices,lv_attr vg0 2>&1
L pvs -o pv_name,vg_name,pv_tags,pv_missing 2>&1
L vgchange -ay vg0 2>&1 || echo "activation-refused $?"
export DMP_VG=vg0 DMP_LV=data
rc=0
dmcache.test -test.v -test.run '^TestGuestProvisionRecover$' || rc=$?
echo "== after recovery"
L pvs -o pv_name,vg_name,pv_tags,pv_missing 2>&1
L vgck vg0 && echo "vgck ok"
L vgchange -ay vg0
echo "md5-after $(md5 /dev/mapper/vg0-data)"
exit $rc
`

// TestDMCacheProvisionUnclean: boot 1 attaches a brd RAM cache to an LV
// and resets the VM uncleanly without detaching it; boot 2, on the same
// disk image with the RAM disk empty, finds the cache's PV missing,
// RecoverMissing uncaches the LV and removes the missing PV; the VG
// passes vgck and the LV's md5 equals the one before the cache.
func TestDMCacheProvisionUnclean(t *testing.T) {
	bin := buildDMCacheTest(t)
	img := filepath.Join(t.TempDir(), "lvm.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 160<<20); err != nil {
		t.Fatal(err)
	}
	o := vmlab.Options{Disks: []vmlab.Disk{{Image: img}}, Files: map[string]string{"/usr/local/bin/dmcache.test": bin}}
	out1 := bootUnclean(t, uncleanBoot1, o)
	if !strings.Contains(out1, "--- PASS: TestGuestProvisionAttachRAM") || !strings.Contains(out1, "resetting-uncleanly") {
		t.Fatalf("boot 1 did not attach the cache and reach the reset:\n%s", out1)
	}
	before := fields(t, out1, "md5-before")[0]
	r := boot(t, uncleanBoot2, o, 0)
	results := guestResults(r.Output)
	after := fields(t, r.Output, "md5-after")[0]
	vgck := strings.Contains(r.Output, "\nvgck ok")
	recovered := results["TestGuestProvisionRecover"] == "PASS" && vgck && after == before
	if !recovered {
		t.Errorf("after the unclean reset: TestGuestProvisionRecover %q, vgck passed %v, md5 before the cache %s, after recovery %s\nboot 2 output:\n%s",
			results["TestGuestProvisionRecover"], vgck, before, after, r.Output)
	}
	set("uncleanRebootRecovered", recovered)
	intact(after == before)
}

// bootUnclean runs a script that ends by resetting the VM (no exit
// line), records its time like boot, and returns its output.
func bootUnclean(t *testing.T, script string, o vmlab.Options) string {
	t.Helper()
	assets(t)
	vm, err := vmlab.Start(t.Context(), script, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vm.Close() })
	r, err := vm.Wait()
	name := strings.ReplaceAll(t.Name(), "/", "_") + "-boot1"
	_ = os.WriteFile(filepath.Join(artifacts, name+"-console.log"), []byte(r.Console), 0o644)
	_ = os.WriteFile(filepath.Join(artifacts, name+"-output.txt"), []byte(r.Output), 0o644)
	record(t.Name()+" VM (boot 1, reset)", r.Wall, fmt.Sprintf("%s; boot %.1f s (guest clock)", r.Accel, r.Boot.Seconds()))
	t.Logf("VM boot 1 (%s): boot %.1f s, wall %.1f s, ended by the reset: %v", r.Accel, r.Boot.Seconds(), r.Wall.Seconds(), err)
	if err == nil {
		t.Fatalf("boot 1's script exited (%d) instead of resetting the VM:\n%s", r.ExitCode, r.Output)
	}
	if !strings.Contains(err.Error(), "exit line is missing") || !strings.Contains(r.Console, "sysrq: Resetting") {
		t.Fatalf("boot 1 did not end by the sysrq reset: %v\noutput:\n%s", err, r.Output)
	}
	return r.Output
}

// buildDMCacheTest builds agent/dmcache's in-guest test binary.
func buildDMCacheTest(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dmcache.test")
	t0 := time.Now()
	cmd := exec.Command("go", "test", "-c", "-tags", "vmguest", "-o", bin, "../../agent/dmcache")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c -tags vmguest ./agent/dmcache: %v\n%s", err, out)
	}
	record("build dmcache.test ("+t.Name()+")", time.Since(t0), "")
	return bin
}

// guestResults maps each in-guest test to PASS, FAIL or SKIP.
func guestResults(out string) map[string]string {
	results := map[string]string{}
	for _, m := range guestResultRE.FindAllStringSubmatch(out, -1) {
		results[m[2]] = m[1]
	}
	return results
}
