package dmcache

// Running the tools of another root file system (Tool.Root): the host's
// dmsetup and lvm from the agent's container, chrooted into the host's
// root mounted at /host.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// RootPath is the PATH a command run in Tool.Root gets, and the
// folders LookPathIn searches, in this order.
const RootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// maxLinks bounds the symbolic links followed in one path, as the
// kernel's ELOOP does.
const maxLinks = 40

// LookPathIn returns the path, as seen from inside the root file system
// mounted at root, of the executable regular file prog: prog itself
// when it is absolute, else the first of RootPath's folders that has it.
// Symbolic links are followed as a process chrooted into root follows
// them (an absolute target starts again at root). The error wraps
// fs.ErrNotExist and says where prog was looked for; a relative prog
// with a folder in it is refused.
func LookPathIn(root, prog string) (string, error) {
	p, err := lookPathIn(root, prog)
	if err != nil {
		return "", fmt.Errorf("dmcache: %w", err)
	}
	return p, nil
}

// lookPathIn is LookPathIn with an error that does not name the package.
func lookPathIn(root, prog string) (string, error) {
	cands := []string{prog}
	if !path.IsAbs(prog) {
		if strings.Contains(prog, "/") {
			return "", fmt.Errorf("%s: want a program name or an absolute path inside %s", prog, root)
		}
		cands = nil
		for _, d := range filepath.SplitList(RootPath) {
			cands = append(cands, path.Join(d, prog))
		}
	}
	for _, c := range cands {
		real, err := resolveIn(root, c)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join(root, real)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return c, nil
		}
	}
	if len(cands) == 1 {
		return "", fmt.Errorf("%s: %w: no executable file at that path in the root file system at %s", prog, fs.ErrNotExist, root)
	}
	return "", fmt.Errorf("%s: %w: no executable file of that name in %s of the root file system at %s", prog, fs.ErrNotExist, RootPath, root)
}

// resolveIn returns the path inside root that the absolute path p names
// for a process chrooted into root, every symbolic link in it followed.
// An error is os.Lstat's or os.Readlink's, or ELOOP after maxLinks links.
func resolveIn(root, p string) (string, error) {
	done, rest := "/", strings.Split(path.Clean("/"+p), "/")
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: %w", p, syscall.ELOOP)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, nil
}

// command returns the command that runs prog with args: from PATH, or,
// with Root set, prog of the root file system at Root (LookPathIn) run
// chrooted into it, in its "/", with PATH set to RootPath and the rest
// of the environment kept (DM_DISABLE_UDEV, for example, reaches the
// tool).
func (t *Tool) command(ctx context.Context, prog string, args []string) (*exec.Cmd, error) {
	if t.Root == "" {
		return exec.CommandContext(ctx, prog, args...), nil
	}
	p, err := lookPathIn(t.Root, prog)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, p, args...)
	if err := chroot(cmd, t.Root); err != nil {
		return nil, err
	}
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "PATH="+RootPath) // the last PATH wins
	return cmd, nil
}
