// Package fifo helps tests check that a read of a FIFO does not block:
// a reader that opens a FIFO waits for a writer, and would hang the test.
package fifo

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Within fails t when f has not returned after 5 s (a read blocked on a
// FIFO); unblock, if not nil, is then called to let f go.
func Within(t testing.TB, what string, unblock func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		if unblock != nil {
			unblock()
		}
		t.Fatalf("%s blocked for 5 s", what)
	}
}

// Unblocker returns a function that lets a reader blocked on the FIFO at
// path go: it opens the writing end without blocking and closes it.
func Unblocker(path string) func() {
	return func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
}
