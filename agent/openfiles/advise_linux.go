//go:build linux

package openfiles

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// advise gives a file held by another process s.Advice, through a
// duplicate of its descriptor (pidfd_getfd(2), which needs
// PTRACE_MODE_ATTACH_REALCREDS over the process: root with
// CAP_SYS_PTRACE). The duplicate must still be the file the listing
// found (its device and inode, s.Dev and s.Ino): a process may close or
// replace the descriptor in between, and the file it holds then is not
// the one the plan judged; such a file is left, with an error wrapping
// ErrReplaced. Errors name the process and descriptor.
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
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat pid %d fd %d: %w", s.PID, s.FD, err)
	}
	if dev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev); dev != s.Dev || st.Ino != s.Ino {
		return fmt.Errorf("pid %d fd %d holds %d:%d inode %d, listed as %d:%d inode %d: %w", s.PID, s.FD,
			dev>>20, dev&0xfffff, st.Ino, s.Dev>>20, s.Dev&0xfffff, s.Ino, ErrReplaced)
	}
	adv := unix.FADV_NORMAL
	if s.Advice == Sequential {
		adv = unix.FADV_SEQUENTIAL
	}
	if err := unix.Fadvise(fd, 0, 0, adv); err != nil {
		return fmt.Errorf("%s on pid %d fd %d: %w", s.Advice, s.PID, s.FD, err)
	}
	return nil
}
