//go:build !linux

package tracer

import "fmt"

// PageCacheProbe counts read-ahead waste per file system device; it needs
// Linux.
type PageCacheProbe struct{}

// NewPageCacheProbe returns an error wrapping ErrPageCacheUnsupported:
// the probe needs Linux.
func NewPageCacheProbe(PageCacheOptions) (*PageCacheProbe, error) {
	return nil, fmt.Errorf("%w: needs Linux", ErrPageCacheUnsupported)
}

// Track returns an error wrapping ErrPageCacheUnsupported.
func (*PageCacheProbe) Track(_, _ []uint32) error {
	return fmt.Errorf("%w: needs Linux", ErrPageCacheUnsupported)
}

// Stats returns an error wrapping ErrPageCacheUnsupported.
func (*PageCacheProbe) Stats() (map[uint32]PageCacheStats, error) {
	return nil, fmt.Errorf("%w: needs Linux", ErrPageCacheUnsupported)
}

// Close does nothing.
func (*PageCacheProbe) Close() error { return nil }
