// Package archtest checks the import rules of the module with `go list`:
//
//   - no package under operator/ (its tests included) depends on a package
//     under agent/: the operator reads what the agents write through the
//     API (api/v1alpha1), never their code;
//   - only cmd/shadowtune (package main) imports the command line,
//     cmd/shadowtune/app (its own tests aside);
//   - the node agent (package agent, not its tests) reaches the simulator
//     only through internal/engine: it imports none of internal/sim,
//     internal/sched, internal/redcap and internal/readahead (the disk
//     model it learns online, internal/model, is its own); nor does its
//     device controller, agent/window;
//   - the agent's layers below its root package, agent/window (one
//     device's controller), agent/readahead (the read-ahead road),
//     agent/host (the agent's footprint and host facts), agent/pagecache
//     (the page-cache probe's counts per device), agent/explain (the
//     windows kept for replay), agent/sentinel (changed kernel defaults),
//     agent/selection (which policy governs each device, and its claim),
//     agent/sampling (sampled tracing), agent/otherwriter (other writers of
//     the governed settings) and agent/schedcost (the schedulers' dispatch
//     costs), their tests included, do not depend on the root package
//     agent, which uses them;
//   - the device controller (agent/window, not its tests) does no I/O: it
//     imports none of the packages that reach files, processes, the
//     network or the devices (noIO).
//
// The rules are checked on every package of the module, test packages and
// the e2e build tag included.
package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shadowtune/shadowtune"

const (
	operatorTree = module + "/operator"
	agentTree    = module + "/agent"
	mainPkg      = module + "/cmd/shadowtune"
	appPkg       = module + "/cmd/shadowtune/app"
	agentPkg     = module + "/agent"
	windowPkg    = module + "/agent/window"
	readaheadPkg = module + "/agent/readahead"
	hostPkg      = module + "/agent/host"
	pagecachePkg = module + "/agent/pagecache"
	explainPkg   = module + "/agent/explain"
	sentinelPkg  = module + "/agent/sentinel"
	selectionPkg = module + "/agent/selection"
	samplingPkg  = module + "/agent/sampling"
	otherPkg     = module + "/agent/otherwriter"
	schedcostPkg = module + "/agent/schedcost"
)

// belowAgent are the agent's layers below its root package, which must
// not depend on it.
var belowAgent = []string{
	windowPkg, readaheadPkg, hostPkg, pagecachePkg, explainPkg, sentinelPkg, selectionPkg, samplingPkg, otherPkg, schedcostPkg,
}

// noIO are the packages through which code reaches files, processes, the
// network or the devices; the device controller imports none of them.
var noIO = []string{
	"os", "os/exec", "os/signal", "syscall", "net", "net/http", "io/ioutil", "io/fs", "golang.org/x/sys/unix",
	module + "/agent/sysfs", module + "/agent/actuate", module + "/agent/tracer", module + "/internal/fsutil",
}

// behindEngine are the simulator's packages, which the agent reaches only
// through internal/engine.
var behindEngine = []string{
	module + "/internal/sim", module + "/internal/sched", module + "/internal/redcap", module + "/internal/readahead",
}

// pkg is one package as go list reports it. Paths are ImportPaths: a test
// variant's is "m/x [m/x.test]", an external test package's
// "m/x_test [m/x.test]", a test main's "m/x.test".
type pkg struct {
	path    string
	imports []string // direct imports
	deps    []string // transitive dependencies
}

// plain is the package path of an ImportPath, without the variant suffix:
// "m/x [m/x.test]" is "m/x".
func plain(path string) string {
	p, _, _ := strings.Cut(path, " ")
	return p
}

// base is the package a (test) package belongs to: "m/x [m/x.test]",
// "m/x_test [m/x.test]" and "m/x.test" are all "m/x".
func base(path string) string {
	path = plain(path)
	if p, ok := strings.CutSuffix(path, ".test"); ok {
		return p
	}
	if p, ok := strings.CutSuffix(path, "_test"); ok {
		return p
	}
	return path
}

func under(path, tree string) bool {
	return path == tree || strings.HasPrefix(path, tree+"/")
}

// violations returns one line per broken rule, sorted: which package, and
// the import chain to the forbidden package (through all, every package
// listed, by ImportPath).
func violations(pkgs []pkg) []string {
	all := map[string]pkg{}
	for _, p := range pkgs {
		all[p.path] = p
	}
	var out []string
	for _, p := range pkgs {
		if strings.HasSuffix(p.path, ".test") {
			continue // a test main: it only adds the test packages, listed too
		}
		b := base(p.path)
		if under(b, operatorTree) {
			for _, d := range p.deps {
				if under(plain(d), agentTree) {
					out = append(out, fmt.Sprintf("%s depends on %s (%s): the operator must not depend on the agent",
						p.path, d, strings.Join(chain(all, p, d), " -> ")))
				}
			}
		}
		if b != mainPkg && b != appPkg && slices.ContainsFunc(p.imports, func(i string) bool { return plain(i) == appPkg }) {
			out = append(out, fmt.Sprintf("%s imports %s: only %s may", p.path, appPkg, mainPkg))
		}
		out = append(out, agentViolations(all, p)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// agentViolations are the agent's rules broken by package p (all: every
// package listed, by ImportPath): the simulator reached past
// internal/engine, a layer below the root package depending on it, and
// the device controller's I/O.
func agentViolations(all map[string]pkg, p pkg) []string {
	var out []string
	if p.path == agentPkg || p.path == windowPkg {
		for _, i := range p.imports {
			if slices.Contains(behindEngine, plain(i)) {
				out = append(out, fmt.Sprintf("%s imports %s: the agent reaches the simulator through internal/engine only", p.path, i))
			}
		}
	}
	if slices.Contains(belowAgent, base(p.path)) {
		for _, d := range p.deps {
			if plain(d) == agentPkg {
				out = append(out, fmt.Sprintf("%s depends on %s (%s): a layer below the agent's root package must not depend on it",
					p.path, d, strings.Join(chain(all, p, d), " -> ")))
			}
		}
	}
	if p.path == windowPkg {
		for _, i := range p.imports {
			if slices.Contains(noIO, plain(i)) {
				out = append(out, fmt.Sprintf("%s imports %s: the device controller does no I/O", p.path, i))
			}
		}
	}
	return out
}

// chain returns a shortest import chain from p to dep through all (by
// ImportPath), or just the two ends when none is found.
func chain(all map[string]pkg, p pkg, dep string) []string {
	prev := map[string]string{}
	queue := []string{p.path}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range all[cur].imports {
			if _, seen := prev[imp]; seen || imp == p.path {
				continue
			}
			prev[imp] = cur
			if imp == dep {
				path := []string{dep}
				for at := dep; at != p.path; {
					at = prev[at]
					path = append(path, at)
				}
				slices.Reverse(path)
				return path
			}
			queue = append(queue, imp)
		}
	}
	return []string{p.path, dep}
}

// split splits a space-separated list of ImportPaths, keeping each
// variant suffix (" [m/x.test]") with its path.
func split(paths string) []string {
	var out []string
	for _, f := range strings.Fields(paths) {
		if strings.HasPrefix(f, "[") && len(out) > 0 {
			out[len(out)-1] += " " + f
			continue
		}
		out = append(out, f)
	}
	return out
}

// list runs go list on the whole module from its root, test packages and
// the e2e tag included.
func list(t *testing.T) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-test", "-tags", "e2e",
		"-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		pkgs = append(pkgs, pkg{path: f[0], imports: split(f[1]), deps: split(f[2])})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("go list output: %v", err)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	pkgs := list(t)
	// The rules are not vacuous: the packages they are about are listed.
	for _, want := range append([]string{mainPkg, appPkg, operatorTree + "/controller", operatorTree + "/rollout", agentTree + "/cluster"}, belowAgent...) {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.path == want }) {
			t.Errorf("go list did not list %s", want)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestViolations checks the checker on made-up packages.
func TestViolations(t *testing.T) {
	const (
		ctrl   = operatorTree + "/controller"
		roll   = operatorTree + "/rollout"
		clus   = agentTree + "/cluster"
		api    = module + "/api/v1alpha1"
		engine = module + "/internal/engine"
	)
	for _, c := range []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{"clean", []pkg{
			{path: mainPkg, imports: []string{appPkg}, deps: []string{appPkg, ctrl, clus, api}},
			{path: appPkg, imports: []string{ctrl, clus}, deps: []string{ctrl, clus, api}},
			{path: appPkg + " [" + appPkg + ".test]", imports: []string{ctrl, clus}, deps: []string{ctrl, clus, api}},
			{path: appPkg + ".test", imports: []string{appPkg}, deps: []string{appPkg, ctrl, clus, api}},
			{path: ctrl, imports: []string{roll, api}, deps: []string{roll, api}},
			{path: roll, imports: []string{api}, deps: []string{api}},
			{path: clus, imports: []string{api}, deps: []string{api}},
			{path: agentTree + "x/y", imports: nil, deps: nil},
			{path: operatorTree + "x", imports: []string{clus}, deps: []string{clus, api}},
		}, nil},
		{"operator through a dependency", []pkg{
			{path: ctrl, imports: []string{roll}, deps: []string{roll, engine, clus, api}},
			{path: roll, imports: []string{engine}, deps: []string{engine, clus, api}},
			{path: engine, imports: []string{clus}, deps: []string{clus, api}},
			{path: clus, imports: []string{api}, deps: []string{api}},
		}, []string{
			ctrl + " depends on " + clus + " (" + ctrl + " -> " + roll + " -> " + engine + " -> " + clus + "): the operator must not depend on the agent",
			roll + " depends on " + clus + " (" + roll + " -> " + engine + " -> " + clus + "): the operator must not depend on the agent",
		}},
		{"operator test", []pkg{
			{path: ctrl + "_test [" + ctrl + ".test]", imports: []string{agentTree}, deps: []string{agentTree}},
		}, []string{
			ctrl + "_test [" + ctrl + ".test] depends on " + agentTree + " (" + ctrl + "_test [" + ctrl + ".test] -> " + agentTree + "): the operator must not depend on the agent",
		}},
		{"app imported", []pkg{
			{path: clus, imports: []string{appPkg}, deps: []string{appPkg}},
			{path: module + "/e2e [" + module + "/e2e.test]", imports: []string{appPkg}, deps: []string{appPkg}},
			{path: module + "/cmd/shadowtune/app/sub", imports: []string{appPkg}, deps: []string{appPkg}},
		}, []string{
			clus + " imports " + appPkg + ": only " + mainPkg + " may",
			module + "/cmd/shadowtune/app/sub imports " + appPkg + ": only " + mainPkg + " may",
			module + "/e2e [" + module + "/e2e.test] imports " + appPkg + ": only " + mainPkg + " may",
		}},
		{"agent past the engine", []pkg{
			{path: agentPkg, imports: []string{engine, module + "/internal/model", module + "/internal/sim"}},
			{path: agentPkg + " [" + agentPkg + ".test]", imports: []string{engine, module + "/internal/sched"}},
			{path: clus, imports: []string{module + "/internal/redcap"}},
		}, []string{
			agentPkg + " imports " + module + "/internal/sim: the agent reaches the simulator through internal/engine only",
		}},
		{"controller past the engine", []pkg{
			{path: windowPkg, imports: []string{engine, module + "/internal/sim"}},
			{path: windowPkg + " [" + windowPkg + ".test]", imports: []string{engine, module + "/internal/sim"}},
		}, []string{
			windowPkg + " imports " + module + "/internal/sim: the agent reaches the simulator through internal/engine only",
		}},
		{"layers below the agent", []pkg{
			{path: windowPkg, imports: []string{readaheadPkg}, deps: []string{readaheadPkg, agentPkg}},
			{path: readaheadPkg, imports: []string{agentPkg}, deps: []string{agentPkg}},
			{path: windowPkg + "_test [" + windowPkg + ".test]", imports: []string{agentPkg}, deps: []string{agentPkg}},
			{path: agentPkg, imports: []string{windowPkg}, deps: []string{windowPkg, readaheadPkg}},
			{path: clus, imports: []string{agentPkg}, deps: []string{agentPkg, windowPkg}},
		}, []string{
			readaheadPkg + " depends on " + agentPkg + " (" + readaheadPkg + " -> " + agentPkg + "): a layer below the agent's root package must not depend on it",
			windowPkg + " depends on " + agentPkg + " (" + windowPkg + " -> " + readaheadPkg + " -> " + agentPkg + "): a layer below the agent's root package must not depend on it",
			windowPkg + "_test [" + windowPkg + ".test] depends on " + agentPkg + " (" + windowPkg + "_test [" + windowPkg + ".test] -> " + agentPkg + "): a layer below the agent's root package must not depend on it",
		}},
		{"controller I/O", []pkg{
			{path: windowPkg, imports: []string{"os", "fmt", module + "/agent/sysfs"}},
			{path: windowPkg + " [" + windowPkg + ".test]", imports: []string{"os", "os/exec"}},
			{path: agentPkg, imports: []string{"os", "os/exec"}},
		}, []string{
			windowPkg + " imports " + module + "/agent/sysfs: the device controller does no I/O",
			windowPkg + " imports os: the device controller does no I/O",
		}},
		{"host above the agent", []pkg{
			{path: agentPkg, imports: []string{hostPkg}, deps: []string{hostPkg, api}},
			{path: hostPkg, imports: []string{module + "/internal/statefs"}, deps: []string{module + "/internal/statefs"}},
			{path: hostPkg + "_test [" + hostPkg + ".test]", imports: []string{clus}, deps: []string{clus, agentPkg, hostPkg}},
			{path: clus, imports: []string{agentPkg}, deps: []string{agentPkg, hostPkg}},
		}, []string{
			hostPkg + "_test [" + hostPkg + ".test] depends on " + agentPkg + " (" + hostPkg + "_test [" + hostPkg + ".test] -> " + clus + " -> " + agentPkg + "): a layer below the agent's root package must not depend on it",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := violations(c.pkgs)
			if !slices.Equal(got, c.want) {
				t.Errorf("violations:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
