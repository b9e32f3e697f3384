// Package need is how a test asks for a real part of the machine it runs
// on: root, loop devices, a program such as fio or mkfs.ext4, a memory
// cgroup, a scheduler, a kernel feature, a control plane. A test whose
// part is missing is skipped on a developer's machine, and FAILS when the
// environment says CI (CI=true, as CI services and .ci/run set it): a CI
// run must not pass by skipping what it was meant to check.
//
//	func TestLive(t *testing.T) {
//		need.Root(t, "creates loop devices")
//		fio := need.Tool(t, "fio", "hack/ensure-test-deps.sh installs it")
//		...
//	}
//
// Every call also records, when SHADOWTUNE_NEED_LOG names a file (make test
// sets it), one line "package<TAB>test<TAB>part<TAB>have|missing" in it:
// hack/mustrun checks that the tests on the committed must-run list
// (hack/must-run.txt) ran and were not skipped, and that every test that
// asked for a real part is on that list.
package need

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// LogEnv names the file the calls are recorded in (see the package
// comment); unset, nothing is recorded.
const LogEnv = "SHADOWTUNE_NEED_LOG"

// CI reports whether $CI parses as true ("true", "1", "TRUE", ...): then a
// missing part fails the test instead of skipping it.
func CI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing records that t needs part and that it is missing, then skips t
// with the reason (format, args), or fails it with the reason when CI is
// true. It does not return.
func Missing(t testing.TB, part, format string, args ...any) {
	t.Helper()
	record(t, part, false)
	reason := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("missing %s: %s (CI=true: a test whose part is missing fails)", part, reason)
	}
	t.Skipf("missing %s: %s", part, reason)
}

// Have records that t needs part and that it is there (see the package
// comment); the must-run list is checked against these records.
func Have(t testing.TB, part string) {
	t.Helper()
	record(t, part, true)
}

// Root needs the test to run as root (effective uid 0); why says what for
// ("creates loop devices").
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root", "needs root: %s (run go test as root)", why)
	}
	Have(t, "root")
}

// ToolEnv is the environment variable that overrides the path of the
// program name: its name upper-cased, every character other than a letter
// or digit replaced by '_' ("fio" → FIO, "mkfs.ext4" → MKFS_EXT4).
func ToolEnv(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
}

// Tool returns the path of the program name: $ToolEnv(name) when that is
// set (a path, or a name looked up in $PATH; set but empty or not found,
// the program is missing), else name looked up in $PATH. hint says how to
// get it ("hack/ensure-test-deps.sh installs it").
func Tool(t testing.TB, name, hint string) string {
	t.Helper()
	env := ToolEnv(name)
	want, set := os.LookupEnv(env)
	if !set {
		want = name
	}
	if want == "" {
		Missing(t, name, "%s is set but empty (%s)", env, hint)
	}
	p, err := exec.LookPath(want)
	if err != nil {
		if set {
			Missing(t, name, "%s=%s: %v (%s)", env, want, err, hint)
		}
		Missing(t, name, "%s not found in $PATH (%s)", name, hint)
	}
	Have(t, name)
	return p
}

var logMu sync.Mutex

// record appends t's line to $SHADOWTUNE_NEED_LOG, if set. A file that
// cannot be written fails t: the must-run check would otherwise judge an
// incomplete record.
func record(t testing.TB, part string, have bool) {
	t.Helper()
	path := os.Getenv(LogEnv)
	if path == "" {
		return
	}
	state := "missing"
	if have {
		state = "have"
	}
	test, _, _ := strings.Cut(t.Name(), "/")
	line := fmt.Sprintf("%s\t%s\t%s\t%s\n", pkgPath(), test, part, state)
	logMu.Lock()
	defer logMu.Unlock()
	// One write of one short line with O_APPEND: lines of test binaries
	// running side by side do not interleave.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("need: record in %s=%s: %v", LogEnv, path, err)
	}
}

var (
	pkgOnce sync.Once
	pkg     string
)

// pkgPath is the import path of the package under test: go test runs a
// test binary in its package's directory, so it is the module path of the
// nearest go.mod above the working directory joined with the way down.
// When that cannot be worked out it is the working directory.
func pkgPath() string {
	pkgOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			pkg = "?"
			return
		}
		pkg = wd
		for dir := wd; ; dir = filepath.Dir(dir) {
			if mod := modulePath(filepath.Join(dir, "go.mod")); mod != "" {
				rel, err := filepath.Rel(dir, wd)
				if err == nil {
					pkg = strings.TrimSuffix(mod+"/"+filepath.ToSlash(rel), "/.")
				}
				return
			}
			if filepath.Dir(dir) == dir {
				return
			}
		}
	})
	return pkg
}

// modulePath is the module path a go.mod file declares, "" without one.
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
