# Hinge: `make run` starts the service on the embedded default; `make test` runs the suite.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install browser run test test-slow lint bench bench-tools bench-quick migrate clean

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# `make run` installs only what the service needs and starts at once: the API answers while
# the worker compiles the Numba kernels into the on-disk cache (the first time only; it
# reports `warming` in GET /v1/status until the kernels of `auto` and `smo` are ready).
$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	@touch $(RUN_STAMP)

# Tests, benchmarks and lint add the dev extras (test runners, reference engines, linters),
# without pip's bytecode compile of every file they ship (sympy, pandas, moto, pyspark...:
# most of it is never imported; what is imported is compiled once, on first import).
$(DEV_STAMP): pyproject.toml $(RUN_STAMP)
	$(PY) -m pip install --quiet --no-compile -e '.[dev]'
	@touch $(DEV_STAMP)

install: $(RUN_STAMP)

migrate: $(RUN_STAMP)
	$(PY) -m alembic upgrade head

run: $(RUN_STAMP)
	$(PY) -m app.run

# The dashboard tests drive Debian's Chromium (never a downloaded browser build); the
# export tests compare against LIBSVM's own svm-scale (Debian's libsvm-tools).
browser:
	@test -x /usr/bin/chromium || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
	@command -v svm-scale >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsvm-tools >/dev/null)

# Four pytest processes (pytest-xdist, one test file per process at a time): much of the
# suite waits on real servers and worker processes, not on the CPU (on a fresh clone, 2
# cores: three processes 572 s, four 554 s). A worker process that dies fails the run
# ("worker 'gw1' crashed while running ..."). The schemathesis test counts as its 30
# operations when collected and as one test when it reports. Files go out in the order
# tests/conftest.py collects them (the end-to-end and deployment files first):
# pytest-xdist would otherwise hand out the files with the most tests first (the
# scikit-learn checks), and the few-test, minutes-long end-to-end files last, alone.
#
# Before the tests, side by side (make -j): the dev extras' install, then the lint and the
# browser; from the runtime install on, the compile of every Numba kernel
# (testkit.kernels, two processes, the longest groups first); `pip install .` of the
# shipped install (.venv-runtime, by the standard library's python) from the start; then
# that install seeded with the compiled kernels. On a fresh clone the compile and the
# install took about 100 s and 65 s at the start of the test processes, with a core idle
# during each pip install and the lint. Python writes bytecode for the test run even where
# PYTHONDONTWRITEBYTECODE is set: the suite starts hundreds of API, worker and helper
# processes, each of which would compile the project's sources again (the files go to the
# ignored __pycache__ folders). OMP_WAIT_POLICY=PASSIVE (as the worker sets for itself,
# workers/celery_app.py): Numba's OpenMP threads in the test processes sleep rather than
# spin while they wait. The test processes, each with 2 threads, and the servers share 2
# cores: with spinning threads test_smo.py and test_tron.py took 27 CPU s beside two busy
# processes, 20.5 s without.
test:
	$(MAKE) --no-print-directory -j 4 --output-sync=target $(DEV_STAMP) lint browser test-ready
	$(WITH_BYTECODE) OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -n 4 --dist loadfile --no-loadscope-reorder --durations=30

WITH_BYTECODE := env -u PYTHONDONTWRITEBYTECODE

.PHONY: kernels test-ready runtime-install
kernels: $(RUN_STAMP)
	$(WITH_BYTECODE) $(PY) -m testkit.kernels --processes 2

runtime-install:
	$$(command -v $(PYTHON) || command -v python3) -m testkit.runtime_venv --install-only

test-ready: kernels runtime-install
	$(WITH_BYTECODE) $(PY) -m testkit.runtime_venv

# The service as it ships, in .venv-runtime: `pip install .` into a clean virtualenv (no dev
# extras, not editable) and the kernels compiled, as the Dockerfile builds its image. The
# deployment tests (tests/deploy) run it; they build or refresh it themselves when it is
# missing or stale, and this builds it ahead (standard library only: no .venv needed).
.PHONY: runtime-venv
runtime-venv:
	$$(command -v $(PYTHON) || command -v python3) -m testkit.runtime_venv

test-slow: $(DEV_STAMP)
	$(PY) -m pytest -m slow

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The predict benchmark drives the HTTP server with Debian's wrk; the parse benchmark times
# LIBLINEAR's own reader through Debian's liblinear-train (liblinear-tools).
bench-tools:
	@command -v wrk >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null)
	@command -v liblinear-train >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblinear-tools >/dev/null)

bench: $(DEV_STAMP) bench-tools
	$(PY) -m bench.run

bench-quick: $(DEV_STAMP) bench-tools
	$(PY) -m bench.run --quick

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
