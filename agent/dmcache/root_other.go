//go:build !linux

package dmcache

import (
	"errors"
	"os/exec"
)

// errNoChroot is chroot's error where the system has none.
var errNoChroot = errors.New("dmcache: running the tools of another root file system (Tool.Root) needs Linux")

// chroot fails: Tool.Root is supported on Linux only.
func chroot(*exec.Cmd, string) error { return errNoChroot }
