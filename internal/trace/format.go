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

// ErrTooManyRequests is returned, wrapped, by ReadAllLimit and
// ReadFileLimit when a trace holds more requests than the limit.
var ErrTooManyRequests = errors.New("more requests than the limit")

// ReadAll drains r into a slice. It returns ErrEmpty (wrapped with the
// source name when known) if the trace holds no request.
func ReadAll(r Reader) ([]Request, error) {
	return ReadAllLimit(r, 0)
}

// ReadAllLimit drains r into a slice of at most limit requests (limit ≤ 0:
// no limit). It stops at the request after the limit and returns an error
// wrapping ErrTooManyRequests, having read no further: the slice then
// takes at most about 2 × limit × 64 bytes of memory (with its growth),
// whatever the size of the input. It returns ErrEmpty if the trace holds
// no request, and the reader's error (a *ParseError for malformed input).
func ReadAllLimit(r Reader, limit int) ([]Request, error) {
	var out []Request
	for {
		q, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if limit > 0 && len(out) == limit {
			return nil, fmt.Errorf("%w of %d", ErrTooManyRequests, limit)
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
	return ReadFileLimit(format, path, 0)
}

// ReadFileLimit opens, reads and closes a trace file of at most limit
// requests (limit ≤ 0: no limit), as ReadAllLimit; its ErrEmpty and
// ErrTooManyRequests errors are prefixed with path, e.g.
// "trace.gz: more requests than the limit of 1000000".
func ReadFileLimit(format, path string, limit int) ([]Request, error) {
	r, c, err := OpenFile(format, path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	reqs, err := ReadAllLimit(r, limit)
	if errors.Is(err, ErrEmpty) || errors.Is(err, ErrTooManyRequests) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, err
}

// Head returns a Reader that yields the first n requests of r and then
// io.EOF, without reading further from r (n ≤ 0: every request).
func Head(r Reader, n int) Reader {
	if n <= 0 {
		return r
	}
	return &headReader{r: r, left: n}
}

type headReader struct {
	r    Reader
	left int
}

func (h *headReader) Next() (Request, error) {
	if h.left == 0 {
		return Request{}, io.EOF
	}
	q, err := h.r.Next()
	if err == nil {
		h.left--
	}
	return q, err
}
