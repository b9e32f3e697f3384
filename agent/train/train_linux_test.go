//go:build linux

package train

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// loop attaches a loop device of size bytes (skipping unless root) and
// fills its backing file with random data, so that reads reach allocated
// blocks and any write changes the file's checksum. It returns the kernel
// name and the backing file.
func loop(t *testing.T, size int64) (name, backing string) {
	t.Helper()
	loopdev.NeedFio(t)
	d := loopdev.NewForTest(t, size)
	d.Fill(t, rand.NewChaCha8([32]byte{byte(size), 7}))
	return d.Name, d.Backing
}

func checksum(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

type logWriter struct{ t *testing.T }

func (l logWriter) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestTrainReadOnlyLoop trains a 256 MiB loop device for about 5 s
// without writes: the model fills (nearly) every planned read cell, and
// the device's data is unchanged — nothing was written to it.
func TestTrainReadOnlyLoop(t *testing.T) {
	name, backing := loop(t, 256<<20)
	before := checksum(t, backing)
	st0 := loopdev.ReadStat(t, name)
	start := time.Now()
	res, err := Run(t.Context(), Options{Device: "/dev/" + name, Duration: 5 * time.Second, Seed: 1, Log: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := loopdev.ReadStat(t, name).Sub(st0)
	after := checksum(t, backing)
	t.Logf("%s: class %s (%s), %d rounds, %.1f s; fio %d reads; traced %d, learned %d, other %d, lost %d; cells %d/%d; tables %+v; stat %+v",
		name, res.Class, res.ClassNote, res.Rounds, res.Elapsed.Seconds(), res.FioReads, res.Traced, res.Learned, res.Other, res.Lost,
		res.CoveredCells, res.PlannedCells, res.Tables, st)

	if !bytes.Equal(before, after) {
		t.Error("read-only training changed the device's data")
	}
	if st.Writes != 0 || st.WriteSectors != 0 || res.FioWrites != 0 {
		t.Errorf("read-only training wrote: %d writes (%d sectors) on the device, fio %d", st.Writes, st.WriteSectors, res.FioWrites)
	}
	if took > 9*time.Second || res.Elapsed < 4*time.Second {
		t.Errorf("training took %v (run %v), want about 5 s", res.Elapsed, took)
	}
	if res.Learned < 1000 || res.Learned < int(res.FioReads)*95/100 {
		t.Errorf("learned %d of %d reads fio completed", res.Learned, res.FioReads)
	}
	m := res.Model
	if got := m.Config().CapacitySectors; got != 256<<11 {
		t.Errorf("model capacity %d sectors, want %d", got, 256<<11)
	}
	// The cells the model learned, as the agent would look them up.
	table := model.ReadMiss
	if m.Class() == model.HDD { // a loop device over a seek-bound disk
		table = model.ReadHit
	}
	// The read cells the same plan covers, independently of res's counts.
	p, err := NewPlanner(PlanOptions{CapacitySectors: 256 << 11, LogicalBlockSize: res.Device.LogicalBlockSize, MaxRequestBytes: maxRequestBytes("", res.Device)})
	if err != nil {
		t.Fatal(err)
	}
	filled, planned := 0, 0
	for _, c := range p.Cells() {
		planned++
		if m.Samples(table, c.Row, c.Col)+m.Samples(model.ReadMiss, c.Row, c.Col) > 0 {
			filled++
		}
	}
	readMiss := 0
	for col := 0; col < m.Columns(); col++ {
		for row := 0; row < model.NumRows; row++ {
			if m.Samples(model.ReadMiss, row, col) > 0 {
				readMiss++
			}
		}
	}
	t.Logf("read-miss cells with samples: %d; planned read cells filled: %d of %d", readMiss, filled, planned)
	if filled*10 < planned*9 {
		t.Errorf("only %d of %d planned read cells hold samples", filled, planned)
	}
	if m.Class() != model.HDD && readMiss < planned*9/10 {
		t.Errorf("only %d read-miss cells hold samples, want most of the %d planned", readMiss, planned)
	}
	for _, ts := range res.Tables {
		if ts.Table == model.Write && (ts.Requests != 0 || ts.Cells != 0) {
			t.Errorf("write table learned %d requests in %d cells without writes", ts.Requests, ts.Cells)
		}
	}
}

// TestTrainWritesOnlyItsDevice trains writes on an unmounted loop device:
// fio's writes all land on it, and a second loop device is untouched.
func TestTrainWritesOnlyItsDevice(t *testing.T) {
	name, backing := loop(t, 64<<20)
	other, otherBacking := loop(t, 64<<20)
	before, otherBefore := checksum(t, backing), checksum(t, otherBacking)
	st0, ot0 := loopdev.ReadStat(t, name), loopdev.ReadStat(t, other)
	res, err := Run(t.Context(), Options{Device: name, Duration: 2 * time.Second, AllowWrite: true, Seed: 2, Log: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	st, ot := loopdev.ReadStat(t, name).Sub(st0), loopdev.ReadStat(t, other).Sub(ot0)
	t.Logf("%s: fio %d reads, %d writes; traced %d, learned %d; stat %+v; other device %s: stat %+v; tables %+v",
		name, res.FioReads, res.FioWrites, res.Traced, res.Learned, st, other, ot, res.Tables)
	if res.FioWrites == 0 || res.FioReads == 0 {
		t.Fatalf("fio completed %d reads and %d writes, want both", res.FioReads, res.FioWrites)
	}
	if st.Writes < uint64(res.FioWrites) {
		t.Errorf("the device completed %d writes, fio %d: some went elsewhere", st.Writes, res.FioWrites)
	}
	if bytes.Equal(before, checksum(t, backing)) {
		t.Error("the trained device's data did not change")
	}
	if ot.Writes != 0 || !bytes.Equal(otherBefore, checksum(t, otherBacking)) {
		t.Errorf("the other loop device was written: %+v", ot)
	}
	var w *TableStats
	for i := range res.Tables {
		if res.Tables[i].Table == model.Write {
			w = &res.Tables[i]
		}
	}
	if w == nil || w.Requests == 0 || w.Cells < res.PlannedCells/2*9/10 {
		t.Errorf("write table %+v, want most of the %d write cells filled", w, res.PlannedCells/2)
	}
	if res.CoveredCells*10 < res.PlannedCells*9 {
		t.Errorf("covered %d of %d cells", res.CoveredCells, res.PlannedCells)
	}
}

// TestTrainRefusesWritesOnClaimedDevice: a device another program holds
// exclusively (as a mount or a device-mapper would) is not written.
func TestTrainRefusesWritesOnClaimedDevice(t *testing.T) {
	name, backing := loop(t, 16<<20)
	before := checksum(t, backing)
	f, err := os.OpenFile("/dev/"+name, os.O_RDONLY|os.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st0 := loopdev.ReadStat(t, name)
	_, err = Run(t.Context(), Options{Device: name, Duration: time.Second, AllowWrite: true})
	if !errors.Is(err, ErrInUse) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want a one-line in-use refusal", err)
	}
	t.Log(err)
	if st := loopdev.ReadStat(t, name).Sub(st0); st.Writes != 0 || !bytes.Equal(before, checksum(t, backing)) {
		t.Errorf("refused training wrote: %+v", st)
	}
}

// TestTrainInterrupted: when the context ends, training stops within a
// moment and returns the model learned so far.
func TestTrainInterrupted(t *testing.T) {
	name, _ := loop(t, 16<<20)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Options{Device: name, Duration: time.Minute, Log: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("stopped after %v: %d rounds, learned %d", took, res.Rounds, res.Learned)
	if !res.Interrupted || took > 5*time.Second || res.Learned == 0 || res.Model == nil {
		t.Errorf("interrupted %v after %v with %d learned requests; want an early stop with a model", res.Interrupted, took, res.Learned)
	}
}
