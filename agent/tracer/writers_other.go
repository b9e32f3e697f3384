//go:build !linux || !amd64

package tracer

import "errors"

// WriterProbe names the processes that write block devices' queue
// settings; it needs Linux on amd64 (the probe's object is built for it).
type WriterProbe struct{}

// NewWriterProbe returns an error: no probe on this platform.
func NewWriterProbe() (*WriterProbe, error) {
	return nil, errors.New("writer probe: needs Linux on amd64")
}

// Last reports no writer.
func (*WriterProbe) Last(string) (Writer, bool) { return Writer{}, false }

// Mechanism is "".
func (*WriterProbe) Mechanism() string { return "" }

// Close does nothing.
func (*WriterProbe) Close() error { return nil }
