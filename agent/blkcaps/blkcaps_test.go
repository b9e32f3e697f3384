package blkcaps

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
)

// tree writes files (path relative to the fake host root: content) and
// returns the root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func write(t *testing.T, root, p, c string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

const v1 = "sys/fs/cgroup/blkio/"

func served(dev string, reads int) string {
	return strings.NewReplacer("D", dev, "N", strconv.Itoa(reads)).Replace("D Read N\nD Write 7\nD Sync N\nD Async 0\nD Total N\nTotal N\n")
}

// TestReadV1: the dominant reader of each device, its own caps only (v1
// limits are flat), between two Reads.
func TestReadV1(t *testing.T) {
	root := tree(t, map[string]string{
		v1 + "blkio.throttle.io_serviced":              served("7:0", 500),
		v1 + "capped/blkio.throttle.io_serviced":       served("7:0", 100) + served("8:0", 50),
		v1 + "capped/blkio.throttle.read_iops_device":  "7:0 3000\n",
		v1 + "capped/blkio.throttle.read_bps_device":   "7:0 200000000\n8:0 1000000\n",
		v1 + "capped/child/blkio.throttle.io_serviced": served("7:0", 0),
	})
	r := New(root)
	got, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["8:0"] != (model.Throttle{BytesPerSec: 1e6}) {
		t.Fatalf("first read: %v, want 8:0 capped at 1 MB/s (7:0's dominant reader, the root, is uncapped)", got)
	}
	// Since: the root read 10 more of 7:0, the capped group 400.
	write(t, root, v1+"blkio.throttle.io_serviced", served("7:0", 510))
	write(t, root, v1+"capped/blkio.throttle.io_serviced", served("7:0", 500)+served("8:0", 50))
	got, err = r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["7:0"] != (model.Throttle{IOPS: 3000, BytesPerSec: 2e8}) {
		t.Fatalf("second read: %v, want 7:0 capped at 3000 IOPS, 200 MB/s (8:0 unread since)", got)
	}
	// The child reads most: v1 does not apply its parent's caps to it.
	write(t, root, v1+"capped/child/blkio.throttle.io_serviced", served("7:0", 1000))
	if got, _ = r.Read(); len(got) != 0 {
		t.Fatalf("a v1 child of a capped group: %v, want uncapped", got)
	}
}

// TestReadV2: io.max tightened along the path, io.stat's recursive counts
// made each cgroup's own.
func TestReadV2(t *testing.T) {
	const v2 = "sys/fs/cgroup/"
	root := tree(t, map[string]string{
		v2 + "cgroup.controllers":      "cpu io memory\n",
		v2 + "io.stat":                 "7:0 rbytes=1 wbytes=0 rios=900 wios=0 dbytes=0 dios=0\n",
		v2 + "pods/io.max":             "7:0 rbps=max wbps=max riops=3000 wiops=max\n",
		v2 + "pods/io.stat":            "7:0 rbytes=1 wbytes=0 rios=800 wios=0 dbytes=0 dios=0\n",
		v2 + "pods/reader/io.max":      "7:0 rbps=100000000 wbps=max riops=max wiops=max\n",
		v2 + "pods/reader/io.stat":     "7:0 rbytes=1 wbytes=0 rios=700 wios=0 dbytes=0 dios=0\n",
		v2 + "pods/other/io.stat":      "7:0 rbytes=1 wbytes=0 rios=100 wios=0 dbytes=0 dios=0\n",
		v2 + "pods/other/cgroup.procs": "",
	})
	got, err := New(root).Read()
	if err != nil {
		t.Fatal(err)
	}
	if got["7:0"] != (model.Throttle{IOPS: 3000, BytesPerSec: 1e8}) {
		t.Fatalf("%v, want 7:0 at the reader's 100 MB/s and its parent's 3000 IOPS", got)
	}
}

// TestReadUnified: a hybrid host's cgroup2 at sys/fs/cgroup/unified.
func TestReadUnified(t *testing.T) {
	const v2 = "sys/fs/cgroup/unified/"
	root := tree(t, map[string]string{
		v2 + "cgroup.controllers": "io\n",
		v2 + "a/io.max":           "7:0 riops=500\n",
		v2 + "a/io.stat":          "7:0 rios=10\n",
	})
	got, err := New(root).Read()
	if err != nil || got["7:0"] != (model.Throttle{IOPS: 500}) {
		t.Fatalf("%v, %v; want 7:0 at 500 IOPS", got, err)
	}
}

// TestReadBadInput: a file that does not parse is named with its line;
// no result is returned, and a host without cgroups reads as none.
func TestReadBadInput(t *testing.T) {
	root := tree(t, map[string]string{
		v1 + "blkio.throttle.io_serviced":        served("7:0", 5),
		v1 + "x/blkio.throttle.read_iops_device": "7:0 3000\n7:0 lots\n",
	})
	got, err := New(root).Read()
	if err == nil || got != nil || !strings.Contains(err.Error(), "x/blkio.throttle.read_iops_device:2:") {
		t.Fatalf("%v, %v; want the file and line 2 named", got, err)
	}
	got, err = New(t.TempDir()).Read()
	if err != nil || len(got) != 0 {
		t.Fatalf("no cgroups: %v, %v", got, err)
	}
}
