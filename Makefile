# `make demo` and `make test` set up everything they need on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/quickstart.py

test: $(VENV)/.installed
	$(PY) -m ruff check langgraph_ctx tests examples benchmarks
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(PY) -m ruff check langgraph_ctx tests examples benchmarks

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
