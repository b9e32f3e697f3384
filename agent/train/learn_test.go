package train

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// served turns planned requests into traced ones: issued one at a time,
// each taking service(i) ns.
func served(reqs []trace.Request, service func(i int) int64) []trace.Request {
	out := make([]trace.Request, len(reqs))
	now := int64(1000)
	for i, q := range reqs {
		q.Arrival, q.Dispatch = now, now+2000
		q.Complete = q.Dispatch + service(i)
		now = q.Complete + 5000
		out[i] = q
	}
	return out
}

func TestLearnClassAndSummary(t *testing.T) {
	const capacity = 1 << 21 // 1 GiB
	disk := sysfs.Device{Name: "sdx", Rotational: true, SizeBytes: capacity * 512}
	cases := []struct {
		name      string
		class     model.Class
		serviceNs int64
		want      model.Class
		note      bool
	}{
		{"rotational but fast: modelled as ssd", 0, 150_000, model.SSD, true},
		{"rotational and slow: hdd", 0, 8_000_000, model.HDD, false},
		{"class given: kept", model.HDD, 150_000, model.HDD, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPlanner(PlanOptions{CapacitySectors: capacity, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			reqs := p.Next(3 * len(p.Cells()))
			planned := map[reqKey]int{}
			for _, q := range reqs {
				planned[reqKey{q.Op, q.Sector, q.Sectors}]++
			}
			traced := served(reqs, func(int) int64 { return c.serviceNs })
			// Another program's read in the middle: traced, not learned.
			foreign := traced[10]
			foreign.Sector, foreign.Dispatch, foreign.Complete = 12345, traced[10].Dispatch+1, traced[10].Dispatch+2
			traced = append(traced, foreign)
			res := &Result{Device: disk, Name: disk.Name}
			if err := learn(res, traced, planned, capacity, c.class, p.Cells()); err != nil {
				t.Fatal(err)
			}
			if res.Class != c.want || res.Model.Class() != c.want || (res.ClassNote != "") != c.note {
				t.Errorf("class %v (model %v), note %q; want %v, note %v", res.Class, res.Model.Class(), res.ClassNote, c.want, c.note)
			}
			if res.Learned != len(reqs) || res.Other != 1 || res.Traced != len(reqs)+1 {
				t.Errorf("learned %d, other %d, traced %d; want %d, 1, %d", res.Learned, res.Other, res.Traced, len(reqs), len(reqs)+1)
			}
			if res.CoveredCells != res.PlannedCells || res.PlannedCells != len(p.Cells()) {
				t.Errorf("covered %d of %d cells (planned %d)", res.CoveredCells, res.PlannedCells, len(p.Cells()))
			}
			var n int
			for _, ts := range res.Tables {
				n += ts.Requests
				if ts.Requests > 0 && ts.MeanServiceNs != c.serviceNs {
					t.Errorf("table %s: mean %d ns, want %d", ts.Name, ts.MeanServiceNs, c.serviceNs)
				}
			}
			if n != len(reqs) {
				t.Errorf("tables hold %d requests, want %d", n, len(reqs))
			}
			if k := res.Model.Servers(); k != model.DefaultConfig(c.want, capacity).Servers {
				t.Errorf("k = %d, want the class default", k)
			}
			if got := res.Model.Config().CapacitySectors; got != capacity {
				t.Errorf("model capacity %d, want %d (the agent only loads a model of the device's size)", got, capacity)
			}
		})
	}
}

func TestLearnNothingTraced(t *testing.T) {
	res := &Result{Name: "sdx", Tracer: "ebpf", FioReads: 10}
	err := learn(res, nil, map[reqKey]int{}, 1<<20, model.SSD, nil)
	if err == nil || !strings.Contains(err.Error(), "no training request was traced") {
		t.Errorf("got %v", err)
	}
}

func TestRunPreconditions(t *testing.T) {
	if _, err := Run(t.Context(), Options{Device: "loop0"}); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("no duration: %v", err)
	}
	_, err := Run(t.Context(), Options{Device: "loop0", Duration: time.Second, Fio: "/nonexistent/fio"})
	if !errors.Is(err, ErrNoFio) {
		t.Errorf("no fio: %v", err)
	}
	saved := geteuid
	geteuid = func() int { return 1000 }
	defer func() { geteuid = saved }()
	_, err = Run(t.Context(), Options{Device: "loop0", Duration: time.Second, Fio: "/bin/sh"})
	if !errors.Is(err, ErrNotRoot) {
		t.Errorf("not root: %v", err)
	}
}
