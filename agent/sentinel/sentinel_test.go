package sentinel

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

func TestCompare(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	old := Host{KernelRelease: "6.16.1", Image: "Debian 12"}
	upgraded := Host{KernelRelease: "6.17.2", Image: "Debian 12"}
	base := map[string]string{"scheduler": "mq-deadline", "read_ahead_kb": "128", "nr_requests": "64", "max_sectors_kb": "1280", "rotational": "1"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		prev Seen
		cur  Seen
		ok   bool
		text string
	}{
		{"unchanged", Seen{Knobs: base, Host: old, At: t0}, Seen{Knobs: base, Host: upgraded}, false, ""},
		// AKS#5743 / runner-images#13938: a kernel that derives read-ahead
		// from max_sectors on a rotational disk.
		{"read-ahead raised by a kernel upgrade", Seen{Knobs: base, Host: old, At: t0}, Seen{Knobs: with("read_ahead_kb", "4096"), Host: upgraded}, true,
			"read_ahead_kb 128 → 4096; kernel 6.16.1 → 6.17.2"},
		{"two knobs, in Knobs' order, same host", Seen{Knobs: with("read_ahead_kb", "512"), Host: old, At: t0},
			Seen{Knobs: with("scheduler", "none"), Host: old}, true, "scheduler mq-deadline → none, read_ahead_kb 512 → 128; kernel and image unchanged"},
		{"a knob at one start only is not compared", Seen{Knobs: with("wbt_lat_usec", "2000"), At: t0}, Seen{Knobs: base}, false, ""},
		{"image changed, hosts partly unknown", Seen{Knobs: base, Host: Host{Image: "A"}, At: t0}, Seen{Knobs: with("nr_requests", "256"), Host: Host{Image: "B"}}, true,
			"nr_requests 64 → 256; image A → B"},
		{"no host known", Seen{Knobs: base, At: t0}, Seen{Knobs: with("rotational", "0")}, true, "rotational 1 → 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := Compare(tc.prev, tc.cur)
			if ok != tc.ok || (ok && f.String() != tc.text) {
				t.Errorf("Compare = %q, %v; want %q, %v", f.String(), ok, tc.text, tc.ok)
			}
			if ok && !f.Since.Equal(t0) {
				t.Errorf("Since %v, want %v", f.Since, t0)
			}
		})
	}
}

func write(t *testing.T, root, rel, text string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOf(t *testing.T) {
	disk := sysfs.Device{Scheduler: "mq-deadline", ReadAheadKiB: 128, NrRequests: 64, MaxSectorsKB: 1280, WbtLatUsec: 75000, Rotational: true}
	want := map[string]string{"scheduler": "mq-deadline", "read_ahead_kb": "128", "nr_requests": "64", "max_sectors_kb": "1280",
		"wbt_lat_usec": "75000", "rotational": "1"}
	if got := Of(disk); !reflect.DeepEqual(got, want) {
		t.Errorf("Of(a disk) = %v, want %v", got, want)
	}
	// A bio-based device (zram) has no scheduler.
	zram := sysfs.Device{ReadAheadKiB: 128, MaxSectorsKB: 1280}
	want = map[string]string{"read_ahead_kb": "128", "nr_requests": "0", "max_sectors_kb": "1280", "wbt_lat_usec": "0", "rotational": "0"}
	if got := Of(zram); !reflect.DeepEqual(got, want) {
		t.Errorf("Of(zram) = %v, want %v", got, want)
	}
	for _, k := range Knobs[1:] {
		if _, ok := Of(zram)[k]; !ok {
			t.Errorf("knob %s missing", k)
		}
	}
}

func TestReadHost(t *testing.T) {
	root := t.TempDir()
	own, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if h := ReadHost(root); h != (Host{KernelRelease: strings.TrimSpace(string(own))}) {
		t.Errorf("a host root with only /sys (the chart's default): %+v, want this kernel's release and no image", h)
	}
	write(t, root, "proc/sys/kernel/osrelease", "6.17.2-cloud\n")
	write(t, root, "usr/lib/os-release", "NAME=\"Flatcar\"\nVERSION_ID=4152.2.0\n")
	if h := ReadHost(root); h != (Host{KernelRelease: "6.17.2-cloud", Image: "Flatcar 4152.2.0"}) {
		t.Errorf("usr/lib/os-release: %+v", h)
	}
	write(t, root, "etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=Debian\n")
	if h := ReadHost(root); h.Image != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("etc/os-release: %+v", h)
	}
}

func TestJudge(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name           string
		newNs, oldNs   float64
		slower, judged bool
		pct            float64
	}{
		{"a deeper default that thrashes", 9e9, 1e9, true, true, 800},
		{"within the margin", 1.04e9, 1e9, false, true, 4},
		{"just beyond the margin", 1.06e9, 1e9, true, true, 6},
		{"faster", 0.5e9, 1e9, false, true, -50},
		{"no work at the old default", 1e9, 0, false, false, 0},
		{"no work at the new one", 0, 1e9, false, false, 0},
		{"not a number", nan, 1e9, false, false, 0},
		{"infinite", math.Inf(1), 1e9, false, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := Judge(tc.newNs, tc.oldNs, 5)
			if ok != tc.judged || v.Slower != tc.slower || math.Abs(v.ChangePct-tc.pct) > 1e-9 {
				t.Errorf("Judge(%g, %g, 5) = %+v, %v; want slower %v, %.1f %%, judged %v", tc.newNs, tc.oldNs, v, ok, tc.slower, tc.pct, tc.judged)
			}
		})
	}
}
