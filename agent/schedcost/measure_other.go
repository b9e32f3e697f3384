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

// Kernel is "" off Linux.
func Kernel() string { return "" }
