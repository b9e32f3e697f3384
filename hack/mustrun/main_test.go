package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLive"}
{"Action":"output","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLive","Output":"=== RUN   TestLive\n"}
{"Action":"output","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLive","Output":"    live_test.go:12: missing fio: fio not found in $PATH (hint)\n"}
{"Action":"output","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLive","Output":"--- SKIP: TestLive (0.00s)\n"}
{"Action":"skip","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLive"}
{"Action":"run","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLoop"}
{"Action":"run","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLoop/sub"}
{"Action":"skip","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLoop/sub"}
{"Action":"pass","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestLoop"}
{"Action":"output","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestChild","Output":"    x_test.go:3: workload child of TestLoop\n"}
{"Action":"skip","Package":"github.com/shadowtune/shadowtune/agent","Test":"TestChild"}
{"Action":"pass","Package":"github.com/shadowtune/shadowtune","Test":"TestRoot"}
`

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheck: a listed test that skipped, a listed pattern that matched no
// test, and a test that asked for a part but is not listed are each a
// problem; a helper's skip is in the skip summary only.
func TestCheck(t *testing.T) {
	list := write(t, "must-run.txt", "# comment\nagent TestLive\nagent TestLoo.* # trailing comment\n. TestRoot\nagent/tracer TestGone\n")
	events := write(t, "go-test.json", stream)
	needs := write(t, "need.log", "github.com/shadowtune/shadowtune/agent\tTestLive\tfio\tmissing\n"+
		"github.com/shadowtune/shadowtune/agent\tTestLoop\troot\thave\n"+
		"github.com/shadowtune/shadowtune/agent\tTestChild\troot\thave\n"+
		"github.com/shadowtune/shadowtune/cmd\tTestUnlisted\tloop devices\thave\n")
	rep, err := run(list, events, needs)
	if err != nil {
		t.Fatal(err)
	}
	got := rep.String()
	for _, want := range []string{
		"skipped tests: 2\n",
		"  SKIP agent TestChild: workload child of TestLoop\n",
		"  SKIP agent TestLive: missing fio: fio not found in $PATH (hint)\n",
		"must-run list: 4 entries, 2 tests ran, 3 problems\n",
		"must-run.txt:2: agent TestLive was skipped: missing fio: fio not found in $PATH (hint)\n",
		"must-run.txt:5: agent/tracer ^(?:TestGone)$: no such test ran\n",
		"  MUST-RUN cmd TestUnlisted needs loop devices but is not on the must-run list: add it\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// TestBadList: a malformed list is a one-line error naming file:line.
func TestBadList(t *testing.T) {
	for content, want := range map[string]string{
		"agent\n":             "must-run.txt:1: want `PACKAGE TEST-REGEXP`, got 1 fields",
		"\nagent Test(\n":     "must-run.txt:2: error parsing regexp",
		"agent TestA extra\n": "must-run.txt:1: want `PACKAGE TEST-REGEXP`, got 3 fields",
	} {
		_, err := run(write(t, "must-run.txt", content), write(t, "e.json", ""), "")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", content, err, want)
		}
	}
}
