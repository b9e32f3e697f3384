//go:build linux && amd64

package tracer

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// WriterProbe names the processes that write block devices' queue
// settings, recording per disk the last writer other than this process
// (bpf/writers.c). It loads the first of three mechanisms that works:
//
//   - fentry programs on queue_attr_store and elv_attr_store (BPF
//     trampolines; nothing on the I/O path);
//   - kprobes on the same functions, where fentry cannot attach;
//   - a tp_btf program on the raw syscall tracepoint sys_enter that
//     recognises writes to DISK/queue/* and DISK/queue/iosched/* sysfs
//     files, where neither loads. It needs what the block tracer needs
//     (tp_btf, BTF) and no tracefs mount, so the probe loads wherever the
//     tracer does. It runs on every system call of the host while
//     attached (the kernel takes its traced system call path for every
//     task): on this project's 2-core 6.18 test machine a getppid() took
//     92–98 ns more with it in three runs of TestWriterProbeSyscallCost,
//     163 ns in a fourth while the host ran make test.
//
// This project's 6.18 test machines need the third: they refuse every
// trampoline program to root at load (fentry, fexit and BPF LSM alike get
// EPERM before the verifier runs, for any function, while tp_btf loads;
// their ftrace function tracer is closed too: writing "function" to
// current_tracer and opening available_filter_functions get EPERM), and
// they are built without kprobes (CONFIG_KPROBES off, no kprobe_events).
// The EPERM is not the memlock limit cilium/ebpf's message suggests.
//
// Close releases it.
type WriterProbe struct {
	coll  *ebpf.Collection
	last  *ebpf.Map
	links []link.Link
	mech  string
}

// writerMechs are the probe's mechanisms in the order they are tried: the
// name Mechanism returns, the programs and how each attaches.
var writerMechs = []struct {
	name  string
	progs []string
	syms  []string // kprobe symbols, for the kprobe programs
}{
	{"fentry", []string{writersProgFentryQueueAttrStore, writersProgFentryElvAttrStore}, nil},
	{"kprobe", []string{writersProgKprobeQueueAttrStore, writersProgKprobeElvAttrStore}, []string{"queue_attr_store", "elv_attr_store"}},
	{"syscall tracepoint", []string{writersProgSysEnterWrite}, nil},
}

// NewWriterProbe loads and attaches the probe. It needs CAP_BPF and
// CAP_PERFMON (or root) and BTF, and fentry (BPF trampolines), kprobes or
// tp_btf; it returns every mechanism's error otherwise.
func NewWriterProbe() (*WriterProbe, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("writer probe: memlock: %w", err)
	}
	var errs []error
	var msgs []string
	for i := range writerMechs {
		p, err := loadWriterProbe(i)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
		msgs = append(msgs, writerMechs[i].name+": "+err.Error())
	}
	// One line (errors.Join's would be one per mechanism); errors.Is
	// still sees each.
	return nil, &probeError{msg: "writer probe: " + strings.Join(msgs, "; "), errs: errs}
}

// probeError is NewWriterProbe's error: every mechanism's, on one line.
type probeError struct {
	msg  string
	errs []error
}

func (e *probeError) Error() string   { return e.msg }
func (e *probeError) Unwrap() []error { return e.errs }

// Mechanism says how the probe is attached: "fentry", "kprobe" or
// "syscall tracepoint".
func (p *WriterProbe) Mechanism() string { return p.mech }

// loadWriterProbe loads the programs of writerMechs[mech] with the map and
// attaches them.
func loadWriterProbe(mech int) (*WriterProbe, error) {
	m := writerMechs[mech]
	spec, err := loadWriters()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables[writersVarSelfTgid].Set(uint32(os.Getpid())); err != nil {
		return nil, err
	}
	for name := range spec.Programs {
		if !slices.Contains(m.progs, name) {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	p := &WriterProbe{coll: coll, last: coll.Maps[writersMapWriters], mech: m.name}
	for i, name := range m.progs {
		prog := coll.Programs[name]
		var l link.Link
		if m.syms != nil {
			l, err = link.Kprobe(m.syms[i], prog, nil)
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		}
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %s: %w", name, err)
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

// Last returns the last writer of disk's queue settings ("sda"), and false
// when the probe saw none.
func (p *WriterProbe) Last(disk string) (Writer, bool) {
	var key writersQwriterKey
	if len(disk) >= len(key.Disk) {
		return Writer{}, false
	}
	for i := range len(disk) {
		key.Disk[i] = int8(disk[i])
	}
	var w writersQwriter
	if err := p.last.Lookup(&key, &w); err != nil {
		return Writer{}, false
	}
	return Writer{PID: w.Pid, TID: w.Tid, Comm: cstr(w.Comm[:]), CgroupID: w.CgroupId,
		Attr: cstr(w.Attr[:]), Value: cstr(w.Value[:]), At: int64(w.TimeNs)}, true
}

// Close detaches and unloads the probe.
func (p *WriterProbe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.links = nil
	if p.coll != nil {
		p.coll.Close()
	}
	return errors.Join(errs...)
}

// cstr is a NUL-terminated C string of int8s, trailing newline dropped.
func cstr(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	for len(out) > 0 && (out[len(out)-1] == '\n' || out[len(out)-1] == ' ') {
		out = out[:len(out)-1]
	}
	return string(out)
}
