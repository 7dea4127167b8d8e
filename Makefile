# toolgym: `make serve` runs the env server, `make test` runs the test suite; both bootstrap .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export RAY_USAGE_STATS_ENABLED := 0
export RAY_AUTH_MODE := disabled
export TOKENIZERS_PARALLELISM := false

.PHONY: venv serve test lint typecheck importlint check bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[all]' --group dev
	$(PY) -m pip install -q --no-deps bfcl-eval mpmath
	touch $@

venv: $(VENV)/.installed

serve: venv
	TOOLGYM_DATABASE_URL=$${TOOLGYM_DATABASE_URL:-sqlite:///./toolgym.db} $(VENV)/bin/toolgym serve --host 127.0.0.1 --port 8000

test: venv
	$(PY) -m pytest -q

lint: venv
	$(VENV)/bin/ruff check toolgym tests bench examples

typecheck: venv
	$(VENV)/bin/mypy

importlint: venv
	$(VENV)/bin/lint-imports

check: lint typecheck importlint

bench: venv
	$(PY) bench/env_step.py
	$(PY) bench/sandbox.py
	$(PY) bench/server.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
