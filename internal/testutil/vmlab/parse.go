package vmlab

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseAptDepends returns the first package starting with prefix in the
// Depends lines of `apt-cache depends` output.
func parseAptDepends(out, prefix string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], prefix) {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("apt-cache depends: no dependency named %s*", prefix)
}

// parseLdd returns the absolute library paths in ldd's output (the
// "name => /path (addr)" lines and the loader's "/path (addr)" line).
func parseLdd(out string) ([]string, error) {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("ldd: %s not found", f[0])
		case strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	if len(libs) == 0 {
		return nil, errors.New("ldd: no libraries listed")
	}
	return libs, nil
}

// modName is a module's name as modprobe takes it: the file name without
// .ko, with - as _.
func modName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(path.Base(file), ".ko"), "-", "_")
}

// moduleClosure returns the module files (paths relative to the module
// tree, as modules.dep has them) of names and everything they depend on,
// per modules.dep (depmod's "file: dep dep ..." lines). Built-in modules
// are not in modules.dep: a name neither there nor in modules.builtin is
// an error, so callers should list only loadable ones.
func moduleClosure(dep string, names []string) ([]string, error) {
	deps := map[string][]string{} // name → [file, deps...]
	for _, line := range strings.Split(dep, "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[modName(file)] = append([]string{strings.TrimSpace(file)}, strings.Fields(rest)...)
	}
	var files []string
	for _, n := range names {
		e, ok := deps[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			return nil, fmt.Errorf("module %s is not in modules.dep", n)
		}
		files = append(files, e...)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// serial is what the guest's init wrote to the second serial port.
type serial struct {
	output   string
	exitCode int
	boot     time.Duration // guest uptime when the script started
	script   time.Duration // the script's run time, guest clock
}

const (
	startMarker = "@@VMLAB-START "
	exitMarker  = "\n@@VMLAB-EXIT "
)

// parseSerial splits the second serial port's bytes into the script's
// output and its exit code. It fails when the exit line is missing (the
// guest died or was killed before the script ended).
func parseSerial(b []byte) (serial, error) {
	s := strings.ReplaceAll(string(b), "\r", "")
	var r serial
	var start float64
	if rest, ok := strings.CutPrefix(s, startMarker); ok {
		line, after, _ := strings.Cut(rest, "\n")
		if v, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err == nil {
			start = v
			r.boot = seconds(v)
		}
		s = after
	} else {
		return r, errors.New("the guest's init never started the script")
	}
	i := strings.LastIndex(s, exitMarker)
	if i < 0 {
		r.output = s
		return r, errors.New("the script's exit line is missing: the guest stopped before the script ended")
	}
	r.output = s[:i]
	f := strings.Fields(s[i+len(exitMarker):])
	if len(f) < 1 {
		return r, errors.New("the script's exit line is truncated")
	}
	code, err := strconv.Atoi(f[0])
	if err != nil {
		return r, fmt.Errorf("the script's exit line: %w", err)
	}
	r.exitCode = code
	if len(f) > 1 {
		if end, err := strconv.ParseFloat(f[1], 64); err == nil && end >= start {
			r.script = seconds(end - start)
		}
	}
	return r, nil
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
