//go:build linux

package tracer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Where tracefs is looked for, and where it is mounted if it is nowhere.
var tracefsMounts = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// instancePrefix names the private trace instances: shadowtune-<pid>.
const instancePrefix = "shadowtune-"

// stopTimeout bounds the wait for the stop marker when Run ends.
const stopTimeout = 5 * time.Second

type tracefsTracer struct {
	opts    Options
	root    string // tracefs mount
	mounted bool   // this tracer mounted root, and unmounts it in release
	inst    string // the private instance directory
	events  []string
	pipe    *os.File
	marker  *os.File
	token   string // tells this tracer's markers apart
	notes   []string
	ebpfErr error

	mu  sync.Mutex // guards col and p
	col collector
	p   *pairer

	run runState
}

func newTracefs(opts Options, ebpfErr error) (*tracefsTracer, error) {
	root, mounted, err := findTracefs(opts.TracefsRoot)
	if err != nil {
		return nil, err
	}
	note := ""
	if mounted {
		note = "tracefs was not mounted: mounted it at " + root + " until the tracer closes"
	}
	// trace_pipe prints microseconds: floor the base so that no event
	// stamps before it.
	opts.Base -= opts.Base % int64(time.Microsecond)
	t := &tracefsTracer{opts: opts, root: root, mounted: mounted, ebpfErr: ebpfErr, col: collector{base: opts.Base}}
	t.p = newPairer(t.col.add)
	if note != "" {
		t.notes = append(t.notes, note)
	}
	if ebpfErr != nil {
		t.notes = append(t.notes, "ebpf unavailable ("+ebpfErr.Error()+"): tracing with tracefs")
	}
	for name := range tfEvents {
		if _, err := os.Stat(filepath.Join(root, "events/block", name, "enable")); err == nil {
			t.events = append(t.events, name)
		} else if name != "block_io_start" && name != "block_bio_frontmerge" {
			t.unmount()
			return nil, fmt.Errorf("tracefs at %s has no block/%s event", root, name)
		}
	}
	removeDeadInstances(root)
	if err := t.makeInstance(); err != nil {
		t.unmount()
		return nil, err
	}
	if err := t.setup(); err != nil {
		_ = t.release()
		return nil, err
	}
	return t, nil
}

// findTracefs returns where tracefs is mounted, mounting it at
// /sys/kernel/tracing if it is not (mounted reports that it did, so that
// the tracer can put the host back as it was).
func findTracefs(root string) (dir string, mounted bool, err error) {
	if root != "" {
		if _, err := os.Stat(filepath.Join(root, "instances")); err != nil {
			return "", false, fmt.Errorf("tracefs root %s: %w", root, err)
		}
		return root, false, nil
	}
	for _, d := range tracefsMounts {
		if _, err := os.Stat(filepath.Join(d, "instances")); err == nil {
			return d, false, nil
		}
	}
	d := tracefsMounts[0]
	if err := unix.Mount("nodev", d, "tracefs", 0, ""); err != nil {
		return "", false, fmt.Errorf("tracefs is not mounted and mounting it at %s failed: %w", d, err)
	}
	return d, true, nil
}

// unmount undoes the mount findTracefs made, if any. A tracefs that
// someone started using meanwhile (EBUSY) stays mounted.
func (t *tracefsTracer) unmount() {
	if t.mounted {
		_ = unix.Unmount(t.root, 0)
		t.mounted = false
	}
}

// removeDeadInstances removes the instances of shadowtune processes that
// died without removing theirs. An instance in use (its trace_pipe open)
// cannot be removed (EBUSY), so a live tracer in another PID namespace is
// safe.
func removeDeadInstances(root string) {
	ents, _ := os.ReadDir(filepath.Join(root, "instances"))
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), instancePrefix)
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(name, "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue
		}
		if err := syscall.Kill(n, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue
		}
		_ = os.Remove(filepath.Join(root, "instances", e.Name()))
	}
}

// makeInstance creates instances/shadowtune-<pid> (or -<pid>-N if taken).
func (t *tracefsTracer) makeInstance() error {
	base := fmt.Sprintf("%s%d", instancePrefix, os.Getpid())
	for i := 1; i <= 100; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		dir := filepath.Join(t.root, "instances", name)
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			t.inst = dir
			t.token = name
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create trace instance: %w", err)
		}
	}
	return fmt.Errorf("create trace instance: %s-* all taken", base)
}

func (t *tracefsTracer) write(rel, val string) error {
	if err := os.WriteFile(filepath.Join(t.inst, rel), []byte(val), 0); err != nil {
		return fmt.Errorf("trace instance: write %q to %s: %w", val, rel, err)
	}
	return nil
}

// setup configures the instance and starts recording.
func (t *tracefsTracer) setup() error {
	if err := t.write("tracing_on", "0"); err != nil {
		return err
	}
	if err := t.write("trace_clock", "mono"); err != nil {
		return err
	}
	if err := t.write("buffer_size_kb", strconv.Itoa(t.opts.TracefsBufferKB)); err != nil {
		return err
	}
	// Wake trace_pipe readers on any data (the default waits for half a
	// buffer); irq-info off gives the plainer line format. Both are
	// optional.
	_ = t.write("buffer_percent", "0")
	_ = t.write("options/irq-info", "0")
	if err := t.SetDevices(t.opts.Devices); err != nil {
		return err
	}
	for _, name := range t.events {
		if err := t.write(filepath.Join("events/block", name, "enable"), "1"); err != nil {
			return err
		}
	}
	var err error
	if t.pipe, err = os.Open(filepath.Join(t.inst, "trace_pipe")); err != nil {
		return fmt.Errorf("trace instance: %w", err)
	}
	if t.marker, err = os.OpenFile(filepath.Join(t.inst, "trace_marker"), os.O_WRONLY, 0); err != nil {
		return fmt.Errorf("trace instance: %w", err)
	}
	return t.write("tracing_on", "1")
}

func (t *tracefsTracer) Kind() string { return KindTracefs }

func (t *tracefsTracer) Info() Info {
	return Info{Kind: KindTracefs, Base: t.opts.Base, Resolution: time.Microsecond, EBPFError: t.ebpfErr, Notes: t.notes}
}

// SetPaused returns ErrPauseUnsupported unless devs is empty: the trace
// events pair a request's start and completion in user space, after the
// kernel filter, so a filter change would lose the requests in flight.
func (t *tracefsTracer) SetPaused(devs []uint32) error {
	if len(devs) == 0 {
		return nil
	}
	return ErrPauseUnsupported
}

// SetDevices writes the dev filter of every block event of the instance.
func (t *tracefsTracer) SetDevices(devs []uint32) error {
	var b strings.Builder
	for i, d := range devs {
		if i > 0 {
			b.WriteString(" || ")
		}
		fmt.Fprintf(&b, "dev == %d", d)
	}
	if len(devs) == 0 {
		b.WriteString("dev == 0") // no disk is 0:0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range t.events {
		if err := t.write(filepath.Join("events/block", name, "filter"), b.String()); err != nil {
			return err
		}
	}
	return nil
}

func (t *tracefsTracer) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{
		Events:   t.col.events.Load(),
		Dropped:  t.p.dropped,
		Lost:     t.col.lost.Load() + t.p.stale,
		Orphans:  t.p.orphans,
		Skipped:  t.p.skipped,
		Requeues: t.p.requeues,
		Partial:  t.p.partial,
		Errors:   t.col.errors.Load(),
		Unissued: t.p.unissued,
	}
}

// mark writes a marker line into the instance's buffer.
func (t *tracefsTracer) mark(what string) error {
	_, err := t.marker.WriteString(t.token + " " + what + "\n")
	return err
}

func (t *tracefsTracer) Run(ctx context.Context, out func([]trace.Request)) error {
	ctx, finish, err := t.run.start(ctx)
	if err != nil {
		return err
	}
	defer finish()
	tickDone := make(chan struct{})
	defer close(tickDone)
	go func() {
		tk := time.NewTicker(t.opts.FlushInterval)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				_ = t.mark("sync")
			case <-ctx.Done():
				// Everything stamped before the stop marker has been
				// read when it is; if it never comes, give up later.
				_ = t.mark("stop")
				_ = t.pipe.SetReadDeadline(time.Now().Add(stopTimeout))
				return
			case <-tickDone:
				return
			}
		}
	}()
	deliver := func(frontier int64) {
		t.mu.Lock()
		batch := t.col.release(frontier)
		t.mu.Unlock()
		if len(batch) > 0 {
			out(batch)
		}
	}
	br := bufio.NewReaderSize(t.pipe, 1<<20)
	prefix := []byte(t.token + " ")
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than 1 MiB is not an event line: skip it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				deliver(math.MaxInt64)
				return nil
			}
			return fmt.Errorf("read %s: %w", filepath.Join(t.inst, "trace_pipe"), err)
		}
		ev, perr := parseLine(line)
		if perr != nil || ev.kind == tfNone {
			continue
		}
		if ev.kind != tfMarker {
			t.mu.Lock()
			t.p.event(&ev)
			t.mu.Unlock()
			continue
		}
		what, ok := bytes.CutPrefix(ev.text, prefix)
		if !ok {
			continue
		}
		switch string(what) {
		case "sync":
			t.mu.Lock()
			oldest := t.p.sweep(ev.ts - int64(t.opts.StaleAfter))
			t.mu.Unlock()
			deliver(min(ev.ts-frontierMargin, oldest))
		case "stop":
			deliver(math.MaxInt64)
			return nil
		}
	}
}

func (t *tracefsTracer) Close() error {
	if !t.run.stop() {
		return nil
	}
	return t.release()
}

// release stops recording, closes the files and removes the instance
// (which disables its events and frees its buffer).
func (t *tracefsTracer) release() error {
	var errs []error
	if t.inst == "" {
		return nil
	}
	_ = t.write("tracing_on", "0")
	for _, f := range []*os.File{t.pipe, t.marker} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	t.pipe, t.marker = nil, nil
	// rmdir fails with EBUSY while a file of the instance is still being
	// released; retry briefly.
	var err error
	for range 50 {
		if err = os.Remove(t.inst); err == nil || errors.Is(err, os.ErrNotExist) {
			err = nil
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("remove trace instance: %w", err))
	}
	t.inst = ""
	t.unmount()
	return errors.Join(errs...)
}
