package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// maxErrLine is the longest error line Main prints, newline included.
const maxErrLine = len("shadowtune: error: ") + MaxErrorBytes + 1

// TestRunRefusesUnboundedConfig: `run --config` with a file too large, a
// named pipe, /dev/zero, a directory or a 100 MB metadata.name is refused
// at once with a short one-line error naming the file, exit status 2.
func TestRunRefusesUnboundedConfig(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "policy.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	bigContent := policy("  mode: Observe\n") + strings.Repeat("# padding\n", 200_000)
	big := writeFile(t, "big.yaml", bigContent)
	hugeName := writeFile(t, "huge-name.yaml", strings.Replace(policy("  mode: Observe\n"), "name: test", "name: "+strings.Repeat("n", 100<<20), 1))
	// Under the size limit, but the name is refused by validation, which
	// quotes it: the printed line is cut.
	longName := writeFile(t, "long-name.yaml", strings.Replace(policy("  mode: Observe\n"), "name: test", "name: "+strings.Repeat("n", 900<<10), 1))
	host := fakeHost(t)
	cases := []struct {
		name, config, want string
	}{
		{"too large", big, big + ": file too large: " + strconv.Itoa(len(bigContent)) + " bytes, the limit is 1048576 (1 MiB)"},
		{"named pipe", fifo, fifo + ": not a regular file (a named pipe): want a YAML file"},
		{"/dev/zero", "/dev/zero", "/dev/zero: not a regular file (a character device): want a YAML file"},
		{"directory", dir, dir + ": not a regular file (a directory): want a YAML file"},
		{"100 MB metadata.name", hugeName, hugeName + ": file too large: "},
		{"900 KiB metadata.name", longName, longName + ": metadata.name: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			type result struct {
				out, errOut string
				code        int
			}
			done := make(chan result, 1)
			go func() {
				out, errOut, code := run(t, "run", "--config", c.config, "--host-root", host, "--state-dir", filepath.Join(t.TempDir(), "state"))
				done <- result{out, errOut, code}
			}()
			select {
			case r := <-done:
				checkOneLineError(t, r.out, r.errOut, r.code, ExitUsage, c.want)
				if len(r.errOut) > maxErrLine {
					t.Errorf("error line of %d bytes, want at most %d", len(r.errOut), maxErrLine)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("run --config %s blocked", c.config)
			}
		})
	}
}

func TestErrorLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"short", "short"},
		{" two\nlines\r\n", "two; lines"},
		{strings.Repeat("x", 100), strings.Repeat("x", 100)},
		{strings.Repeat("x", 101), strings.Repeat("x", 60) + "… (41 more bytes)"},
	} {
		if got := errorLine(c.in, 100); got != c.want {
			t.Errorf("errorLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// A cut never splits a UTF-8 sequence and never exceeds the limit.
	for n := 90; n < 110; n++ {
		got := errorLine(strings.Repeat("é", n), 100)
		if !utf8.ValidString(got) || len(got) > 100 {
			t.Errorf("%d runes: %q (%d bytes)", n, got, len(got))
		}
	}
}

// TestMaxRequests: a trace over --max-requests is refused with a one-line
// error naming the file and the limit (exit 2); at the limit the output is
// the same as without a limit.
func TestMaxRequests(t *testing.T) {
	for _, cmd := range [][]string{
		{"simulate", "-o", "json"},
		{"model", "eval", "-o", "json"},
		{"model", "learn"},
	} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			args := append(append([]string(nil), cmd...), "--trace", atlas, "--format", "disksim")
			out, errOut, code := run(t, append(args, "--max-requests", "9999")...)
			checkOneLineError(t, out, errOut, code, ExitUsage, "atlas10k.trace: more requests than the limit of 9999 (--max-requests")

			strip := func(s string) any {
				var d map[string]any
				if err := json.Unmarshal([]byte(s), &d); err != nil {
					t.Fatalf("%v: %s", err, s)
				}
				delete(d, "run") // timings
				return d
			}
			want, errOut, code := run(t, append(args, "--max-requests", "0")...)
			if code != 0 {
				t.Fatalf("no limit: exit %d: %s", code, errOut)
			}
			for _, limit := range []string{"10000", ""} {
				a := args
				if limit != "" {
					a = append(args, "--max-requests", limit)
				}
				got, errOut, code := run(t, a...)
				if code != 0 {
					t.Fatalf("limit %q: exit %d: %s", limit, code, errOut)
				}
				if !reflect.DeepEqual(strip(got), strip(want)) {
					t.Errorf("limit %q: output differs from the output without a limit", limit)
				}
			}
		})
	}
	out, errOut, code := run(t, "simulate", "--trace", atlas, "--format", "disksim", "--max-requests", "-1")
	checkOneLineError(t, out, errOut, code, ExitUsage, "--max-requests: must be ≥ 0, got -1")
}

func TestTraceConvertHead(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "head.trace")
	if _, errOut, code := run(t, "trace", "convert", "--from", "disksim", "--to", "disksim", "-i", atlas, "--out-file", dst, "--head", "100"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "\n"); n != 100 {
		t.Errorf("%d lines, want 100", n)
	}
	out, errOut, code := run(t, "trace", "convert", "--from", "disksim", "-i", atlas, "--head", "-3")
	checkOneLineError(t, out, errOut, code, ExitUsage, "--head: must be ≥ 0, got -3")
}

// TestSimulateParallelFitsTheBudget: by default simulate runs no more
// candidates at once than fit in memoryBudgetBytes, and at least one; an
// explicit --parallel is kept.
func TestSimulateParallelFitsTheBudget(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, n := range []int{1, 10_000, 269_007, defaultMaxSimulateRequests, 10 * defaultMaxSimulateRequests} {
		p := simulateParallel(0, n)
		if p < 1 || p > procs {
			t.Errorf("n=%d: %d at once, want 1…%d", n, p, procs)
		}
		if p > 1 && (simulateBaseBytes+p*simulateRunBytes)*n > memoryBudgetBytes {
			t.Errorf("n=%d: %d at once exceed the budget", n, p)
		}
	}
	if p := simulateParallel(0, 10_000); p != procs {
		t.Errorf("a small trace: %d at once, want GOMAXPROCS %d", p, procs)
	}
	if p := simulateParallel(7, 10*defaultMaxSimulateRequests); p != 7 {
		t.Errorf("--parallel 7: %d at once", p)
	}
}
