//go:build !linux

package openfiles

import "errors"

// advise needs Linux (pidfd_getfd).
func advise(Step) error { return errors.New("needs Linux") }
