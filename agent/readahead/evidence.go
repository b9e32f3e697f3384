package readahead

import "math"

// PageCache is what the page-cache probe counted of the files on one
// device in one window (tracer.PageCacheStats of the disk and its
// partitions, less the counts at the window's start). Pages are 4 KiB.
type PageCache struct {
	// Measured: a probe counted the device's files during the window.
	Measured bool
	// Used are the pages that entered the page cache while followed and
	// were read or mapped before they left it; Wasted those memory
	// reclaim evicted first. ReadUsed and ReadWasted are their part that
	// read() brought in (not a page fault's read-around). While the
	// device's tracing is paused for a sample, read()'s pages are not
	// followed (tracer.PageCacheProbe.Track, light).
	Used, Wasted, ReadUsed, ReadWasted uint64
	// Mapped are the used pages whose first access was fault-around
	// mapping them (filemap_map_pages).
	Mapped uint64
	// Windows are the read-ahead windows the kernel read and Pages their
	// pages; AroundWindows and AroundPages the part page faults read.
	// Depth and AroundDepth sum, over those windows, the read-ahead of
	// the file each was read for (its depth when it was opened), pages.
	Windows, Pages, AroundWindows, AroundPages uint64
	Depth, AroundDepth                         uint64
	// FullWindows, FullPages and FullDepth are the windows not read
	// around a fault that were as long as their file's depth, their pages
	// and their files' depth summed: streams the depth bounds.
	FullWindows, FullPages, FullDepth uint64
	// FaultAsync are the asynchronous read-aheads page faults started
	// (do_async_mmap_readahead): a sequential mmap reader's windows.
	FaultAsync uint64
}

// Class is one kind of reader's read-ahead, in one window or decayed over
// several (every field is a sum, so that a class weighs by its amount).
type Class struct {
	// Windows are the read-ahead windows read, Pages their pages, and
	// Depth the sum over them of their files' depth, pages (0: not
	// known).
	Windows, Pages, Depth float64
	// Used and Wasted are the pages resolved: used before eviction, and
	// evicted unused by memory reclaim.
	Used, Wasted float64
}

// Evidence is a device's read-ahead evidence.
type Evidence struct {
	// Random is the read-around of page faults at random places;
	// Sequential the windows of sequential readers that the depth bounds
	// (read() windows as long as their file's depth, and sequential mmap
	// readers'); Short the read() windows shorter than their file's depth
	// (a small file's, bounded by its end or its first read's size, and
	// the context read-ahead of reads among cached pages,
	// page_cache_sync_ra in mm/readahead.c).
	Random, Sequential, Short Class
}

// FromPageCache sorts a window's page-cache counts into the two kinds of
// reader. Page faults' windows are random when most of them were
// synchronous read-around (AroundWindows − FaultAsync), else sequential;
// a random reader's pages that fault-around mapped count as wasted. The
// pages of faults' windows read before the window and resolved in it
// count as random, with no window of their own.
func FromPageCache(pc PageCache) Evidence {
	if !pc.Measured {
		return Evidence{}
	}
	var ev Evidence
	faults := Class{
		Windows: float64(pc.AroundWindows), Pages: float64(pc.AroundPages), Depth: float64(pc.AroundDepth),
		Used: float64(sub(pc.Used, pc.ReadUsed)), Wasted: float64(sub(pc.Wasted, pc.ReadWasted)),
	}
	if sync := sub(pc.AroundWindows, pc.FaultAsync); 2*sync >= pc.AroundWindows {
		m := min(float64(pc.Mapped), faults.Used)
		faults.Used -= m
		faults.Wasted += m
		ev.Random = faults
	} else {
		ev.Sequential = faults
	}
	reads := Class{Windows: float64(sub(pc.Windows, pc.AroundWindows)), Pages: float64(sub(pc.Pages, pc.AroundPages)),
		Depth: float64(sub(pc.Depth, pc.AroundDepth))}
	full := Class{Windows: float64(pc.FullWindows), Pages: float64(pc.FullPages), Depth: float64(pc.FullDepth)}
	// read()'s used and wasted pages are not told apart by window: each
	// part takes its share of the pages.
	share := 1.0
	if reads.Pages > 0 {
		share = min(full.Pages/reads.Pages, 1)
	}
	full.Used, full.Wasted = share*float64(pc.ReadUsed), share*float64(pc.ReadWasted)
	ev.Sequential = ev.Sequential.plus(full, 1)
	ev.Short = Class{Windows: max(reads.Windows-full.Windows, 0), Pages: max(reads.Pages-full.Pages, 0),
		Depth: max(reads.Depth-full.Depth, 0), Used: (1 - share) * float64(pc.ReadUsed), Wasted: (1 - share) * float64(pc.ReadWasted)}
	return ev
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// plus is c + f·o, field by field.
func (c Class) plus(o Class, f float64) Class {
	return Class{Windows: c.Windows + f*o.Windows, Pages: c.Pages + f*o.Pages, Depth: c.Depth + f*o.Depth,
		Used: c.Used + f*o.Used, Wasted: c.Wasted + f*o.Wasted}
}

// Resolved is the class's pages resolved, used or wasted.
func (c Class) Resolved() float64 { return c.Used + c.Wasted }

// WastePct is the class's waste, percent of its resolved pages (0 when
// none were resolved).
func (c Class) WastePct() float64 {
	if c.Resolved() <= 0 {
		return 0
	}
	return 100 * c.Wasted / c.Resolved()
}

// depthPages is the class's mean window, pages (0 without windows).
func (c Class) depthPages() float64 {
	if c.Windows <= 0 {
		return 0
	}
	return c.Pages / c.Windows
}

// fileDepthPages is the mean depth the class's files were opened at,
// pages, or cur when not known.
func (c Class) fileDepthPages(cur float64) float64 {
	if c.Windows <= 0 || c.Depth <= 0 {
		return cur
	}
	return c.Depth / c.Windows
}

// usedPerWindow is how many pages of each window its reader used: the
// used share of the mean window, or +Inf when the class wasted at most
// lowWastePct of its resolved pages (a sequential reader uses what it is
// given, at any depth); a class with no resolved page used its whole
// window, as far as anything tells.
func (c Class) usedPerWindow(lowWastePct float64) float64 {
	a := c.depthPages()
	switch {
	case c.Resolved() <= 0:
		return a
	case c.WastePct() <= lowWastePct:
		return math.Inf(1)
	}
	return a * c.Used / c.Resolved()
}

// Plus is e + f·o, class by class: the mix of e and o weighted f.
func (e Evidence) Plus(o Evidence, f float64) Evidence {
	return Evidence{Random: e.Random.plus(o.Random, f), Sequential: e.Sequential.plus(o.Sequential, f), Short: e.Short.plus(o.Short, f)}
}

// Scaled is e with every count multiplied by f.
func (e Evidence) Scaled(f float64) Evidence { return Evidence{}.Plus(e, f) }

// Resolved is the pages resolved in both classes.
func (e Evidence) Resolved() float64 {
	return e.Random.Resolved() + e.Sequential.Resolved() + e.Short.Resolved()
}

// Pages is the pages read in both classes' windows.
func (e Evidence) Pages() float64 { return e.Random.Pages + e.Sequential.Pages + e.Short.Pages }

// Used is the pages used in both classes.
func (e Evidence) Used() float64 { return e.Random.Used + e.Sequential.Used + e.Short.Used }

// WastePct is the waste of both classes, percent of their resolved pages.
func (e Evidence) WastePct() float64 {
	return Class{Used: e.Used(), Wasted: e.Random.Wasted + e.Sequential.Wasted + e.Short.Wasted}.WastePct()
}

// Kind says which kind of reader read the evidence's pages.
type Kind uint8

const (
	// Mixed is evidence of which both kinds read a share of the pages.
	Mixed Kind = iota
	// RandomKind is evidence whose pages were nearly all random
	// readers' read-around.
	RandomKind
	// SequentialKind is evidence whose pages were nearly all sequential
	// readers' windows.
	SequentialKind
)

// kind is the evidence's kind: one class's when the other read at most
// tolPct of the pages (a share that moves a per-page measure by about
// as much), else Mixed; Mixed too when nothing was read.
func (e Evidence) kind(tolPct float64) Kind {
	all := e.Pages()
	switch {
	case all <= 0:
		return Mixed
	case 100*(e.Sequential.Pages+e.Short.Pages) <= tolPct*all:
		return RandomKind
	case 100*e.Random.Pages <= tolPct*all:
		return SequentialKind
	}
	return Mixed
}
