//go:build !linux

package schedcost

import (
	"context"
	"errors"
)

// Measure needs Linux's loop devices and blk-mq schedulers.
func Measure(context.Context, string, Options) (Costs, error) {
	return Costs{}, errors.New("schedcost: only on Linux")
}

// Recover has nothing to mend off Linux.
func Recover(string, string) error { return nil }

// Kernel is "" off Linux.
func Kernel() string { return "" }
