//go:build !linux

package agent

// background does nothing off Linux.
func background() error { return nil }
