# The two commands of the README. Both install what they need into the current Python.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
DEMO := out/demo
# TensorFlow for the trainers (the extras of pyproject.toml): the CUDA build where an NVIDIA
# driver is present.
TF := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
	&& echo cuda || echo cpu)
PORT ?= 8888

.PHONY: start test simulate lint

## Install and start JupyterLab with the scheduler embedded (this machine's GPUs, or simulated
## GPUs where there are none; SQLite in the Jupyter data dir), on the demo notebook.
start:
	$(PIP) install -q -e ".[$(TF)]"
	$(PYTHON) -m jupyter lab --ip=127.0.0.1 --port=$(PORT) examples/elastic-training.ipynb

## Install everything the tests need and run them all (slow suites included).
test:
	bash .ci/install-test-deps
	$(PIP) install -q -e ".[test]"
	$(PYTHON) -m pytest

## Replay a generated lab workload through the policies side by side (no GPUs needed).
simulate:
	$(PIP) install -q -e .
	$(PYTHON) -m jupyter_elastic_gpu.cli workload generate --out $(DEMO) --seed 1 --jobs 60 --window 21600 --max-gpus 16
	$(PYTHON) -m jupyter_elastic_gpu.cli simulate --jobs $(DEMO)/jobs.csv --profiles $(DEMO)/profiles.csv \
		--nodes 4 --gpus-per-node 4 --start-cost 6 \
		--policy adaptive,static,termination,termination-aware,tiresias,optimus,srtf \
		--json $(DEMO)/comparison.json --plot $(DEMO)/comparison.png

lint:
	ruff check . && ruff format --check .
