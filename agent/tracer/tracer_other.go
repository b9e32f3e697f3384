//go:build !linux

package tracer

import (
	"errors"
	"time"
)

var errNotLinux = errors.New("block request tracing needs Linux")

type noTracer struct{ Tracer }

func newEBPF(Options) (*noTracer, error) { return nil, errNotLinux }

func newTracefs(Options, error) (*noTracer, error) { return nil, errNotLinux }

var start = time.Now()

// Monotonic returns a monotonic clock in ns (CLOCK_MONOTONIC on Linux).
func Monotonic() int64 { return int64(time.Since(start)) }
