//go:build !linux

package host

// Background does nothing off Linux, and returns nil.
func Background() error { return nil }
