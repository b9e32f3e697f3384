//go:build linux && amd64

package tracer

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// WriterProbe names the processes that write block devices' queue
// settings: programs on queue_attr_store and elv_attr_store
// (bpf/writers.c; fentry, or kprobes where fentry cannot attach) record,
// per disk, the last writer other than this process. It costs nothing on
// the I/O path. Close releases it.
type WriterProbe struct {
	coll  *ebpf.Collection
	last  *ebpf.Map
	links []link.Link
}

// NewWriterProbe loads and attaches the probe. It needs CAP_BPF and
// CAP_PERFMON (or root) and BTF, and fentry (BPF trampolines) or kprobes;
// it returns both attach errors otherwise.
func NewWriterProbe() (*WriterProbe, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("writer probe: memlock: %w", err)
	}
	p, ferr := loadWriterProbe(true)
	if ferr == nil {
		return p, nil
	}
	p, kerr := loadWriterProbe(false)
	if kerr != nil {
		return nil, fmt.Errorf("writer probe: fentry: %w; kprobe: %w", ferr, kerr)
	}
	return p, nil
}

// loadWriterProbe loads the fentry programs (or the kprobe ones) with the
// map and attaches them.
func loadWriterProbe(fentry bool) (*WriterProbe, error) {
	spec, err := loadWriters()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["self_tgid"].Set(uint32(os.Getpid())); err != nil {
		return nil, err
	}
	keep := map[bool][2]string{
		true:  {writersProgFentryQueueAttrStore, writersProgFentryElvAttrStore},
		false: {writersProgKprobeQueueAttrStore, writersProgKprobeElvAttrStore},
	}[fentry]
	for name := range spec.Programs {
		if name != keep[0] && name != keep[1] {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	p := &WriterProbe{coll: coll, last: coll.Maps[writersMapWriters]}
	for i, sym := range []string{"queue_attr_store", "elv_attr_store"} {
		prog := coll.Programs[keep[i]]
		var l link.Link
		if fentry {
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		} else {
			l, err = link.Kprobe(sym, prog, nil)
		}
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %s: %w", sym, err)
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
