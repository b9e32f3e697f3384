package dmcache

// The brd RAM disk a "ram" cache uses on a volume whose logical blocks
// are smaller than zram's (Documentation/admin-guide/blockdev/ramdisk.rst,
// drivers/block/brd.c).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// brdDevice is the brd RAM disk a "ram" cache uses on a volume whose
// logical blocks are smaller than zram's 4096 bytes.
const brdDevice = "/dev/ram0"

// EnsureBRD makes the brd RAM disk /dev/ram0 of sizeBytes ready: loads
// brd with one disk of that size (rounded up to KiB) when it is absent,
// and refuses one of another size (brd's size is set when the module is
// loaded) or one in use (a holder, or mounted). It reads
// HOSTROOT/sys/block/ram0 and HOSTROOT/proc/mounts (hostRoot "" is "/")
// and runs modprobe from PATH, not chrooted. Errors: modprobe's (wrapped,
// with its output), the disk's size unreadable (wrapped), or the refusal.
func EnsureBRD(hostRoot string, sizeBytes int64) error {
	kib := (sizeBytes + 1023) / 1024
	sys := filepath.Join(hostRootOr(hostRoot), "sys", "block", "ram0")
	if _, err := os.Stat(sys); errors.Is(err, os.ErrNotExist) {
		out, err := exec.Command("modprobe", "brd", "rd_nr=1", "rd_size="+strconv.FormatInt(kib, 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("modprobe brd rd_nr=1 rd_size=%d: %w: %s", kib, err, strings.TrimSpace(string(out)))
		}
	}
	b, err := os.ReadFile(filepath.Join(sys, "size"))
	if err != nil {
		return fmt.Errorf("brd RAM disk: %w", err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return fmt.Errorf("brd RAM disk: size %q: %w", strings.TrimSpace(string(b)), err)
	}
	if sectors*512 != kib*1024 {
		return fmt.Errorf("%s exists with %d bytes, memoryBudget asks for %d: not used (brd's size is set when the module is loaded)", brdDevice, sectors*512, kib*1024)
	}
	if h, _ := os.ReadDir(filepath.Join(sys, "holders")); len(h) > 0 {
		return fmt.Errorf("%s is in use (held by %s): not used", brdDevice, h[0].Name())
	}
	if m, err := os.ReadFile(filepath.Join(hostRootOr(hostRoot), "proc", "mounts")); err == nil && slices.Contains(strings.Fields(string(m)), brdDevice) {
		return fmt.Errorf("%s is mounted: not used", brdDevice)
	}
	return nil
}

// hostRootOr is r, or "/" when r is "".
func hostRootOr(r string) string {
	if r == "" {
		return "/"
	}
	return r
}
