//go:build linux

package openfiles

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// advise gives a file held by another process s.Advice, through a
// duplicate of its descriptor (pidfd_getfd(2), which needs
// PTRACE_MODE_ATTACH_REALCREDS over the process: root with
// CAP_SYS_PTRACE). Errors name the process and descriptor.
func advise(s Step) error {
	pidfd, err := unix.PidfdOpen(int(s.PID), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", s.PID, err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, int(s.FD), 0)
	if err != nil {
		return fmt.Errorf("pidfd_getfd pid %d fd %d: %w", s.PID, s.FD, err)
	}
	defer unix.Close(fd)
	adv := unix.FADV_NORMAL
	if s.Advice == Sequential {
		adv = unix.FADV_SEQUENTIAL
	}
	if err := unix.Fadvise(fd, 0, 0, adv); err != nil {
		return fmt.Errorf("%s on pid %d fd %d: %w", s.Advice, s.PID, s.FD, err)
	}
	return nil
}
