package dmcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// probeReads is how many 4 KiB reads ProbeRead times.
const probeReads = 64

// ProbeRead measures what a read served by a dm-cache costs: the
// median time of probeReads 4 KiB O_DIRECT reads, one at a time, spread
// over the cache's fast device (its data device: of the cache device
// dmDev's slaves in sysfs, the largest that is not the origin, whose
// "MAJOR:MINOR" is origin). It only reads, and returns the device's kernel
// name and the median in ns. The simulated cache charges it per hit
// (redcap.Config.HitOverheadNs) in place of a RAM copy's 2 µs: an SSD
// cache device reads in tens of µs, and the VM lab's brd RAM disk behind
// dm-linear in 11 µs under TCG. It reads HOSTROOT/sys/block and
// HOSTROOT/dev/DEV (hostRoot "" is "/"). Errors: no such slave, or the
// device cannot be opened or read (wrapped).
func ProbeRead(hostRoot, dmDev, origin string) (string, int64, error) {
	root := hostRoot
	if root == "" {
		root = "/"
	}
	dev, sectors, err := dataDevice(root, dmDev, origin)
	if err != nil {
		return "", 0, err
	}
	f, err := os.OpenFile(filepath.Join(root, "dev", dev), os.O_RDONLY|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) { // no O_DIRECT (a test's regular file on tmpfs)
		f, err = os.Open(filepath.Join(root, "dev", dev))
	}
	if err != nil {
		return dev, 0, fmt.Errorf("probe the cache device: %w", err)
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned for O_DIRECT
	if err != nil {
		return dev, 0, fmt.Errorf("probe the cache device: %w", err)
	}
	defer unix.Munmap(buf) //nolint:errcheck // an anonymous mapping
	blocks := max(int64(sectors)/8, 1)
	times := make([]int64, 0, probeReads)
	for i := range int64(probeReads + 1) {
		off := (i * (blocks / probeReads)) % blocks * 4096
		t0 := time.Now()
		if _, err := f.ReadAt(buf, off); err != nil {
			return dev, 0, fmt.Errorf("probe the cache device %s at byte %d: %w", dev, off, err)
		}
		if i > 0 { // the first read warms the path
			times = append(times, time.Since(t0).Nanoseconds())
		}
	}
	slices.Sort(times)
	return dev, times[len(times)/2], nil
}

// dataDevice returns the kernel name and size in sectors of the
// largest slave of dmDev (under root/sys/block) whose dev is not origin.
func dataDevice(root, dmDev, origin string) (string, uint64, error) {
	ents, err := os.ReadDir(filepath.Join(root, "sys", "block", dmDev, "slaves"))
	if err != nil {
		return "", 0, fmt.Errorf("the cache device's slaves: %w", err)
	}
	best, most := "", uint64(0)
	for _, e := range ents {
		base := filepath.Join(root, "sys", "block", e.Name())
		mm, err := os.ReadFile(filepath.Join(base, "dev"))
		if err != nil || strings.TrimSpace(string(mm)) == origin {
			continue
		}
		b, err := os.ReadFile(filepath.Join(base, "size"))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > most {
			best, most = e.Name(), n
		}
	}
	if best == "" {
		return "", 0, fmt.Errorf("%s: no slave but the origin %s", dmDev, origin)
	}
	return best, most, nil
}
