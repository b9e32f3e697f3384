// Package blkcaps reads the read caps that cgroups set on block devices
// with blk-throttle (block/blk-throttle.c), and which cgroup read each
// device: the caps a device's readers pay that its service times do not
// show. blk-throttle holds a bio before it becomes a request
// (blk_throtl_bio, called from submit_bio_noacct), so a capped reader
// waits in front of the device and every request it issues spends one of
// its IOPS and its bytes of its bandwidth, however fast the device serves
// it. The read-ahead road charges a window that share (readahead.Device).
//
// It reads, below a host root:
//
//   - cgroup v1 (sys/fs/cgroup/blkio): each cgroup's
//     blkio.throttle.read_iops_device and read_bps_device ("MAJ:MIN N"
//     lines), and blkio.throttle.io_serviced ("MAJ:MIN Read N"), the
//     requests the cgroup itself issued (blk-throttle's per-group stat);
//   - cgroup v2 (sys/fs/cgroup when it is the cgroup2 root, else
//     sys/fs/cgroup/unified): each cgroup's io.max ("MAJ:MIN riops=N
//     rbps=N ..." or "max") and io.stat ("MAJ:MIN rios=N ..."), whose
//     counts include the cgroup's descendants (blkcg_print_stat after the
//     rstat flush), so a cgroup's own is its count less its children's.
//
// On cgroup v2 a cgroup's effective cap is the tightest of its own and
// its ancestors': a group's limit applies to its subtree. On v1 each
// group's limit applies to its own I/O alone (throtl_pd_init: the parent
// service queue is the group's parent only on the default hierarchy).
package blkcaps

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shadowtune/shadowtune/internal/model"
)

// MaxCgroups bounds the cgroups one Read walks (a node runs hundreds);
// beyond it Read returns ErrTooMany and what it read so far is not used.
const MaxCgroups = 100_000

// ErrTooMany is returned when a hierarchy has more than MaxCgroups
// cgroups.
var ErrTooMany = errors.New("blkcaps: more than MaxCgroups cgroups")

// Reader reads the caps of each device's dominant reader: the cgroup
// that issued the most read requests to it between two calls of Read.
// The zero value is not usable; build one with New. Not safe for
// concurrent use.
type Reader struct {
	root string
	// last is each cgroup's own read requests per device at the last
	// Read, keyed by hierarchy-relative path and "MAJ:MIN".
	last map[readerKey]uint64
}

type readerKey struct{ cgroup, dev string }

// New returns a Reader of the cgroup hierarchies below hostRoot ("" for
// the host's own /).
func New(hostRoot string) *Reader {
	return &Reader{root: filepath.Join(hostRoot, "/sys/fs/cgroup"), last: map[readerKey]uint64{}}
}

// group is one cgroup's caps and own read requests, per device.
type group struct {
	path  string
	caps  map[string]model.Throttle // effective: the tightest along the path
	reads map[string]uint64
}

// Read returns, per device ("MAJ:MIN"), the effective read caps
// (model.Throttle's IOPS and BytesPerSec; bursts 0) of the cgroup that
// issued the most read requests to it since the previous Read, or, for a
// cgroup the previous Read did not see, since the cgroup was made. Call
// it once to start counting (its answer counts every read since boot).
// A device whose dominant reader is
// uncapped is absent. Hierarchies that are not mounted are skipped; an
// error reading one that is (a file it cannot parse: "path:line: ...",
// or ErrTooMany) is returned with no result, and the counts are kept
// from the last good Read.
func (r *Reader) Read() (map[string]model.Throttle, error) {
	var groups []group
	if fileExists(filepath.Join(r.root, "blkio", "blkio.throttle.io_serviced")) {
		g, err := walk(filepath.Join(r.root, "blkio"), readV1, false)
		if err != nil {
			return nil, err
		}
		groups = append(groups, g...)
	}
	if v2 := r.v2Root(); v2 != "" {
		g, err := walk(v2, readV2, true)
		if err != nil {
			return nil, err
		}
		ownReads(g)
		groups = append(groups, g...)
	}
	return r.dominant(groups), nil
}

// v2Root is the cgroup2 hierarchy's root, "" when none is mounted.
func (r *Reader) v2Root() string {
	for _, d := range []string{r.root, filepath.Join(r.root, "unified")} {
		if fileExists(filepath.Join(d, "cgroup.controllers")) {
			return d
		}
	}
	return ""
}

// dominant picks each device's dominant reader among groups, and keeps
// their counts for the next Read.
func (r *Reader) dominant(groups []group) map[string]model.Throttle {
	type best struct {
		n    uint64
		caps model.Throttle
	}
	top := map[string]best{}
	next := make(map[readerKey]uint64, len(r.last))
	for _, g := range groups {
		for dev, n := range g.reads {
			k := readerKey{g.path, dev}
			next[k] = n
			d := n
			if prev, ok := r.last[k]; ok && prev <= n {
				d = n - prev // a cgroup made again under the same path counts afresh
			}
			if b, ok := top[dev]; d > 0 && (!ok || d > b.n) {
				top[dev] = best{d, g.caps[dev]}
			}
		}
	}
	r.last = next
	out := map[string]model.Throttle{}
	for dev, b := range top {
		if b.caps.Enabled() {
			out[dev] = b.caps
		}
	}
	return out
}

// readFunc reads one cgroup directory's own caps and read counts.
type readFunc func(dir string) (caps map[string]model.Throttle, reads map[string]uint64, err error)

// walk reads every cgroup below root, each one's caps tightened by its
// parent's when nested (the hierarchy's limits apply to subtrees).
func walk(root string, read readFunc, nested bool) ([]group, error) {
	var out []group
	index := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			if errors.Is(err, fs.ErrNotExist) { // a cgroup removed while walked
				return nil
			}
			return err
		case !d.IsDir():
			return nil
		case len(out) >= MaxCgroups:
			return ErrTooMany
		}
		caps, reads, err := read(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if i, ok := index[filepath.Dir(rel)]; ok && nested && rel != "." {
			caps = tighten(caps, out[i].caps)
		}
		index[rel] = len(out)
		out = append(out, group{path: filepath.Base(root) + ":" + rel, caps: caps, reads: reads})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the cgroups below %s: %w", root, err)
	}
	return out, nil
}

// tighten is own with each device's caps tightened by parent's.
func tighten(own, parent map[string]model.Throttle) map[string]model.Throttle {
	out := make(map[string]model.Throttle, len(own)+len(parent))
	for dev, t := range parent {
		out[dev] = t
	}
	for dev, t := range own {
		p := out[dev]
		out[dev] = model.Throttle{IOPS: tighter(t.IOPS, p.IOPS), BytesPerSec: tighter(t.BytesPerSec, p.BytesPerSec)}
	}
	return out
}

// tighter is the lower of two caps, 0 being none.
func tighter(a, b float64) float64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// ownReads makes cgroup v2's recursive read counts each cgroup's own: its
// count less its children's. groups are in walk order (a parent before
// its children).
func ownReads(groups []group) {
	byPath := make(map[string]int, len(groups))
	for i, g := range groups {
		byPath[g.path] = i
	}
	for _, g := range groups {
		root, rel, _ := strings.Cut(g.path, ":")
		if rel == "." {
			continue
		}
		parent := root + ":" + filepath.Dir(rel)
		i, ok := byPath[parent]
		if !ok {
			continue
		}
		for dev, n := range g.reads {
			groups[i].reads[dev] -= min(n, groups[i].reads[dev])
		}
	}
}

// readV1 reads a cgroup v1 blkio directory.
func readV1(dir string) (map[string]model.Throttle, map[string]uint64, error) {
	caps := map[string]model.Throttle{}
	for _, f := range []struct {
		name string
		set  func(*model.Throttle, float64)
	}{
		{"blkio.throttle.read_iops_device", func(t *model.Throttle, v float64) { t.IOPS = v }},
		{"blkio.throttle.read_bps_device", func(t *model.Throttle, v float64) { t.BytesPerSec = v }},
	} {
		err := eachLine(filepath.Join(dir, f.name), func(fields []string) error {
			if len(fields) != 2 {
				return errors.New(`want "MAJ:MIN VALUE"`)
			}
			v, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return err
			}
			t := caps[fields[0]]
			f.set(&t, float64(v))
			caps[fields[0]] = t
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	reads := map[string]uint64{}
	err := eachLine(filepath.Join(dir, "blkio.throttle.io_serviced"), func(fields []string) error {
		if len(fields) != 3 || fields[1] != "Read" {
			return nil // the other directions, and the "Total" line
		}
		n, err := strconv.ParseUint(fields[2], 10, 64)
		reads[fields[0]] = n
		return err
	})
	return caps, reads, err
}

// readV2 reads a cgroup v2 directory's io.max and io.stat.
func readV2(dir string) (map[string]model.Throttle, map[string]uint64, error) {
	caps := map[string]model.Throttle{}
	err := eachLine(filepath.Join(dir, "io.max"), func(fields []string) error {
		var t model.Throttle
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			if v == "max" || (k != "riops" && k != "rbps") {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return err
			}
			if k == "riops" {
				t.IOPS = float64(n)
			} else {
				t.BytesPerSec = float64(n)
			}
		}
		if t.Enabled() {
			caps[fields[0]] = t
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	reads := map[string]uint64{}
	err = eachLine(filepath.Join(dir, "io.stat"), func(fields []string) error {
		for _, kv := range fields[1:] {
			if v, ok := strings.CutPrefix(kv, "rios="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				reads[fields[0]] = n
				return err
			}
		}
		return nil
	})
	return caps, reads, err
}

// eachLine calls f with the fields of each non-empty line of a file; a
// file that does not exist has none. An error f returns is the file's
// "path:line: ..." error.
func eachLine(path string, f func(fields []string) error) error {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if err := f(fields); err != nil {
			return fmt.Errorf("%s:%d: %q: %w", path, n, sc.Text(), err)
		}
	}
	return sc.Err()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
