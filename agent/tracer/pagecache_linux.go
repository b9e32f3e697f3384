//go:build linux

package tracer

import (
	"errors"
	"fmt"
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
// in the order they are attached.
var pageCacheHooks = []struct{ group, name, prog string }{
	{"filemap", "mm_filemap_add_to_page_cache", pagecacheProgPcAdd},
	{"filemap", "mm_filemap_delete_from_page_cache", pagecacheProgPcDelete},
	{"filemap", "mm_filemap_get_pages", pagecacheProgPcGetPages},
	{"filemap", "mm_filemap_fault", pagecacheProgPcFault},
	{"filemap", "mm_filemap_map_pages", pagecacheProgPcMapPages},
	{"readahead", "page_cache_sync_ra", pagecacheProgPcSyncRa},
	{"readahead", "page_cache_async_ra", pagecacheProgPcAsyncRa},
	{"readahead", "page_cache_ra_order", pagecacheProgPcRaOrder},
	{"readahead", "page_cache_ra_unbounded", pagecacheProgPcRaUnbounded},
}

// PageCacheProbe counts, per file system device, the pages added to the
// page cache and whether they were accessed before they left it: the
// read-ahead waste (bpf/pagecache.c; see the package doc, "Page-cache
// probe"). It counts only the devices given to Track. Its methods may be
// called concurrently. Close releases it.
type PageCacheProbe struct {
	coll    *ebpf.Collection
	links   []link.Link
	tracked *ebpf.Map
	stats   *ebpf.Map
	// fastDevs and fastMany are the programs' filter (fast_devs,
	// fast_many in bpf/pagecache.c), kept by syncFilter.
	fastDevs, fastMany *ebpf.Variable

	mu   sync.Mutex
	devs map[uint32]uint32 // s_dev → index into stats
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
		fastMany: coll.Variables[pagecacheVarFastMany], devs: map[uint32]uint32{}}
	err = p.attach()
	if err == nil {
		err = p.detach()
	}
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// attach attaches the programs to their tracepoints; on an error none
// stays attached (p.mu held, or p not yet shared).
func (p *PageCacheProbe) attach() error {
	for _, h := range pageCacheHooks {
		l, err := link.AttachTracing(link.TracingOptions{Program: p.coll.Programs[h.prog], AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			_ = p.detach()
			return fmt.Errorf("page-cache probe: attach %s:%s: %w", h.group, h.name, err)
		}
		p.links = append(p.links, l)
	}
	return nil
}

// detach detaches the programs and forgets the per-page and per-task
// state, which the events missed while detached would leave stale (p.mu
// held, or p not yet shared). Every page-cache event of the node runs the
// attached programs, a tracked device's or not: on 4 KiB reads of a
// device not tracked, about 10 ms of each second of reading
// (hack/bench-bpf-programs.sh, docs/bench-decisions.md).
func (p *PageCacheProbe) detach() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.links = nil
	for _, name := range []string{pagecacheMapChunks, pagecacheMapTasks} {
		if err := clearMap(p.coll.Maps[name]); err != nil {
			errs = append(errs, fmt.Errorf("page-cache probe: clear %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// clearMap deletes every key of a hash map (programs detached: nothing
// adds keys meanwhile).
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
// major<<20 | minor (KernelDev converts stat's st_dev). A device already
// tracked keeps its counters; one dropped loses them, and restarts from
// zero if tracked again. Pages a device had in the page cache before it
// was tracked are never counted as used or wasted. The programs are
// attached while at least one device is tracked and detached while none
// is. It returns an error for more than 64 devices or when a map update,
// an attach or a detach fails (the set is then partly applied).
func (p *PageCacheProbe) Track(devs []uint32) error {
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
	if err := p.syncFilter(); err != nil {
		return err
	}
	switch {
	case len(p.devs) == 0 && p.links != nil:
		return p.detach()
	case len(p.devs) > 0 && p.links == nil:
		return p.attach()
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
	p.links = nil
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	return errors.Join(errs...)
}
