# cascade: build the control plane, check the code, run the tests.
# `make` alone lists the targets.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

KUBE_VERSION := v1.36.3
# The harness takes binaries from KUBEBUILDER_ASSETS when it is set, else
# from bin/kube/$(KUBE_VERSION), which `make kube` fills.
KUBE_BIN := $(or $(KUBEBUILDER_ASSETS),$(CURDIR)/bin/kube/$(KUBE_VERSION))
TEST_TIMEOUT ?= 30m

.PHONY: help kube test conform fmt-check vet model-imports

help: ## list the targets
	@echo "cascade make targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/' | expand -t 18

kube: ## build etcd, kube-apiserver, kube-controller-manager v1.36.3 into bin/kube/ (skipped when KUBEBUILDER_ASSETS is set)
ifdef KUBEBUILDER_ASSETS
	@echo "kube: using KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS), not building"
else
	bash hack/kube/build.sh
endif

test: kube fmt-check vet model-imports ## gofmt, go vet, model import rule, then go test -race ./... (all packages, smoke tests included)
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

conform: kube ## run the conformance checks against the upstream control plane; today: the harness smoke tests, verbose
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -count=1 -timeout $(TEST_TIMEOUT) -v ./harness/controlplane/

fmt-check: ## fail if gofmt would change any file
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

vet: ## go vet ./...
	go vet ./...

model-imports: ## check the import rule: model/ uses only the standard library (model/check also traces/)
	bash hack/model-imports.sh

.PHONY: bench-check
bench-check: ## SPIN baseline: fanout-N (FANOUT=8) explored by SPIN and by cascade; states, states/s, peak RSS, ratio
	FANOUT="$(FANOUT)" bash hack/bench-check.sh
