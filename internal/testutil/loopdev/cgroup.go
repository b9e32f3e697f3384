package loopdev

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// MemCgroup creates a memory cgroup limited to limit bytes, named after
// the test process, and returns its cgroup.procs file; it is removed
// when t ends (its processes must have exited by then). It is a cgroup
// v2 leaf under /sys/fs/cgroup when the memory controller is enabled
// there, else a cgroup v1 memory cgroup below this process's own; without
// either t is skipped, or fails under CI=true (package need). The page
// cache a process in it reads is charged to it, so a small limit makes
// read-ahead thrash.
func MemCgroup(t testing.TB, limit int64) string {
	t.Helper()
	name := fmt.Sprintf("shadowtune-test-%d", os.Getpid())
	var dir, limitFile string
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(b), "memory") {
		dir, limitFile = filepath.Join("/sys/fs/cgroup", name), "memory.max"
	} else if parent := v1MemoryCgroup(); parent != "" {
		dir, limitFile = filepath.Join(parent, name), "memory.limit_in_bytes"
	} else {
		need.Missing(t, "memory cgroup", "needs a cgroup v2 memory controller (or cgroup v1 memory)")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		need.Missing(t, "memory cgroup", "cannot create a memory cgroup: %v", err)
	}
	need.Have(t, "memory cgroup")
	t.Cleanup(func() {
		// The children have exited; the cgroup empties a moment later.
		var err error
		for range 50 {
			if err = os.Remove(dir); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("remove cgroup %s: %v", dir, err)
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatalf("%s: %v", limitFile, err)
	}
	t.Logf("memory cgroup %s (%s = %d)", dir, limitFile, limit)
	return filepath.Join(dir, "cgroup.procs")
}

// v1MemoryCgroup is this process's cgroup v1 memory cgroup directory, or
// "" without one.
func v1MemoryCgroup() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && f[1] == "memory" {
			dir := filepath.Join("/sys/fs/cgroup/memory", f[2])
			if _, err := os.Stat(filepath.Join(dir, "memory.limit_in_bytes")); err == nil {
				return dir
			}
		}
	}
	return ""
}

// RunChild re-executes the test binary to run the test function test
// alone as a child, with env ("NAME=value") added to its environment;
// moves the child into the cgroup whose cgroup.procs file is procs
// (MemCgroup); then lets it go with a line on its stdin, which the child
// waits for with AwaitGo, so that none of its work is done outside the
// cgroup. It waits for the child and returns when it was let go and its
// combined output; a child that fails fails t.
func RunChild(t testing.TB, procs, test, env string) (time.Time, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(procs, []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("move the child %s into %s: %v", test, procs, err)
	}
	start := time.Now()
	_, _ = in.Write([]byte("go\n"))
	_ = in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child %s (%s): %v\n%s", test, env, err, out.String())
	}
	return start, out.String()
}

// AwaitGo is a RunChild child's wait for the line that lets it go, once
// it is in its cgroup.
func AwaitGo(t testing.TB) {
	t.Helper()
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
}
