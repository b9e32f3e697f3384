# shadowtune — build, test and benchmark targets (kubebuilder-style names).
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO        ?= go
BIN       ?= $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/shadowtune/shadowtune/internal/version.Version=$(VERSION) \
             -X github.com/shadowtune/shadowtune/internal/version.Commit=$(COMMIT)

GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN        ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
GOLANGCI_LINT         := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM_VERSION          ?= v3.22.0
HELM                  := $(BIN)/helm-$(HELM_VERSION)
HELM_DOCS             ?= $(GO) run github.com/norwoodj/helm-docs/cmd/helm-docs@v1.14.2
# helm-values-schema-json v1.9.2, pinned in hack/tools/go.mod (`go run ...@v1.9.2`
# fails where the module proxy refuses the module's version list).
HELM_SCHEMA           ?= $(GO) tool -modfile=$(CURDIR)/hack/tools/go.mod helm-values-schema-json
CHART                 := charts/shadowtune

# Benchmark knobs: `make bench BENCH_COUNT=10`, `make bench-agent BENCH_PAIRS=9`,
# `make bench-agent-parts BENCH_ROUNDS=16`, `make bench-memory BENCH_LINES=4000000`,
# `make bench-decisions` (the plan's repetitions; BENCH_REPS=5 overrides, BENCH_QUICK=1 a smoke run).
BENCH_COUNT ?= 5
BENCH_RUNS  ?= 5
BENCH_PAIRS ?= 5
BENCH_ROUNDS ?= 10
BENCH_LINES ?= 40000000

.PHONY: all
all: build

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development
.PHONY: fmt
fmt: ## Run gofmt on the tree.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) chart-lint ## Run golangci-lint (installs it into bin/ first) and chart-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: test
# Packages one at a time (-p 1): the live tests measure time (loop devices
# under fio with the agent's model error judged per window; the operator
# against a real API server with 1,000 simulated agents, each node's change
# to show within 5 s), and two such packages side by side on a 2-core
# machine measured each other: in one make test the operator's worst status
# lag was 6.1 s (p50 2.8 s) and the agent's 70/30 mix varied 22-41 % from
# group to group.
#
# gotestsum (pinned in hack/tools/go.mod) runs go test -json and prints a
# line per package and the output of failed tests; the whole event stream
# is kept in $(TEST_LOG)/go-test.json (JUnit XML beside it) for a CI
# reader. hack/mustrun then prints every skipped test with its reason and
# checks the must-run list, hack/must-run.txt: the tests that need a real
# part of the machine (root, loop devices, fio, cgroups, mkfs, a
# scheduler, a kernel feature), which must have run and not skipped.
# Under CI=true a failed check fails make test, as does a missing part in
# hack/ensure-test-deps.sh and in the tests (internal/testutil/need).
TEST_LOG  ?= $(BIN)/test-log
GOTESTSUM ?= $(GO) tool -modfile=$(CURDIR)/hack/tools/go.mod gotestsum
test: vet $(HELM) ## Run vet and all unit and integration tests (fuzz seed corpora included); skip summary, must-run check and logs in bin/test-log/.
	hack/ensure-test-deps.sh
	@mkdir -p $(TEST_LOG) && rm -f $(TEST_LOG)/need.log
	@set +e; start=$$(date +%s); \
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/k8s-bins.sh --print-dir 2>/dev/null)}" \
	SHADOWTUNE_NEED_LOG=$(TEST_LOG)/need.log \
		$(GOTESTSUM) --format pkgname-and-test-fails --hide-summary=skipped \
		--jsonfile $(TEST_LOG)/go-test.json --junitfile $(TEST_LOG)/junit.xml -- -p 1 -count=1 ./...; \
	rc=$$?; \
	$(GO) run ./hack/mustrun -list hack/must-run.txt -json $(TEST_LOG)/go-test.json -need $(TEST_LOG)/need.log \
		$$(case "$${CI:-}" in 1|t|T|true|TRUE|True) echo -strict;; esac) | tee $(TEST_LOG)/skipped.txt; \
	mrc=$${PIPESTATUS[0]}; \
	echo "make test: $$(( $$(date +%s) - start )) s in go test (exit $$rc; must-run check exit $$mrc); logs in $(TEST_LOG)/"; \
	[ $$rc = 0 ] && [ $$mrc = 0 ]

.PHONY: test-vm
test-vm: build ## The VM lab (root): Debian's kernel in QEMU (hack/ensure-vm-deps.sh installs it): boot, dm-cache, trace record on 6.1; bin/vm-artifacts/summary.json.
	hack/ensure-vm-deps.sh
	@set +e; start=$$(date +%s); mkdir -p $(BIN)/vm-artifacts; \
	SHADOWTUNE_BINARY=$(BIN)/shadowtune SHADOWTUNE_VM_ARTIFACTS=$(BIN)/vm-artifacts \
		$(GO) test -tags vm -count=1 -v -timeout 30m ./e2e/vm/ 2>&1 | tee $(BIN)/vm-artifacts/go-test.log; \
	rc=$${PIPESTATUS[0]}; [ $$rc = 0 ] || hack/failed-digest.sh $(BIN)/vm-artifacts/go-test.log; \
	echo "make test-vm: $$(( $$(date +%s) - start )) s in the VM tests (exit $$rc)"; exit $$rc

.PHONY: scale
scale: ## Operator scale test on a real API server: 1,000 simulated agents (SHADOWTUNE_SCALE_NODES, _PERIOD, _DURATION), figures printed.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/k8s-bins.sh --print-dir)}" $(GO) test -count=1 -run '^TestScale$$' -v ./operator/controller/ | grep -v '^{'

.PHONY: e2e
e2e: $(HELM) ## End to end on real clusters built here (root): TestEndToEnd on a new single-node e2e/cluster, then TestRolloutMultiNode on a new three-node one (SHADOWTUNE_E2E_NODES=3); each part's time printed, down after each (logs kept).
	e2e/cluster down --purge # every run on a new cluster: no objects or events of an earlier run
	t0=$$(date +%s); e2e/cluster up && e2e/cluster load || { e2e/cluster down; exit 1; }; \
	set +e; HELM=$(HELM) $(GO) test -tags e2e -count=1 -v -timeout 45m -run '^TestEndToEnd$$' ./e2e/ 2>&1 | grep -v '^{'; rc=$${PIPESTATUS[0]}; \
	e2e/cluster down; echo "e2e: single-node part $$(( $$(date +%s) - t0 )) s, exit $$rc"; exit $$rc # +e: down after a failure too
	t0=$$(date +%s); SHADOWTUNE_E2E_NODES=3 e2e/cluster up || { e2e/cluster down; exit 1; }; \
	set +e; HELM=$(HELM) SHADOWTUNE_E2E_ARTIFACTS=$(BIN)/e2e-artifacts/multinode $(GO) test -tags e2e -count=1 -v -timeout 45m -run '^TestRolloutMultiNode$$' ./e2e/ 2>&1 | grep -v '^{'; rc=$${PIPESTATUS[0]}; \
	e2e/cluster down; echo "e2e: three-node part $$(( $$(date +%s) - t0 )) s, exit $$rc"; exit $$rc

.PHONY: envtest-assets
envtest-assets: ## kube-apiserver + etcd for envtest in ~/.cache/shadowtune (hack/k8s-bins.sh; K8S_BINS="kubelet ..." adds more).
	hack/k8s-bins.sh $(K8S_BINS)

.PHONY: fuzz
fuzz: ## Fuzz every trace reader for FUZZTIME each (default 30s).
	@for f in $$($(GO) test -list '^Fuzz' ./internal/trace | grep '^Fuzz'); do \
		echo "== $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} ./internal/trace; done

.PHONY: bench
bench: build ## Simulator benchmarks: Go benchmarks plus whole-process runs on linux-webserver-2.
	$(GO) test -run='^$$' -bench=. -benchmem -count=$(BENCH_COUNT) ./internal/sim/ | tee $(BIN)/bench-go.txt
	hack/bench-process.sh $(BIN)/shadowtune $(BENCH_RUNS) | tee $(BIN)/bench-process.txt

.PHONY: bench-memory
bench-memory: build ## Peak RSS and wall time of simulate / model eval / model learn on generated DiskSim traces (40 M requests and at the --max-requests defaults; traces in /tmp).
	hack/bench-memory.sh $(BIN)/shadowtune $(BENCH_LINES) | tee $(BIN)/bench-memory.txt

.PHONY: bench-agent-memory
bench-agent-memory: build ## Peak memory of `shadowtune run` with the example's heavy policy under a high-IOPS load, per memory limit (root; LIMITS="max 256M 160M").
	hack/bench-agent-memory.sh $(BIN)/shadowtune | tee $(BIN)/bench-agent-memory.txt

.PHONY: bench-agent
bench-agent: build ## Agent overhead (root): fio IOPS on a new loop device without/with shadowtune run, BENCH_PAIRS pairs; report in bin/bench-agent.txt, per-pair ratios drawn in bin/bench-agent.svg.
	hack/bench-agent.sh $(BIN)/shadowtune $(BENCH_PAIRS) | tee $(BIN)/bench-agent.txt

.PHONY: bench-agent-parts
bench-agent-parts: build ## Where the agent's IOPS cost comes from (root): fio alone / BPF rejecting every event / tracing only / the agent, BENCH_ROUNDS rounds.
	hack/bench-agent-parts.sh $(BIN)/shadowtune $(BENCH_ROUNDS) | tee $(BIN)/bench-agent-parts.txt

.PHONY: bench-decisions
bench-decisions: build ## Decision quality (root): the agent as shipped vs every static setting on RocksDB, PostgreSQL, rg and a backup in memory-limited pods on a throttled loop device (BENCH_PLAN, BENCH_REPS; BENCH_QUICK=1: a smoke run); record and report in docs/runs/.
	@mkdir -p $(BIN)
	hack/bench-decisions.sh $(BIN)/shadowtune $(BENCH_REPS) | tee $(BIN)/bench-decisions.txt

.PHONY: bench-counterfactual
bench-counterfactual: build ## Counterfactual accuracy (root): each scheduler's measured time against what the agent in Observe mode predicted for it, per workload, on the uncapped loop device (hack/bench-plans/counterfactual.json; BENCH_REPS); record, table and SVG in docs/runs/.
	@mkdir -p $(BIN)
	BENCH_PLAN=hack/bench-plans/counterfactual.json hack/bench-decisions.sh $(BIN)/shadowtune $(BENCH_REPS) | tee $(BIN)/bench-counterfactual.txt

.PHONY: generate
generate: ## Regenerate deepcopy code from api/ (controller-gen), and the CEL rules on TunableRange from the knob table (api/knob).
	go run ./hack/knobgen api/v1alpha1/storagetuning_types.go
	$(CONTROLLER_GEN) object paths=./api/...

RBAC_DIR := $(CHART)/files/rbac

.PHONY: manifests
manifests: ## Regenerate the CRDs in crds/ from api/ (and the chart's templates/crds/ from them), and the agent's and operator's ClusterRole rules in $(RBAC_DIR) from their +kubebuilder:rbac markers (controller-gen).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=crds
	hack/chart-crds.sh crds $(CHART)/templates/crds
	$(CONTROLLER_GEN) rbac:roleName=shadowtune-agent,fileName=agent-role.yaml paths=./agent/... output:rbac:artifacts:config=$(RBAC_DIR)
	$(CONTROLLER_GEN) rbac:roleName=shadowtune-operator,fileName=operator-role.yaml paths=./operator/... output:rbac:artifacts:config=$(RBAC_DIR)

.PHONY: verify-generate
verify-generate: generate manifests ## Fail if generated files (deepcopy, CRDs, RBAC rules) differ from the committed ones.
	@test -z "$$(git status --porcelain -- api crds $(CHART)/templates/crds $(RBAC_DIR))" || { git status --porcelain -- api crds $(CHART)/templates/crds $(RBAC_DIR); echo "run: make generate manifests"; exit 1; }

.PHONY: chart-lint
chart-lint: $(HELM) ## Checks that the chart's generated files are current (CRDs, README, values.schema.json), then helm lint --strict and helm template: default values and a local test cluster's (ci/local-cluster-values.yaml).
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && hack/chart-crds.sh crds "$$tmp" && \
		diff -r "$$tmp" $(CHART)/templates/crds || { echo "$(CHART)/templates/crds differs from crds/: run make manifests"; exit 1; }
	$(HELM_DOCS) --chart-search-root $(CHART) --template-files README.md.gotmpl --dry-run | diff -q - $(CHART)/README.md >/dev/null || { echo "$(CHART)/README.md is not current: run make chart-docs"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(call chart-schema-gen,$$tmp/values.schema.json) && \
		{ diff -u $(CHART)/values.schema.json "$$tmp/values.schema.json" || { echo "$(CHART)/values.schema.json is not current: run make chart-schema"; exit 1; }; }
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --values $(CHART)/ci/local-cluster-values.yaml
	$(HELM) template shadowtune $(CHART) --namespace shadowtune-system >/dev/null
	$(HELM) template shadowtune $(CHART) --namespace shadowtune-system --values $(CHART)/ci/local-cluster-values.yaml >/dev/null

.PHONY: chart-docs
chart-docs: ## Regenerate the chart's README.md (values table from values.yaml's # -- comments) with helm-docs.
	$(HELM_DOCS) --chart-search-root $(CHART) --template-files README.md.gotmpl

# The chart's values.schema.json from values.yaml and its "# @schema" line
# comments, written to $(1). helm-values-schema-json exits 0 after an error
# (it prints "Error: ..." and writes nothing), so its success line is required
# as the last line of the output (go run's "go: downloading" lines come first
# on a cold module cache).
define chart-schema-gen
out=$$($(HELM_SCHEMA) -input $(CHART)/values.yaml -output $(1) -draft 7 -indent 2 \
	-schemaRoot.title "Values of the shadowtune chart" -schemaRoot.additionalProperties false 2>&1) && \
	[[ $$out == *"JSON schema successfully generated" ]] || { echo "$$out" >&2; echo "helm-values-schema-json failed" >&2; exit 1; }
endef

.PHONY: chart-schema
chart-schema: ## Regenerate the chart's values.schema.json from values.yaml's # @schema comments with helm-values-schema-json.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(call chart-schema-gen,$$tmp/values.schema.json) && \
		cat "$$tmp/values.schema.json" > $(CHART)/values.schema.json

.PHONY: helm
helm: $(HELM) ## Install the pinned helm (HELM_VERSION) into bin/; bin/helm links to it.

##@ Build
.PHONY: build
build: ## Build bin/shadowtune.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/shadowtune ./cmd/shadowtune

# The image without a container daemon (hack/imagebuild): bin/shadowtune as
# the Dockerfile's final stage has it, written as a docker-archive tarball.
IMAGE     ?= localhost/shadowtune:dev
IMAGE_TAR ?= $(BIN)/shadowtune-image.tar

.PHONY: image-tar
image-tar: build ## Image tarball of bin/shadowtune (docker-archive, IMAGE=localhost/shadowtune:dev) in IMAGE_TAR, no daemon needed.
	$(GO) run ./hack/imagebuild -binary $(BIN)/shadowtune -path /usr/local/bin/shadowtune -user 65532:65532 \
		-tag $(IMAGE) -o $(IMAGE_TAR) \
		-label org.opencontainers.image.title=shadowtune \
		-label "org.opencontainers.image.description=Tunes each node's block-storage stack by shadow simulation" \
		-label org.opencontainers.image.source=https://github.com/shadowtune/shadowtune \
		-label org.opencontainers.image.version=$(VERSION)

.PHONY: db-bench-image
# Debian's db_bench is linked dynamically: its libraries and loader, as ldd
# lists them, go in at the same paths. Its user is distroless' nonroot.
db-bench-image: ## Image tarball of RocksDB's db_bench (Debian's rocksdb-tools, installed when missing) with its libraries, bin/db-bench-image.tar (localhost/db-bench:dev): the README walkthrough's reader pod.
	@command -v db_bench >/dev/null || { echo "installing rocksdb-tools (db_bench)"; apt-get update -qq && apt-get install -y -qq --no-install-recommends rocksdb-tools >/dev/null; }
	$(GO) run ./hack/imagebuild -binary "$$(command -v db_bench)" -path /usr/bin/db_bench -user 65532:65532 -workdir / \
		-tag localhost/db-bench:dev -o $(BIN)/db-bench-image.tar \
		$$(ldd "$$(command -v db_bench)" | awk '$$2 == "=>" && $$3 ~ /^\// { print "-file", $$3 } $$1 ~ /^\// { print "-file", $$1 }')

.PHONY: e2e-cluster-up
e2e-cluster-up: ## Start the local Kubernetes cluster for e2e tests (root; e2e/cluster up; SHADOWTUNE_E2E_NODES=N for N kubelets).
	e2e/cluster up

.PHONY: e2e-cluster-down
e2e-cluster-down: ## Stop the local e2e cluster and remove its runtime state and key material, keeping the logs (e2e/cluster down).
	e2e/cluster down

.PHONY: run
run: build ## The main job: a what-if simulation of a shipped real trace.
	$(BIN)/shadowtune simulate --trace testdata/traces/blkreplay/linux-webserver-2.load.gz --format blkreplay --redcap both

.PHONY: test-faults
test-faults: build ## Crash-and-fault test (root): FAULTS_KILLS (100) SIGKILLs of `shadowtune run` on loop devices under faults; ends "kills N, originals lost L, failed reverts F".
	nice -n 10 hack/test-faults.sh $(BIN)/shadowtune

.PHONY: quickstart
quickstart: ## The main job on this host (root): RocksDB read through mmap in a memory-limited cgroup on a loop device, before and after shadowtune run (Apply) changes read-ahead, then restore; DURATION caps the agent (3m).
	hack/quickstart.sh $(DURATION)

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $(GOLANGCI_LINT)

$(HELM):
	@mkdir -p $(BIN)
	rm -f $(BIN)/helm
	GOBIN=$(BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $(HELM)
	ln -s $(notdir $(HELM)) $(BIN)/helm
