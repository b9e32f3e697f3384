// Tools the Makefile runs with `go tool -modfile=hack/tools/go.mod`, pinned
// here and not in the project's go.mod. helm-values-schema-json cannot be run
// as `go run ...@version` on a machine whose module proxy refuses its version
// list: the go command reads the list to check the module for deprecation.
module github.com/shadowtune/shadowtune/hack/tools

go 1.26.0

tool github.com/losisin/helm-values-schema-json

require (
	github.com/kr/pretty v0.3.1 // indirect
	github.com/losisin/helm-values-schema-json v1.9.2 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
