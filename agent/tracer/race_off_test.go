//go:build !race

package tracer

// raceDetector reports whether the tests run with the race detector, which
// makes the Go side many times slower than the kernel side it keeps up with.
const raceDetector = false
