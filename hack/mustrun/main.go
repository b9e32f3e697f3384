// Command mustrun reads the event stream of `go test -json` (as gotestsum's
// --jsonfile writes it) and:
//
//   - prints every skipped test with its reason, one line each (the skip
//     summary of make test);
//   - checks the committed must-run list (hack/must-run.txt): every entry
//     must match at least one test that ran, and none that was skipped;
//   - with -need, checks that every test that asked package need for a
//     real part of the machine (root, loop devices, fio, ...) is on the
//     list, so the list cannot fall behind the tests.
//
// It exits 1 when a check fails and -strict is given (make test passes it
// under CI=true), and 2 on bad input (a one-line error naming file:line).
// Without -strict it reports the failed checks as warnings: on a
// developer's machine a test without its part skips.
//
// usage: go run ./hack/mustrun -list hack/must-run.txt -json go-test.json [-need need.log] [-strict]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// module is the import path prefix the list's package names are relative
// to.
const module = "github.com/shadowtune/shadowtune"

func main() {
	list := flag.String("list", "hack/must-run.txt", "the must-run list: lines `PACKAGE TEST-REGEXP`, # comments")
	events := flag.String("json", "", "the `go test -json` output (required)")
	needLog := flag.String("need", "", "package need's record of the tests that asked for a real part (SHADOWTUNE_NEED_LOG)")
	strict := flag.Bool("strict", false, "exit 1 when a check fails (CI)")
	flag.Parse()
	if *events == "" {
		fmt.Fprintln(os.Stderr, "mustrun: -json is required")
		os.Exit(2)
	}
	rep, err := run(*list, *events, *needLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mustrun:", err)
		os.Exit(2)
	}
	os.Stdout.WriteString(rep.String())
	if len(rep.Problems) > 0 && *strict {
		os.Exit(1)
	}
}

// run loads the three files and checks them.
func run(listPath, eventsPath, needPath string) (*Report, error) {
	entries, err := readList(listPath)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(eventsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	results, err := readEvents(f, eventsPath)
	if err != nil {
		return nil, err
	}
	var needs []Need
	if needPath != "" {
		if needs, err = readNeeds(needPath); err != nil {
			return nil, err
		}
	}
	return Check(entries, results, needs), nil
}

// Entry is one line of the must-run list.
type Entry struct {
	Where   string // file:line
	Package string // import path relative to the module ("agent/actuate"; "." for the root)
	Test    *regexp.Regexp
}

// readList parses the must-run list: `PACKAGE TEST-REGEXP` per line (the
// regexp is anchored: ^(...)$), blank lines and # comments ignored.
func readList(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for i, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d", path, i+1)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: want `PACKAGE TEST-REGEXP`, got %d fields", where, len(f))
		}
		re, err := regexp.Compile("^(?:" + f[1] + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, Entry{Where: where, Package: f[0], Test: re})
	}
	return out, nil
}

// Result is a top-level test's outcome: "pass", "fail" or "skip", with
// its output lines (the skip reason among them).
type Result struct {
	Package, Test, Action string
	Output                []string
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action, Package, Test, Output string
}

// readEvents collects the outcome of every top-level test (subtests are
// their parent's business).
func readEvents(r io.Reader, name string) (map[[2]string]*Result, error) {
	out := map[[2]string]*Result{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // a build error's text, say: go test reports those itself
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		k := [2]string{e.Package, e.Test}
		res := out[k]
		if res == nil {
			res = &Result{Package: e.Package, Test: e.Test}
			out[k] = res
		}
		switch e.Action {
		case "pass", "fail", "skip":
			res.Action = e.Action
		case "output":
			res.Output = append(res.Output, e.Output)
		}
	}
	return out, sc.Err()
}

// Need is one line of package need's record.
type Need struct{ Package, Test, Part, State string }

// readNeeds parses package need's record: package, test, part, have or
// missing, tab-separated.
func readNeeds(path string) ([]Need, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no test asked for a part
	}
	if err != nil {
		return nil, err
	}
	var out []Need
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 tab-separated fields, got %d", path, i+1, len(f))
		}
		out = append(out, Need{f[0], f[1], f[2], f[3]})
	}
	return out, nil
}

// Report is what Check found.
type Report struct {
	Skipped  []string // "pkg Test: reason", sorted
	Listed   int      // entries on the must-run list
	Ran      int      // tests on the list that ran (passed or failed)
	Problems []string // failed checks, one line each
}

// String is the report as make test prints it.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "skipped tests: %d\n", len(r.Skipped))
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "  SKIP %s\n", s)
	}
	fmt.Fprintf(&b, "must-run list: %d entries, %d tests ran, %d problems\n", r.Listed, r.Ran, len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  MUST-RUN %s\n", p)
	}
	return b.String()
}

// Check checks the results against the list and package need's record.
func Check(entries []Entry, results map[[2]string]*Result, needs []Need) *Report {
	rep := &Report{Listed: len(entries)}
	for _, res := range results {
		if res.Action == "skip" {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s %s: %s", rel(res.Package), res.Test, skipReason(res)))
		}
	}
	slices.Sort(rep.Skipped)
	for _, e := range entries {
		matched := 0
		for _, res := range results {
			if rel(res.Package) != e.Package || !e.Test.MatchString(res.Test) || res.Action == "" {
				continue
			}
			matched++
			if res.Action == "skip" {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s %s was skipped: %s", e.Where, e.Package, res.Test, skipReason(res)))
			} else {
				rep.Ran++
			}
		}
		if matched == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s %s: no such test ran", e.Where, e.Package, e.Test.String()))
		}
	}
	rep.Problems = append(rep.Problems, unlisted(entries, results, needs)...)
	return rep
}

// unlisted returns a problem for every test that asked for a real part and
// is not on the list. A test that skipped for a reason of its own (a
// helper process's test, run again as a child that asked for the part)
// is not one: only tests that ran, or skipped for a missing part, count.
func unlisted(entries []Entry, results map[[2]string]*Result, needs []Need) []string {
	var out []string
	seen := map[[2]string]bool{}
	for _, n := range needs {
		k := [2]string{n.Package, n.Test}
		if seen[k] {
			continue
		}
		seen[k] = true
		if res := results[k]; res != nil && res.Action == "skip" && !strings.HasPrefix(skipReason(res), "missing ") {
			continue
		}
		if !slices.ContainsFunc(entries, func(e Entry) bool { return e.Package == rel(n.Package) && e.Test.MatchString(n.Test) }) {
			out = append(out, fmt.Sprintf("%s %s needs %s but is not on the must-run list: add it", rel(n.Package), n.Test, n.Part))
		}
	}
	slices.Sort(out)
	return out
}

// rel is an import path relative to the module.
func rel(pkg string) string {
	if pkg == module {
		return "."
	}
	return strings.TrimPrefix(pkg, module+"/")
}

// logLine is a t.Log line of go test's output: "    file_test.go:42: msg".
var logLine = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: (.*)$`)

// skipReason is the message of a skipped test: the last t.Log line of its
// output (t.Skip's), without the file:line prefix; else its last line
// other than go test's own "=== RUN"/"--- SKIP" lines.
func skipReason(res *Result) string {
	last := ""
	for i := len(res.Output) - 1; i >= 0; i-- {
		if m := logLine.FindStringSubmatch(strings.TrimRight(res.Output[i], "\n")); m != nil {
			return m[1]
		}
		l := strings.TrimSpace(res.Output[i])
		if last == "" && l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
			last = l
		}
	}
	if last == "" {
		return "(no reason given)"
	}
	return last
}
