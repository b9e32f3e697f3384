package dmcache

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
)

// Device is a device-mapper device whose table is a single cache target.
type Device struct {
	Name       string // the device-mapper name (/dev/mapper/NAME)
	UUID       string // the device-mapper uuid, "" when none was set
	MajorMinor string // "253:2"
	// LVM: the uuid starts with "LVM-": an LVM logical volume, VG/LV.
	LVM    bool
	VG, LV string
	Table  Table
	Status Status
}

// Skipped is a device List did not return although its table has a cache
// target, and why.
type Skipped struct {
	Name, Reason string
}

// Tool runs dmsetup and lvm2's commands. The zero value runs dmsetup and
// lvm from PATH and uses /sys.
type Tool struct {
	// Root, when not empty, is the directory where another system's root
	// file system is mounted (the host's, e.g. /host in the agent's
	// container): every command is then that system's program, run
	// chrooted into Root, so that it uses that system's libraries,
	// lvm.conf, LVM archives and locks, /dev and udev database. DMSetup,
	// LVM and LVChange are then names looked up in Root's RootPath
	// folders, or absolute paths inside Root (LookPathIn). The chroot
	// needs CAP_SYS_CHROOT, and Linux. Sys stays the agent's own path.
	Root string
	// DMSetup is the dmsetup program; "dmsetup" when empty.
	DMSetup string
	// LVM is lvm2's lvm program, run as `lvm lvconvert ...` (every lvm2
	// command is a subcommand of it); "lvm" when empty.
	LVM string
	// LVChange, when set, is run for lvchange instead of `LVM lvchange`
	// (lvm2's lvchange program, or a link to lvm named lvchange).
	LVChange string
	// LVMArgs are put before every lvm command's other arguments, e.g.
	// []string{"--config", "devices { use_devicesfile=0 }"}.
	LVMArgs []string
	// Sys is where sysfs is mounted (zram's control files, block devices'
	// logical block sizes); "/sys" when empty.
	Sys string
	// ResumeTimeout bounds the resume (and rollback) after a suspend,
	// which runs even when the caller's context is done, so that a device
	// is not left suspended; 30 s when zero.
	ResumeTimeout time.Duration
}

// infoFields are the `dmsetup info -c` columns the tool reads; the name
// is last, so a "|" in it does not shift the others.
const infoFields = "major,minor,uuid,name"

// maxStderr bounds the stderr quoted in an error.
const maxStderr = 400

// List returns every device-mapper device whose table is a single cache
// target, with its table and status, in dmsetup's order (by name). A
// device whose table has a cache target among several targets, or whose
// cache lines do not parse, is not returned but listed in skipped with
// the reason.
func (t *Tool) List(ctx context.Context) (devs []Device, skipped []Skipped, err error) {
	infos, err := t.infos(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(infos))
	for i, d := range infos {
		names[i] = d.Name
	}
	tables, err := t.lines(ctx, "table", names)
	if err != nil {
		return nil, nil, err
	}
	statuses, err := t.lines(ctx, "status", names)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range infos {
		tl, ok := tables[d.Name]
		if !ok || !hasCache(tl) {
			continue // gone since the info, or not a cache
		}
		if err := d.fill(tl, statuses[d.Name]); err != nil {
			skipped = append(skipped, Skipped{d.Name, err.Error()})
			continue
		}
		if err := t.lvmNames(ctx, &d); err != nil {
			skipped = append(skipped, Skipped{d.Name, err.Error()})
			continue
		}
		devs = append(devs, d)
	}
	return devs, skipped, nil
}

// Get returns the cache device name: ErrNotFound when there is no such
// device-mapper device, ErrNotCache when its table is not a single cache
// target.
func (t *Tool) Get(ctx context.Context, name string) (Device, error) {
	infos, err := t.infos(ctx, name)
	if err != nil {
		return Device{}, err
	}
	if len(infos) != 1 {
		return Device{}, fmt.Errorf("dmcache: %s: dmsetup info printed %d devices, want 1", name, len(infos))
	}
	d := infos[0]
	tl, err := t.run(ctx, name, t.dmsetup(), "table", name)
	if err != nil {
		return Device{}, err
	}
	sl, err := t.run(ctx, name, t.dmsetup(), "status", name)
	if err != nil {
		return Device{}, err
	}
	if err := d.fill(splitLines(tl), splitLines(sl)); err != nil {
		return Device{}, err
	}
	if err := t.lvmNames(ctx, &d); err != nil {
		return Device{}, err
	}
	return d, nil
}

// SetMode switches the cache device name to mode m online, following the
// package's safety rules: m must be Writethrough or Passthrough
// (ErrWriteback for Writeback); Passthrough needs a status with no dirty
// blocks (ErrDirty). Nothing is done when the device is in m already. A
// device-mapper device is suspended, its table reloaded with the new mode
// feature (Table.WithMode) and resumed; an LVM cached LV is changed with
// `lvm lvchange --cachemode m VG/LV`.
func (t *Tool) SetMode(ctx context.Context, name string, m Mode) error {
	switch m {
	case Writethrough, Passthrough:
	case Writeback:
		return fmt.Errorf("dmcache: %s: %w (only writethrough or passthrough are set)", name, ErrWriteback)
	default:
		return fmt.Errorf("dmcache: %s: unknown mode %q, want writethrough or passthrough", name, m)
	}
	d, err := t.Get(ctx, name)
	if err != nil {
		return err
	}
	if err := checkSwitch(d, m); err != nil {
		return err
	}
	if d.Table.Mode == m && d.Status.Mode == m {
		return nil
	}
	if d.LVM {
		return t.lvchange(ctx, d, m)
	}
	return t.reload(ctx, d, m)
}

// checkSwitch refuses a switch of d to m that is unsafe by its status.
func checkSwitch(d Device, m Mode) error {
	switch {
	case d.Status.Failed != "":
		return fmt.Errorf("dmcache: %s: %w: status %q", d.Name, ErrFailed, d.Status.Failed)
	case m == Passthrough && d.Status.Dirty > 0:
		return fmt.Errorf("dmcache: %s: %w: %d dirty blocks in %s mode, passthrough needs 0", d.Name, ErrDirty, d.Status.Dirty, d.Status.Mode)
	}
	return nil
}

// reload switches a device-mapper device: suspend, re-read the table and
// the status while suspended, reload, resume. The device is resumed
// whatever fails after the suspend.
func (t *Tool) reload(ctx context.Context, d Device, m Mode) (err error) {
	name := d.Name
	if _, err := t.run(ctx, name, t.dmsetup(), "suspend", name); err != nil {
		return err
	}
	resumed := false
	defer func() {
		if resumed {
			return
		}
		rctx, cancel := t.resumeCtx(ctx)
		defer cancel()
		if _, rerr := t.run(rctx, name, t.dmsetup(), "resume", name); rerr != nil {
			err = fmt.Errorf("%w; and the resume failed, the device is suspended: %s", err, rerr.Error())
		}
	}()
	cur, err := t.Get(ctx, name)
	if err != nil {
		return err
	}
	if cur.Table.String() != d.Table.String() {
		return fmt.Errorf("dmcache: %s: the table changed before the suspend (now %q), not switched", name, cur.Table.String())
	}
	if err := checkSwitch(cur, m); err != nil {
		return err
	}
	if _, err := t.run(ctx, name, t.dmsetup(), "reload", name, "--table", cur.Table.WithMode(m).String()); err != nil {
		return err
	}
	resumed = true
	rctx, cancel := t.resumeCtx(ctx)
	defer cancel()
	_, err = t.run(rctx, name, t.dmsetup(), "resume", name)
	if err == nil {
		return nil
	}
	// The new table is live but failed to resume (the kernel refuses
	// passthrough with dirty blocks only at this point): put the old one
	// back.
	_, rerr := t.run(rctx, name, t.dmsetup(), "reload", name, "--table", cur.Table.String())
	if rerr == nil {
		_, rerr = t.run(rctx, name, t.dmsetup(), "resume", name)
	}
	if rerr != nil {
		return fmt.Errorf("%w; restoring the previous table failed too, the device may be suspended: %s", err, rerr.Error())
	}
	return fmt.Errorf("%w; the previous table was restored", err)
}

// resumeCtx is the context of a resume: not cancelled with ctx, bounded
// by ResumeTimeout.
func (t *Tool) resumeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := t.ResumeTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// lvchange switches an LVM cached LV and checks the new status.
func (t *Tool) lvchange(ctx context.Context, d Device, m Mode) error {
	if d.VG == "" || d.LV == "" {
		return fmt.Errorf("dmcache: %s: no VG/LV for an LVM device", d.Name)
	}
	if _, err := t.lvm(ctx, d.Name, "lvchange", "--cachemode", string(m), d.VG+"/"+d.LV); err != nil {
		return err
	}
	after, err := t.Get(ctx, d.Name)
	if err != nil {
		return err
	}
	if after.Status.Mode != m {
		return fmt.Errorf("dmcache: %s: lvchange --cachemode %s succeeded but the status reports %s", d.Name, m, after.Status.Mode)
	}
	return nil
}

// fill parses a device's table and status lines into d.
func (d *Device) fill(table, status []string) error {
	if len(table) != 1 {
		return fmt.Errorf("dmcache: %s: %w: %d table lines (a cache target among others)", d.Name, ErrNotCache, len(table))
	}
	if f := strings.Fields(table[0]); len(f) < 3 || f[2] != "cache" {
		return fmt.Errorf("dmcache: %s: %w: table %q", d.Name, ErrNotCache, clip(table[0]))
	}
	var err error
	if d.Table, err = ParseTable(table[0]); err != nil {
		return fmt.Errorf("%w (device %s)", err, d.Name)
	}
	if len(status) != 1 {
		return fmt.Errorf("dmcache: %s: %d status lines for one cache target", d.Name, len(status))
	}
	if d.Status, err = ParseStatus(status[0]); err != nil {
		return fmt.Errorf("%w (device %s)", err, d.Name)
	}
	return nil
}

// lvmNames sets d.VG and d.LV of an LVM device with dmsetup splitname.
func (t *Tool) lvmNames(ctx context.Context, d *Device) error {
	d.LVM = strings.HasPrefix(d.UUID, "LVM-")
	if !d.LVM {
		return nil
	}
	out, err := t.run(ctx, d.Name, t.dmsetup(), "splitname", d.Name, "LVM", "--noheadings", "-c", "-o", "vg_name,lv_name,lv_layer", "--separator", "|")
	if err != nil {
		return err
	}
	f := strings.Split(strings.TrimSpace(out), "|")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] != "" {
		return fmt.Errorf("dmcache: %s: dmsetup splitname: %q is not VG|LV| (a top-level LV)", d.Name, strings.TrimSpace(out))
	}
	d.VG, d.LV = f[0], f[1]
	return nil
}

// infos runs dmsetup info on name, or on every device when name is "".
func (t *Tool) infos(ctx context.Context, name string) ([]Device, error) {
	args := []string{"info"}
	if name != "" {
		args = append(args, name)
	}
	args = append(args, "-c", "--noheadings", "--separator", "|", "-o", infoFields)
	out, err := t.run(ctx, name, t.dmsetup(), args...)
	if err != nil {
		if name != "" && strings.Contains(err.Error(), "Device does not exist") {
			return nil, fmt.Errorf("dmcache: %s: %w", name, ErrNotFound)
		}
		return nil, err
	}
	var ds []Device
	for _, l := range splitLines(out) {
		f := strings.SplitN(l, "|", 4)
		if len(f) != 4 {
			continue // "No devices found"
		}
		ds = append(ds, Device{Name: f[3], UUID: f[2], MajorMinor: f[0] + ":" + f[1]})
	}
	return ds, nil
}

// lines runs `dmsetup table` or `dmsetup status` for every device and
// returns each device's target lines; "NAME: line" is matched against the
// known names, the longest first.
func (t *Tool) lines(ctx context.Context, cmd string, names []string) (map[string][]string, error) {
	out, err := t.run(ctx, "", t.dmsetup(), cmd)
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, l := range splitLines(out) {
		best := ""
		for _, n := range names {
			if len(n) > len(best) && strings.HasPrefix(l, n+":") {
				best = n
			}
		}
		if best == "" {
			continue
		}
		rest := strings.TrimSpace(l[len(best)+1:])
		if rest != "" {
			m[best] = append(m[best], rest)
		} else if _, ok := m[best]; !ok {
			m[best] = nil // no table loaded
		}
	}
	return m, nil
}

// hasCache reports whether a table has a cache target.
func hasCache(table []string) bool {
	for _, l := range table {
		if f := strings.Fields(l); len(f) >= 3 && f[2] == "cache" {
			return true
		}
	}
	return false
}

func (t *Tool) dmsetup() string {
	if t.DMSetup == "" {
		return "dmsetup"
	}
	return t.DMSetup
}

// run runs prog with args (in Root when set) and returns its standard
// output. The error names the device (dev, when not "") and the command,
// and quotes its standard error, on one line; or says that prog is not
// in Root.
func (t *Tool) run(ctx context.Context, dev, prog string, args ...string) (string, error) {
	who := "dmcache: "
	if dev != "" {
		who += dev + ": "
	}
	cmd, err := t.command(ctx, prog, args)
	if err != nil {
		return "", fmt.Errorf("%s%w", who, err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr // stdin: /dev/null, so prompts answer no
	err = cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	msg := oneLine(stderr.String())
	if msg == "" {
		msg = oneLine(stdout.String())
	}
	if cerr := ctx.Err(); cerr != nil {
		return stdout.String(), fmt.Errorf("%s%s: %w (%s): %s", who, command(prog, args), cerr, err.Error(), msg)
	}
	return stdout.String(), fmt.Errorf("%s%s: %w: %s", who, command(prog, args), err, msg)
}

// command renders a command line for an error, long tables clipped.
func command(prog string, args []string) string {
	return clip(strings.Join(append([]string{prog}, args...), " "))
}

// oneLine joins the trimmed lines of s with "; " and bounds its length.
func oneLine(s string) string {
	s = strings.Join(splitLines(s), "; ")
	if len(s) > maxStderr {
		s = s[:maxStderr] + "..."
	}
	return s
}

// splitLines returns the non-empty trimmed lines of s.
func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
