# Developer entry points: `make venv`, `make test`, `make demo`.
# Everything runs inside virtual environments created here; nothing is installed globally.

PYTHON ?= python3
VENV := .venv
CORE_VENV := .venv-core
# Pinned so pip takes the CPU build on disk instead of resolving a multi-GB CUDA build.
TORCH := torch==2.13.0
TEST_DEPS := pytest hypothesis pytest-timeout
DEV_DEPS := $(TEST_DEPS) matplotlib
PACKAGES := helion-core helion-triton helion-pallas helion-cute helion-distributed
PACKAGE_PYPROJECTS := $(foreach p,$(PACKAGES),packages/$(p)/pyproject.toml)
# A stamp per venv: the install steps re-run only when a pyproject or this file changes.
STAMP := .helion-installed
PIP := python -m pip install --quiet

.PHONY: venv venv-core test test-packages test-isolated test-plugins-isolated demo lint format clean

venv: $(VENV)/$(STAMP)

$(VENV)/$(STAMP): $(PACKAGE_PYPROJECTS) pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/$(PIP) $(TORCH)
	$(VENV)/bin/$(PIP) hatchling $(DEV_DEPS)
	$(VENV)/bin/$(PIP) --no-build-isolation $(foreach p,$(PACKAGES),-e packages/$(p))
	touch $@

# The isolation venv has torch, helion-core (a real, non-editable install) and the test tools,
# and no plugin: helion-core's own tests must pass there on the built-in ref backend alone.
venv-core: $(CORE_VENV)/$(STAMP)

$(CORE_VENV)/$(STAMP): packages/helion-core/pyproject.toml Makefile
	test -x $(CORE_VENV)/bin/python || $(PYTHON) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/$(PIP) $(TORCH)
	$(CORE_VENV)/bin/$(PIP) $(TEST_DEPS) ./packages/helion-core
	touch $@

# The suites use separate venvs and run side by side (TEST_JOBS at a time, 2 by default: CI's
# machine has 2 cores); each suite's output is printed whole when it ends.
TEST_JOBS ?= 2

test:
	$(MAKE) --no-print-directory --output-sync=target -j$(TEST_JOBS) test-packages test-isolated test-plugins-isolated

# Each plugin package alone: torch, helion-core and that package (real installs, their declared
# dependencies resolved by pip) and the test tools; its own tests must pass there.
PLUGINS := helion-triton helion-pallas helion-cute helion-distributed

.venv-%/$(STAMP): packages/%/pyproject.toml packages/helion-core/pyproject.toml Makefile
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/$(PIP) $(TORCH)
	.venv-$*/bin/$(PIP) $(TEST_DEPS) hatchling ./packages/helion-core
	.venv-$*/bin/$(PIP) --no-build-isolation ./packages/$*
	touch $@

# keep the stamps (make would delete them as intermediates of the pattern rule)
.PRECIOUS: .venv-%/$(STAMP)

test-plugins-isolated: $(foreach p,$(PLUGINS),test-isolated-$(p))

test-isolated-%: .venv-%/$(STAMP)
	.venv-$*/bin/$(PIP) --no-deps --force-reinstall --no-build-isolation ./packages/helion-core ./packages/$*
	.venv-$*/bin/python -m pytest packages/$*/tests

# pytest exits non-zero on any failure, and with 5 when it collected no test: both fail make.
# Here: core's tests with every plugin installed (the default backend changes) and the
# cross-package tests. Each plugin's own tests run once, in its isolated venv (below).
test-packages: venv
	$(VENV)/bin/python -m pytest packages/helion-core/tests tests

# Reinstalls helion-core from the current sources each run, so the venv tests this checkout as
# a wheel would ship it; then checks that no plugin leaked in before running core's tests.
test-isolated: venv-core
	$(CORE_VENV)/bin/$(PIP) --no-deps --force-reinstall ./packages/helion-core
	$(CORE_VENV)/bin/python -c "import importlib.metadata as m; found = [ep.value for ep in m.entry_points(group='helion.plugins')]; assert not found, f'$(CORE_VENV) must have no helion plugin installed, found {found}'"
	$(CORE_VENV)/bin/python -m pytest packages/helion-core/tests

demo: venv
	$(VENV)/bin/python examples/demo.py

lint: venv
	$(VENV)/bin/$(PIP) ruff
	$(VENV)/bin/python -m ruff check .
	$(VENV)/bin/python -m ruff format --check .

format: venv
	$(VENV)/bin/$(PIP) ruff
	$(VENV)/bin/python -m ruff format .

clean:
	rm -rf $(VENV) $(CORE_VENV) $(foreach p,$(PLUGINS),.venv-$(p)) .pytest_cache .hypothesis build dist
	find . -name __pycache__ -type d -prune -not -path './.venv*' -exec rm -rf {} +
