package dmcache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Provisioning: a cache attached online to an LVM logical volume with
// lvm2's commands only (lvmcache(7), "dm-cache with cachevol"): the fast
// device becomes a PV of the LV's VG, a cache volume is created on it
// alone, and `lvconvert --type cache --cachevol` puts it in front of the
// LV in writethrough mode, never writeback. LVM splits the cache volume
// into the dm-cache metadata and data devices
// (Documentation/admin-guide/device-mapper/cache.rst). A writethrough
// cache holds no data that is not on the origin, so losing the fast
// device (a RAM disk after a power-off) loses nothing: RecoverMissing
// drops it.

const (
	// Tag is the LVM tag (lvm(8), TAGS) on the cache volumes and PVs
	// AttachCache creates: DetachCache and RecoverMissing act only on
	// caches that carry it.
	Tag = "shadowtune"
	// ZRAMTag is the LVM tag, besides Tag, on a PV that is a zram device
	// AttachCache created: DetachCache resets and removes the device.
	ZRAMTag = "shadowtune_zram"
	// CacheSuffix is appended to the LV's name to name its cache volume;
	// LVM renames it NAME_cvol once attached.
	CacheSuffix = "_stcache"
)

var (
	// ErrNotOurs is returned for a cache without Tag; it is left as it is.
	ErrNotOurs = errors.New("cache not attached by shadowtune (no " + Tag + " tag)")
	// ErrNotCached is returned for an LV without a cache.
	ErrNotCached = errors.New("logical volume is not cached")
	// ErrBlockSize is returned when the fast device's logical block size is larger than
	// the LV's. The cached LV would present the larger one to its users
	// online (I/O in smaller units would then fail), so the cache is not
	// attached. zram's is 4096 bytes; brd's and most disks' 512.
	ErrBlockSize = errors.New("fast device's logical block size is larger than the LV's")
)

// FastDevice is the device a cache is put on: a zram RAM disk the tool
// creates (ZRAM), or an existing block device (Path): a brd RAM disk
// such as /dev/ram0, or a fast disk. Exactly one is set. The device
// must not be a PV or hold a signature (pvcreate, without -y, refuses
// to wipe one). lvm2 2.03.16 does not know zram's device type: its
// configuration (lvm.conf or Tool.LVMArgs) must list it, as
// `devices { types = [ "zram", 16 ] }`.
type FastDevice struct {
	ZRAM bool
	Path string
}

func (f FastDevice) String() string {
	if f.ZRAM {
		return "zram"
	}
	return f.Path
}

// AttachCache puts a writethrough dm-cache in front of the active LV
// vg/lv, online, with lvm2's commands: the fast device (a new zram
// device of sizeBytes, or fast.Path) is made a PV (pvcreate), added to
// vg (vgextend) and tagged Tag; a cache volume LV+CacheSuffix of at
// most sizeBytes bytes (whole extents) is created on that PV alone and
// tagged Tag; then `lvconvert --type cache --cachevol NAME --cachemode
// writethrough --chunksize chunkSectors vg/lv`. chunkSectors is the
// dm-cache block size in 512-byte sectors: a multiple of 64 (32 KiB)
// from 64 to 2097152 (1 GiB), per cache.rst, or 0 for LVM's choice
// (lvmcache(7), --chunksize). On any failure what was done is undone
// (lvremove, vgreduce, pvremove, zram reset and hot_remove) and the
// error says what was undone.
func (t *Tool) AttachCache(ctx context.Context, vg, lv string, fast FastDevice, sizeBytes int64, chunkSectors uint64) (err error) {
	if err := checkAttach(vg, lv, fast, sizeBytes, chunkSectors); err != nil {
		return err
	}
	who := vg + "/" + lv
	lvs, err := t.lvReport(ctx, vg)
	if err != nil {
		return err
	}
	origin, ok := lvs[lv]
	switch {
	case !ok:
		return fmt.Errorf("dmcache: %s: no such LV", who)
	case origin.SegType == "cache" || origin.Pool != "":
		return fmt.Errorf("dmcache: %s: already cached (%s, pool %s)", who, origin.SegType, origin.Pool)
	case origin.Major < 0:
		return fmt.Errorf("dmcache: %s: not active: a cache is attached online only", who)
	}
	if _, clash := lvs[lv+CacheSuffix]; clash {
		return fmt.Errorf("dmcache: %s: an LV %s exists already", who, lv+CacheSuffix)
	}
	lvBlock, err := t.blockSize(fmt.Sprintf("dev/block/%d:%d", origin.Major, origin.Minor))
	if err != nil {
		return err
	}
	var u undo
	defer func() {
		if err != nil {
			err = u.run(t, ctx, err)
		}
	}()
	dev, pvTags, err := t.fastDevice(ctx, who, fast, sizeBytes, lvBlock, &u)
	if err != nil {
		return err
	}
	if err := t.addPV(ctx, who, vg, dev, pvTags, &u); err != nil {
		return err
	}
	n, err := t.extents(ctx, who, dev, sizeBytes)
	if err != nil {
		return err
	}
	name := lv + CacheSuffix
	if _, err := t.lvm(ctx, who, "lvcreate", "-q", "-y", "-n", name, "-l", strconv.FormatInt(n, 10), "--addtag", Tag, vg, dev); err != nil {
		return err
	}
	u.push("lvremove "+vg+"/"+name, func(ctx context.Context) error {
		_, err := t.lvm(ctx, who, "lvremove", "-q", "-y", vg+"/"+name)
		return err
	})
	args := []string{"-q", "-y", "--type", "cache", "--cachevol", name, "--cachemode", string(Writethrough)}
	if chunkSectors > 0 {
		args = append(args, "--chunksize", strconv.FormatUint(chunkSectors, 10)+"s")
	}
	_, err = t.lvm(ctx, who, "lvconvert", append(args, who)...)
	return err
}

// checkAttach checks AttachCache's arguments before anything is run.
func checkAttach(vg, lv string, fast FastDevice, sizeBytes int64, chunkSectors uint64) error {
	who := vg + "/" + lv
	switch {
	case vg == "" || lv == "" || strings.ContainsAny(vg+lv, "/ "):
		return fmt.Errorf("dmcache: %q/%q: a VG and an LV name are needed", vg, lv)
	case fast.ZRAM == (fast.Path != ""):
		return fmt.Errorf("dmcache: %s: the fast device must be zram or a path, not %+v", who, fast)
	case sizeBytes <= 0:
		return fmt.Errorf("dmcache: %s: cache size %d bytes, want more than 0", who, sizeBytes)
	case chunkSectors != 0 && (chunkSectors%64 != 0 || chunkSectors > 2097152):
		return fmt.Errorf("dmcache: %s: chunk of %d sectors: want a multiple of 64 (32 KiB) up to 2097152 (1 GiB)", who, chunkSectors)
	}
	return nil
}

// fastDevice returns the fast device's path and the tags its PV gets:
// a new zram device of sizeBytes (its removal pushed on u) or
// fast.Path. Its logical block size must not exceed lvBlock.
func (t *Tool) fastDevice(ctx context.Context, who string, fast FastDevice, sizeBytes, lvBlock int64, u *undo) (dev string, tags []string, err error) {
	tags = []string{Tag}
	var name string
	if fast.ZRAM {
		id, err := t.zramAdd(sizeBytes)
		if err != nil {
			return "", nil, fmt.Errorf("dmcache: %s: %w", who, err)
		}
		u.push(fmt.Sprintf("zram%d reset and hot_remove", id), func(context.Context) error { return t.zramRemove(id) })
		name = "zram" + strconv.Itoa(id)
		dev, tags = "/dev/"+name, append(tags, ZRAMTag)
	} else {
		real, err := filepath.EvalSymlinks(fast.Path)
		if err != nil {
			return "", nil, fmt.Errorf("dmcache: %s: fast device: %w", who, err)
		}
		dev, name = fast.Path, filepath.Base(real)
	}
	fb, err := t.blockSize("class/block/" + name)
	if err != nil {
		return "", nil, err
	}
	if fb > lvBlock {
		return "", nil, fmt.Errorf("dmcache: %s: %w: %s %d bytes, the LV %d", who, ErrBlockSize, dev, fb, lvBlock)
	}
	if out, err := t.lvm(ctx, who, "pvs", "--noheadings", "-o", "pv_uuid", dev); err == nil && strings.TrimSpace(out) != "" {
		return "", nil, fmt.Errorf("dmcache: %s: %s is a PV already (uuid %s): only a new PV is used", who, dev, strings.TrimSpace(out))
	}
	return dev, tags, nil
}

// addPV makes dev a PV of vg with tags, pushing the undo of each step.
func (t *Tool) addPV(ctx context.Context, who, vg, dev string, tags []string, u *undo) error {
	if _, err := t.lvm(ctx, who, "pvcreate", "-q", dev); err != nil {
		return err
	}
	u.push("pvremove "+dev, func(ctx context.Context) error {
		_, err := t.lvm(ctx, who, "pvremove", "-q", dev)
		return err
	})
	if _, err := t.lvm(ctx, who, "vgextend", "-q", vg, dev); err != nil {
		return err
	}
	u.push("vgreduce "+vg+" "+dev, func(ctx context.Context) error {
		_, err := t.lvm(ctx, who, "vgreduce", "-q", vg, dev)
		return err
	})
	args := []string{"-q"}
	for _, tag := range tags {
		args = append(args, "--addtag", tag)
	}
	_, err := t.lvm(ctx, who, "pvchange", append(args, dev)...)
	return err
}

// extents returns the extents of the cache volume: as many of dev's
// free extents as fit in sizeBytes.
func (t *Tool) extents(ctx context.Context, who, dev string, sizeBytes int64) (int64, error) {
	out, err := t.lvm(ctx, who, "pvs", "--noheadings", "--nosuffix", "--units", "b", "--separator", "|",
		"-o", "pv_pe_count,pv_pe_alloc_count,vg_extent_size", dev)
	if err != nil {
		return 0, err
	}
	f := strings.Split(strings.TrimSpace(out), "|")
	var v [3]int64
	for i := range v {
		if len(f) != 3 {
			break
		}
		if v[i], err = strconv.ParseInt(strings.TrimSpace(f[i]), 10, 64); err != nil {
			break
		}
	}
	if len(f) != 3 || err != nil || v[2] <= 0 {
		return 0, fmt.Errorf("dmcache: %s: pvs %s: %q is not extents|allocated|extent size", who, dev, strings.TrimSpace(out))
	}
	n := min(v[0]-v[1], sizeBytes/v[2])
	if n < 1 {
		return 0, fmt.Errorf("dmcache: %s: %s has %d free extents of %d bytes, %d bytes allowed: no room for a cache", who, dev, v[0]-v[1], v[2], sizeBytes)
	}
	return n, nil
}

// DetachCache removes the cache AttachCache put in front of vg/lv:
// `lvconvert --uncache` (which flushes the cache, detaches it and
// removes the cache volume in one command, leaving no LV behind, where
// --splitcache would keep the cache volume as an LV to remove), then
// for each of the cache volume's PVs tagged Tag: vgreduce, pvremove,
// and for a zram device AttachCache created (ZRAMTag), reset and
// hot_remove. A cache whose volume lacks Tag is refused (ErrNotOurs),
// an LV without a cache too (ErrNotCached); nothing is run then.
func (t *Tool) DetachCache(ctx context.Context, vg, lv string) error {
	who := vg + "/" + lv
	lvs, err := t.lvReport(ctx, vg)
	if err != nil {
		return err
	}
	cv, err := ourCache(who, lvs, lv)
	if err != nil {
		return err
	}
	pvs, err := t.pvReport(ctx, vg)
	if err != nil {
		return err
	}
	var ours []pvRow
	for _, d := range cv.Devices {
		for _, p := range pvs {
			if p.Name == d && slices.Contains(p.Tags, Tag) {
				ours = append(ours, p)
			}
		}
	}
	if _, err := t.lvm(ctx, who, "lvconvert", "-q", "-y", "--uncache", who); err != nil {
		return err
	}
	for _, p := range ours {
		if _, err := t.lvm(ctx, who, "vgreduce", "-q", vg, p.Name); err != nil {
			return err
		}
		if _, err := t.lvm(ctx, who, "pvremove", "-q", p.Name); err != nil {
			return err
		}
		id, isZRAM := zramID(p.Name)
		if isZRAM && slices.Contains(p.Tags, ZRAMTag) {
			if err := t.zramRemove(id); err != nil {
				return fmt.Errorf("dmcache: %s: %w", who, err)
			}
		}
	}
	return nil
}

// ourCache returns the cache volume of the cached LV lv, which must
// carry Tag.
func ourCache(who string, lvs map[string]lvRow, lv string) (lvRow, error) {
	origin, ok := lvs[lv]
	switch {
	case !ok:
		return lvRow{}, fmt.Errorf("dmcache: %s: no such LV", who)
	case origin.SegType != "cache" || origin.Pool == "":
		return lvRow{}, fmt.Errorf("dmcache: %s: %w (segment type %s)", who, ErrNotCached, origin.SegType)
	}
	cv, ok := lvs[origin.Pool]
	if !ok {
		return lvRow{}, fmt.Errorf("dmcache: %s: its cache %s is not listed", who, origin.Pool)
	}
	if !slices.Contains(cv.Tags, Tag) {
		return lvRow{}, fmt.Errorf("dmcache: %s: %w: cache %s, tags %q", who, ErrNotOurs, cv.Name, cv.Tags)
	}
	return cv, nil
}

// RecoverMissing drops, after an unclean power-off, the caches that
// AttachCache put on a device now gone (a RAM disk): for each cached LV
// of vg whose cache volume carries Tag and lies on a missing PV
// ("[unknown]"), `lvconvert --uncache` without --force (lvm2 2.03.16
// detaches a cachevol on a missing PV from an inactive LV; a
// writethrough cache has nothing to flush, and --force would also drop
// a writeback cache's dirty blocks), then `vgreduce --removemissing`
// without --force (which would remove LVs still on a missing PV) when
// every missing PV carries Tag and is empty. The origin LVs are then
// plain LVs with their data, inactive (LVM refused to activate them
// partial). A cache in writeback mode by the metadata is not touched
// and is reported in the error. recovered are the LVs uncached.
func (t *Tool) RecoverMissing(ctx context.Context, vg string) (recovered []string, err error) {
	lvs, err := t.lvReport(ctx, vg)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range sortedKeys(lvs) {
		cached := lvs[name]
		cv, ok := lvs[cached.Pool]
		if cached.SegType != "cache" || !ok || !slices.Contains(cv.Tags, Tag) || !slices.Contains(cv.Devices, "[unknown]") {
			continue
		}
		who := vg + "/" + name
		if cached.CacheMode == string(Writeback) {
			errs = append(errs, fmt.Errorf("dmcache: %s: %w: cache %s on a missing PV is writeback, not dropped", who, ErrWriteback, cv.Name))
			continue
		}
		if _, err := t.lvm(ctx, who, "lvconvert", "-q", "-y", "--uncache", who); err != nil {
			errs = append(errs, err)
			continue
		}
		recovered = append(recovered, name)
	}
	pvs, err := t.pvReport(ctx, vg)
	if err != nil {
		return recovered, errors.Join(append(errs, err)...)
	}
	missing, ours := 0, 0
	for _, p := range pvs {
		if p.Missing {
			missing++
			if slices.Contains(p.Tags, Tag) && p.Allocated == 0 {
				ours++
			}
		}
	}
	switch {
	case missing > 0 && ours == missing:
		if _, err := t.lvm(ctx, vg, "vgreduce", "-q", "--removemissing", vg); err != nil {
			errs = append(errs, err)
		}
	case missing > 0:
		errs = append(errs, fmt.Errorf("dmcache: %s: %d missing PVs, %d of them shadowtune's and empty: vgreduce --removemissing not run", vg, missing, ours))
	}
	return recovered, errors.Join(errs...)
}

// lvRow is a line of `lvs -a` (hidden LVs' brackets removed).
type lvRow struct {
	Name, SegType, Pool, CacheMode string
	Tags, Devices                  []string // devices without their "(extent)"
	Major, Minor                   int      // -1 when inactive
}

// lvReport lists vg's LVs, hidden ones included, by name.
func (t *Tool) lvReport(ctx context.Context, vg string) (map[string]lvRow, error) {
	out, err := t.lvm(ctx, vg, "lvs", "-a", "--noheadings", "--separator", "|",
		"-o", "lv_name,segtype,pool_lv,lv_tags,devices,cache_mode,lv_kernel_major,lv_kernel_minor", vg)
	if err != nil {
		return nil, err
	}
	rows := map[string]lvRow{}
	for _, l := range splitLines(out) {
		f := strings.Split(l, "|")
		if len(f) != 8 {
			return nil, fmt.Errorf("dmcache: %s: lvs: %q has %d fields, want 8", vg, l, len(f))
		}
		r := lvRow{Name: unbracket(f[0]), SegType: f[1], Pool: unbracket(f[2]), Tags: list(f[3]), CacheMode: f[5]}
		for _, d := range list(f[4]) {
			if i := strings.LastIndexByte(d, '('); i > 0 {
				d = d[:i]
			}
			r.Devices = append(r.Devices, d)
		}
		var e1, e2 error
		r.Major, e1 = strconv.Atoi(strings.TrimSpace(f[6]))
		r.Minor, e2 = strconv.Atoi(strings.TrimSpace(f[7]))
		if e1 != nil || e2 != nil {
			return nil, fmt.Errorf("dmcache: %s: lvs: %q: bad kernel major:minor", vg, l)
		}
		rows[r.Name] = r
	}
	return rows, nil
}

// pvRow is a line of pvs.
type pvRow struct {
	Name      string // "[unknown]" when missing
	Tags      []string
	Missing   bool
	Allocated int64 // extents
}

// pvReport lists vg's PVs.
func (t *Tool) pvReport(ctx context.Context, vg string) ([]pvRow, error) {
	out, err := t.lvm(ctx, vg, "pvs", "--noheadings", "--separator", "|",
		"-o", "pv_name,pv_tags,pv_missing,pv_pe_alloc_count", "--select", "vg_name="+vg)
	if err != nil {
		return nil, err
	}
	var rows []pvRow
	for _, l := range splitLines(out) {
		f := strings.Split(l, "|")
		if len(f) != 4 {
			return nil, fmt.Errorf("dmcache: %s: pvs: %q has %d fields, want 4", vg, l, len(f))
		}
		n, err := strconv.ParseInt(strings.TrimSpace(f[3]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dmcache: %s: pvs: %q: bad allocated extents", vg, l)
		}
		rows = append(rows, pvRow{Name: strings.TrimSpace(f[0]), Tags: list(f[1]), Missing: strings.TrimSpace(f[2]) == "missing", Allocated: n})
	}
	return rows, nil
}

// lvm runs `LVM sub LVMArgs... args...`; lvchange runs t.LVChange
// instead when it is set (the Tool's earlier API).
func (t *Tool) lvm(ctx context.Context, dev, sub string, args ...string) (string, error) {
	prog, pre := t.LVM, []string{sub}
	if prog == "" {
		prog = "lvm"
	}
	if sub == "lvchange" && t.LVChange != "" {
		prog, pre = t.LVChange, nil
	}
	return t.run(ctx, dev, prog, append(append(pre, t.LVMArgs...), args...)...)
}

// blockSize reads queue/logical_block_size of a block device under
// the sysfs path rel (relative to Sys), in bytes.
func (t *Tool) blockSize(rel string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(t.sys(), rel, "queue", "logical_block_size"))
	if err != nil {
		return 0, fmt.Errorf("dmcache: logical block size: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("dmcache: %s/queue/logical_block_size: %q", rel, strings.TrimSpace(string(b)))
	}
	return v, nil
}

// zramAdd creates a zram device of size bytes (zram.rst: hot_add, then
// disksize) and returns its number.
func (t *Tool) zramAdd(size int64) (int, error) {
	b, err := os.ReadFile(filepath.Join(t.sys(), "class", "zram-control", "hot_add"))
	if err != nil {
		return 0, fmt.Errorf("zram: %w (is the zram module loaded?)", err)
	}
	id, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || id < 0 {
		return 0, fmt.Errorf("zram: hot_add gave %q", strings.TrimSpace(string(b)))
	}
	if err := t.sysWrite(fmt.Sprintf("block/zram%d/disksize", id), strconv.FormatInt(size, 10)); err != nil {
		if rerr := t.zramRemove(id); rerr != nil {
			return 0, fmt.Errorf("%w; and removing zram%d: %w", err, id, rerr)
		}
		return 0, err
	}
	return id, nil
}

// zramRemove resets zram device id and removes it (hot_remove).
func (t *Tool) zramRemove(id int) error {
	if err := t.sysWrite(fmt.Sprintf("block/zram%d/reset", id), "1"); err != nil {
		return err
	}
	return t.sysWrite("class/zram-control/hot_remove", strconv.Itoa(id))
}

func (t *Tool) sysWrite(rel, v string) error {
	f, err := os.OpenFile(filepath.Join(t.sys(), rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("zram: %w", err)
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("zram: writing %q to %s: %w", v, rel, err)
	}
	return nil
}

func (t *Tool) sys() string {
	if t.Sys == "" {
		return "/sys"
	}
	return t.Sys
}

// zramID returns N of a /dev/zramN path.
func zramID(dev string) (int, bool) {
	s, ok := strings.CutPrefix(dev, "/dev/zram")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(s)
	return id, err == nil && id >= 0
}

// undo is a stack of steps that put back what AttachCache did.
type undo struct {
	names []string
	fns   []func(context.Context) error
}

func (u *undo) push(name string, fn func(context.Context) error) {
	u.names, u.fns = append(u.names, name), append(u.fns, fn)
}

// run runs the steps, the last pushed first, in a context that is not
// cancelled with ctx (bounded by ResumeTimeout), and returns err with
// what was undone or failed to be.
func (u *undo) run(t *Tool, ctx context.Context, err error) error {
	uctx, cancel := t.resumeCtx(ctx)
	defer cancel()
	var done []string
	for i := len(u.fns) - 1; i >= 0; i-- {
		if uerr := u.fns[i](uctx); uerr != nil {
			undone := "nothing undone"
			if len(done) > 0 {
				undone = "undone: " + strings.Join(done, ", ")
			}
			return fmt.Errorf("%w; %s; undoing failed at %s, not undone: %s: %s",
				err, undone, u.names[i], strings.Join(u.names[:i], ", "), uerr.Error())
		}
		done = append(done, u.names[i])
	}
	if len(done) == 0 {
		return err
	}
	return fmt.Errorf("%w; undone: %s", err, strings.Join(done, ", "))
}

func unbracket(s string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
}

// list splits a comma-separated lvs/pvs field.
func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys(m map[string]lvRow) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
