// Package sentinel notices when a device's queue defaults change between
// the agent's runs, as a kernel or node-image upgrade changes them (Linux
// 6.17 derives a rotational disk's read_ahead_kb from its max_sectors_kb,
// block/blk-settings.c, blk_apply_bdi_limits; a distribution's udev rule
// or tuned profile sets another scheduler). At each start the agent reads
// the defaults of every device it governs (the values before any change
// of its own: the actuator's record of the original when it holds one),
// compares them with those it kept at the previous start on the same
// disk, and keeps the new ones. Each knob that differs is a finding, with
// the kernel release and node image of both starts beside it.
//
// The knobs compared are those of Knobs, taken from the device as package
// agent/sysfs read it (HOSTROOT/sys/block/DEV/queue/NAME) and written as
// sysfs prints them: the scheduler by name, the others as decimal numbers,
// rotational as 0 or 1. A device without a scheduler file (bio-based) has
// no scheduler knob; the others read 0 when their file is absent, as
// package sysfs reads them.
package sentinel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// Knobs are the queue attributes compared, in the order findings list
// them: the scheduler, the read-ahead depth (KiB), the scheduler's queue
// depth (requests), the largest request (KiB), writeback throttling's
// latency target (µs) and whether the kernel treats the disk as
// rotational.
var Knobs = []string{"scheduler", "read_ahead_kb", "nr_requests", "max_sectors_kb", "wbt_lat_usec", "rotational"}

// maxAttrBytes bounds a read of the kernel release or of os-release.
const maxAttrBytes = 4096

// Host is what the node ran at a start.
type Host struct {
	// KernelRelease is /proc/sys/kernel/osrelease ("6.17.2-1-cloud").
	KernelRelease string `json:"kernelRelease,omitempty"`
	// Image is os-release's PRETTY_NAME, else NAME and VERSION_ID
	// ("Debian GNU/Linux 12 (bookworm)").
	Image string `json:"image,omitempty"`
}

// Seen is a device's defaults at one start.
type Seen struct {
	// Knobs maps a name of Knobs to its value as sysfs prints it.
	Knobs map[string]string `json:"knobs"`
	Host  Host              `json:"host"`
	// At is when they were read: first read, for the defaults a start
	// keeps (a later start that reads the same values keeps its time).
	At time.Time `json:"at"`
}

// Change is one knob's default that differs.
type Change struct {
	Knob     string
	Old, New string
}

// Finding is what differs between two starts.
type Finding struct {
	Changes []Change
	// Before and After are the hosts of the earlier and the later start.
	Before, After Host
	// Since is when the earlier defaults were read.
	Since time.Time
}

// Compare returns the knobs whose values differ between prev, the
// defaults of an earlier start, and cur, in Knobs' order, with both
// starts' hosts; ok is false when none differs. It is pure.
func Compare(prev, cur Seen) (f Finding, ok bool) {
	for _, k := range Knobs {
		o, inPrev := prev.Knobs[k]
		n, inCur := cur.Knobs[k]
		if inPrev && inCur && o != n {
			f.Changes = append(f.Changes, Change{Knob: k, Old: o, New: n})
		}
	}
	f.Before, f.After, f.Since = prev.Host, cur.Host, prev.At
	return f, len(f.Changes) > 0
}

// String says what changed and with what, in one line: "read_ahead_kb
// 128 → 4096, scheduler mq-deadline → none; kernel 6.16.1 → 6.17.2".
func (f Finding) String() string {
	parts := make([]string, len(f.Changes))
	for i, c := range f.Changes {
		parts[i] = fmt.Sprintf("%s %s → %s", c.Knob, c.Old, c.New)
	}
	s := strings.Join(parts, ", ")
	if w := f.With(); w != "" {
		s += "; " + w
	}
	return s
}

// With names the kernel and image changes that came with the finding
// ("kernel 6.16.1 → 6.17.2, image A → B"), or says that neither changed;
// "" when neither start's host is known.
func (f Finding) With() string {
	var w []string
	if f.Before.KernelRelease != f.After.KernelRelease {
		w = append(w, fmt.Sprintf("kernel %s → %s", orUnknown(f.Before.KernelRelease), orUnknown(f.After.KernelRelease)))
	}
	if f.Before.Image != f.After.Image {
		w = append(w, fmt.Sprintf("image %s → %s", orUnknown(f.Before.Image), orUnknown(f.After.Image)))
	}
	switch {
	case len(w) > 0:
		return strings.Join(w, ", ")
	case f.After.KernelRelease == "" && f.After.Image == "":
		return ""
	}
	return "kernel and image unchanged"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Of returns d's knobs of Knobs.
func Of(d sysfs.Device) map[string]string {
	out := map[string]string{
		"read_ahead_kb":  strconv.Itoa(d.ReadAheadKiB),
		"nr_requests":    strconv.Itoa(d.NrRequests),
		"max_sectors_kb": strconv.Itoa(d.MaxSectorsKB),
		"wbt_lat_usec":   strconv.FormatInt(d.WbtLatUsec, 10),
		"rotational":     "0",
	}
	if d.Rotational {
		out["rotational"] = "1"
	}
	if d.Scheduler != "" {
		out["scheduler"] = d.Scheduler
	}
	return out
}

// ReadHost returns the host's kernel release and image, from
// HOSTROOT/proc/sys/kernel/osrelease (else this process's
// /proc/sys/kernel/osrelease: a container runs on the node's kernel) and
// HOSTROOT/etc/os-release (else HOSTROOT/usr/lib/os-release,
// os-release(5); never the container's own, which names its image);
// what cannot be read is left empty.
func ReadHost(hostRoot string) Host {
	var h Host
	var err error
	if h.KernelRelease, err = readSmall(filepath.Join(hostRoot, "/proc/sys/kernel/osrelease")); err != nil && hostRoot != "" {
		h.KernelRelease, _ = readSmall("/proc/sys/kernel/osrelease")
	}
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		if img, ok := image(filepath.Join(hostRoot, p)); ok {
			h.Image = img
			break
		}
	}
	return h
}

// image reads an os-release file: PRETTY_NAME, else NAME VERSION_ID.
func image(path string) (string, bool) {
	text, err := readSmall(path)
	if err != nil {
		return "", false
	}
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			kv[k] = strings.Trim(v, `"'`)
		}
	}
	if kv["PRETTY_NAME"] != "" {
		return kv["PRETTY_NAME"], true
	}
	s := strings.TrimSpace(kv["NAME"] + " " + kv["VERSION_ID"])
	return s, s != ""
}

// readSmall reads a file of at most maxAttrBytes, trimmed of white space
// around it.
func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, maxAttrBytes+1)
	n, err := f.Read(b)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if n > maxAttrBytes {
		return "", fmt.Errorf("read %s: longer than %d bytes", path, maxAttrBytes)
	}
	return strings.TrimSpace(string(b[:n])), nil
}
