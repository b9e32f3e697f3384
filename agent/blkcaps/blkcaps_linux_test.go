package blkcaps

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestReadLive: a cgroup of the host's blk-throttle (cgroup v1 blkio, else
// cgroup v2 with the io controller) caps a loop device's reads at 3000
// IOPS and 200 MB/s; a process in it reads the device with direct I/O;
// Read names those caps for the device, and none once an uncapped reader
// reads more.
func TestReadLive(t *testing.T) {
	dev := loopdev.NewForTest(t, 64<<20)
	majMin := dev.MajMin(t)
	dir, procs := loopdev.ThrottleCgroup(t, majMin, 3000, 200_000_000)
	r := New("")
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	read := func(procs string, mib int) {
		t.Helper()
		sh := fmt.Sprintf("echo $$ > %s && exec dd if=%s of=/dev/null bs=64k count=%d iflag=direct status=none", procs, dev.Path, mib*16)
		if procs == "" {
			sh = fmt.Sprintf("exec dd if=%s of=/dev/null bs=64k count=%d iflag=direct status=none", dev.Path, mib*16)
		}
		if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
			t.Fatalf("dd: %v: %s", err, out)
		}
	}
	read(procs, 8)
	got, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got[majMin] != (model.Throttle{IOPS: 3000, BytesPerSec: 2e8}) {
		t.Fatalf("after a read in %s: %s caps %v, want 3000 IOPS, 200 MB/s (all: %v)", dir, majMin, got[majMin], got)
	}
	read("", 16)
	if got, err = r.Read(); err != nil || got[majMin].Enabled() {
		t.Fatalf("after a larger uncapped read: %v, %v; want %s uncapped", got, err, majMin)
	}
}
