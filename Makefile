# cascade: build the control plane, check the code, run the tests.
# `make` alone lists the targets.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The Kubernetes release `make kube` builds and the targets run against; any
# release the Go module proxy serves, for example
# `make kube test KUBE_VERSION=v1.33.13` (hack/kube/README.md lists the tried ones;
# the previous default, v1.36.3, stays buildable). Keep it equal to
# controlplane.KubeVersion and model.DefaultRelease.
KUBE_VERSION := v1.37.2
# The harness takes binaries from KUBEBUILDER_ASSETS when it is set, else
# from bin/kube/$(KUBE_VERSION), which `make kube` fills. The make targets
# use KUBEBUILDER_ASSETS only when it holds all three binaries; otherwise
# `make kube` builds them into bin/kube/$(KUBE_VERSION) and the targets use
# those.
KUBE_BINARIES := etcd kube-apiserver kube-controller-manager
KUBE_ASSETS_OK := $(if $(KUBEBUILDER_ASSETS),$(if $(strip $(foreach b,$(KUBE_BINARIES),$(if $(wildcard $(KUBEBUILDER_ASSETS)/$(b)),,missing))),,yes))
KUBE_BIN := $(if $(KUBE_ASSETS_OK),$(KUBEBUILDER_ASSETS),$(CURDIR)/bin/kube/$(KUBE_VERSION))
TEST_TIMEOUT ?= 30m
# The kine release `make kine` builds (hack/kine/go.mod pins it), for
# --datastore kine.
KINE_VERSION := v0.17.5

.PHONY: help kube kine test conform fmt-check vet model-imports

help: ## list the targets
	@echo "cascade make targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/; s/[$$][(]KUBE_VERSION[)]/$(KUBE_VERSION)/g; s/[$$][(]KINE_VERSION[)]/$(KINE_VERSION)/g' | expand -t 18

kube: ## build etcd, kube-apiserver, kube-controller-manager $(KUBE_VERSION) into bin/kube/$(KUBE_VERSION)/ (another release: KUBE_VERSION=vX.Y.Z; skipped when KUBEBUILDER_ASSETS holds all three)
ifneq ($(KUBE_ASSETS_OK),)
	@echo "kube: using KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS), not building"
else
ifdef KUBEBUILDER_ASSETS
	@echo "kube: KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) lacks some of $(KUBE_BINARIES): building them into bin/kube/$(KUBE_VERSION), which the make targets then use; for cascade run by hand, unset KUBEBUILDER_ASSETS or point it there"
endif
	KUBE_VERSION=$(KUBE_VERSION) bash hack/kube/build.sh
endif

kine: ## build kine $(KINE_VERSION) (the etcd API over SQLite that k3s runs kube-apiserver on; --datastore kine) into bin/kine/$(KINE_VERSION)/
	KINE_VERSION=$(KINE_VERSION) bash hack/kine/build.sh

test: kube kine fmt-check vet model-imports ## gofmt, go vet, the import rules (model, impl), then go test -race ./... (all packages, smoke tests included; kine too, so the envtest test on kine runs), then model/check again without -race for its exhaustive searches
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	go test -count=1 -timeout $(TEST_TIMEOUT) ./model/check/

CONFORM_TARGETS ?= model,upstream,impl,impl-stepped,upstream-stepped
# Suite targets and fuzz runs at a time: each starts its own control plane
# and mostly waits on it, so three fit on 2 cores.
CONFORM_JOBS ?= 3

# What the envtest targets' kube-apiserver stores objects in: etcd, or
# kine (`make conform DATASTORE=kine`, after `make kine`).
DATASTORE ?= etcd

FUZZ_TARGETS ?= upstream,impl
FUZZ_CHECKS ?= 10
FUZZ_SEED ?= 1

conform: kube ## the conformance gate: every scenario and race trace on the model, upstream, impl, stepped impl and stepped upstream, and a short fuzz on upstream and impl, CONFORM_JOBS at a time (DATASTORE=kine: on kine, after make kine); one line per spec, then one table; reports in out/conform/
	go build -o bin/conform ./hack/conform
	KUBEBUILDER_ASSETS=$(KUBE_BIN) bin/conform -targets=$(CONFORM_TARGETS) -fuzz-targets=$(FUZZ_TARGETS) \
		-fuzz-checks=$(FUZZ_CHECKS) -fuzz-seed=$(FUZZ_SEED) -datastore=$(DATASTORE) -jobs=$(CONFORM_JOBS) -timeout=$(TEST_TIMEOUT) -out=out/conform

# The release × datastore matrix (`make conform-matrix`): every cell's
# release must be built first (make kube KUBE_VERSION=...), kine cells need
# make kine. Not part of CI, which keeps the default release.
MATRIX_CELLS ?= v1.31.13/etcd,v1.33.13/etcd,v1.34.4/etcd,v1.36.3/etcd,v1.37.2/etcd,v1.37.2/kine

.PHONY: conform-matrix
conform-matrix: ## the gate per release and datastore (MATRIX_CELLS=RELEASE/DATASTORE,...; build each release first with make kube KUBE_VERSION=...), one table: traces, fuzz runs, known races met per cell
	go build -o bin/conform ./hack/conform
	go build -o bin/conform-matrix ./hack/conform-matrix
	bin/conform-matrix -cells=$(MATRIX_CELLS) -targets=$(CONFORM_TARGETS) -fuzz-targets=$(FUZZ_TARGETS) \
		-fuzz-checks=$(FUZZ_CHECKS) -fuzz-seed=$(FUZZ_SEED) -jobs=$(CONFORM_JOBS) -out=out/conform-matrix

.PHONY: image
image: kube ## an OCI image tarball for campaign pods (cascade campaign run): the static cascade at /cascade and the $(KUBE_VERSION) control plane at /kube, built and validated with go-containerregistry (no Docker daemon), into bin/cascade-image.tar
	CGO_ENABLED=0 go build -o bin/cascade-static ./cmd/cascade
	cd hack/image && go run . -cascade ../../bin/cascade-static -kube $(KUBE_BIN) -tag cascade:$(KUBE_VERSION) -o ../../bin/cascade-image.tar

.PHONY: bench-detect
bench-detect: kube ## every injectable bug fuzzed on impl-stepped over 5 seeds: found?, median time to find, shrunk length vs the checker's BFS-minimal length
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go run ./hack/benchdetect -seeds $(or $(SEEDS),5) -budget $(or $(BUDGET),60s)

fmt-check: ## fail if gofmt would change any file
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

vet: ## go vet ./...
	go vet ./...

model-imports: ## check the import rules: model/ uses only the standard library (model/check also traces/); impl/ never depends on model/, tests included
	bash hack/model-imports.sh

.PHONY: pgo
pgo: ## profile the model checker (fanout-8, universes adoption and pair) into cmd/cascade/default.pgo, which go build uses to optimise cascade (profile-guided optimisation); rerun after a change to the checker's hot paths
	bash hack/pgo.sh

.PHONY: bench-check
bench-check: ## SPIN baseline: fanout-N (FANOUT=8) explored by SPIN and by cascade; per-core (1 worker) and two-worker ratios of states/s and states/CPU-s, load average, peak RSS (ROUNDS=N repeats)
	FANOUT="$(FANOUT)" ROUNDS="$(ROUNDS)" bash hack/bench-check.sh
