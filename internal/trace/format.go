package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Format describes one trace format: how to read it and, when supported, how
// to write it.
type Format struct {
	// Name is the format's name on the command line ("disksim", "msr", ...).
	Name string
	// Doc is a one-line description.
	Doc string
	// NewReader returns a streaming reader over r. name is used in errors.
	NewReader func(name string, r io.Reader) (Reader, error)
	// NewWriter returns a writer, or is nil if the format is read-only.
	NewWriter func(w io.Writer, opt WriterOptions) (Writer, error)
}

// WriterOptions parameterise writers.
type WriterOptions struct {
	// Target is the file or device name a format that names one writes
	// (fio iolog's filename column). Default "/dev/sdX".
	Target string
}

var formats = map[string]Format{}

// register adds a format; it is called from the init functions of the
// format files in this package.
func register(f Format) {
	if _, dup := formats[f.Name]; dup {
		panic("trace: format registered twice: " + f.Name)
	}
	formats[f.Name] = f
}

// Formats returns the registered formats sorted by name.
func Formats() []Format {
	out := make([]Format, 0, len(formats))
	for _, f := range formats {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FormatNames returns the registered format names, sorted, comma separated.
func FormatNames() string {
	names := make([]string, 0, len(formats))
	for _, f := range Formats() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// Lookup returns the named format or an error listing the known ones.
func Lookup(name string) (Format, error) {
	f, ok := formats[name]
	if !ok {
		return Format{}, fmt.Errorf("unknown trace format %q (known: %s)", name, FormatNames())
	}
	return f, nil
}

// OpenFile opens path and returns a reader of the named format. A gzip
// stream (recognised by its magic bytes, whatever the file name) is
// decompressed transparently. The caller must Close the returned closer.
func OpenFile(format, path string) (Reader, io.Closer, error) {
	f, err := Lookup(format)
	if err != nil {
		return nil, nil, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open trace: %w", err)
	}
	br := bufio.NewReaderSize(fh, 256<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			fh.Close()
			return nil, nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		src = zr
	}
	r, err := f.NewReader(path, src)
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	return r, fh, nil
}

// ReadAll drains r into a slice. It returns ErrEmpty (wrapped with the
// source name when known) if the trace holds no request.
func ReadAll(r Reader) ([]Request, error) {
	var out []Request
	for {
		q, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	if len(out) == 0 {
		return nil, ErrEmpty
	}
	return out, nil
}

// ReadFile opens, reads and closes a whole trace file.
func ReadFile(format, path string) ([]Request, error) {
	r, c, err := OpenFile(format, path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	reqs, err := ReadAll(r)
	if errors.Is(err, ErrEmpty) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, err
}
