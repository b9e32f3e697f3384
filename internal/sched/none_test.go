package sched

import (
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

func TestNoneFIFOOrder(t *testing.T) {
	s := mustNew(t, "none", nil, DefaultDevice)
	insert(t, s, 0,
		rq(0, 'R', 5000, 8, 1), rq(1, 'W', 100, 8, 2), rq(2, 'R', 9000, 8, 1),
		rq(3, 'R', 10, 8, 3), rq(4, 'W', 700, 8, 2))
	if got := ids(run(t, s, 0, ms, 1, 0, nil)); got != "0 1 2 3 4" {
		t.Fatalf("order = %q, want arrival order", got)
	}
}

func TestNoneMerge(t *testing.T) {
	cases := []struct {
		name    string
		queued  []*Request
		r       *Request
		max     uint32
		merged  bool
		into    int32 // ID of the request merged into
		sector  uint64
		sectors uint32
	}{
		{"back", []*Request{rq(0, 'R', 100, 8, 1)}, rq(1, 'R', 108, 8, 1), 2560, true, 0, 100, 16},
		{"front", []*Request{rq(0, 'R', 100, 8, 1)}, rq(1, 'R', 92, 8, 1), 2560, true, 0, 92, 16},
		{"gap", []*Request{rq(0, 'R', 100, 8, 1)}, rq(1, 'R', 109, 8, 1), 2560, false, 0, 0, 0},
		{"other op", []*Request{rq(0, 'W', 100, 8, 1)}, rq(1, 'R', 108, 8, 1), 2560, false, 0, 0, 0},
		{"other process", []*Request{rq(0, 'R', 100, 8, 1)}, rq(1, 'R', 108, 8, 2), 2560, true, 0, 100, 16},
		{"exactly max", []*Request{rq(0, 'R', 100, 8, 1)}, rq(1, 'R', 108, 8, 1), 16, true, 0, 100, 16},
		{"over max", []*Request{rq(0, 'R', 100, 8, 1)}, rq(1, 'R', 108, 9, 1), 16, false, 0, 0, 0},
		// a contiguous candidate that is too big ends the search
		// (BIO_MERGE_FAILED) even if an older one would fit.
		{"failed stops", []*Request{rq(0, 'R', 124, 8, 1), rq(1, 'R', 100, 16, 1)}, rq(2, 'R', 116, 8, 1), 20, false, 0, 0, 0},
		{"newest first", []*Request{rq(0, 'R', 100, 8, 1), rq(1, 'R', 116, 8, 1)}, rq(2, 'R', 108, 8, 1), 2560, true, 1, 108, 16},
		{"discard not merged", []*Request{rq(0, 'D', 100, 8, 1)}, rq(1, 'D', 108, 8, 1), 2560, false, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, "none", nil, Device{MaxSectors: c.max, QueueDepth: 1})
			insert(t, s, 0, c.queued...)
			got := s.Insert(c.r, 0)
			if got != c.merged {
				t.Fatalf("merged = %v, want %v", got, c.merged)
			}
			if !got {
				if s.Queued() != len(c.queued)+1 {
					t.Fatalf("Queued = %d", s.Queued())
				}
				return
			}
			var into *Request
			for _, q := range c.queued {
				if q.ID == c.into {
					into = q
				}
			}
			if into.Sector != c.sector || into.Sectors != c.sectors {
				t.Fatalf("merged request = [%d,+%d), want [%d,+%d)", into.Sector, into.Sectors, c.sector, c.sectors)
			}
			if len(into.Merged) != 1 || into.Merged[0] != c.r || c.r.Class != ClassMerged {
				t.Fatalf("Merged list = %v", into.Merged)
			}
			if s.Queued() != len(c.queued) {
				t.Fatalf("Queued = %d, want %d", s.Queued(), len(c.queued))
			}
		})
	}
}

func TestNoneMergeScansEightNewest(t *testing.T) {
	s := mustNew(t, "none", nil, DefaultDevice)
	insert(t, s, 0, rq(0, 'R', 100, 8, 1))
	for i := 1; i <= 8; i++ {
		insert(t, s, 0, rq(i, 'R', uint64(10000*i), 8, 1))
	}
	if s.Insert(rq(9, 'R', 108, 8, 1), 0) {
		t.Fatal("merged with the 9th newest request; blk_bio_list_merge checks 8")
	}
	s2 := mustNew(t, "none", nil, DefaultDevice)
	insert(t, s2, 0, rq(0, 'R', 100, 8, 1))
	for i := 1; i <= 7; i++ {
		insert(t, s2, 0, rq(i, 'R', uint64(10000*i), 8, 1))
	}
	if !s2.Insert(rq(8, 'R', 108, 8, 1), 0) {
		t.Fatal("did not merge with the 8th newest request")
	}
}

func TestNoneMaxSectorsChain(t *testing.T) {
	// A sequential stream of 8-sector requests merges up to MaxSectors
	// (64 here), then starts a new request.
	s := mustNew(t, "none", nil, Device{MaxSectors: 64, QueueDepth: 1})
	merged := 0
	for i := 0; i < 20; i++ {
		r := rq(i, 'W', uint64(8*i), 8, 1)
		if s.Insert(r, 0) {
			merged++
		}
	}
	out := run(t, s, 0, ms, 1, 0, nil)
	var total uint32
	for _, r := range out {
		if r.Sectors > 64 {
			t.Fatalf("request of %d sectors exceeds MaxSectors", r.Sectors)
		}
		total += r.Sectors
	}
	if len(out) != 3 || merged != 17 || total != 160 {
		t.Fatalf("got %d requests (%d merged, %d sectors), want 3 (17, 160)", len(out), merged, total)
	}
}

func TestFlushBypass(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s := mustNew(t, name, nil, Device{Rotational: true, MaxSectors: 2560, QueueDepth: 1})
			insert(t, s, 0, rq(0, 'R', 100, 8, 1), rq(1, 'W', 5000, 8, 2))
			f := rq(2, 'F', 0, 0, 3)
			insert(t, s, 0, f)
			r, _ := s.Dispatch(0)
			if r != f {
				t.Fatalf("first dispatch = %v, want the flush", r.ID)
			}
			if f.Op != trace.Flush || f.Class != ClassBypass {
				t.Fatal("flush not marked bypass")
			}
			s.Complete(f, ms)
			if got := len(run(t, s, ms, ms, 1, 0, nil)); got != 2 {
				t.Fatalf("dispatched %d more, want 2", got)
			}
		})
	}
}
