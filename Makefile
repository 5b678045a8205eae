# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_ARGS ?=

.PHONY: run test lint typecheck unit clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The local CPU wheel; a plain `torch` would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/ratchet run $(RUN_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(VENV)/bin/pytest -q -m "not slow"

test: $(STAMP) lint typecheck
	$(VENV)/bin/pytest -q

clean:
	rm -rf $(VENV) ratchet-run
