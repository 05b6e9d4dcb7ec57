# `make demo` and `make test` set up everything they need on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test lint clean redis-server dist-check doctest langgraph-suite

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/quickstart.py

# The Redis tests run against a real redis-server: install it when missing
# (Debian's package; Homebrew on macOS). CI must run them, not skip them.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server for the Redis tests"; \
	  if command -v apt-get >/dev/null 2>&1; then \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	  elif command -v brew >/dev/null 2>&1; then \
	    brew install redis; \
	  else \
	    echo "redis-server is missing: install Redis 6 or newer, then re-run" >&2; exit 1; \
	  fi; }

test: $(VENV)/.installed redis-server
	$(PY) -m ruff check langgraph_ctx tests examples benchmarks
	$(PY) -m mypy langgraph_ctx
	LANGGRAPH_CTX_REQUIRE_REDIS=1 $(PY) -m pytest -q
	$(MAKE) --no-print-directory dist-check

# The docstring examples alone (the pytest run of `test` includes them: tests/test_doctests.py).
doctest: $(VENV)/.installed
	$(PY) -m pytest -q tests/test_doctests.py

# LangGraph's own checkpointer test suite run against our savers. Not part of `test`: it
# bootstraps (and caches) its own venv with LangGraph's test dependencies.
langgraph-suite: $(VENV)/.installed
	$(PY) tests/langgraph_suite/run.py --quick

# What PyPI would get: build the sdist, then the wheel from it (in a clean build
# environment, as a release does) into a temporary directory and let twine
# check their metadata and README rendering.
dist-check: $(VENV)/.installed
	@out=$$(mktemp -d) && \
	  $(PY) -m build --outdir "$$out" . >"$$out/build.log" 2>&1 \
	    || { cat "$$out/build.log"; rm -rf "$$out"; exit 1; }; \
	  $(PY) -m twine check --strict "$$out"/*.whl "$$out"/*.tar.gz; status=$$?; \
	  rm -rf "$$out"; exit $$status

lint: $(VENV)/.installed
	$(PY) -m ruff check langgraph_ctx tests examples benchmarks
	$(PY) -m mypy langgraph_ctx

clean:
	rm -rf $(VENV) .pytest_cache build dist *.egg-info
