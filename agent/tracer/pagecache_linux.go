//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// pageCacheChunks is the size of the probe's per-page state (entries of
// 16 pages): 131,072 chunks follow 8 GiB of the tracked devices' page
// cache, in 12.6 MB of kernel memory (96 bytes an entry).
const pageCacheChunks = 1 << 17

// pageCacheMaxDevs is how many devices Track accepts (MAX_DEVS in
// bpf/pagecache.c).
const pageCacheMaxDevs = 64

// pageCacheHooks are the probe's tracepoints (group, name) and programs,
// in the order they are attached. Those marked light are all that is
// attached while every tracked device is counted lightly (Track): the
// faults, their read-around windows and the pages those add, their
// fault-around and sequential mmap use, and the folios' eviction; not
// the programs that run on every read() (pc_get_pages) and read() miss
// (pc_sync_ra), or on forced read-ahead.
var pageCacheHooks = []pageCacheHook{
	{"filemap", "mm_filemap_add_to_page_cache", pagecacheProgPcAdd, true},
	{"filemap", "mm_filemap_delete_from_page_cache", pagecacheProgPcDelete, true},
	{"filemap", "mm_filemap_get_pages", pagecacheProgPcGetPages, false},
	{"filemap", "mm_filemap_fault", pagecacheProgPcFault, true},
	{"filemap", "mm_filemap_map_pages", pagecacheProgPcMapPages, true},
	{"readahead", "page_cache_sync_ra", pagecacheProgPcSyncRa, false},
	{"readahead", "page_cache_async_ra", pagecacheProgPcAsyncRa, true},
	{"readahead", "page_cache_ra_order", pagecacheProgPcRaOrder, true},
	{"readahead", "page_cache_ra_unbounded", pagecacheProgPcRaUnbounded, false},
}

// pageCacheHook is a tracepoint (group, name), its program, and whether
// it is attached in the light state.
type pageCacheHook struct {
	group, name, prog string
	light             bool
}

// attachLevel is how many of the hooks are attached.
type attachLevel int

const (
	attachNone  attachLevel = iota
	attachLight             // the light hooks
	attachAll
)

// PageCacheProbe counts, per file system device, the pages added to the
// page cache and whether they were accessed before they left it: the
// read-ahead waste (bpf/pagecache.c; see the package doc, "Page-cache
// probe"). It counts only the devices given to Track. Its methods may be
// called concurrently. Close releases it.
type PageCacheProbe struct {
	coll    *ebpf.Collection
	links   map[string]link.Link // by program
	tracked *ebpf.Map
	stats   *ebpf.Map
	// fastDevs and fastMany are the programs' filter (fast_devs,
	// fast_many in bpf/pagecache.c), kept by syncFilter, and lightMask
	// its light_mask.
	fastDevs, fastMany, lightMask *ebpf.Variable
	// aroundMask is the programs' around_mask: the light devices that had
	// a fault's read-around since they turned light.
	aroundMask *ebpf.Variable

	mu    sync.Mutex
	devs  map[uint32]uint32 // s_dev → index into stats
	light map[uint32]bool   // the devices counted lightly
	level attachLevel
}

// NewPageCacheProbe loads the probe and checks that it attaches to its nine
// tracepoints, as BTF-enabled raw tracepoints (tp_btf); it stays attached
// only while Track has devices to count. It needs root (CAP_BPF and
// CAP_PERFMON) and kernel BTF. When the kernel lacks one of the
// tracepoints (Linux 6.1 lacks most; 6.18 has them) it returns an error
// wrapping ErrPageCacheUnsupported that names it, before anything is
// attached; other errors (memlock, BTF, load, attach) are returned wrapped,
// and nothing stays attached.
func NewPageCacheProbe(opt PageCacheOptions) (*PageCacheProbe, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("page-cache probe: memlock: %w", err)
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("page-cache probe: kernel BTF: %w", err)
	}
	for _, h := range pageCacheHooks {
		var typ *btf.Typedef
		if err := kspec.TypeByName("btf_trace_"+h.name, &typ); err != nil {
			return nil, fmt.Errorf("%w: kernel has no tracepoint %s:%s (a recent kernel has it: 6.18 does, 6.1 does not)", ErrPageCacheUnsupported, h.group, h.name)
		}
	}
	spec, err := loadPagecache()
	if err != nil {
		return nil, fmt.Errorf("page-cache probe: %w", err)
	}
	spec.Maps[pagecacheMapChunks].MaxEntries = pageCacheChunks
	if err := spec.Variables["sample_mask"].Set(opt.sampleMask()); err != nil {
		return nil, fmt.Errorf("page-cache probe: %w", err)
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kspec}})
	if err != nil {
		return nil, fmt.Errorf("page-cache probe: load: %w", err)
	}
	p := &PageCacheProbe{coll: coll, tracked: coll.Maps[pagecacheMapTracked],
		stats: coll.Maps[pagecacheMapStats], fastDevs: coll.Variables[pagecacheVarFastDevs],
		fastMany: coll.Variables[pagecacheVarFastMany], lightMask: coll.Variables[pagecacheVarLightMask],
		aroundMask: coll.Variables[pagecacheVarAroundMask],
		devs:       map[uint32]uint32{}, light: map[uint32]bool{}, links: map[string]link.Link{}}
	err = p.attach(attachAll)
	if err == nil {
		err = p.attach(attachNone)
	}
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// attach attaches the hooks of level and detaches the others; on an
// error nothing stays attached (p.mu held, or p not yet shared). Every
// page-cache event of the node runs the attached programs, a tracked
// device's or not: on 4 KiB reads of a device not tracked, about 10 ms of
// each second of reading (hack/bench-bpf-programs.sh,
// docs/runs/2026-12-03-history.md); the light hooks run on faults, read-ahead
// windows and folios added or evicted, not on every read(). Leaving the
// full state forgets the per-page and per-task state, which the read()
// events missed meanwhile would leave stale.
func (p *PageCacheProbe) attach(level attachLevel) error {
	for _, h := range pageCacheHooks {
		want := level == attachAll || level == attachLight && h.light
		if l, ok := p.links[h.prog]; ok && !want {
			delete(p.links, h.prog)
			if err := l.Close(); err != nil {
				return errors.Join(fmt.Errorf("page-cache probe: detach %s:%s: %w", h.group, h.name, err), p.attach(attachNone))
			}
		}
		if _, ok := p.links[h.prog]; ok || !want {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: p.coll.Programs[h.prog], AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return errors.Join(fmt.Errorf("page-cache probe: attach %s:%s: %w", h.group, h.name, err), p.attach(attachNone))
		}
		p.links[h.prog] = l
	}
	was := p.level
	p.level = level
	if was != attachAll || level == attachAll {
		return nil
	}
	return p.forgetPages()
}

// forgetPages clears the per-page and per-task maps (the read() hooks
// detached, p.mu held).
func (p *PageCacheProbe) forgetPages() error {
	var errs []error
	for _, name := range []string{pagecacheMapChunks, pagecacheMapTasks} {
		if err := clearMap(p.coll.Maps[name]); err != nil {
			errs = append(errs, fmt.Errorf("page-cache probe: clear %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// clearMap deletes the keys a hash map holds when it starts. The light
// programs may add keys meanwhile (pages a fault's read-around adds): a
// key deleted as it is added loses that chunk's pages, which then count
// neither as used nor as wasted.
func clearMap(m *ebpf.Map) error {
	key, val := make([]byte, m.KeySize()), make([]byte, m.ValueSize())
	var keys [][]byte
	it := m.Iterate()
	for it.Next(key, val) {
		keys = append(keys, slices.Clone(key))
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// Track sets the devices counted: s_dev values, the kernel's encoding
// major<<20 | minor (KernelDev converts stat's st_dev). Those also in
// light are counted lightly: their faults, asynchronous read-ahead events
// and windows (MmapFaults, AsyncReadAhead, ReadAheadPages, AroundPages),
// and of their pages only those a page fault's read-around added, used
// by faults, fault-around and sequential mmap readers or wasted; in the
// light state the programs of every read() and read() miss do not run,
// so SyncReadAhead and forced read-ahead (page_cache_ra_unbounded) are
// not counted, and the pages read() adds are not followed. A device
// already tracked keeps its counters, whether it changes between the two
// states or not; one dropped loses them, and restarts from zero if
// tracked again. Pages a device had in the page cache before it was
// tracked, or that read() added while it was counted lightly, are never
// counted as used or wasted. All programs are attached while one device
// is counted fully, the light ones while every device is counted
// lightly, none while none is tracked. It returns
// an error for more than 64 devices or when a map update, an attach or a
// detach fails (the set is then partly applied).
func (p *PageCacheProbe) Track(devs, light []uint32) error {
	devs = slices.Compact(slices.Sorted(slices.Values(devs)))
	if len(devs) > pageCacheMaxDevs {
		return fmt.Errorf("page-cache probe: %d devices, at most %d", len(devs), pageCacheMaxDevs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for dev := range p.devs {
		if _, keep := slices.BinarySearch(devs, dev); keep {
			continue
		}
		if err := p.tracked.Delete(dev); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("page-cache probe: untrack %s: %w", DevString(dev), err)
		}
		delete(p.devs, dev)
	}
	// The devices dropped leave the filter before their indices are
	// given to others.
	if err := p.syncFilter(); err != nil {
		return err
	}
	for _, dev := range devs {
		if _, ok := p.devs[dev]; ok {
			continue
		}
		idx := p.freeIndex()
		if err := p.zero(idx); err != nil {
			return fmt.Errorf("page-cache probe: track %s: %w", DevString(dev), err)
		}
		if err := p.tracked.Put(dev, idx); err != nil {
			return fmt.Errorf("page-cache probe: track %s: %w", DevString(dev), err)
		}
		p.devs[dev] = idx
	}
	was := maps.Clone(p.light)
	clear(p.light)
	for _, dev := range light {
		if _, ok := p.devs[dev]; ok {
			p.light[dev] = true
		}
	}
	if err := p.syncFilter(); err != nil {
		return err
	}
	if err := p.clearAround(was); err != nil {
		return err
	}
	level := attachNone
	switch {
	case len(p.devs) > len(p.light):
		level = attachAll
	case len(p.devs) > 0:
		level = attachLight
	}
	if level == p.level {
		return nil
	}
	return p.attach(level)
}

// clearAround clears the around_mask bits of the devices light now that
// were not in was: a device's light pages are looked up on eviction only
// once it has had a fault's read-around since it turned light (p.mu
// held). The programs may set another device's bit meanwhile; that one
// then waits for its next read-around.
func (p *PageCacheProbe) clearAround(was map[uint32]bool) error {
	var mask uint64
	for dev := range p.light {
		if !was[dev] {
			mask |= 1 << p.devs[dev]
		}
	}
	if mask == 0 {
		return nil
	}
	var cur uint64
	if err := p.aroundMask.Get(&cur); err != nil {
		return fmt.Errorf("page-cache probe: around mask: %w", err)
	}
	if err := p.aroundMask.Set(cur &^ mask); err != nil {
		return fmt.Errorf("page-cache probe: around mask: %w", err)
	}
	return nil
}

// pageCacheFastDevs is FAST_DEVS in bpf/pagecache.c.
const pageCacheFastDevs = 8

// syncFilter writes the tracked devices into the programs' filter: each
// at its stats index in fast_devs, or, when one's index is past it, the
// whole set in the tracked map only (fast_many) (p.mu held).
func (p *PageCacheProbe) syncFilter() error {
	var fast [pageCacheFastDevs]uint32
	many := uint32(0)
	for dev, idx := range p.devs {
		if idx >= pageCacheFastDevs {
			many = 1
			continue
		}
		fast[idx] = dev
	}
	if many == 1 {
		// The map holds every device: switch to it first.
		if err := p.fastMany.Set(many); err != nil {
			return fmt.Errorf("page-cache probe: filter: %w", err)
		}
	}
	if err := p.fastDevs.Set(fast); err != nil {
		return fmt.Errorf("page-cache probe: filter: %w", err)
	}
	if err := p.fastMany.Set(many); err != nil {
		return fmt.Errorf("page-cache probe: filter: %w", err)
	}
	var mask uint64
	for dev := range p.light {
		mask |= 1 << p.devs[dev]
	}
	if err := p.lightMask.Set(mask); err != nil {
		return fmt.Errorf("page-cache probe: filter: %w", err)
	}
	return nil
}

// freeIndex is the lowest stats index no tracked device uses (p.mu held).
func (p *PageCacheProbe) freeIndex() uint32 {
	used := make([]bool, pageCacheMaxDevs)
	for _, idx := range p.devs {
		used[idx] = true
	}
	return uint32(slices.Index(used, false))
}

// zero resets the per-CPU counters at idx.
func (p *PageCacheProbe) zero(idx uint32) error {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	return p.stats.Put(idx, make([]pagecachePcStats, n))
}

// Stats returns the cumulative counters of every tracked device, by s_dev,
// since it was tracked (pages are 4 KiB). It returns an error when a
// counter cannot be read.
func (p *PageCacheProbe) Stats() (map[uint32]PageCacheStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[uint32]PageCacheStats, len(p.devs))
	var per []pagecachePcStats
	for dev, idx := range p.devs {
		if err := p.stats.Lookup(idx, &per); err != nil {
			return nil, fmt.Errorf("page-cache probe: counters of %s: %w", DevString(dev), err)
		}
		var s PageCacheStats
		for _, c := range per {
			s.AddedPages += c.Added
			s.UsedPages += c.Used
			s.WastedPages += c.Wasted
			s.SyncReadAhead += c.SyncRa
			s.AsyncReadAhead += c.AsyncRa
			s.ReadAheadPages += c.RaPages
			s.MmapFaults += c.Faults
			s.UnwalkedPages += c.Unwalked
			s.AroundPages += c.Around
			s.MappedPages += c.Mapped
			s.MapEvents += c.MapEvents
			s.ReadUsedPages += c.UsedRead
			s.ReadWastedPages += c.WastedRead
			s.Windows += c.Windows
			s.AroundWindows += c.AroundWindows
			s.DepthPages += c.Depth
			s.AroundDepthPages += c.AroundDepth
			s.FullWindows += c.FullWindows
			s.FullPages += c.FullPages
			s.FullDepthPages += c.FullDepth
			s.FaultAsyncReadAhead += c.FaultAsync
		}
		out[dev] = s
	}
	return out, nil
}

// Close detaches and unloads the probe; it returns the detach errors.
func (p *PageCacheProbe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	clear(p.links)
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	return errors.Join(errs...)
}
