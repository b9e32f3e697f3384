// Package dmcache discovers dm-cache devices and switches their cache mode
// online with the standard tools: dmsetup for devices set up directly with
// device-mapper, and lvm2's lvchange for LVM cached logical volumes. It
// runs those programs (os/exec); it never issues device-mapper ioctls
// itself. With Tool.Root set it runs the programs of another root file
// system (the host's, mounted in the agent's container), chrooted into it.
//
// For the node agent it also finds the dm-cache in front of a disk
// through sysfs (Find), measures what a read served by the cache costs
// (ProbeRead), adapts Tool to the agent and its actuator with bounded
// calls (Governor), and plans and makes the caches spec.cache.provision
// asks for (Wanted, Plan, Provision).
//
// The table and status formats are those of the kernel's dm-cache target,
// Documentation/admin-guide/device-mapper/cache.rst. Every length and
// block size in this package is in 512-byte sectors, as in that document;
// block counts (used, total, dirty, ...) are in cache blocks of
// BlockSectors sectors, or metadata blocks of MetadataBlockSectors.
//
// Safety rules of SetMode:
//
//   - only writethrough and passthrough are ever set; writeback is refused
//     (ErrWriteback), because a writeback cache holds the only copy of
//     recent writes;
//   - passthrough is set only when the status reports no dirty blocks
//     (ErrDirty otherwise); for a device-mapper device this is checked
//     again while the device is suspended, just before the reload, so a
//     write between the check and the switch cannot slip through (the
//     kernel also refuses to resume a dirty cache in passthrough, but
//     only after the table swap, cache.rst "Passthrough");
//   - a device is never left suspended by SetMode: after a failed reload
//     it is resumed, and when the resume of the new table fails, the
//     previous table is loaded again and resumed;
//   - an LVM cached LV (device-mapper uuid "LVM-...") is switched with
//     lvchange --cachemode only, never reloaded behind LVM's back.
package dmcache

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mode is a dm-cache operating mode (cache.rst "Optional feature
// arguments" and "Passthrough").
type Mode string

// The cache modes.
const (
	// Writethrough: writes go to the origin and are complete only when the
	// origin has them; the cache never holds the only copy.
	Writethrough Mode = "writethrough"
	// Passthrough: reads and writes go to the origin; cached blocks that
	// are written are invalidated. Only allowed when no block is dirty.
	Passthrough Mode = "passthrough"
	// Writeback: writes may complete in the cache only (dirty blocks); the
	// kernel's default when no mode feature is given.
	Writeback Mode = "writeback"
)

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool {
	return m == Writethrough || m == Passthrough || m == Writeback
}

// Errors of this package. They are wrapped (errors.Is) with the device,
// and the command when one failed.
var (
	// ErrWriteback: SetMode was asked for writeback, which it never sets.
	ErrWriteback = errors.New("refusing to set writeback mode")
	// ErrDirty: passthrough was asked for while the cache has dirty blocks.
	ErrDirty = errors.New("cache has dirty blocks")
	// ErrNotFound: no device-mapper device has the name.
	ErrNotFound = errors.New("no such device-mapper device")
	// ErrNotCache: the device's table is not a single cache target.
	ErrNotCache = errors.New("not a single dm-cache target")
	// ErrFailed: the cache target reports "Fail" or "Error" as its status.
	ErrFailed = errors.New("cache target failed")
	// ErrSyntax: a table or status line could not be parsed.
	ErrSyntax = errors.New("malformed dm-cache line")
)

// Table is one cache target's table line, as `dmsetup table` prints it
// (cache.rst "Constructor"):
//
//	<start> <length> cache <metadata dev> <cache dev> <origin dev>
//	<block size> <#feature args> [<feature arg>]*
//	<policy> <#policy args> [<policy arg>]*
//
// Start, Length and BlockSectors are in 512-byte sectors. The devices are
// as the kernel prints them, "major:minor" (or as given, for a table not
// read back from the kernel).
type Table struct {
	Start, Length           uint64
	Metadata, Cache, Origin string
	BlockSectors            uint64
	Features                []string // as given, mode included when explicit
	Mode                    Mode     // from Features; Writeback when none is given
	Policy                  string   // e.g. smq, mq, cleaner
	PolicyArgs              []string // key/value pairs, e.g. migration_threshold 2048
}

// ParseTable parses one table line of a cache target (with or without a
// trailing newline). It checks the counts and numbers; it does not check
// that the kernel knows the features or the policy.
func ParseTable(line string) (Table, error) {
	var t Table
	f := strings.Fields(line)
	if len(f) < 3 || f[2] != "cache" {
		return t, fmt.Errorf("dmcache: table %q: %w: target is not cache", clip(line), ErrSyntax)
	}
	if len(f) < 10 {
		return t, fmt.Errorf("dmcache: table %q: %w: %d fields, want at least 10", clip(line), ErrSyntax, len(f))
	}
	var err error
	if t.Start, t.Length, err = startLength(f); err != nil {
		return t, fmt.Errorf("dmcache: table %q: %w", clip(line), err)
	}
	t.Metadata, t.Cache, t.Origin = f[3], f[4], f[5]
	if t.BlockSectors, err = strconv.ParseUint(f[6], 10, 64); err != nil || t.BlockSectors == 0 {
		return t, fmt.Errorf("dmcache: table %q: %w: block size %q", clip(line), ErrSyntax, f[6])
	}
	rest := f[7:]
	if t.Features, rest, err = counted(rest, "feature"); err != nil {
		return t, fmt.Errorf("dmcache: table %q: %w", clip(line), err)
	}
	if t.Mode, _, err = modeOf(t.Features); err != nil {
		return t, fmt.Errorf("dmcache: table %q: %w", clip(line), err)
	}
	if len(rest) < 2 {
		return t, fmt.Errorf("dmcache: table %q: %w: no policy and policy argument count", clip(line), ErrSyntax)
	}
	t.Policy = rest[0]
	if t.PolicyArgs, rest, err = counted(rest[1:], "policy"); err != nil {
		return t, fmt.Errorf("dmcache: table %q: %w", clip(line), err)
	}
	if len(rest) != 0 {
		return t, fmt.Errorf("dmcache: table %q: %w: %d extra fields after the policy arguments", clip(line), ErrSyntax, len(rest))
	}
	return t, nil
}

// String returns the table line in the constructor's format, which
// `dmsetup reload --table` and `dmsetup create --table` accept.
func (t Table) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d cache %s %s %s %d %d", t.Start, t.Length, t.Metadata, t.Cache, t.Origin, t.BlockSectors, len(t.Features))
	for _, x := range t.Features {
		b.WriteString(" " + x)
	}
	fmt.Fprintf(&b, " %s %d", t.Policy, len(t.PolicyArgs))
	for _, x := range t.PolicyArgs {
		b.WriteString(" " + x)
	}
	return b.String()
}

// WithMode returns a copy of t in mode m: the mode feature (writethrough,
// passthrough or writeback) is replaced in place, or appended when there
// was none; the other features (metadata2, no_discard_passdown) are kept
// in their order. Writeback is written explicitly.
func (t Table) WithMode(m Mode) Table {
	out := make([]string, 0, len(t.Features)+1)
	placed := false
	for _, x := range t.Features {
		if Mode(x).Valid() {
			if !placed {
				out = append(out, string(m))
				placed = true
			}
			continue
		}
		out = append(out, x)
	}
	if !placed {
		out = append(out, string(m))
	}
	t.Features = out
	t.Mode = m
	t.PolicyArgs = slices.Clone(t.PolicyArgs)
	return t
}

// Status is a cache target's status line, as `dmsetup status` prints it
// (cache.rst "Status"):
//
//	<start> <length> cache <metadata block size> <#used metadata blocks>/<#total metadata blocks>
//	<cache block size> <#used cache blocks>/<#total cache blocks>
//	<#read hits> <#read misses> <#write hits> <#write misses>
//	<#demotions> <#promotions> <#dirty> <#features> <features>*
//	<#core args> <core args>* <policy name> <#policy args> <policy args>*
//	<cache metadata mode> <needs_check>
//
// Start, Length, MetadataBlockSectors and BlockSectors are in 512-byte
// sectors; the metadata counts are in metadata blocks, the other counts
// in cache blocks (hits, misses, demotions, promotions: I/Os and blocks
// since the table was loaded). When the target reports only "Fail" or
// "Error", Failed holds that word and the other fields are zero.
type Status struct {
	Start, Length                                     uint64
	MetadataBlockSectors, MetadataUsed, MetadataTotal uint64
	BlockSectors, UsedBlocks, TotalBlocks             uint64
	ReadHits, ReadMisses, WriteHits, WriteMisses      uint64
	Demotions, Promotions, Dirty                      uint64
	Features                                          []string
	Mode                                              Mode
	CoreArgs                                          []string // e.g. migration_threshold 2048
	Policy                                            string
	PolicyArgs                                        []string
	ReadOnly                                          bool   // metadata mode "ro"
	NeedsCheck                                        bool   // "needs_check": the metadata must be repaired
	Failed                                            string // "Fail" or "Error", else ""
}

// ParseStatus parses one status line of a cache target.
func ParseStatus(line string) (Status, error) {
	var s Status
	f := strings.Fields(line)
	if len(f) < 3 || f[2] != "cache" {
		return s, fmt.Errorf("dmcache: status %q: %w: target is not cache", clip(line), ErrSyntax)
	}
	var err error
	if s.Start, s.Length, err = startLength(f); err != nil {
		return s, fmt.Errorf("dmcache: status %q: %w", clip(line), err)
	}
	if len(f) == 4 && (f[3] == "Fail" || f[3] == "Error") {
		s.Failed = f[3]
		return s, nil
	}
	if len(f) < 20 {
		return s, fmt.Errorf("dmcache: status %q: %w: %d fields, want at least 20", clip(line), ErrSyntax, len(f))
	}
	if err := s.parseCounters(f[3:14]); err != nil {
		return s, fmt.Errorf("dmcache: status %q: %w", clip(line), err)
	}
	rest := f[14:]
	if s.Features, rest, err = counted(rest, "feature"); err != nil {
		return s, fmt.Errorf("dmcache: status %q: %w", clip(line), err)
	}
	if s.Mode, _, err = modeOf(s.Features); err != nil {
		return s, fmt.Errorf("dmcache: status %q: %w", clip(line), err)
	}
	if s.CoreArgs, rest, err = counted(rest, "core"); err != nil {
		return s, fmt.Errorf("dmcache: status %q: %w", clip(line), err)
	}
	if len(rest) < 2 {
		return s, fmt.Errorf("dmcache: status %q: %w: no policy", clip(line), ErrSyntax)
	}
	s.Policy = rest[0]
	if s.PolicyArgs, rest, err = counted(rest[1:], "policy"); err != nil {
		return s, fmt.Errorf("dmcache: status %q: %w", clip(line), err)
	}
	if len(rest) != 2 {
		return s, fmt.Errorf("dmcache: status %q: %w: want metadata mode and needs_check after the policy, got %d fields", clip(line), ErrSyntax, len(rest))
	}
	switch rest[0] {
	case "rw":
	case "ro":
		s.ReadOnly = true
	default:
		return s, fmt.Errorf("dmcache: status %q: %w: metadata mode %q, want rw or ro", clip(line), ErrSyntax, rest[0])
	}
	switch rest[1] {
	case "-":
	case "needs_check":
		s.NeedsCheck = true
	default:
		return s, fmt.Errorf("dmcache: status %q: %w: %q, want - or needs_check", clip(line), ErrSyntax, rest[1])
	}
	return s, nil
}

// parseCounters reads the 11 fields from the metadata block size to the
// dirty count.
func (s *Status) parseCounters(f []string) error {
	var err error
	num := func(x string) uint64 {
		v, e := strconv.ParseUint(x, 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%w: %q is not a count", ErrSyntax, x)
		}
		return v
	}
	frac := func(x string) (uint64, uint64) {
		a, b, ok := strings.Cut(x, "/")
		if !ok && err == nil {
			err = fmt.Errorf("%w: %q is not used/total", ErrSyntax, x)
		}
		return num(a), num(b)
	}
	s.MetadataBlockSectors = num(f[0])
	s.MetadataUsed, s.MetadataTotal = frac(f[1])
	s.BlockSectors = num(f[2])
	s.UsedBlocks, s.TotalBlocks = frac(f[3])
	s.ReadHits, s.ReadMisses, s.WriteHits, s.WriteMisses = num(f[4]), num(f[5]), num(f[6]), num(f[7])
	s.Demotions, s.Promotions, s.Dirty = num(f[8]), num(f[9]), num(f[10])
	return err
}

// startLength reads a target line's first two fields.
func startLength(f []string) (uint64, uint64, error) {
	start, err1 := strconv.ParseUint(f[0], 10, 64)
	length, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || length == 0 {
		return 0, 0, fmt.Errorf("%w: start %q, length %q are not sector counts", ErrSyntax, f[0], f[1])
	}
	return start, length, nil
}

// counted splits "<n> <arg>*" off f.
func counted(f []string, what string) (args, rest []string, err error) {
	if len(f) == 0 {
		return nil, nil, fmt.Errorf("%w: no %s argument count", ErrSyntax, what)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 || n > len(f)-1 {
		return nil, nil, fmt.Errorf("%w: %s argument count %q (%d fields follow)", ErrSyntax, what, f[0], len(f)-1)
	}
	return append([]string{}, f[1:1+n]...), f[1+n:], nil
}

// modeOf returns the mode the features select (Writeback when none does)
// and whether one does; two mode features are an error.
func modeOf(features []string) (Mode, bool, error) {
	m, explicit := Writeback, false
	for _, x := range features {
		if !Mode(x).Valid() {
			continue
		}
		if explicit {
			return "", false, fmt.Errorf("%w: two mode features, %s and %s", ErrSyntax, m, x)
		}
		m, explicit = Mode(x), true
	}
	return m, explicit, nil
}

// clip bounds a line quoted in an error.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
