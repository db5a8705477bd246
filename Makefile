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

.PHONY: help kube test conform fmt-check vet model-imports

help: ## list the targets
	@echo "cascade make targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/; s/[$$][(]KUBE_VERSION[)]/$(KUBE_VERSION)/g' | expand -t 18

kube: ## build etcd, kube-apiserver, kube-controller-manager $(KUBE_VERSION) into bin/kube/$(KUBE_VERSION)/ (another release: KUBE_VERSION=vX.Y.Z; skipped when KUBEBUILDER_ASSETS holds all three)
ifneq ($(KUBE_ASSETS_OK),)
	@echo "kube: using KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS), not building"
else
ifdef KUBEBUILDER_ASSETS
	@echo "kube: KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) lacks some of $(KUBE_BINARIES): building them into bin/kube/$(KUBE_VERSION), which the make targets then use; for cascade run by hand, unset KUBEBUILDER_ASSETS or point it there"
endif
	KUBE_VERSION=$(KUBE_VERSION) bash hack/kube/build.sh
endif

test: kube fmt-check vet model-imports ## gofmt, go vet, the import rules (model, impl), then go test -race ./... (all packages, smoke tests included)
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

CONFORM_TARGETS ?= model,upstream,impl,impl-stepped,upstream-stepped
# Suite targets and fuzz runs at a time: each starts its own control plane
# and mostly waits on it, so three fit on 2 cores.
CONFORM_JOBS ?= 3

FUZZ_TARGETS ?= upstream,impl
FUZZ_CHECKS ?= 10
FUZZ_SEED ?= 1

conform: kube ## the conformance gate: every scenario and race trace on the model, upstream, impl, stepped impl and stepped upstream, and a short fuzz on upstream and impl, CONFORM_JOBS at a time; one line per spec, then one table; reports in out/conform/
	go build -o bin/conform ./hack/conform
	KUBEBUILDER_ASSETS=$(KUBE_BIN) bin/conform -targets=$(CONFORM_TARGETS) -fuzz-targets=$(FUZZ_TARGETS) \
		-fuzz-checks=$(FUZZ_CHECKS) -fuzz-seed=$(FUZZ_SEED) -jobs=$(CONFORM_JOBS) -timeout=$(TEST_TIMEOUT) -out=out/conform

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

.PHONY: bench-check
bench-check: ## SPIN baseline: fanout-N (FANOUT=8) explored by SPIN and by cascade; states, states/s, peak RSS, ratio
	FANOUT="$(FANOUT)" bash hack/bench-check.sh
