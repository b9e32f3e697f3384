package dmcache

import (
	"os/exec"
	"syscall"
)

// chroot makes cmd's process chroot into root before it executes its
// program (in the child, between fork and exec: the agent itself stays
// where it is). It needs CAP_SYS_CHROOT.
func chroot(cmd *exec.Cmd, root string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	return nil
}
