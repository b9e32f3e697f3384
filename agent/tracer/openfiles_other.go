//go:build !linux

package tracer

import "fmt"

// OpenFilesProbe lists the files open on file system devices; it needs
// Linux.
type OpenFilesProbe struct{}

// NewOpenFilesProbe returns an error wrapping ErrOpenFilesUnsupported:
// the probe needs Linux.
func NewOpenFilesProbe() (*OpenFilesProbe, error) {
	return nil, fmt.Errorf("%w: needs Linux", ErrOpenFilesUnsupported)
}

// List returns an error wrapping ErrOpenFilesUnsupported.
func (*OpenFilesProbe) List([]uint32, int) ([]OpenFile, bool, error) {
	return nil, false, fmt.Errorf("%w: needs Linux", ErrOpenFilesUnsupported)
}

// Close does nothing.
func (*OpenFilesProbe) Close() error { return nil }
