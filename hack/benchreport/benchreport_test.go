package benchreport

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// python3 returns the interpreter, or skips where there is none (CI has
// one: make test fails there if it is missing, since CI=true).
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is required: %v", err)
		}
		t.Skipf("python3 not found: %v", err)
	}
	return p
}

// TestGeneratedFiguresMatch: README.md's bench-decisions block, the runs'
// index and each run's report are what the generator makes from the
// records in docs/runs (a figure edited by hand, or a record added without
// regenerating, fails here).
func TestGeneratedFiguresMatch(t *testing.T) {
	py := python3(t)
	cmd := exec.Command(py, filepath.Join("..", "bench_decisions.py"), "readme", "--check")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 hack/bench_decisions.py readme --check: %v\n%s", err, out)
	}
}

// TestGeneratorUnitTests runs the generator's and the plan's unit tests.
func TestGeneratorUnitTests(t *testing.T) {
	py := python3(t)
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "benchdec", "-t", ".", "-p", "test_*.py")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest (hack/benchdec): %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
