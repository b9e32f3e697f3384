package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// maxLine bounds the length of one text line; longer lines are an error,
// which keeps memory per request constant on any input.
const maxLine = 64 << 10

// lineScanner reads text lines and counts them for error positions.
type lineScanner struct {
	name string
	sc   *bufio.Scanner
	line int
}

func newLineScanner(name string, r io.Reader) *lineScanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	return &lineScanner{name: name, sc: sc}
}

// next returns the next line (without its newline) or io.EOF.
func (s *lineScanner) next() ([]byte, error) {
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return nil, s.errorf("line longer than %d bytes", maxLine)
			}
			return nil, fmt.Errorf("%s: read: %w", s.name, err)
		}
		return nil, io.EOF
	}
	s.line++
	return s.sc.Bytes(), nil
}

func (s *lineScanner) errorf(format string, args ...any) error {
	return &ParseError{File: s.name, Line: s.line + 1, Msg: fmt.Sprintf(format, args...)}
}

// errAt reports an error on the line most recently returned by next.
func (s *lineScanner) errAt(format string, args ...any) error {
	return &ParseError{File: s.name, Line: s.line, Msg: fmt.Sprintf(format, args...)}
}

// fieldSeps is a set of field-separator bytes for splitFields.
type fieldSeps [256]bool

// newFieldSeps returns the set of the bytes of s.
func newFieldSeps(s string) *fieldSeps {
	var f fieldSeps
	for i := range len(s) {
		f[s[i]] = true
	}
	return &f
}

// The separators of the text formats.
var (
	sepSemicolon = newFieldSeps(";")     // blkreplay
	sepComma     = newFieldSeps(",")     // MSR CSV
	sepBlank     = newFieldSeps(" \t")   // fio iolog
	sepBlankCR   = newFieldSeps(" \t\r") // blkparse
)

// splitFields splits line into dst, without allocating, and returns the
// number of fields stored and whether line holds more fields than dst.
// With collapse, a run of separators is one separator and blank fields are
// dropped (whitespace-separated formats; fields are not trimmed). Without,
// every separator ends a field, fields may be empty, and each is trimmed
// of spaces and tabs (and a trailing CR, as trimSpaceB); a line always
// holds at least one field.
func splitFields(dst [][]byte, line []byte, sep *fieldSeps, collapse bool) (n int, more bool) {
	rest := line
	for {
		if collapse {
			for len(rest) > 0 && sep[rest[0]] {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return n, false
			}
		}
		if n == len(dst) {
			return n, true
		}
		i := 0
		for i < len(rest) && !sep[rest[i]] {
			i++
		}
		if collapse {
			dst[n] = rest[:i]
			rest = rest[i:]
			n++
			continue
		}
		dst[n] = trimSpaceB(rest[:i])
		n++
		if i == len(rest) {
			return n, false
		}
		rest = rest[i+1:]
	}
}
