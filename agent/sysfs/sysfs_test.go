package sysfs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

const fake = "testdata"

func discoverFake(t *testing.T) map[string]Device {
	t.Helper()
	devs, err := Discover(fake)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	m := map[string]Device{}
	for _, d := range devs {
		if _, dup := m[d.Name]; dup {
			t.Fatalf("device %s listed twice", d.Name)
		}
		m[d.Name] = d
	}
	return m
}

func TestDiscoverOrder(t *testing.T) {
	devs, err := Discover(fake)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
	}
	want := []string{"dm-0", "loop3", "loop7", "nvme0n1", "sda", "sda1", "sda2", "vda", "zram0"}
	if !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
}

func TestDiscoverFake(t *testing.T) {
	m := discoverFake(t)
	mqDeadline := map[string]string{
		"async_depth": "64", "fifo_batch": "16", "front_merges": "1", "prio_aging_expire": "10000",
		"read_expire": "500", "write_expire": "5000", "writes_starved": "2",
	}
	tests := []struct {
		name string
		want Device
	}{
		{"sda", Device{
			Name: "sda", MajorMinor: "8:0", Major: 8, Minor: 0, Dev: 8 << 20, DiskSeq: 1,
			Model: "ST1000DM003-1SB1", Serial: "Z9A1B2C3", WWN: "naa.5000c500a1b2c3d4",
			SizeBytes: 1953525168 * 512, Rotational: true, LogicalBlockSize: 512, PhysicalBlockSize: 4096,
			MaxSectorsKB: 1280, NrRequests: 64, WbtLatUsec: 75000, Tags: 32,
			Schedulers: []string{"none", "mq-deadline", "bfq", "kyber"}, Scheduler: "mq-deadline",
			ReadAheadKiB: 128, Tunables: mqDeadline,
		}},
		{"sda1", Device{
			Name: "sda1", MajorMinor: "8:1", Major: 8, Minor: 1, Dev: 8<<20 | 1, DiskSeq: 1,
			Model: "ST1000DM003-1SB1", Serial: "Z9A1B2C3", WWN: "naa.5000c500a1b2c3d4",
			SizeBytes: 1048576 * 512, Rotational: true, LogicalBlockSize: 512, PhysicalBlockSize: 4096,
			MaxSectorsKB: 1280, NrRequests: 64, WbtLatUsec: 75000, Tags: 32,
			Schedulers: []string{"none", "mq-deadline", "bfq", "kyber"}, Scheduler: "mq-deadline",
			ReadAheadKiB: 128, Tunables: mqDeadline, Partition: true, Parent: "sda",
		}},
		{"sda2", Device{
			Name: "sda2", MajorMinor: "8:2", Major: 8, Minor: 2, Dev: 8<<20 | 2, DiskSeq: 1,
			Model: "ST1000DM003-1SB1", Serial: "Z9A1B2C3", WWN: "naa.5000c500a1b2c3d4",
			SizeBytes: 1952474511 * 512, Rotational: true, LogicalBlockSize: 512, PhysicalBlockSize: 4096,
			MaxSectorsKB: 1280, NrRequests: 64, WbtLatUsec: 75000, Tags: 32,
			Schedulers: []string{"none", "mq-deadline", "bfq", "kyber"}, Scheduler: "mq-deadline",
			ReadAheadKiB: 128, Tunables: mqDeadline, Partition: true, Parent: "sda",
			Holders: []string{"dm-0"},
		}},
		{"nvme0n1", Device{
			Name: "nvme0n1", MajorMinor: "259:0", Major: 259, Minor: 0, Dev: 259 << 20, DiskSeq: 2,
			Model: "Samsung SSD 980 PRO 1TB", Serial: "S5GXNF0R123456A", WWN: "eui.002538b111b2c3d4",
			SizeBytes: 1953525168 * 512, LogicalBlockSize: 512, PhysicalBlockSize: 512,
			MaxSectorsKB: 128, NrRequests: 1023, WbtLatUsec: 2000, Tags: 1023,
			Schedulers: []string{"none", "mq-deadline", "kyber", "bfq"}, Scheduler: "none",
			ReadAheadKiB: 128,
		}},
		{"vda", Device{
			Name: "vda", MajorMinor: "254:0", Major: 254, Minor: 0, Dev: 254 << 20, DiskSeq: 3,
			Serial: "overlayblk", SizeBytes: 536870912 * 512, Rotational: true,
			LogicalBlockSize: 512, PhysicalBlockSize: 4096, MaxSectorsKB: 4096, NrRequests: 256, WbtLatUsec: 75000, Tags: 256,
			Schedulers: []string{"none", "mq-deadline", "kyber", "bfq"}, Scheduler: "mq-deadline",
			ReadAheadKiB: 8192, Tunables: map[string]string{
				"async_depth": "256", "fifo_batch": "16", "front_merges": "1", "prio_aging_expire": "10000",
				"read_expire": "500", "write_expire": "5000", "writes_starved": "2",
			},
		}},
		{"loop3", Device{
			Name: "loop3", MajorMinor: "7:3", Major: 7, Minor: 3, Dev: 7<<20 | 3, DiskSeq: 9,
			SizeBytes: 64 << 20, Rotational: true, LogicalBlockSize: 512, PhysicalBlockSize: 512,
			MaxSectorsKB: 1280, NrRequests: 128, WbtLatUsec: 75000, Tags: 128,
			Schedulers: []string{"none", "mq-deadline", "kyber", "bfq"}, Scheduler: "none",
			ReadAheadKiB: 128, Loop: true, BackingFile: "/var/lib/shadowtune/images/disk.img",
		}},
		{"loop7", Device{
			Name: "loop7", MajorMinor: "7:7", Major: 7, Minor: 7, Dev: 7<<20 | 7, DiskSeq: 13,
			Rotational: true, LogicalBlockSize: 512, PhysicalBlockSize: 512,
			MaxSectorsKB: 1280, NrRequests: 128, WbtLatUsec: 75000, Tags: 128,
			Schedulers: []string{"none", "mq-deadline", "kyber", "bfq"}, Scheduler: "none",
			ReadAheadKiB: 128, Loop: true,
		}},
		{"zram0", Device{
			Name: "zram0", MajorMinor: "252:0", Major: 252, Minor: 0, Dev: 252 << 20, DiskSeq: 4,
			SizeBytes: 4 << 30, LogicalBlockSize: 4096, PhysicalBlockSize: 4096, MaxSectorsKB: 1280,
			ReadAheadKiB: 128, Zram: true,
		}},
		{"dm-0", Device{
			Name: "dm-0", MajorMinor: "253:0", Major: 253, Minor: 0, Dev: 253 << 20, DiskSeq: 5,
			SizeBytes: 1952473088 * 512, Rotational: true, LogicalBlockSize: 512, PhysicalBlockSize: 4096,
			MaxSectorsKB: 1280, Schedulers: []string{"none"}, Scheduler: "none", ReadAheadKiB: 128,
			Slaves: []string{"sda2"}, DM: true, DMName: "vg0-root",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := m[tc.name]
			if !ok {
				t.Fatalf("%s not discovered", tc.name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Discover:\n got %+v\nwant %+v", got, tc.want)
			}
			r, err := Read(fake, tc.name)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(r, got) {
				t.Errorf("Read differs from Discover:\n got %+v\nwant %+v", r, got)
			}
		})
	}
}

func TestClassTunableVirtual(t *testing.T) {
	m := discoverFake(t)
	tests := []struct {
		name    string
		class   model.Class
		tunable bool
		virtual bool
	}{
		{"sda", model.HDD, true, false},
		{"sda1", model.HDD, false, false},
		{"nvme0n1", model.NVMe, true, false},
		{"vda", model.HDD, true, false},
		{"loop3", model.HDD, true, true},
		{"zram0", model.SSD, false, true},
		{"dm-0", model.HDD, false, true},
	}
	for _, tc := range tests {
		d := m[tc.name]
		if c := d.Class(); c != tc.class {
			t.Errorf("%s: Class = %v, want %v", tc.name, c, tc.class)
		}
		if got := d.Tunable(); got != tc.tunable {
			t.Errorf("%s: Tunable = %v, want %v", tc.name, got, tc.tunable)
		}
		if got := d.Virtual(); got != tc.virtual {
			t.Errorf("%s: Virtual = %v, want %v", tc.name, got, tc.virtual)
		}
	}
	for name, want := range map[string]bool{"md0": true, "md127": true, "mdx": false, "ram0": true, "sr0": true, "sra": false, "ramdisk": false} {
		if got := (&Device{Name: name}).Virtual(); got != want {
			t.Errorf("Device{Name:%q}.Virtual() = %v, want %v", name, got, want)
		}
	}
}

func TestSelect(t *testing.T) {
	devs, err := Discover(fake)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	tests := []struct {
		name             string
		include, exclude []string
		rotational       *bool
		minSize          uint64
		want             []string
	}{
		{"default: real whole disks", nil, nil, nil, 0, []string{"nvme0n1", "sda", "vda"}},
		{"include loop explicitly", []string{"loop*"}, nil, nil, 0, []string{"loop3"}}, // loop7 is empty
		{"include exact name", []string{"loop3", "sda"}, nil, nil, 0, []string{"loop3", "sda"}},
		{"star includes virtual", []string{"*"}, nil, nil, 0, []string{"dm-0", "loop3", "nvme0n1", "sda", "vda", "zram0"}},
		{"partition never selected", []string{"sda1", "sda*"}, nil, nil, 0, []string{"sda"}},
		{"exclude wins", []string{"sd*", "nvme*"}, []string{"sda"}, nil, 0, []string{"nvme0n1"}},
		{"exclude glob", nil, []string{"nvme*"}, nil, 0, []string{"sda", "vda"}},
		{"rotational only", nil, nil, &yes, 0, []string{"sda", "vda"}},
		{"non-rotational only", nil, nil, &no, 0, []string{"nvme0n1"}},
		{"min size", nil, nil, nil, 600 << 30, []string{"nvme0n1", "sda"}},
		{"min size excludes small loop", []string{"loop*"}, nil, nil, 1 << 30, nil},
		{"bad pattern matches nothing", []string{"[sd"}, nil, nil, 0, nil},
		{"bad exclude ignored", nil, []string{"[x"}, nil, 0, []string{"nvme0n1", "sda", "vda"}},
		{"dm by name", []string{"dm-*"}, nil, nil, 0, []string{"dm-0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range Select(devs, tc.include, tc.exclude, tc.rotational, tc.minSize) {
				got = append(got, d.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Select = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidatePatterns(t *testing.T) {
	if err := ValidatePatterns([]string{"sd*", "nvme?n1", "loop[0-9]"}); err != nil {
		t.Errorf("valid patterns: %v", err)
	}
	err := ValidatePatterns([]string{"sd*", "[sd"})
	if err == nil || !strings.Contains(err.Error(), `"[sd"`) {
		t.Errorf("bad pattern: err = %v", err)
	}
}

func TestParseScheduler(t *testing.T) {
	tests := []struct {
		in      string
		list    []string
		cur     string
		wantErr bool
	}{
		{"none [mq-deadline] kyber bfq \n", []string{"none", "mq-deadline", "kyber", "bfq"}, "mq-deadline", false},
		{"[none] mq-deadline kyber bfq ", []string{"none", "mq-deadline", "kyber", "bfq"}, "none", false},
		{"[mq-deadline] kyber bfq none\n", []string{"mq-deadline", "kyber", "bfq", "none"}, "mq-deadline", false},
		{"none\n", []string{"none"}, "none", false},
		{"noop deadline [cfq]", []string{"noop", "deadline", "cfq"}, "cfq", false}, // legacy block layer
		{"none mq-deadline", nil, "", true},
		{"[none] [bfq]", nil, "", true},
		{"none [bfq", nil, "", true},
		{"[]", nil, "", true},
		{"", nil, "", true},
	}
	for _, tc := range tests {
		list, cur, err := ParseScheduler(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseScheduler(%q) err = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if !slices.Equal(list, tc.list) || cur != tc.cur {
			t.Errorf("ParseScheduler(%q) = %v, %q; want %v, %q", tc.in, list, cur, tc.list, tc.cur)
		}
	}
}

func TestParseMajorMinor(t *testing.T) {
	tests := []struct {
		in       string
		maj, min uint32
		dev      uint32
		wantErr  bool
	}{
		{"8:0", 8, 0, 8 << 20, false},
		{"259:3\n", 259, 3, 259<<20 | 3, false},
		{"4095:1048575", 4095, 1048575, 0xffffffff, false},
		{"4096:0", 0, 0, 0, true},
		{"8:1048576", 0, 0, 0, true},
		{"8", 0, 0, 0, true},
		{"a:b", 0, 0, 0, true},
	}
	for _, tc := range tests {
		maj, min, dev, err := ParseMajorMinor(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseMajorMinor(%q) err = %v", tc.in, err)
			continue
		}
		if maj != tc.maj || min != tc.min || dev != tc.dev {
			t.Errorf("ParseMajorMinor(%q) = %d,%d,%#x; want %d,%d,%#x", tc.in, maj, min, dev, tc.maj, tc.min, tc.dev)
		}
	}
}

func TestReadErrors(t *testing.T) {
	for _, name := range []string{"sdz", "", "..", "../block/sda", "sda/queue"} {
		if _, err := Read(fake, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Read(%q) err = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := Discover(filepath.Join(t.TempDir(), "nothing")); err == nil {
		t.Error("Discover on a missing root: no error")
	}
}

// copyTree copies the fake tree into a temporary directory.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(fake)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestMalformedFilesNamed(t *testing.T) {
	tests := []struct {
		file, content string
	}{
		{"sys/block/sda/dev", "8-0\n"},
		{"sys/block/sda/size", "-1\n"},
		{"sys/block/sda/queue/rotational", "yes\n"},
		{"sys/block/sda/queue/scheduler", "none mq-deadline\n"},
		{"sys/block/sda/queue/read_ahead_kb", "12k\n"},
		{"sys/block/sda/sda1/dev", "8\n"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			root := copyTree(t)
			path := filepath.Join(root, tc.file)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			devs, err := Discover(root)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("Discover err = %v, want one naming %s", err, path)
			}
			// The other devices are still returned.
			found := map[string]bool{}
			for _, d := range devs {
				found[d.Name] = true
			}
			if !found["nvme0n1"] || !found["loop3"] {
				t.Errorf("other devices missing: %v", found)
			}
		})
	}
}

func TestMissingRequiredFile(t *testing.T) {
	root := copyTree(t)
	path := filepath.Join(root, "sys/block/nvme0n1/size")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := Read(root, "nvme0n1")
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Read err = %v, want one naming %s", err, path)
	}
}

func TestHostRootSymlinks(t *testing.T) {
	// On a real host /sys/block/NAME are symlinks into /sys/devices.
	root := t.TempDir()
	devices := filepath.Join(root, "sys/devices/virtual/block")
	if err := os.MkdirAll(devices, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(devices, "loop3"), os.DirFS(filepath.Join(fake, "sys/block/loop3"))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../devices/virtual/block/loop3", filepath.Join(root, "sys/block/loop3")); err != nil {
		t.Fatal(err)
	}
	devs, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].Name != "loop3" || devs[0].Scheduler != "none" || devs[0].BackingFile == "" {
		t.Fatalf("Discover through symlink = %+v", devs)
	}
}

func TestReadStat(t *testing.T) {
	st, err := ReadStat(fake, "vda")
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{ReadIOs: 112851, ReadMerges: 26547, ReadSectors: 5052058, ReadTicksMs: 177427,
		WriteIOs: 26720, WriteMerges: 76620, WriteSectors: 5231800, WriteTicksMs: 39293,
		IOTicksMs: 20468, TimeInQueueMs: 219126, DiscardIOs: 33103, DiscardMerges: 49,
		DiscardSectors: 3580808, DiscardTicksMs: 2395, FlushIOs: 260, FlushTicksMs: 9}
	if st != want {
		t.Errorf("ReadStat(vda) = %+v, want %+v", st, want)
	}
	p, err := ReadStat(fake, "sda1")
	if err != nil {
		t.Fatal(err)
	}
	if p.ReadIOs != 311 || p.WriteSectors != 16 {
		t.Errorf("ReadStat(sda1) = %+v", p)
	}
	if _, err := ParseStat("1 2 3"); err == nil {
		t.Error("ParseStat of 3 fields: no error")
	}
	if _, err := ReadStat(fake, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadStat(nope) err = %v", err)
	}
}

// TestRealSysfs reads the running host's /sys read-only. It checks only
// invariants that hold for any device, so unusual hardware cannot fail it.
func TestRealSysfs(t *testing.T) {
	if _, err := os.Stat("/sys/block"); err != nil {
		need.Missing(t, "/sys/block", "no /sys/block on this machine: %v", err)
	}
	devs, err := Discover("")
	if err != nil {
		t.Logf("Discover reported (devices may come and go): %v", err)
	}
	for _, d := range devs {
		t.Logf("%-10s %-7s dev=%s size=%d rot=%v sched=%q of %v ra=%d nr=%d part=%v loop=%v dm=%v zram=%v model=%q serial=%q wwn=%q",
			d.Name, d.Class(), d.MajorMinor, d.SizeBytes, d.Rotational, d.Scheduler, d.Schedulers,
			d.ReadAheadKiB, d.NrRequests, d.Partition, d.Loop, d.DM, d.Zram, d.Model, d.Serial, d.WWN)
		if d.Dev != d.Major<<20|d.Minor {
			t.Errorf("%s: Dev %#x != %d<<20|%d", d.Name, d.Dev, d.Major, d.Minor)
		}
		if d.Scheduler != "" && !slices.Contains(d.Schedulers, d.Scheduler) {
			t.Errorf("%s: current scheduler %q not in %v", d.Name, d.Scheduler, d.Schedulers)
		}
		if d.Partition && d.Parent == "" {
			t.Errorf("%s: partition without parent", d.Name)
		}
		if !d.Partition {
			r, err := Read("", d.Name)
			if err != nil {
				if errors.Is(err, ErrNotFound) {
					continue // went away
				}
				t.Errorf("Read(%s): %v", d.Name, err)
				continue
			}
			if r.MajorMinor != d.MajorMinor {
				t.Errorf("%s: Read dev %s != Discover dev %s", d.Name, r.MajorMinor, d.MajorMinor)
			}
		}
	}
	sel := Select(devs, nil, nil, nil, 0)
	for _, d := range sel {
		if d.Partition || d.Virtual() || d.SizeBytes == 0 {
			t.Errorf("default selection picked %s (partition=%v virtual=%v size=%d)", d.Name, d.Partition, d.Virtual(), d.SizeBytes)
		}
	}
}

func TestPartitionDevs(t *testing.T) {
	got, err := PartitionDevs(fake, "sda")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []uint32{8<<20 | 1, 8<<20 | 2}; !slices.Equal(got, want) {
		t.Fatalf("PartitionDevs(sda) = %v, want %v", got, want)
	}
	if got, err := PartitionDevs(fake, "nvme0n1"); err != nil || len(got) != 0 {
		t.Fatalf("PartitionDevs(nvme0n1) = %v, %v; want none", got, err)
	}
	if _, err := PartitionDevs(fake, "../x"); err == nil {
		t.Fatal("PartitionDevs(../x): no error")
	}
}
