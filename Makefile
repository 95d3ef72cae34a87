# specchat: `make run` installs and starts the app; `make test` installs test needs and runs every test;
# `make test-fast` runs all but the browser tests and the long model runs, for the edit-test loop.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run install system-deps test test-fast test-install browser bench soak

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The package is installed editable, so code changes need no reinstall: only a changed pyproject.toml does.
# PYTHONWARNINGS quiets setuptools' generic warning about editable installs in the build's own process.
INSTALLED := $(VENV)/.installed
TEST_INSTALLED := $(VENV)/.installed-test

$(INSTALLED): pyproject.toml | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e .
	@touch $@

install: $(INSTALLED) system-deps

# On Debian/Ubuntu, OpenBLAS makes MLX on the CPU several times faster than the wheel's own BLAS
# (see webapp/blas.py). Installed when we are root; otherwise a hint, and specchat still runs.
system-deps:
	@if [ "$$(uname)" = Linux ] && command -v dpkg >/dev/null && ! dpkg -s libopenblas0-pthread >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q libopenblas0-pthread; \
		else echo "hint: sudo apt-get install libopenblas0-pthread makes specchat faster on this CPU"; fi; fi

run: install
	$(BIN)/specchat $(ARGS)

$(TEST_INSTALLED): pyproject.toml | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[test]'
	@touch $@ $(INSTALLED)

test-install: $(TEST_INSTALLED) system-deps
	$(MAKE) browser
	@# BLIS, the other BLAS `--blas` can take, so its test runs too (root only; the test skips without it).
	@if [ "$$(uname)" = Linux ] && [ "$$(id -u)" = 0 ] && command -v dpkg >/dev/null \
		&& ! dpkg -s libblis4-pthread >/dev/null 2>&1; then \
		(apt-get update -q && apt-get install -y -q libblis4-pthread) || echo "BLIS not installed: its test skips"; fi

# Browser tests use Debian's Chromium on Linux (a test tool's own browser download is not needed),
# and Playwright's Chromium elsewhere.
browser:
	@if [ -n "$$SPECCHAT_CHROMIUM" ] || command -v chromium >/dev/null; then :; \
	elif [ "$$(uname)" = Linux ] && command -v apt-get >/dev/null; then \
		$(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; \
	else $(BIN)/playwright install chromium; fi

# Workers each taking whole files, so a file's shared server or checkpoint is built once. The tests run
# MLX in their own process too: on OpenBLAS, as the app does (webapp/blas.py), preloaded here because a
# process cannot swap its BLAS once started; the servers they start find it already loaded.
TEST_BLAS = $(shell $(BIN)/python -c "from webapp.blas import find_openblas; print(find_openblas('auto') or '')")
# Bytecode is written even where the environment turns it off (PYTHONDONTWRITEBYTECODE): without pytest's cached
# rewrite of each test file every worker rewrites all their asserts again, about 3 CPU-seconds a worker a run.
PYTEST = PYTHONDONTWRITEBYTECODE= LD_PRELOAD=$(TEST_BLAS)$${LD_PRELOAD:+:$$LD_PRELOAD} SPECCHAT_BLAS=$(TEST_BLAS) \
	$(BIN)/pytest -q --dist loadfile --no-loadscope-reorder
# Workers beyond the two cores fill the others' waits: the browser tests mostly wait on timers and frames (a third
# worker; tests/conftest.py hands each file of long model runs out beside a browser file, since three model runs at
# once gain nothing); the fast tier's tests wait on sockets, servers and timers for a third of their time (a fourth).
TEST_WORKERS ?= 3
FAST_WORKERS ?= 4

test: test-install
	$(PYTEST) -n $(TEST_WORKERS)

test-fast: test-install
	$(PYTEST) -n $(FAST_WORKERS) -m "not browser and not slow"

bench: install
	$(BIN)/python -m benchmarks.streaming
	$(BIN)/python -m benchmarks.blas

# Long runs: the protocol fuzz (hypothesis comes with the test extra) and the soak on the demo model.
soak: $(TEST_INSTALLED) system-deps
	$(BIN)/python -m benchmarks.fuzz
	$(BIN)/python -m benchmarks.soak $(SOAK_ARGS)
