package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// FormatVersion is the version of the JSON model format written by Save.
const FormatVersion = 1

// maxModelBytes bounds the size of a model Load accepts (a full table of
// 3 × 64 × 275 cells × 64 samples is ~40 MB of JSON).
const maxModelBytes = 256 << 20

// fileModel is the JSON form of a Model:
//
//	{
//	  "version": 1,
//	  "class": "hdd",
//	  "capacitySectors": 2049820,
//	  "servers": 1,
//	  "hit": {"thresholdNs": 1000000, "nsPerSector": 1707},
//	  "cache": {"sizeBytes": 16777216, "segments": 32, ...},
//	  "layout": {"rows": 64, "columns": 20, "gibPerColumn": 1},
//	  "cells": [{"table": "read-miss", "row": 0, "col": 19, "samplesNs": [...]}, ...]
//	}
//
// layout is redundant (it follows from capacitySectors) and is checked on
// load, so a model written by a build with another geometry is rejected
// rather than misread. samplesNs are a cell's stored service times in ns,
// oldest first (at most RingSize). Only non-empty cells are written, in
// table, column, row order.
type fileModel struct {
	Version         *int           `json:"version"`
	Class           *string        `json:"class"`
	CapacitySectors *uint64        `json:"capacitySectors"`
	Servers         *int           `json:"servers"`
	Hit             *HitClassifier `json:"hit"`
	Cache           *CacheConfig   `json:"cache"`
	Throttle        *Throttle      `json:"throttle,omitempty"`
	Layout          *fileLayout    `json:"layout"`
	Cells           []fileCell     `json:"cells"`
}

type fileLayout struct {
	Rows         int    `json:"rows"`
	Columns      int    `json:"columns"`
	GiBPerColumn uint64 `json:"gibPerColumn"`
}

type fileCell struct {
	Table     string  `json:"table"`
	Row       *int    `json:"row"`
	Col       *int    `json:"col"`
	SamplesNs []int64 `json:"samplesNs"`
}

// Save writes the model as versioned JSON (see fileModel for the format).
// The output is deterministic: the same model gives the same bytes.
func (m *Model) Save(w io.Writer) error {
	v, class, capSec, servers := FormatVersion, m.cfg.Class.String(), m.cfg.CapacitySectors, m.cfg.Servers
	hit, cache := m.cfg.Hit, m.cfg.Cache
	f := fileModel{
		Version: &v, Class: &class, CapacitySectors: &capSec, Servers: &servers,
		Hit: &hit, Cache: &cache,
		Layout: &fileLayout{Rows: NumRows, Columns: m.lay.columns(), GiBPerColumn: m.lay.gibPerCol},
		Cells:  []fileCell{},
	}
	if m.cfg.Throttle.Enabled() {
		th := m.cfg.Throttle
		f.Throttle = &th
	}
	for t := range m.tables {
		tb := &m.tables[t]
		for col := 0; col < m.lay.columns(); col++ {
			for row := 0; row < NumRows; row++ {
				c := &tb.cells[col*NumRows+row]
				if c.n == 0 {
					continue
				}
				s := make([]int64, c.n)
				for i := range s {
					s[i] = c.logical(i)
				}
				r, cl := row, col
				f.Cells = append(f.Cells, fileCell{Table: Table(t).String(), Row: &r, Col: &cl, SamplesNs: s})
			}
		}
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(&f); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	return nil
}

// Load reads a model written by Save. It rejects malformed input with an
// error naming the offending field: unknown fields, a missing or
// unsupported version, an unknown class, a zero capacity, invalid hit,
// server or cache parameters, a layout that does not match this build's
// geometry for the capacity, and cells with an unknown table, a row or
// column out of range, a duplicate position, no samples, more than
// RingSize samples or a negative sample.
func Load(r io.Reader) (*Model, error) {
	f, err := decodeModelFile(r)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(&f)
	if err != nil {
		return nil, err
	}
	m, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("model: load: %w", err)
	}
	if l := *f.Layout; l.Rows != NumRows || l.Columns != m.lay.columns() || l.GiBPerColumn != m.lay.gibPerCol {
		return nil, loadFieldErr("layout", "%d rows × %d columns of %d GiB does not match this build's %d × %d of %d GiB for %d sectors",
			l.Rows, l.Columns, l.GiBPerColumn, NumRows, m.lay.columns(), m.lay.gibPerCol, cfg.CapacitySectors)
	}
	if f.Cells == nil {
		return nil, loadFieldErr("cells", "missing")
	}
	if err := loadCells(m, f.Cells); err != nil {
		return nil, err
	}
	return m, nil
}

// loadFieldErr is Load's error for a bad field.
func loadFieldErr(field, format string, args ...any) error {
	return fmt.Errorf("model: load: field %q: %s", field, fmt.Sprintf(format, args...))
}

// decodeModelFile reads at most maxModelBytes from r and decodes one model
// object, rejecting unknown fields and trailing data.
func decodeModelFile(r io.Reader) (fileModel, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxModelBytes+1))
	if err != nil {
		return fileModel{}, fmt.Errorf("model: load: %w", err)
	}
	if len(data) > maxModelBytes {
		return fileModel{}, fmt.Errorf("model: load: input larger than %d bytes", maxModelBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f fileModel
	if err := dec.Decode(&f); err != nil {
		return fileModel{}, fmt.Errorf("model: load: %w", describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fileModel{}, fmt.Errorf("model: load: trailing data after the model object")
	}
	return f, nil
}

// loadConfig checks the version and the presence of the header fields of
// f (layout included) and returns the validated configuration they give.
func loadConfig(f *fileModel) (Config, error) {
	switch {
	case f.Version == nil:
		return Config{}, loadFieldErr("version", "missing")
	case *f.Version != FormatVersion:
		return Config{}, loadFieldErr("version", "unsupported version %d (this build reads %d)", *f.Version, FormatVersion)
	case f.Class == nil:
		return Config{}, loadFieldErr("class", "missing")
	}
	class, err := ParseClass(*f.Class)
	if err != nil {
		return Config{}, loadFieldErr("class", "%v", err)
	}
	switch {
	case f.CapacitySectors == nil:
		return Config{}, loadFieldErr("capacitySectors", "missing")
	case *f.CapacitySectors == 0:
		return Config{}, loadFieldErr("capacitySectors", "must be > 0")
	case f.Servers == nil:
		return Config{}, loadFieldErr("servers", "missing")
	case f.Hit == nil:
		return Config{}, loadFieldErr("hit", "missing")
	case f.Cache == nil:
		return Config{}, loadFieldErr("cache", "missing")
	case f.Layout == nil:
		return Config{}, loadFieldErr("layout", "missing")
	}
	cfg := Config{
		Class: class, CapacitySectors: *f.CapacitySectors, Servers: *f.Servers,
		Hit: *f.Hit, Cache: *f.Cache,
	}
	if f.Throttle != nil {
		cfg.Throttle = *f.Throttle
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("model: load: %w", err)
	}
	return cfg, nil
}

// loadCells checks the cells of a model file against m's layout and
// learns their samples (ns) into m.
func loadCells(m *Model, cells []fileCell) error {
	seen := make(map[[3]int]bool, len(cells))
	for i, c := range cells {
		name := func(sub string) string { return fmt.Sprintf("cells[%d].%s", i, sub) }
		t, ok := parseTable(c.Table)
		if !ok {
			return loadFieldErr(name("table"), "unknown table %q (want read-miss, read-hit or write)", c.Table)
		}
		if c.Row == nil {
			return loadFieldErr(name("row"), "missing")
		}
		if c.Col == nil {
			return loadFieldErr(name("col"), "missing")
		}
		row, col := *c.Row, *c.Col
		if row < 0 || row >= NumRows {
			return loadFieldErr(name("row"), "%d out of range [0, %d)", row, NumRows)
		}
		if col < 0 || col >= m.lay.columns() {
			return loadFieldErr(name("col"), "%d out of range [0, %d)", col, m.lay.columns())
		}
		key := [3]int{int(t), row, col}
		if seen[key] {
			return loadFieldErr(name("table"), "duplicate cell %s row %d col %d", t, row, col)
		}
		seen[key] = true
		if err := checkSamples(i, c.SamplesNs); err != nil {
			return err
		}
		for _, v := range c.SamplesNs {
			m.learnCell(t, row, col, v)
		}
	}
	return nil
}

// checkSamples checks the samples (ns) of cell i: 1 to RingSize of them,
// each in [0, maxSampleNs].
func checkSamples(i int, samples []int64) error {
	if len(samples) == 0 {
		return loadFieldErr(fmt.Sprintf("cells[%d].samplesNs", i), "missing or empty")
	}
	if len(samples) > RingSize {
		return loadFieldErr(fmt.Sprintf("cells[%d].samplesNs", i), "%d samples, at most %d", len(samples), RingSize)
	}
	for j, v := range samples {
		if v < 0 {
			return loadFieldErr(fmt.Sprintf("cells[%d].samplesNs[%d]", i, j), "negative service time %d", v)
		}
		if v > maxSampleNs {
			return loadFieldErr(fmt.Sprintf("cells[%d].samplesNs[%d]", i, j), "service time %d ns exceeds %d ns", v, maxSampleNs)
		}
	}
	return nil
}

// maxSampleNs bounds a stored service time (1 hour), so that sums of a
// cell and of a column cannot overflow.
const maxSampleNs = int64(3600e9)

// describeJSONError names the field of a JSON type error.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("field %q: cannot use JSON %s as %s", te.Field, te.Value, te.Type)
	}
	return err
}
