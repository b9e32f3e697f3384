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
