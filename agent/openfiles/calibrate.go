package openfiles

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/shadowtune/shadowtune/agent/tracer"
)

// Calibrate learns the f_mode bits that POSIX_FADV_RANDOM and
// POSIX_FADV_NOREUSE set on the running kernel (FMODE_RANDOM,
// FMODE_NOREUSE in include/linux/fs.h; their values moved between kernel
// versions and BTF does not carry them): it creates three files in a new
// directory under dir, gives two of them one advice each, lists them
// with p and compares their modes with the third's. The directory is
// removed before it returns. It returns an error wrapping ErrNotHostPID
// when the kernel lists the files under another PID than this process's
// (a PID namespace), and an error naming what differs when the modes do
// not differ by one bit for POSIX_FADV_RANDOM and by at most one for
// POSIX_FADV_NOREUSE (a kernel older than 6.3 sets none for it).
func Calibrate(p *tracer.OpenFilesProbe, dir string) (marks uint32, err error) {
	tmp, err := os.MkdirTemp(dir, "shadowtune-fmode-")
	if err != nil {
		return 0, fmt.Errorf("calibrate open-file marks: %w", err)
	}
	defer os.RemoveAll(tmp)
	advice := []int{unix.FADV_NORMAL, unix.FADV_RANDOM, unix.FADV_NOREUSE}
	inos := make([]uint64, len(advice))
	var dev uint32
	for i, adv := range advice {
		f, err := os.Create(filepath.Join(tmp, fmt.Sprint(i)))
		if err != nil {
			return 0, fmt.Errorf("calibrate open-file marks: %w", err)
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, adv); err != nil {
			return 0, fmt.Errorf("calibrate open-file marks: fadvise %d: %w", adv, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return 0, fmt.Errorf("calibrate open-file marks: %w", err)
		}
		inos[i], dev = st.Ino, tracer.KernelDev(st.Dev)
	}
	files, _, err := p.List([]uint32{dev}, MaxFiles)
	if err != nil {
		return 0, fmt.Errorf("calibrate open-file marks: %w", err)
	}
	return marksOf(files, dev, inos, uint32(os.Getpid()))
}

// marksOf finds the three calibration files (inos: plain, random,
// noreuse) among files and returns the bits the advice set.
func marksOf(files []tracer.OpenFile, dev uint32, inos []uint64, pid uint32) (uint32, error) {
	modes := make([]uint32, len(inos))
	found := 0
	for _, f := range files {
		for i, ino := range inos {
			if f.Dev != dev || f.Ino != ino {
				continue
			}
			if f.PID != pid {
				return 0, fmt.Errorf("calibrate open-file marks: the kernel lists this process as %d, it sees itself as %d: %w", f.PID, pid, ErrNotHostPID)
			}
			modes[i] = f.Mode
			found |= 1 << i
		}
	}
	if found != 1<<len(inos)-1 {
		return 0, errors.New("calibrate open-file marks: the probe did not list this process's own files")
	}
	random, noreuse := modes[1]^modes[0], modes[2]^modes[0]
	if bits.OnesCount32(random) != 1 || bits.OnesCount32(noreuse) > 1 || random == noreuse {
		return 0, fmt.Errorf("calibrate open-file marks: f_mode %#x plain, %#x after POSIX_FADV_RANDOM, %#x after POSIX_FADV_NOREUSE: want one bit apart each (fadvise does nothing on a file system without a backing device, such as tmpfs)", modes[0], modes[1], modes[2])
	}
	return random | noreuse, nil
}
