package need

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// childEnv marks the test binary run by TestMissingFailsUnderCI as the
// child that calls Missing.
const childEnv = "SHADOWTUNE_NEED_TEST_CHILD"

// TestChildMissing is the child of TestMissingFailsUnderCI: a test whose
// part (fio, through $FIO) is missing.
func TestChildMissing(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("the child of TestMissingFailsUnderCI")
	}
	Tool(t, "fio", "a test of package need")
	t.Error("Tool returned for a missing program")
}

// TestMissingFailsUnderCI: a missing part skips the test, or fails it with
// a one-line reason when CI=true; either way the need log records it.
func TestMissingFailsUnderCI(t *testing.T) {
	for _, c := range []struct {
		ci, want string
	}{{"", "--- SKIP: TestChildMissing"}, {"false", "--- SKIP: TestChildMissing"}, {"true", "--- FAIL: TestChildMissing"}} {
		log := filepath.Join(t.TempDir(), "need.log")
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildMissing$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "CI="+c.ci, childEnv+"=1", "FIO=/nonexistent/fio", LogEnv+"="+log)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("CI=%q: want %q in\n%s", c.ci, c.want, out)
		}
		reason := "missing fio: FIO=/nonexistent/fio: "
		if !strings.Contains(string(out), reason) {
			t.Errorf("CI=%q: the reason %q is not in\n%s", c.ci, reason, out)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if want := "github.com/shadowtune/shadowtune/internal/testutil/need\tTestChildMissing\tfio\tmissing\n"; string(b) != want {
			t.Errorf("CI=%q: log %q, want %q", c.ci, b, want)
		}
	}
}

func TestToolEnv(t *testing.T) {
	for in, want := range map[string]string{"fio": "FIO", "mkfs.ext4": "MKFS_EXT4", "kube-apiserver": "KUBE_APISERVER"} {
		if got := ToolEnv(in); got != want {
			t.Errorf("ToolEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestToolFound: a program that is there is returned and recorded as had.
func TestToolFound(t *testing.T) {
	log := filepath.Join(t.TempDir(), "need.log")
	t.Setenv(LogEnv, log)
	t.Setenv("SH", "")
	os.Unsetenv("SH")
	if p := Tool(t, "sh", "any system has it"); filepath.Base(p) != "sh" {
		t.Errorf("Tool(sh) = %q", p)
	}
	b, _ := os.ReadFile(log)
	if want := "github.com/shadowtune/shadowtune/internal/testutil/need\tTestToolFound\tsh\thave\n"; string(b) != want {
		t.Errorf("log %q, want %q", b, want)
	}
}
