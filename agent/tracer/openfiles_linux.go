//go:build linux

package tracer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// OpenFilesProbe lists the regular files open on given file system
// devices, over every process of the host, with each file's own
// read-ahead and mode (bpf/openfiles.c: a BPF iterator over every task's
// file table). Nothing runs in the kernel between calls of List. Its
// methods may be called concurrently. Close releases it.
type OpenFilesProbe struct {
	mu   sync.Mutex
	coll *ebpf.Collection
	it   *link.Iter
}

// NewOpenFilesProbe loads the iterator. It needs root (CAP_BPF and
// CAP_PERFMON) and kernel BTF. A kernel that cannot load or attach it
// returns an error wrapping ErrOpenFilesUnsupported; other errors
// (memlock) are returned wrapped.
func NewOpenFilesProbe() (*OpenFilesProbe, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("open-files probe: memlock: %w", err)
	}
	spec, err := loadOpenfiles()
	if err != nil {
		return nil, fmt.Errorf("open-files probe: %w", err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: load: %w", ErrOpenFilesUnsupported, err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: coll.Programs[openfilesProgOpenFiles]})
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("%w: attach iter/task_file: %w", ErrOpenFilesUnsupported, err)
	}
	return &OpenFilesProbe{coll: coll, it: it}, nil
}

// List returns the regular files open on the devices devs (s_dev values;
// at most 256), at most max of them (max > 0), and whether more were left
// out. A file open by several descriptors or processes is listed once per
// descriptor. It returns an error for too many devices, or when the
// device map cannot be set or the iterator cannot be read.
func (p *OpenFilesProbe) List(devs []uint32, max int) (files []OpenFile, truncated bool, err error) {
	devs = slices.Compact(slices.Sorted(slices.Values(devs)))
	if len(devs) > openFilesMaxDevs {
		return nil, false, fmt.Errorf("open-files probe: %d devices, at most %d", len(devs), openFilesMaxDevs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setDevs(devs); err != nil {
		return nil, false, err
	}
	rd, err := p.it.Open()
	if err != nil {
		return nil, false, fmt.Errorf("open-files probe: open iterator: %w", err)
	}
	defer rd.Close()
	return readOpenFiles(bufio.NewReader(rd), max)
}

// setDevs makes devs the iterator's device set (p.mu held).
func (p *OpenFilesProbe) setDevs(devs []uint32) error {
	m := p.coll.Maps[openfilesMapDevs]
	if err := clearMap(m); err != nil {
		return fmt.Errorf("open-files probe: clear devices: %w", err)
	}
	for _, d := range devs {
		if err := m.Put(d, uint8(1)); err != nil {
			return fmt.Errorf("open-files probe: device %s: %w", DevString(d), err)
		}
	}
	return nil
}

// readOpenFiles decodes the iterator's records, at most max.
func readOpenFiles(r io.Reader, max int) ([]OpenFile, bool, error) {
	var out []OpenFile
	var rec openfilesOpenFile
	for {
		err := binary.Read(r, binary.NativeEndian, &rec)
		if errors.Is(err, io.EOF) {
			return out, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("open-files probe: read %d-byte record: %w", unsafe.Sizeof(rec), err)
		}
		if len(out) == max {
			return out, true, nil
		}
		out = append(out, OpenFile{PID: rec.Tgid, FD: rec.Fd, Dev: rec.Dev, Ino: rec.Ino, RAPages: rec.RaPages, Mode: rec.F_mode,
			Mapped: rec.Mapped != 0})
	}
}

// Close detaches and unloads the iterator.
func (p *OpenFilesProbe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.it.Close()
	p.coll.Close()
	return err
}
