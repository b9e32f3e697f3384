//go:build vm

package vm

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/vmlab"
)

// dmCacheToolScript sets up, on a 128 MiB brd RAM disk: a writethrough
// smq cache "cached" over the throttled /dev/vdb (the host's random
// image), a writeback cache "wbcache" over /dev/vda made dirty with 2 MiB
// of direct writes (then reloaded with migration_threshold 0, so that smq
// does not clean it in the background when idle), and "multi", a cache target followed by a linear one
// over /dev/vde; and an LVM cached LV vg0/data (origin on /dev/vdc, filled
// with random data, cachevol on /dev/vdd, writethrough, 64 KiB chunks).
// It runs agent/dmcache's in-guest test (dmcache.test, -tags vmguest) on
// them, prints the tables and statuses, then the md5 sums: the raw
// origin before, the cached view after the test, the origin after the
// cache's removal (through the cleaner policy); the LV before caching,
// after the test and its origin sub-LV.
const dmCacheToolScript = `set -e
modprobe brd rd_nr=1 rd_size=131072
mkdir -p /run/lvm /run/lock/lvm
[ -e /usr/sbin/lvchange ] || ln -s lvm /usr/sbin/lvchange
C='devices { use_devicesfile=0 obtain_device_list_from_udev=0 } global { cache_check_executable="" } activation { udev_sync=0 udev_rules=0 monitoring=0 }'
mm() { dmsetup info -c --noheadings -o major,minor --separator : "$1"; }
md5() { md5sum <"$1" | cut -d' ' -f1; }
O=/dev/vdb
echo "md5-raw-before $(md5 $O)"
dmsetup create cmeta --table "0 8192 linear /dev/ram0 0"
dmsetup create cdata --table "0 122880 linear /dev/ram0 8192"
dmsetup create cached --table "0 $(blockdev --getsz $O) cache /dev/mapper/cmeta /dev/mapper/cdata $O 128 1 writethrough smq 0"
dmsetup create wbmeta --table "0 8192 linear /dev/ram0 131072"
dmsetup create wbdata --table "0 32768 linear /dev/ram0 139264"
dmsetup create mmeta --table "0 8192 linear /dev/ram0 172032"
dmsetup create mdata --table "0 16384 linear /dev/ram0 180224"
E=$(($(blockdev --getsz /dev/vde) - 2048))
printf '0 %d cache /dev/mapper/mmeta /dev/mapper/mdata /dev/vde 128 1 writethrough smq 0\n%d 2048 linear /dev/vde 0\n' $E $E | dmsetup create multi
lvm pvcreate --config "$C" -q /dev/vdc /dev/vdd
lvm vgcreate --config "$C" -q vg0 /dev/vdc /dev/vdd
lvm lvcreate --config "$C" -q -y -n data -L 96M vg0 /dev/vdc
dd if=/dev/urandom of=/dev/mapper/vg0-data bs=1M count=96 2>/dev/null
echo "md5-lvm-before $(md5 /dev/mapper/vg0-data)"
lvm lvcreate --config "$C" -q -y -n fast -L 32M vg0 /dev/vdd
lvm lvconvert --config "$C" -q -y --type cache --cachevol fast --cachemode writethrough --chunksize 64k vg0/data
WB="0 $(blockdev --getsz /dev/vda) cache /dev/mapper/wbmeta /dev/mapper/wbdata /dev/vda 128 0 smq"
dmsetup create wbcache --table "$WB 0"
dd if=/dev/urandom of=/dev/mapper/wbcache bs=64k count=32 oflag=direct
dmsetup suspend wbcache
dmsetup reload wbcache --table "$WB 2 migration_threshold 0"
dmsetup resume wbcache
echo "== before"; dmsetup table; dmsetup status
export DMC_LVM_CONFIG="$C" DMC_MULTI=multi
export DMC_RAW=cached DMC_RAW_ORIGIN=$(cat /sys/block/vdb/dev) DMC_RAW_CACHE=$(mm cdata)
export DMC_WB=wbcache DMC_WB_ORIGIN=$(cat /sys/block/vda/dev) DMC_WB_CACHE=$(mm wbdata)
export DMC_LVM=vg0-data DMC_LVM_ORIGIN=$(mm vg0-data_corig) DMC_LVM_CACHE=$(mm vg0-fast_cvol-cdata)
rc=0
dmcache.test -test.v -test.run '^TestGuest' || rc=$?
echo "== after"; dmsetup table; dmsetup status
lvm lvs --config "$C" -a -o lv_name,cache_mode,lv_attr,segtype vg0
echo "md5-raw-cached $(md5 /dev/mapper/cached)"
echo "md5-lvm-after $(md5 /dev/mapper/vg0-data)"
echo "md5-lvm-origin $(md5 /dev/mapper/vg0-data_corig)"
T=$(dmsetup table cached)
dmsetup suspend cached
dmsetup reload cached --table "${T% * * *} writethrough cleaner 0"
dmsetup resume cached
i=0
while [ "$(dmsetup status cached | cut -d' ' -f14)" != 0 ]; do
	i=$((i+1)); [ $i -lt 60 ] || { echo "cleaner: still dirty: $(dmsetup status cached)"; exit 3; }
	sleep 0.5
done
dmsetup remove cached
echo "md5-raw-after $(md5 $O)"
exit $rc
`

var guestResultRE = regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (TestGuest\w+)`)

// TestDMCacheTool runs agent/dmcache's in-guest test on the 6.1 kernel:
// List finds a raw dm-cache, an LVM cached LV and a dirty writeback cache
// (and skips a multi-target table), SetMode switches writethrough →
// passthrough → writethrough online under fio (dmsetup suspend/reload/
// resume, lvchange for the LV), refuses writeback and refuses passthrough
// on the dirty cache; the data of both origins is unchanged (md5).
func TestDMCacheTool(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dmcache.test")
	t0 := time.Now()
	cmd := exec.Command("go", "test", "-c", "-tags", "vmguest", "-o", bin, "../../agent/dmcache")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c -tags vmguest ./agent/dmcache: %v\n%s", err, out)
	}
	record("build dmcache.test", time.Since(t0), "")
	img := filepath.Join(t.TempDir(), "origin.img")
	want := randomImage(t, img, 128<<20)
	r := boot(t, dmCacheToolScript, vmlab.Options{
		Disks: []vmlab.Disk{{SizeMiB: 16}, {Image: img, Throttle: &vmlab.CloudDisk}, {SizeMiB: 128}, {SizeMiB: 64}, {SizeMiB: 16}},
		Files: map[string]string{"/usr/local/bin/dmcache.test": bin}}, 0)
	results := map[string]string{}
	for _, m := range guestResultRE.FindAllStringSubmatch(r.Output, -1) {
		results[m[2]] = m[1]
	}
	for _, name := range []string{"TestGuestList", "TestGuestSwitchRaw", "TestGuestSwitchLVM", "TestGuestRefuseDirty"} {
		if results[name] != "PASS" {
			t.Errorf("in the guest, %s: %q, want PASS", name, results[name])
		}
	}
	rawBefore, rawCached, rawAfter := fields(t, r.Output, "md5-raw-before")[0], fields(t, r.Output, "md5-raw-cached")[0], fields(t, r.Output, "md5-raw-after")[0]
	hostAfter := md5File(t, img)
	if rawBefore != want || rawCached != want || rawAfter != want || hostAfter != want {
		t.Errorf("raw cache md5: image written %s; guest: origin before %s, cached view after the switches %s, origin after removal %s; image after the VM %s",
			want, rawBefore, rawCached, rawAfter, hostAfter)
	}
	lvBefore, lvAfter, lvOrigin := fields(t, r.Output, "md5-lvm-before")[0], fields(t, r.Output, "md5-lvm-after")[0], fields(t, r.Output, "md5-lvm-origin")[0]
	if lvAfter != lvBefore || lvOrigin != lvBefore {
		t.Errorf("LVM md5: LV before caching %s, after the switches %s, its origin sub-LV %s", lvBefore, lvAfter, lvOrigin)
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", r.Output)
	}
	rawOK, lvmOK := rawCached == want && rawAfter == want && hostAfter == want, lvAfter == lvBefore && lvOrigin == lvBefore
	intact(rawOK && lvmOK)
	set("dmCacheTool", map[string]any{"guestTests": results, "rawIntact": rawOK, "lvmIntact": lvmOK})
}
