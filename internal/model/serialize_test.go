package model

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// trainedModel learns the first half of a DiskSim trace.
func trainedModel(t testing.TB, name string) (*Model, []trace.Request) {
	t.Helper()
	reqs := loadDiskSim(t, name)
	var capacity uint64
	for _, q := range reqs {
		capacity = max(capacity, q.End())
	}
	m := Default(HDD, capacity)
	h, _ := DeriveHitClassifier(reqs[:len(reqs)/2])
	if err := m.SetHitClassifier(h); err != nil {
		t.Fatal(err)
	}
	d := m.NewDisk(1)
	for _, q := range reqs[:len(reqs)/2] {
		d.Observe(q.Op, q.Sector, q.Sectors, q.ServiceTime())
	}
	return m, reqs
}

func TestSaveLoadRoundTrip(t *testing.T) {
	m, reqs := trainedModel(t, "atlas10k")
	m.SetServers(3)
	var a bytes.Buffer
	if err := m.Save(&a); err != nil {
		t.Fatal(err)
	}
	l, err := Load(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if l.Config() != m.Config() {
		t.Fatalf("config: %+v != %+v", l.Config(), m.Config())
	}
	var b bytes.Buffer
	if err := l.Save(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("Save(Load(Save(m))) differs from Save(m)")
	}
	// Every cell answers the same, and sampling Disks replay identically.
	for tb := ReadMiss; tb < numTables; tb++ {
		for col := 0; col < m.Columns(); col++ {
			for row := 0; row < NumRows; row++ {
				if x, y := m.Lookup(tb, row, col), l.Lookup(tb, row, col); x != y {
					t.Fatalf("%v row %d col %d: %d != %d", tb, row, col, x, y)
				}
			}
		}
	}
	d1, d2 := m.NewDisk(42), l.NewDisk(42)
	d1.SetPredictMode(PredictSample)
	d2.SetPredictMode(PredictSample)
	for _, q := range reqs[len(reqs)/2:] {
		if x, y := d1.Service(q.Op, q.Sector, q.Sectors), d2.Service(q.Op, q.Sector, q.Sectors); x != y {
			t.Fatalf("sampled predictions differ after reload: %d != %d", x, y)
		}
	}
	// The JSON carries the documented top-level fields.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(a.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "class", "capacitySectors", "servers", "hit", "cache", "layout", "cells"} {
		if _, ok := top[k]; !ok {
			t.Errorf("saved model lacks %q", k)
		}
	}
	// An empty model round-trips too.
	var e bytes.Buffer
	if err := Default(NVMe, 1<<30).Save(&e); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&e); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	m := Default(HDD, 4*gib)
	m.Learn(trace.Read, 8, 1000, 5_000_000)
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	// mutate applies a change to the decoded generic JSON.
	mutate := func(f func(map[string]any)) string {
		var v map[string]any
		if err := json.Unmarshal([]byte(good), &v); err != nil {
			t.Fatal(err)
		}
		f(v)
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	cell := func(v map[string]any) map[string]any { return v["cells"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "EOF"},
		{"not JSON", "hello", "invalid character"},
		{"trailing data", good + "{}", "trailing data"},
		{"unknown field", mutate(func(v map[string]any) { v["colour"] = "red" }), `"colour"`},
		{"missing version", mutate(func(v map[string]any) { delete(v, "version") }), `"version": missing`},
		{"future version", mutate(func(v map[string]any) { v["version"] = 2 }), `"version": unsupported version 2`},
		{"version type", mutate(func(v map[string]any) { v["version"] = "1" }), `"version"`},
		{"unknown class", mutate(func(v map[string]any) { v["class"] = "tape" }), `"class"`},
		{"missing class", mutate(func(v map[string]any) { delete(v, "class") }), `"class": missing`},
		{"zero capacity", mutate(func(v map[string]any) { v["capacitySectors"] = 0 }), `"capacitySectors"`},
		{"negative capacity", mutate(func(v map[string]any) { v["capacitySectors"] = -5 }), `"capacitySectors"`},
		{"zero servers", mutate(func(v map[string]any) { v["servers"] = 0 }), `"servers"`},
		{"bad threshold", mutate(func(v map[string]any) { v["hit"].(map[string]any)["thresholdNs"] = 0 }), `"hit.thresholdNs"`},
		{"bad cache", mutate(func(v map[string]any) { v["cache"].(map[string]any)["segments"] = 0 }), `"cache.segments"`},
		{"missing cache", mutate(func(v map[string]any) { delete(v, "cache") }), `"cache": missing`},
		{"layout mismatch", mutate(func(v map[string]any) { v["layout"].(map[string]any)["columns"] = 99 }), `"layout"`},
		{"capacity vs layout", mutate(func(v map[string]any) { v["capacitySectors"] = 100 * gib }), `"layout"`},
		{"missing cells", mutate(func(v map[string]any) { delete(v, "cells") }), `"cells": missing`},
		{"bad table", mutate(func(v map[string]any) { cell(v)["table"] = "read-maybe" }), `"cells[0].table"`},
		{"row out of range", mutate(func(v map[string]any) { cell(v)["row"] = NumRows }), `"cells[0].row"`},
		{"negative row", mutate(func(v map[string]any) { cell(v)["row"] = -1 }), `"cells[0].row"`},
		{"missing col", mutate(func(v map[string]any) { delete(cell(v), "col") }), `"cells[0].col": missing`},
		{"col out of range", mutate(func(v map[string]any) { cell(v)["col"] = 1000 }), `"cells[0].col"`},
		{"row type", mutate(func(v map[string]any) { cell(v)["row"] = "two" }), `"cells.row"`},
		{"no samples", mutate(func(v map[string]any) { cell(v)["samplesNs"] = []any{} }), `"cells[0].samplesNs"`},
		{"too many samples", mutate(func(v map[string]any) { cell(v)["samplesNs"] = make([]any, RingSize+1) }), `"cells[0].samplesNs": 65 samples`},
		{"negative sample", mutate(func(v map[string]any) { cell(v)["samplesNs"] = []any{1, -2} }), `"cells[0].samplesNs[1]"`},
		{"huge sample", mutate(func(v map[string]any) { cell(v)["samplesNs"] = []any{1e15} }), `"cells[0].samplesNs[0]"`},
		{"duplicate cell", mutate(func(v map[string]any) {
			v["cells"] = append(v["cells"].([]any), v["cells"].([]any)[0])
		}), `"cells[1].table": duplicate`},
	} {
		_, err := Load(strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "model: load: ") {
			t.Errorf("%s: error %q, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load(strings.NewReader(good)); err != nil {
		t.Fatalf("unmodified input: %v", err)
	}
}
