package loopdev

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// SetMemLimit sets the limit, bytes, of the memory cgroup whose
// cgroup.procs file is procs (MemCgroup), for the processes that join it
// after: a phase of a load that needs less memory than the others.
func SetMemLimit(t testing.TB, procs string, limit int64) {
	t.Helper()
	dir := filepath.Dir(procs)
	limitFile := filepath.Join(dir, "memory.max")
	if _, err := os.Stat(limitFile); err != nil {
		limitFile = filepath.Join(dir, "memory.limit_in_bytes")
	} else if high := strings.TrimSpace(readFileOr(filepath.Join(dir, "memory.high"))); high != "" && high != "max" {
		limitFile = filepath.Join(dir, "memory.high") // NoOOMKill's limit
	}
	if err := os.WriteFile(limitFile, []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatalf("%s: %v", limitFile, err)
	}
	t.Logf("memory cgroup %s: %s = %d", dir, filepath.Base(limitFile), limit)
}

// NoOOMKill makes the memory cgroup whose cgroup.procs file is procs
// reclaim, and make its processes wait, at its limit rather than kill
// one: pages a process reads are locked while their I/O is queued (behind
// a blk-throttle cap, for a while), and reclaim cannot take them until it
// completes. cgroup v1: memory.oom_control's oom_kill_disable; v2: the
// limit moves from memory.max to memory.high, the reclaim-and-throttle
// limit.
func NoOOMKill(t testing.TB, procs string) {
	t.Helper()
	dir := filepath.Dir(procs)
	if fileExists(filepath.Join(dir, "memory.oom_control")) {
		if err := os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("1"), 0); err != nil {
			t.Fatalf("memory.oom_control: %v", err)
		}
		return
	}
	limit, err := os.ReadFile(filepath.Join(dir, "memory.max"))
	if err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"memory.high": strings.TrimSpace(string(limit)), "memory.max": "max"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// MemPinned is what the processes of the memory cgroup whose
// cgroup.procs file is procs hold that reclaim cannot take back from
// the page cache, bytes: their anonymous and shared memory and the file
// pages they map (memory.stat: v1 rss, shmem, mapped_file; v2 anon,
// shmem, file_mapped). The rest of the limit is the room for the page
// cache of their reads. It returns an error when memory.stat cannot be
// read or parsed (it takes no testing.TB: a poller calls it beside the
// test's goroutine).
func MemPinned(procs string) (int64, error) {
	stat := filepath.Join(filepath.Dir(procs), "memory.stat")
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "rss", "shmem", "mapped_file", "anon", "file_mapped":
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", stat, line, err)
			}
			sum += n
		}
	}
	return sum, nil
}

// ThrottleCgroup creates a cgroup of the host's blk-throttle (cgroup v1
// blkio, else cgroup v2 with the io controller) that caps the reads of
// the device majMin ("MAJ:MIN") at iops requests and bps bytes a second
// (0: that one uncapped), and returns its directory and cgroup.procs
// file; it is removed when t ends (its processes must have exited by
// then). Without blk-throttle t is skipped, or fails under CI=true.
func ThrottleCgroup(t testing.TB, majMin string, iops, bps int) (dir, procs string) {
	t.Helper()
	name := fmt.Sprintf("shadowtune-test-blkio-%d", os.Getpid())
	switch {
	case fileExists("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device"):
		dir = filepath.Join("/sys/fs/cgroup/blkio", name)
	case strings.Contains(readFileOr("/sys/fs/cgroup/cgroup.subtree_control"), "io"):
		dir = filepath.Join("/sys/fs/cgroup", name)
	default:
		need.Missing(t, "blk-throttle", "needs cgroup v1 blkio or cgroup v2's io controller")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		need.Missing(t, "blk-throttle", "cannot create %s: %v", dir, err)
	}
	need.Have(t, "blk-throttle")
	t.Cleanup(func() {
		var err error
		for range 50 { // the children have exited; the cgroup empties a moment later
			if err = os.Remove(dir); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("remove cgroup %s: %v", dir, err)
	})
	CapReads(t, dir, majMin, iops, bps)
	return dir, filepath.Join(dir, "cgroup.procs")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readFileOr(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
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
	return RunChildIn(t, []string{procs}, test, env)
}

// RunChildIn is RunChild with the child moved into every cgroup whose
// cgroup.procs file is in procs (a memory cgroup and a blk-throttle one).
func RunChildIn(t testing.TB, procs []string, test, env string) (time.Time, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	return runGated(t, cmd, procs, fmt.Sprintf("child %s (%s)", test, env))
}

// RunIn runs the command argv (a tool such as fio) in every cgroup whose
// cgroup.procs file is in procs: a shell that waits for a line on its
// stdin is moved into them, then execs argv. It waits for the command and
// returns when it was let go and its combined output; a command that
// fails fails t.
func RunIn(t testing.TB, procs []string, argv ...string) (time.Time, string) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", `read _ && exec "$@"`, "sh"}, argv...)...)
	return runGated(t, cmd, procs, strings.Join(argv, " "))
}

// runGated starts cmd, which waits for a line on its stdin before it
// does any work, moves it into every cgroup whose cgroup.procs file is in
// procs, lets it go, and waits for it: it returns when it was let go and
// its combined output. A move or a run that fails fails t, naming what.
func runGated(t testing.TB, cmd *exec.Cmd, procs []string, what string) (time.Time, string) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if err := os.WriteFile(p, []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("move %s into %s: %v", what, p, err)
		}
	}
	start := time.Now()
	_, _ = in.Write([]byte("go\n"))
	_ = in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out.String())
	}
	return start, out.String()
}

// Background starts the command argv (a competing load) in a process
// group of its own, and kills the whole group when t ends, so that
// nothing it started reads on into the next test. A process that leaves
// the group (fio's job processes start sessions of their own: run fio
// with --thread) is not killed.
func Background(t testing.TB, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", argv[0], err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// AwaitGo is a RunChild child's wait for the line that lets it go, once
// it is in its cgroup.
func AwaitGo(t testing.TB) {
	t.Helper()
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
}

// CapReads sets the read caps of the device majMin ("MAJ:MIN") in the
// blk-throttle cgroup dir that ThrottleCgroup made: iops requests and bps
// bytes a second (0: that one uncapped), through cgroup v1's
// blkio.throttle.read_{iops,bps}_device or v2's io.max, whichever dir
// has. It takes effect for the requests its processes issue from then on.
func CapReads(t testing.TB, dir, majMin string, iops, bps int) {
	t.Helper()
	files := map[string]string{
		"blkio.throttle.read_iops_device": fmt.Sprintf("%s %d", majMin, iops),
		"blkio.throttle.read_bps_device":  fmt.Sprintf("%s %d", majMin, bps),
	}
	if !fileExists(filepath.Join(dir, "blkio.throttle.read_iops_device")) {
		v2cap := func(n int) string {
			if n == 0 {
				return "max"
			}
			return strconv.Itoa(n)
		}
		files = map[string]string{"io.max": fmt.Sprintf("%s riops=%s rbps=%s", majMin, v2cap(iops), v2cap(bps))}
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
