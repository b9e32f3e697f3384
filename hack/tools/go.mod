// Tools the Makefile runs with `go tool -modfile=hack/tools/go.mod` (gotestsum
// for make test's summary; helm-values-schema-json for the chart), pinned
// here and not in the project's go.mod. helm-values-schema-json cannot be run
// as `go run ...@version` on a machine whose module proxy refuses its version
// list: the go command reads the list to check the module for deprecation.
module github.com/shadowtune/shadowtune/hack/tools

go 1.26.0

tool (
	github.com/losisin/helm-values-schema-json
	gotest.tools/gotestsum
)

require (
	github.com/bitfield/gotestdox v0.2.2 // indirect
	github.com/dnephin/pflag v1.0.7 // indirect
	github.com/fatih/color v1.18.0 // indirect
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/google/shlex v0.0.0-20191202100458-e7afc7fbc510 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/losisin/helm-values-schema-json v1.9.2 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/mod v0.27.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
	golang.org/x/sys v0.36.0 // indirect
	golang.org/x/term v0.35.0 // indirect
	golang.org/x/text v0.17.0 // indirect
	golang.org/x/tools v0.36.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	gotest.tools/gotestsum v1.13.0 // indirect
)
