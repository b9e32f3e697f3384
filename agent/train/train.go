// Package train trains a device's disk model offline (DESIGN §3, "Offline
// training"): it plans requests spread uniformly over the model's cells —
// request sizes × inter-request distance columns × read/write — issues
// them with fio one at a time (psync, iodepth 1, O_DIRECT, back to back:
// the papers served one request at a time, so each service time is
// clean), traces the device with package agent/tracer meanwhile, and
// learns every traced request, with the service time the block layer
// measured (dispatch to completion, not fio's latency), into the model.
//
// Reads only, unless writes are asked for (Options.AllowWrite) and the
// disk is unused: not mounted, no mounted partition, not swap, no holders
// (CheckUnused), and the kernel grants an exclusive claim on it for the
// whole run.
//
// Units as in package model: 512-byte sectors, ns.
package train

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/agent/tracer"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// ErrNotRoot is returned (wrapped) when training is started by a user
// other than root.
var ErrNotRoot = errors.New("model training traces the block layer and reads the device directly: run it as root")

// DeviceError is the error for a device that cannot be trained as named:
// not found, a partition, no medium.
type DeviceError struct{ Err error }

func (e *DeviceError) Error() string { return e.Err.Error() }
func (e *DeviceError) Unwrap() error { return e.Err }

// geteuid is os.Geteuid (a variable for tests).
var geteuid = os.Geteuid

// Options configure [Run].
type Options struct {
	// Device is the whole disk to train: /dev/NAME (or a symlink to it),
	// NAME or MAJOR:MINOR.
	Device string
	// Duration is how long to train (required, > 0). Training issues
	// requests in rounds until it is spent.
	Duration time.Duration
	// AllowWrite plans writes as well as reads, which destroys the data on
	// the device. It is refused unless the disk is unused (CheckUnused and
	// an exclusive claim).
	AllowWrite bool
	// Class is the model's device class; 0 means the class sysfs reports
	// (rotational: HDD; nvme*: NVMe; else SSD), except that a disk sysfs
	// calls rotational whose random reads nearly all (≥ 90 %) complete
	// under the HDD hit threshold is modelled as an SSD — the rule the
	// agent applies (loop devices, virtio and many cloud volumes report
	// rotational=1).
	Class model.Class
	// Tracer is the tracer kind (tracer.KindAuto if empty).
	Tracer string
	// SizesKiB are the request sizes (nil: DefaultSizesKiB up to the
	// device's largest request, see PlanOptions).
	SizesKiB []int
	// Seed seeds the plan.
	Seed uint64
	// Fio is the fio binary (default "fio" from $PATH).
	Fio string
	// Host names the host files of the write check (zero: this host).
	Host HostFiles
	// Log receives one progress line per round (nil: none).
	Log io.Writer
}

// TableStats summarises one table of the trained model.
type TableStats struct {
	// Table is read-miss, read-hit (HDD only) or write.
	Table model.Table `json:"-"`
	// Name is Table's name.
	Name string `json:"table"`
	// Requests is the number of training requests learned into the table.
	Requests int `json:"requests"`
	// MeanServiceNs is their mean service time (0 when Requests is 0).
	MeanServiceNs int64 `json:"meanServiceNs"`
	// Cells is the number of the table's cells that hold samples.
	Cells int `json:"cells"`
}

// Result is what a training run did.
type Result struct {
	// Model is the trained model.
	Model *model.Model `json:"-"`
	// Device is the trained disk as sysfs describes it.
	Device sysfs.Device `json:"-"`
	// Name and Dev are its kernel name and dev_t (major<<20 | minor).
	Name string `json:"device"`
	Dev  uint32 `json:"-"`
	// Class is the model's class; ClassNote says why it differs from
	// sysfs's, if it does.
	Class     model.Class `json:"class"`
	ClassNote string      `json:"classNote,omitempty"`
	// Writes says whether writes were planned.
	Writes bool `json:"writes"`
	// FioVersion, Tracer: the tools used.
	FioVersion string `json:"fio"`
	Tracer     string `json:"tracer"`
	// Elapsed is the training time (fio runs, start-up included).
	Elapsed time.Duration `json:"-"`
	// Rounds is the number of fio runs.
	Rounds int `json:"rounds"`
	// SizesSectors are the planned request sizes; Columns the number of
	// distance columns planned.
	SizesSectors []uint64 `json:"sizesSectors"`
	Columns      int      `json:"columns"`
	// PlannedCells is the number of planned (op, row, column) cells;
	// CoveredCells those the model holds samples for (a read covers its
	// cell in read-miss or read-hit).
	PlannedCells int `json:"plannedCells"`
	CoveredCells int `json:"coveredCells"`
	// Planned is the number of requests written to fio's logs; FioReads
	// and FioWrites those fio reports completed.
	Planned   int64 `json:"planned"`
	FioReads  int64 `json:"fioReads"`
	FioWrites int64 `json:"fioWrites"`
	// Traced is the number of requests traced on the device; Learned
	// those that are training requests, learned into the model; Other the
	// rest (another program's I/O, udev probes, requests the block layer
	// split), which only move the model's head position.
	Traced  int `json:"traced"`
	Learned int `json:"learned"`
	Other   int `json:"other"`
	// Dropped and Lost are the tracer's counters (see tracer.Stats).
	Dropped uint64 `json:"dropped"`
	Lost    uint64 `json:"lost"`
	// Tables summarise the model's tables (read-miss, read-hit for HDDs,
	// write).
	Tables []TableStats `json:"tables"`
	// Interrupted is set when ctx ended the training early.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Run trains the model of one disk for opt.Duration (see the package doc)
// and returns it with a summary. When ctx is done it stops issuing
// requests and learns what was traced so far (Result.Interrupted).
func Run(ctx context.Context, opt Options) (*Result, error) {
	if opt.Duration <= 0 {
		return nil, fmt.Errorf("train: duration must be positive, got %v", opt.Duration)
	}
	fio, err := LookFio(opt.Fio)
	if err != nil {
		return nil, err
	}
	if geteuid() != 0 {
		return nil, ErrNotRoot
	}
	dev, name, sd, err := openDisk(opt)
	if err != nil {
		return nil, err
	}
	capacity := sd.SizeBytes / trace.SectorSize
	if opt.AllowWrite {
		release, err := claimForWrites(opt.Host, name)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	planner, err := NewPlanner(PlanOptions{
		CapacitySectors:  capacity,
		LogicalBlockSize: sd.LogicalBlockSize,
		MaxRequestBytes:  maxRequestBytes(opt.Host.Root, sd),
		SizesKiB:         opt.SizesKiB,
		Writes:           opt.AllowWrite,
		Seed:             opt.Seed,
	})
	if err != nil {
		return nil, &DeviceError{fmt.Errorf("device %s: %w", name, err)}
	}
	logPlan(opt, planner, name, dev, sd)
	tmp, err := os.MkdirTemp("", "shadowtune-train-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	res := &Result{
		Device: sd, Name: name, Dev: dev, Writes: opt.AllowWrite,
		FioVersion: fioVersion(ctx, fio), SizesSectors: planner.Sizes(),
	}
	traced, planned, err := traceRounds(ctx, opt, fio, tmp, planner, res)
	if err != nil {
		return nil, err
	}
	res.Planned, _ = planner.Planned()
	if err := learn(res, traced, planned, capacity, opt.Class, planner.Cells()); err != nil {
		return nil, err
	}
	return res, nil
}

// openDisk resolves opt.Device and reads it, both through the sysfs under
// opt.Host.Root: its dev_t (major<<20 | minor), kernel name and sysfs
// description. Errors are *DeviceError, also for a disk of size 0.
func openDisk(opt Options) (dev uint32, name string, sd sysfs.Device, err error) {
	dev, name, err = tracer.ResolveDeviceIn(opt.Host.Root, opt.Device)
	if err != nil {
		return 0, "", sysfs.Device{}, &DeviceError{err}
	}
	sd, err = sysfs.Read(opt.Host.Root, name)
	if err != nil {
		return 0, "", sysfs.Device{}, &DeviceError{err}
	}
	if sd.SizeBytes/trace.SectorSize == 0 {
		return 0, "", sysfs.Device{}, &DeviceError{fmt.Errorf("device %s has size 0 (no medium, or a detached loop device)", name)}
	}
	return dev, name, sd, nil
}

// claimForWrites checks that disk is unused ([CheckUnused]) and claims it
// and its partitions exclusively; release closes the claims. Errors are
// those of CheckUnused and claimExclusive.
func claimForWrites(h HostFiles, disk string) (release func(), err error) {
	if err := CheckUnused(h, disk); err != nil {
		return nil, err
	}
	held, err := claimExclusive(h, disk)
	if err != nil {
		return nil, err
	}
	return func() {
		for _, f := range held {
			f.Close()
		}
	}, nil
}

// logPlan writes the training plan's summary line to opt.Log, if set.
func logPlan(opt Options, planner *Planner, name string, dev uint32, sd sysfs.Device) {
	if opt.Log == nil {
		return
	}
	ops := "reads only"
	if opt.AllowWrite {
		ops = "reads and writes"
	}
	cols := map[int]bool{}
	for _, c := range planner.Cells() {
		cols[c.Col] = true
	}
	fmt.Fprintf(opt.Log, "training %s (%s, %d MiB) for %v: %s, %d sizes × %d distance columns = %d cells\n",
		name, tracer.DevString(dev), sd.SizeBytes>>20, opt.Duration, ops, len(planner.Sizes()), len(cols), len(planner.Cells()))
}

// traceRounds traces res.Dev while issueRounds runs the planned fio
// rounds on /dev/res.Name (iologs in tmp), and returns the device's traced
// requests and the planned ones by key. It sets res.Tracer, res.Dropped
// and res.Lost. A tracer that fails or quits stops the rounds and is an
// error ("tracer: …"); so is a failed round.
func traceRounds(ctx context.Context, opt Options, fio, tmp string, planner *Planner, res *Result) ([]trace.Request, map[reqKey]int, error) {
	dev := res.Dev
	tr, err := tracer.New(tracer.Options{Devices: []uint32{dev}, Kind: opt.Tracer})
	if err != nil {
		return nil, nil, err
	}
	defer tr.Close()
	res.Tracer = tr.Kind()
	if info := tr.Info(); info.EBPFError != nil && opt.Log != nil {
		fmt.Fprintf(opt.Log, "ebpf tracer unavailable: %v; using %s\n", info.EBPFError, tr.Kind())
	}
	var traced []trace.Request
	traceCtx, stopTrace := context.WithCancel(context.Background())
	defer stopTrace()
	// A tracer that fails stops the training: fio's requests would not be
	// measured.
	roundCtx, stopRounds := context.WithCancel(ctx)
	defer stopRounds()
	traceDone := make(chan error, 1)
	go func() {
		err := tr.Run(traceCtx, func(b []trace.Request) {
			for i := range b {
				if b[i].Dev == dev {
					traced = append(traced, b[i])
				}
			}
		})
		stopRounds()
		traceDone <- err
	}()

	planned := map[reqKey]int{}
	issueErr := issueRounds(roundCtx, fio, "/dev/"+res.Name, tmp, planner, opt, res, planned)
	tracerQuit := roundCtx.Err() != nil && ctx.Err() == nil
	stopTrace()
	if err := <-traceDone; err != nil {
		return nil, nil, fmt.Errorf("tracer: %w", err)
	}
	if tracerQuit {
		return nil, nil, errors.New("tracer: stopped before the training ended")
	}
	if issueErr != nil {
		return nil, nil, issueErr
	}
	st := tr.Stats()
	res.Dropped, res.Lost = st.Dropped, st.Lost
	return traced, planned, nil
}

// Round sizing: the first round is one pass over the cells (at most
// firstRoundMax requests), and measures the service time; later rounds
// plan enough requests for the time left (with a margin; fio's --runtime
// cuts the round at the deadline), at most maxRound (fio reads the whole
// log before it starts, about 2 µs a line).
const (
	firstRoundMax   = 2000
	minRound        = 64
	maxRound        = 200_000
	minRoundRuntime = 50 * time.Millisecond
)

type reqKey struct {
	op      trace.Op
	sector  uint64
	sectors uint32
}

// issueRounds runs fio in rounds until opt.Duration is spent (or ctx is
// done), recording every planned request in planned.
func issueRounds(ctx context.Context, fio, devPath, tmp string, p *Planner, opt Options, res *Result, planned map[reqKey]int) error {
	start := time.Now()
	deadline := start.Add(opt.Duration)
	overhead := 150 * time.Millisecond // fio start-up, first guess
	var perReq time.Duration
	defer func() { res.Elapsed = time.Since(start) }()
	for {
		if ctx.Err() != nil {
			res.Interrupted = true
			return nil
		}
		runtime := time.Until(deadline) - overhead
		if runtime < minRoundRuntime {
			return nil
		}
		n := min(len(p.Cells()), firstRoundMax)
		if perReq > 0 {
			n = min(max(int(float64(runtime)/float64(perReq)*1.15)+1, minRound), maxRound)
		}
		reqs := p.Next(n)
		for i := range reqs {
			planned[reqKey{reqs[i].Op, reqs[i].Sector, reqs[i].Sectors}]++
		}
		log := filepath.Join(tmp, "round-"+strconv.Itoa(res.Rounds+1)+".iolog")
		if err := writeIolog(log, devPath, reqs); err != nil {
			return err
		}
		r, err := runFio(ctx, fio, log, devPath, !opt.AllowWrite, runtime)
		os.Remove(log)
		res.Rounds++
		res.FioReads += r.Reads
		res.FioWrites += r.Writes
		if err != nil {
			if ctx.Err() != nil {
				res.Interrupted = true
				return nil
			}
			return err
		}
		done := r.Reads + r.Writes
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "round %d: %d of %d requests in %.2f s (fio %.2f s)\n",
				res.Rounds, done, n, r.Wall.Seconds(), r.Runtime.Seconds())
		}
		if done == 0 {
			return fmt.Errorf("fio %s completed no request", devPath)
		}
		perReq = max(r.Runtime, time.Millisecond) / time.Duration(done)
		overhead = max(r.Wall-r.Runtime, 20*time.Millisecond)
		if done < int64(n) { // cut at the deadline (or interrupted)
			res.Interrupted = ctx.Err() != nil
			return nil
		}
	}
}

// writeIolog writes reqs as a fio version 3 iolog aimed at devPath.
func writeIolog(path, devPath string, reqs []trace.Request) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := trace.NewFioWriter(bw, trace.WriterOptions{Target: devPath})
	if err == nil {
		for i := range reqs {
			if err = w.Write(&reqs[i]); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	return errors.Join(err, f.Close())
}

// maxRequestBytes is the largest request the block layer passes to the
// device unsplit: max_sectors_kb, and no more than max_segments pages
// (fio's buffers are page-aligned, so in the worst case every page is a
// segment).
func maxRequestBytes(root string, sd sysfs.Device) uint64 {
	limit := uint64(sd.MaxSectorsKB) << 10
	if root == "" {
		root = "/"
	}
	b, err := os.ReadFile(filepath.Join(root, "sys", "block", sd.Name, "queue", "max_segments"))
	if err == nil {
		if segs, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32); err == nil && segs > 0 {
			seg := segs * uint64(os.Getpagesize())
			if limit == 0 || seg < limit {
				limit = seg
			}
		}
	}
	return limit
}

// learn builds the model from the traced requests (see Run) and fills the
// summary.
func learn(res *Result, traced []trace.Request, planned map[reqKey]int, capacity uint64, class model.Class, cells []Cell) error {
	slices.SortStableFunc(traced, func(a, b trace.Request) int {
		switch {
		case a.Dispatch < b.Dispatch:
			return -1
		case a.Dispatch > b.Dispatch:
			return 1
		}
		return 0
	})
	res.Traced = len(traced)
	for i := range traced {
		q := &traced[i]
		k := reqKey{q.Op, q.Sector, q.Sectors}
		if planned[k] > 0 && q.HasService() {
			planned[k]--
			res.Learned++
			continue
		}
		// Not a training request: it moved the head, but its time is not
		// a clean one-at-a-time service time.
		res.Other++
		q.Complete = trace.Unknown
	}
	if res.Learned == 0 {
		return fmt.Errorf("no training request was traced on %s (fio completed %d; tracer %s dropped %d, lost %d)",
			res.Name, res.FioReads+res.FioWrites, res.Tracer, res.Dropped, res.Lost)
	}
	res.Class = class
	if class == 0 {
		res.Class = res.Device.Class()
		if res.Class == model.HDD {
			if fast, random := fastRandomReads(traced); random >= 50 && fast*10 >= random*9 {
				res.Class = model.SSD
				res.ClassNote = fmt.Sprintf("sysfs reports rotational, but %d of %d random reads completed under the HDD hit threshold", fast, random)
			}
		}
	}
	m, err := model.Fit(traced, model.FitOptions{
		Class: res.Class, CapacitySectors: capacity,
		// Training runs at depth 1, which cannot measure k: keep the
		// class default (the agent does not re-measure a loaded model).
		Servers: model.DefaultConfig(res.Class, capacity).Servers,
	})
	if err != nil {
		return fmt.Errorf("learn %s: %w", res.Name, err)
	}
	res.Model = m
	summarize(res, traced, cells)
	return nil
}

// fastRandomReads counts, in dispatch order, the measured reads more than
// 64 KiB from the previous request's end, and those faster than the
// default HDD hit threshold.
func fastRandomReads(reqs []trace.Request) (fast, random int) {
	thr := model.DefaultHitClassifier()
	var last uint64
	for i := range reqs {
		q := &reqs[i]
		d := q.Sector - last
		if q.Sector < last {
			d = last - q.Sector
		}
		if q.Op != trace.Flush {
			last = q.End()
		}
		if q.Op != trace.Read || !q.HasService() || d <= 128 {
			continue
		}
		random++
		if thr.IsHit(q.Sectors, q.ServiceTime()) {
			fast++
		}
	}
	return fast, random
}

// summarize fills the per-table and coverage figures of res.
func summarize(res *Result, learned []trace.Request, cells []Cell) {
	m := res.Model
	cfg := m.Config()
	tables := []model.Table{model.ReadMiss, model.ReadHit, model.Write}
	if cfg.Class != model.HDD {
		tables = []model.Table{model.ReadMiss, model.Write}
	}
	var n [3]int
	var sum [3]int64
	for i := range learned {
		q := &learned[i]
		if !q.HasService() {
			continue
		}
		t := model.Write
		if q.Op == trace.Read {
			t = model.ReadMiss
			if cfg.Class == model.HDD && cfg.Hit.IsHit(q.Sectors, q.ServiceTime()) {
				t = model.ReadHit
			}
		}
		n[t]++
		sum[t] += q.ServiceTime()
	}
	res.Tables = res.Tables[:0]
	for _, t := range tables {
		ts := TableStats{Table: t, Name: t.String(), Requests: n[t]}
		if n[t] > 0 {
			ts.MeanServiceNs = sum[t] / int64(n[t])
		}
		for col := 0; col < m.Columns(); col++ {
			for row := 0; row < model.NumRows; row++ {
				if m.Samples(t, row, col) > 0 {
					ts.Cells++
				}
			}
		}
		res.Tables = append(res.Tables, ts)
	}
	cols := map[int]bool{}
	res.PlannedCells, res.CoveredCells = len(cells), 0
	for _, c := range cells {
		cols[c.Col] = true
		var s int
		if c.Op == trace.Read {
			s = m.Samples(model.ReadMiss, c.Row, c.Col) + m.Samples(model.ReadHit, c.Row, c.Col)
		} else {
			s = m.Samples(model.Write, c.Row, c.Col)
		}
		if s > 0 {
			res.CoveredCells++
		}
	}
	res.Columns = len(cols)
}
